"""Spark, Delta and Kafka I/O: the session, the catalog, idempotent writes, the log, topics, lineage, fencing."""
