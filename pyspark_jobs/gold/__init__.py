"""Gold: fold the change log per key and MERGE it into current-state Delta tables."""
