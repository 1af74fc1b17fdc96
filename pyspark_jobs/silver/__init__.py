"""Silver: the dbt project (models/) turns bronze into one change log; this package runs it."""
