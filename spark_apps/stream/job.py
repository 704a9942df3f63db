"""The Kappa layer: one Structured Streaming query that keeps every stream table of a pipeline.

Each micro-batch is one commit of the pipeline's store (``transforms.store``), so a batch is in every table or in
none:

1. Spark runs the query's plan (``stream.query``): the batch's records read from the log and parsed once, and the
   winner of each event id they hold, from its winner so far in Spark's state store and the batch's own records
   (the earliest record in the log wins, so that is the winner of the whole log so far). The batch is materialized
   once, which also commits the state of that batch;
2. the records get their flags (late by the pipeline's rule, winner or not) and are counted, with the ids whose
   earlier winner a record of the batch displaced (the same id earlier in the log: rare);
3. each gold table gets its rows: a table that folds the partial rows of the batch's on-time winners, read from
   nothing else; a table that does not, and a key a displaced winner left, rows recomputed from every on-time
   winner of the key, read back from the store;
4. the records, any displaced winners, the gold rows and the batch's commit row are appended to the store at once.

Every view readers query (``bronze.events_raw``, ``silver.*``, ``gold.*``, ``stream.dead_letters``,
``stream.commits``) is a pure function of the store, so it moves with that one commit. The commit carries
the batch id and offsets in its ``userMetadata``. A batch replayed after a crash that reached the commit finds its
commit row and writes nothing; one that did not runs again from the state of the batch before it. Only one
instance runs per checkpoint (a second one is fenced out at start, see ``fencing``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from spark_apps.core.errors import PlatformError, first_line
from spark_apps.core.object_path import Location, remove_tree
from spark_apps.core.paths import forget_ending, write_json_whole
from spark_apps.core.progress import phase_times, timed
from spark_apps.core.settings import Settings
from spark_apps.io import lineage, log_identity, serving_cut, stream_store
from spark_apps.io.catalog import table_path
from spark_apps.io.catalog_locks import table_write
from spark_apps.io.delta_writes import commit_metadata, with_retries
from spark_apps.io.fencing import CheckpointFence
from spark_apps.io.key_sets import KEYS_IN_DRIVER_MAX_RECORDS, key_set
from spark_apps.io.parallel_writes import cloned_session
from spark_apps.io.spark_session import choose_execution
from spark_apps.pipeline.declaration import Pipeline, TableNames
from spark_apps.pipeline.determinism import assert_deterministic
from spark_apps.pipeline.folds import q
from spark_apps.pipeline.provenance import pipeline_version
from spark_apps.pipeline.target import Target
from spark_apps.stream import micro_batch
from spark_apps.stream.checkpoint import APP_ID_FILE, checkpoint_problem, read_app_id
from spark_apps.stream.compactor import StreamCompaction
from spark_apps.stream.failures import failure_summary
from spark_apps.stream.faults import FaultPlan
from spark_apps.stream.query import STATE_STORE_CONF, micro_batch_rows
from spark_apps.transforms.events import high_water_marks, per_partition, touched_keys
from spark_apps.transforms.store import EPOCH, EPOCH_KEY, LATE, commit_row, on_time_winners

log = logging.getLogger(__name__)
# Set on the stream's own session; the caller's session, and so the batch recompute, keeps Spark's defaults.
# A micro-batch runs a few queries over a few thousand rows:
# - adaptive execution splits each into extra jobs (one per re-planned stage) that cost more than they save;
# - a runtime Bloom filter on a join is built and shipped inside the task binaries for nothing at this size;
# - a partitioned write sorts its rows by partition unless it may keep a writer open per partition.
STREAM_SESSION_CONF = {"spark.sql.adaptive.enabled": "false",
                       "spark.sql.optimizer.runtime.bloomFilter.enabled": "false",
                       "spark.sql.maxConcurrentOutputFileWriters": "8"}
# A Kafka consumer sends its next fetch as it returns records, and the broker holds a fetch that finds no new record
# for up to this long (500 ms by default). The next batch's read on that consumer waits for the held fetch first:
# 500-600 ms of a micro-batch's read in about one batch in five, measured on 2,000-record batches.
FETCH_MAX_WAIT_MS = 25
# A batch of at most this many records runs its own queries (not the state's) with one shuffle partition: each
# partition of a shuffle is a task, and on two cores four tasks over two thousand rows only wait for each other.
SMALL_BATCH_RECORDS = KEYS_IN_DRIVER_MAX_RECORDS


class CheckpointMismatch(PlatformError):
    """The checkpoint and the tables disagree in a way that would skip or repeat data."""


class StreamFailed(PlatformError):
    """The query stopped with an error; ``detail`` keeps Spark's whole message for logs and tests."""

    def __init__(self, summary: str, detail: str) -> None:
        super().__init__(summary)
        self.detail = detail


@dataclass(frozen=True)
class MicroBatchStats:
    batch_id: int
    records: int
    dead_letters: int
    duration_s: float
    stage_seconds: dict[str, float]
    end_offsets: dict[int, int]
    finished_at_s: float = dataclasses.field(default_factory=time.time)
    future_events: int = 0


class StreamJob:
    """Builds the store and its views, checks the checkpoint against them, runs the query."""

    def __init__(self, spark, settings: Settings, target: Target) -> None:
        self.spark = spark
        self.settings = settings
        self.target = target
        self.pipeline: Pipeline = target.pipeline
        self.tables: TableNames = target.tables
        self.topic = target.topic
        self.checkpoint: Location = target.checkpoint
        self.faults = FaultPlan(settings.fault_inject)
        # Held from prepare() (or reset()) until run() ends: a second instance on this checkpoint refuses to start.
        self.fence = CheckpointFence(self.checkpoint, spark, settings)
        self.app_id: str | None = None
        # What computes the rows, recorded in every commit: the audit says when the batch that checks it ran other code.
        self.code_version = pipeline_version(self.pipeline)
        # The last batch this app recorded in the store: every batch up to it is in every table already.
        self.recorded_through = -1
        # The id of the topic this checkpoint reads (recorded at its first start); the heartbeat carries it.
        self.topic_id: str | None = None
        self.stats: list[MicroBatchStats] = []
        self.lateness = target.lateness
        # Under the high-water-mark lateness rule: per partition, the mark the committed records leave (epoch
        # microseconds), read from the store at the first batch and advanced by each batch after it.
        self.high_water: dict[int, int] | None = None
        self.store_location = table_path(settings, self.tables.store)
        self.store = str(self.store_location)
        # The store's columns and the folds its rows are written for, read once the store is ensured: every batch
        # shapes its rows, and reads any of them back, by it.
        self.layout: stream_store.StoreLayout | None = None
        self.compaction = StreamCompaction(settings, target) if settings.compaction_in_stream else None

    # ---- tables -------------------------------------------------------------------------------

    def ensure_tables(self) -> None:
        """Create the store (empty) and its views, after refusing a pipeline whose gold functions are not
        deterministic (so a refused one leaves no table behind)."""
        from pyspark.sql import functions as F

        from spark_apps.transforms.parsing import candidate_rows, parse_records

        raw = self.spark.createDataFrame([], "key binary, value binary, topic string, partition int, "
                                             "offset long, timestamp timestamp, timestampType int")
        on_time = candidate_rows(parse_records(raw, self.pipeline.schema), self.pipeline.schema) \
            .withColumn(LATE, F.lit(False))
        assert_deterministic(self.pipeline, on_time, self.settings)
        self.layout = stream_store.ensure_store(self.spark, self.settings, self.target)

    # ---- checkpoint safety -------------------------------------------------------------------

    def check_checkpoint(self) -> str:
        """Return the app id tied to this checkpoint, refusing any state that would skip or repeat data."""
        done = lineage.committed_batches(self.checkpoint)
        last_done = done[-1] if done else -1
        commits = stream_store.read_view(self.spark, self.settings, self.target, self.tables.commits,
                                         found=self.layout)
        last_per_app = commits.groupBy("app_id").agg({"batch_id": "max"}).collect()
        recorded = {r["app_id"]: r["max(batch_id)"] for r in last_per_app}
        app_id = read_app_id(self.checkpoint)
        problem = checkpoint_problem(app_id, recorded, last_done, last_done,
                                     planned=bool(lineage.planned_batches(self.checkpoint)))
        if problem:
            raise CheckpointMismatch(f"checkpoint {self.checkpoint} of {self.tables.store}: {problem}. Run "
                                     "`kappa stream --reset --yes` to rebuild every stream table from offset 0")
        self.recorded_through = recorded.get(app_id, -1) if app_id is not None else -1
        if app_id is None:
            self.checkpoint.mkdir(parents=True, exist_ok=True)
            (self.checkpoint / APP_ID_FILE).write_text(f"kappa-{self.pipeline.name}-{uuid.uuid4()}\n")
            app_id = read_app_id(self.checkpoint)
        return app_id

    def reset(self) -> None:
        """Delete this job's checkpoint (Spark's state with it), store and views (the log is untouched); never under
        a running instance."""
        self.fence.acquire()
        for view in self.target.stream_table_names():
            self.spark.sql(f"DROP VIEW IF EXISTS {view}")
        self.spark.sql(f"DROP TABLE IF EXISTS {self.tables.store}")
        remove_tree(self.store_location)
        remove_tree(self.checkpoint)
        self.high_water = None
        self.layout = None

    # ---- the micro-batch ----------------------------------------------------------------------

    def process_batch(self, batch_df, batch_id: int) -> None:
        """Apply one micro-batch to the store in one commit; safe to call again with the same batch id."""
        started = time.monotonic()
        timings: dict[str, float] = {}
        end = lineage.batch_end_offsets(self.checkpoint, batch_id, self.topic)
        if batch_id <= self.recorded_through:
            # Its commit is in the store: a crash came between it and Spark's commit log. Spark still expects this
            # attempt to commit the batch's state, so the batch's rows are computed and thrown away: the state
            # comes out as the first attempt left it, since it derives from the same records and earlier state.
            batch_df.write.format("noop").mode("overwrite").save()
            log.info("batch %d: already in the store (%s); nothing to redo", batch_id, self.tables.store)
            self.stats.append(MicroBatchStats(batch_id, 0, 0, time.monotonic() - started, {}, end))
            return
        spark = batch_df.sparkSession
        start = lineage.batch_start_offsets(self.checkpoint, batch_id, self.topic)
        records = lineage.records_between(start, end)
        self._configure(spark, records)
        meta = {"pipeline": self.pipeline.name, "app_id": self.app_id, "batch_id": batch_id, "topic": self.topic,
                EPOCH_KEY: self._epoch(batch_id),
                "code_version": self.code_version, "end_offsets": {str(p): o for p, o in sorted(end.items())},
                "stream_start_offsets": {str(p): o for p, o in
                                         sorted(lineage.initial_offsets(self.checkpoint, self.topic).items())}}
        with commit_metadata(spark, meta):
            with timed(timings, "state"):
                # Reads and parses the batch and commits the winners' state, once: every step below reads this.
                batch = batch_df.localCheckpoint(eager=True)
            self.faults.reached("after_parse", batch_id)
            parsed, winners = micro_batch.split(batch)
            if self.lateness.uses_high_water_mark and self.high_water is None:
                self.high_water = self._marks_before(spark, start)
            with timed(timings, "flags"):
                # Materialized once: the records and every gold table's rows read them, and each would otherwise
                # join the winners again (a broadcast job each) and plan that join into its own query.
                rows = micro_batch.flagged(parsed, winners, self.pipeline, self.lateness, self.high_water) \
                    .localCheckpoint(eager=True)
            with timed(timings, "tally"):
                tally = micro_batch.tally(batch, start, self.pipeline, self.lateness, self.settings)
            with timed(timings, "gold"):
                parts = [micro_batch.record_rows(rows, batch_id),
                         *self._gold_parts(spark, rows, tally, batch_id, records <= SMALL_BATCH_RECORDS)]
            counts = {"pipeline": self.pipeline.name, "app_id": self.app_id, "topic": self.topic,
                      "start_offsets": {int(p): int(o) for p, o in start.items()},
                      "end_offsets": {int(p): int(o) for p, o in end.items()},
                      "records": tally.valid + tally.dead, "dead_letters": tally.dead,
                      "duration_ms": int((time.monotonic() - started) * 1000)}
            parts.append(spark.createDataFrame([commit_row(counts, batch_id)], self._commit_schema()))
            with timed(timings, "write"):
                self._append(parts, batch_id, small=records <= SMALL_BATCH_RECORDS)
            self.recorded_through = batch_id
            if self.lateness.uses_high_water_mark:
                for partition, mark in tally.marks.items():
                    self.high_water[partition] = max(mark, self.high_water.get(partition, mark))
            self.faults.reached("after_write", batch_id)
            with timed(timings, "serving_cut"):
                self._move_serving_cut(spark, batch_id, end)
            self.faults.reached("before_checkpoint_commit", batch_id)
        if self.compaction is not None:
            self.compaction.batch_written(batch_id)
        stats = MicroBatchStats(batch_id, tally.valid + tally.dead, tally.dead, time.monotonic() - started, timings,
                                end, future_events=tally.future)
        self.stats.append(stats)
        log.info("batch %d: %d records in %.1fs (%s)", batch_id, stats.records, stats.duration_s,
                 phase_times(timings))

    def _configure(self, spark, records: int) -> None:
        for key, value in STREAM_SESSION_CONF.items():
            spark.conf.set(key, value)
        choose_execution(spark, records)
        spark.conf.set("spark.sql.shuffle.partitions",
                       "1" if records <= SMALL_BATCH_RECORDS else str(self.settings.spark_shuffle_partitions))

    def _gold_parts(self, spark, rows, tally: micro_batch.Tally, batch_id: int, small: bool) -> list:
        """Every gold table's rows of this batch, and the displaced winners' rows: the partial rows of the on-time
        winners for a table that folds, and resets for a table that does not and for every key a displaced winner
        left."""
        from pyspark.sql import functions as F

        id_field = self.pipeline.schema.id_field
        added = on_time_winners(rows, self.pipeline, self.lateness)
        displaced = before = None
        parts = []
        if tally.displacing:
            # The winners this batch's records replaced: still the winners in the store before this batch.
            before = self._events_before(spark)
            displaced = before.where(F.col(id_field).isin(*tally.displacing)).localCheckpoint(eager=True)
            parts.append(micro_batch.displaced_rows(displaced, id_field, batch_id))
            log.info("batch %d: displaced the earlier winners of %d event ids", batch_id, len(tally.displacing))
        for gold in self.pipeline.gold_tables:
            touched = None if displaced is None else added.where(F.col(id_field).isin(*tally.displacing)) \
                .unionByName(displaced.where(~F.col(LATE)))
            if gold.fold is not None and touched is None:
                parts.append(micro_batch.partial_rows(gold, added, self.settings, batch_id))
                continue
            keys = touched_keys(gold.key_rows(added if gold.fold is None else touched, self.settings),
                                gold.recompute_keys)
            if gold.fold is None and touched is not None:
                keys = keys.unionByName(touched_keys(gold.key_rows(touched, self.settings), gold.recompute_keys))
            affected = key_set(keys.distinct(), gold.recompute_keys, in_driver=small)
            before = before if before is not None else self._events_before(spark)
            inputs = before.where(~F.col(LATE))
            if displaced is not None:
                inputs = inputs.join(displaced.select(id_field, "partition", "offset"),
                                     [id_field, "partition", "offset"], "left_anti")
            parts.append(micro_batch.reset_rows(gold, affected, inputs.unionByName(added), self.settings, batch_id))
            if gold.fold is not None:
                parts.append(micro_batch.partial_rows(gold, added, self.settings, batch_id, affected.frame))
        return parts

    def _events_before(self, spark):
        """``silver.events`` as the store holds it before this batch (its newest version: the batch has not
        written)."""
        return stream_store.read_view(spark, self.settings, self.target, self.tables.events, found=self.layout)

    def _append(self, parts: list, batch_id: int, small: bool) -> None:
        """Append every part of the batch to the store in one commit, in the store's columns, in its epoch."""
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part, allowMissingColumns=True)
        epoch = self._epoch(batch_id)
        # One SQL projection, so building it is one call into Spark whatever the store's columns; a column the
        # union types otherwise (a kind's column the others lack is null) is cast to the store's type.
        typed = {f.name: f.dataType for f in union.schema.fields}
        rows = union.selectExpr(*[
            f"CAST({int(epoch)} AS {f.dataType.simpleString()}) AS {q(f.name)}" if f.name == EPOCH
            else q(f.name) if typed.get(f.name) == f.dataType
            else f"CAST({q(f.name)} AS {f.dataType.simpleString()}) AS {q(f.name)}"
            for f in self.layout.schema.fields])
        if small:
            rows = rows.coalesce(1)
        # An append reads nothing it could conflict on but the records a reset read back, which an OPTIMIZE of the
        # store may rewrite meanwhile: Delta then refuses the commit, and the batch's rows are appended again.
        with table_write(self.spark, self.settings, self.store_location, f"the stream's batch {batch_id}"):
            with_retries(lambda: rows.write.format("delta").mode("append").save(self.store),
                         f"append of batch {batch_id}")

    def _epoch(self, batch_id: int) -> int:
        return batch_id // self.settings.compaction_epoch_batches

    def _commit_schema(self):
        from pyspark.sql.types import StructType

        from spark_apps.pipeline.folds import BATCH
        from spark_apps.transforms.store import COMMIT_COLUMNS, KIND, commit_column

        wanted = {commit_column(c) for c in COMMIT_COLUMNS} | {KIND, BATCH}
        return StructType([f for f in self.layout.schema.fields if f.name in wanted])

    def _marks_before(self, spark, start: dict[int, int]) -> dict[int, int]:
        """Under the high-water-mark rule, the marks the store's records before ``start`` leave (a partition not in
        ``start`` starts at 0). Read at the first batch of a run; a replayed batch thus gets the marks its first
        attempt had."""
        from pyspark.sql import functions as F

        candidates = stream_store.read_view(spark, self.settings, self.target, self.tables.candidates,
                                            found=self.layout)
        if not start:
            return {}
        before = candidates.where(F.col("offset") < F.coalesce(per_partition(start, F.col("partition")), F.lit(0)))
        return {int(r["partition"]): int(r["mark"]) for r in
                high_water_marks(before, self.pipeline.schema.time_field, self.lateness).collect()}

    def _move_serving_cut(self, spark, batch_id: int, end: dict[int, int]) -> None:
        """Serve this batch, when the pipeline's serving cut follows this stream. A catalog that fails here leaves
        serving on the previous cut (said in the log) and the stream writing: the next batch moves the cut."""
        try:
            serving_cut.follow_stream(spark, self.settings, self.target, self.app_id, batch_id, end,
                                      stream_store.latest_version(self.settings, self.target))
        except Exception as exc:  # noqa: BLE001 - serving lags a batch; the tables must not
            log.warning("batch %d: the serving cut of %s stays where it was: %s", batch_id, self.pipeline.name,
                        first_line(exc))

    # ---- running ------------------------------------------------------------------------------

    def check_log(self) -> None:
        """Refuse a topic that is not the log this checkpoint has read (recreated, truncated or gone), before a
        record of it is read; record the topic's id on the first start."""
        from spark_apps.io.topics import describe_log

        planned = lineage.planned_batches(self.checkpoint)
        read_through = lineage.batch_end_offsets(self.checkpoint, planned[-1], self.topic) if planned else {}
        recorded = log_identity.recorded_source(self.checkpoint)
        log = describe_log(self.settings, self.topic)
        problem = log_identity.log_problem(self.topic, (recorded or {}).get("topic_id"), log.topic_id,
                                           read_through, log.log_end)
        if problem:
            raise log_identity.refusal(problem, self.checkpoint)
        if recorded is None and log.topic_id is not None:
            log_identity.record_source(self.checkpoint, self.topic, log.topic_id)
        self.topic_id = (recorded or {}).get("topic_id") or log.topic_id

    def prepare(self) -> None:
        self.fence.acquire()
        try:
            self.ensure_tables()
            self.app_id = self.check_checkpoint()
            self.check_log()
        except BaseException:
            self.fence.release()
            raise

    def start(self, until_caught_up: bool):
        """Start the query; ``until_caught_up`` processes what the log holds now and stops."""
        if self.app_id is None:
            self.prepare()
        session = cloned_session(self.spark)
        for key, value in STATE_STORE_CONF.items():
            session.conf.set(key, value)
        reader = (session.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", self.settings.kafka_bootstrap_servers)
                  .option("subscribe", self.topic)
                  .option("startingOffsets", "earliest")
                  .option("failOnDataLoss", "true")
                  .option("maxOffsetsPerTrigger", str(self.settings.max_offsets_per_trigger))
                  .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS)))
        rows = micro_batch_rows(reader.load(), self.pipeline.schema, self.settings.spark_shuffle_partitions)
        writer = (rows.writeStream
                  .queryName(f"kappa-{self.pipeline.name}")
                  .outputMode("update")
                  .option("checkpointLocation", str(self.checkpoint))
                  .foreachBatch(self.process_batch))
        if until_caught_up:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.settings.trigger_interval_s} seconds")
        return writer.start()

    def run(self, until_caught_up: bool = True, heartbeat: Path | None = None) -> list[MicroBatchStats]:
        """Run the query in the foreground; SIGTERM or Ctrl-C stops it between checks, safely."""
        if heartbeat is not None:
            forget_ending(heartbeat)
        try:
            return self._run_query(until_caught_up, heartbeat)
        finally:
            self.stopped()

    def stopped(self) -> None:
        """After the query has stopped: let a compaction the stream started finish, then let go of the fence."""
        try:
            if self.compaction is not None:
                self.compaction.wait()
        finally:
            self.fence.release()

    def _run_query(self, until_caught_up: bool, heartbeat: Path | None) -> list[MicroBatchStats]:
        from pyspark.errors import StreamingQueryException

        query = self.start(until_caught_up)
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)} \
            if threading.current_thread() is threading.main_thread() else {}
        try:
            while query.isActive and not stop.is_set():
                query.awaitTermination(0.5)
                if heartbeat is not None:
                    write_heartbeat(heartbeat, query, self.stats, self.topic, self.settings.dead_letter_window_s,
                                    self.topic_id, self.target.generation)
            if stop.is_set():
                query.stop()
            query.awaitTermination()
        except StreamingQueryException as failure:
            detail = str(failure)
            raise StreamFailed(failure_summary(detail), detail) from None
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if heartbeat is not None:
            write_heartbeat(heartbeat, query, self.stats, self.topic, self.settings.dead_letter_window_s,
                            self.topic_id, self.target.generation,
                            ended="caught_up" if until_caught_up and not stop.is_set() else None)
        return self.stats


def write_heartbeat(path: Path, query, stats: list[MicroBatchStats], topic: str, window_s: int,
                    topic_id: str | None = None, generation: str | None = None, ended: str | None = None) -> None:
    """What a supervisor reads: last batch, its offsets and lag, durations, when, the records, dead letters and
    future events of the batches that finished within the last ``window_s`` seconds, the id of the topic the
    stream reads, the generation it writes (whose tables an alert names), and ``ended="caught_up"`` from a run
    that ended as asked, once it had read the log to its end (so a stream that is not running did not fail).

    The last batch's offsets come from the batch itself, not from Spark's progress report: that report lands a
    moment after the batch ends, and a heartbeat naming batch N must carry batch N's offsets."""
    progress = query.lastProgress or {}
    sources = progress.get("sources") or [{}]
    reported = _offsets(sources[0].get("endOffset"))
    now = time.time()
    recent = [s for s in stats if now - s.finished_at_s <= window_s]
    payload = {
        "written_at_epoch_s": now,
        "topic_id": topic_id,
        "generation": generation,
        "query_active": query.isActive,
        "ended": ended,
        "last_batch_id": stats[-1].batch_id if stats else None,
        "last_batch_records": stats[-1].records if stats else None,
        "last_batch_duration_s": round(stats[-1].duration_s, 3) if stats else None,
        "end_offsets": {topic: {str(p): o for p, o in sorted(stats[-1].end_offsets.items())}} if stats else reported,
        "latest_offsets": _offsets(sources[0].get("latestOffset")),
        "offsets_behind_latest": (sources[0].get("metrics") or {}).get("maxOffsetsBehindLatest"),
        "input_rows_per_second": progress.get("inputRowsPerSecond"),
        "processed_rows_per_second": progress.get("processedRowsPerSecond"),
        "window": {"seconds": window_s, "records": sum(s.records for s in recent),
                   "dead_letters": sum(s.dead_letters for s in recent),
                   "future_events": sum(s.future_events for s in recent)},
    }
    write_json_whole(path, payload)


def _offsets(reported) -> dict[str, dict[str, int]] | None:
    """Spark reports a Kafka source's offsets as a JSON string (``{"topic": {"0": 42}}``); the heartbeat keeps
    them as JSON numbers, so a script polling it reads them directly."""
    return json.loads(reported) if isinstance(reported, str) else reported


