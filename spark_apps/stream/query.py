"""The streaming query of a pipeline: the log's records parsed once, and each event id's winner kept in Spark's
state store.

A micro-batch's rows come in two roles. ``record``: every record of the batch, parsed. ``winner``: for every event
id the batch has a valid record of, the log position of its winner over every batch so far (``winner_position``)
and how many valid records of it the log holds up to this batch, from a streaming aggregation whose state Spark
keeps per id in its RocksDB state store and checkpoints with each batch. So the winner of an id is known without
reading back any earlier record, and a replayed batch (after a crash) starts from the state of the batch before it,
exactly as the first attempt did.

The winners are aggregated from the same parsed rows the records are: the rows are hash-partitioned by event id
once, and Spark reuses that exchange for both roles when both read every column of it; the aggregation's
``_same_columns`` is there for that (without it Spark prunes the aggregation's input and reads and parses the log
twice). The partitioning is also the one the aggregation needs, so no second exchange is added.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_apps.pipeline.event_schema import EventSchema
from spark_apps.transforms.events import winner_position
from spark_apps.transforms.parsing import REASON_COLUMN, parse_records

ROLE, RECORD_ROLE, WINNER_ROLE = "_role", "record", "winner"
WINNER, RECORDS_OF_ID, SAME_COLUMNS = "_winner", "_records_of_id", "_same_columns"
# Spark keeps the winners' state in RocksDB (on local disk, in the executor), not on the JVM heap: one entry per
# event id ever seen. Changelog checkpointing uploads only a batch's changes with its commit.
STATE_STORE_CONF = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}


def micro_batch_rows(source: DataFrame, schema: EventSchema, partitions: int) -> DataFrame:
    """The streaming plan: the source's records parsed (``record`` rows) and the winners of their event ids
    (``winner`` rows: the id, ``_winner`` and ``_records_of_id``), one output for ``foreachBatch`` in update mode."""
    parsed = parse_records(source, schema).repartition(partitions, F.col(schema.id_field))
    valid = F.col(REASON_COLUMN).isNull()
    winners = (parsed.groupBy(schema.id_field)
               .agg(winner_position(valid).alias(WINNER), F.count(F.when(valid, True)).alias(RECORDS_OF_ID),
                    F.max(F.xxhash64(*[F.col(f"`{c}`") for c in parsed.columns])).alias(SAME_COLUMNS))
               .where(F.col(RECORDS_OF_ID) > 0))
    return (parsed.withColumn(ROLE, F.lit(RECORD_ROLE))
            .unionByName(winners.withColumn(ROLE, F.lit(WINNER_ROLE)), allowMissingColumns=True))
