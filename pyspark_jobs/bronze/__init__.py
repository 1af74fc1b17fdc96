"""Bronze: land raw CDC records from landing files or Kafka, exactly once, losing nothing."""
