"""The Kappa layer: one Structured Streaming query that keeps every stream table of a pipeline.

Per micro-batch (``foreachBatch``), each write idempotent for (app id, batch id). The first four read only the
batch's parsed rows, so they run at once; gold follows silver:

1. ``bronze.events_raw``: every record with its log coordinates and append time (append);
2. ``audit.dead_letters``: records that failed parsing or validation, with the reason (append, when any);
3. ``silver.event_candidates``: every valid record (append) - so bronze = candidates + dead letters;
4. ``silver.events``: the batch's first record of each event id, MERGEd so that the record earliest in the log
   (lowest partition, offset) wins - the minimum of all candidates, without reading them back;
5. each gold table, once silver is written: for what the batch touches, recomputed from silver (MERGE);
6. ``audit.stream_commits``, once all of them are written: the batch id and the log prefix the tables now reflect.

``silver.late_events`` and ``silver.duplicates`` are views of the candidates and events, so the commits of steps 3
and 4 update them too.

Every one of those commits also carries the batch id and end offsets in its ``userMetadata``.
Replaying a batch after a crash at any point leaves every table as if it ran once; a batch already in the
commits table is not redone at all. Only one instance
runs per checkpoint (a second one is fenced out at start, see ``fencing``), and a MERGE that conflicts
with a concurrent commit (an OPTIMIZE) is retried a few times.
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

from spark_apps.core.errors import PlatformError
from spark_apps.core.paths import checkpoint_path
from spark_apps.core.progress import phase_times, timed
from spark_apps.core.settings import Settings
from spark_apps.io import lineage, log_identity, serving_cut
from spark_apps.io.catalog import delta_relation, ensure_table, ensure_view, table_path
from spark_apps.io.delta_changes import rows_added
from spark_apps.io.delta_writes import (
    GOLD_TABLE_PROPERTIES,
    MERGE_TARGET_PROPERTIES,
    BatchCommit,
    append_once,
    batch_commit,
    commit_metadata,
    deletion_vectors_once_large,
    merge_earliest,
    staggered_checkpoints,
    upsert_gold_keys,
    upsert_recomputed,
    with_retries,
)
from spark_apps.io.fencing import CheckpointFence
from spark_apps.io.key_sets import KEYS_IN_DRIVER_MAX_RECORDS, fixed_changes, key_set
from spark_apps.io.parallel_writes import write_in_parallel
from spark_apps.io.spark_session import choose_execution
from spark_apps.pipeline.declaration import Pipeline, TableNames
from spark_apps.pipeline.determinism import assert_deterministic
from spark_apps.stream.checkpoint import APP_ID_FILE, checkpoint_problem, read_app_id
from spark_apps.stream.failures import failure_summary
from spark_apps.stream.faults import FaultPlan
from spark_apps.transforms.events import (
    added_winners,
    duplicates_query,
    earlier_in_log,
    future_flag,
    gold_changes,
    high_water_marks,
    late_events_query,
    lateness_flag,
    touched_keys,
    winners,
    with_high_water,
)
from spark_apps.transforms.parsing import (
    COORDINATE_COLUMNS,
    REASON_COLUMN,
    candidate_rows,
    dead_letters,
    parse_records,
)
from spark_apps.transforms.sessions import extends_sessions, sessions_after

log = logging.getLogger(__name__)
# Bronze keeps each record exactly as the log holds it: its coordinates, append time, key and value.
BRONZE_COLUMNS = COORDINATE_COLUMNS
# Set on the stream's own (cloned) session; the caller's session, and so the batch recompute, keeps Spark's defaults.
# A micro-batch runs many small queries:
# - adaptive execution splits each into extra jobs (one per re-planned stage) that cost more than they save
#   (measured: 97 Spark jobs per 1,000-record batch instead of 151);
# - a runtime Bloom filter on the silver MERGE's join is built every batch and shipped (4.1 MiB) inside the task
#   binary of every task of the MERGE's scans (measured, docs/scaling.md: the silver stage about a fifth faster
#   without it).
STREAM_SESSION_CONF = {"spark.sql.adaptive.enabled": "false",
                       "spark.sql.optimizer.runtime.bloomFilter.enabled": "false"}


class CheckpointMismatch(PlatformError):
    """The checkpoint and the tables disagree in a way that would skip or repeat data."""


class StreamFailed(PlatformError):
    """The query stopped with an error; ``detail`` keeps Spark's whole message for logs and tests."""

    def __init__(self, summary: str, detail: str) -> None:
        super().__init__(summary)
        self.detail = detail


@dataclass(frozen=True)
class BatchStats:
    batch_id: int
    records: int
    dead_letters: int
    duration_s: float
    stage_seconds: dict[str, float]
    end_offsets: dict[int, int]
    finished_at_s: float = dataclasses.field(default_factory=time.time)
    future_events: int = 0


def large_gold_tables_get_deletion_vectors(spark, settings: Settings, pipeline: Pipeline, generation: str = "") -> None:
    """Each gold table of ``pipeline`` that has reached ``KAPPA_DELETION_VECTORS_MIN_BYTES`` gets deletion vectors
    (``deletion_vectors_once_large``; a table not created yet has no checksum and is left alone)."""
    for gold in pipeline.gold_tables:
        deletion_vectors_once_large(spark, str(table_path(settings, pipeline.tables(generation).gold(gold.name))),
                                    settings.deletion_vectors_min_bytes)


class StreamJob:
    """Builds the tables, checks the checkpoint against them, runs the query."""

    def __init__(self, spark, settings: Settings, pipeline: Pipeline, generation: str = "") -> None:
        self.spark = spark
        self.settings = settings
        self.pipeline = pipeline
        self.generation = generation
        self.tables: TableNames = pipeline.tables(generation)
        self.topic = pipeline.source_topic(settings)
        self.checkpoint: Path = checkpoint_path(settings, pipeline.name, pipeline.table_prefix, generation)
        self.faults = FaultPlan(settings.fault_inject)
        # Held from prepare() (or reset()) until run() ends: a second instance on this checkpoint refuses to start.
        self.fence = CheckpointFence(self.checkpoint)
        self.app_id: str | None = None
        # The last batch this app recorded in the commits table: every batch up to it is in every table already.
        self.recorded_through = -1
        # The id of the topic this checkpoint reads (recorded at its first start); the heartbeat carries it.
        self.topic_id: str | None = None
        self.stats: list[BatchStats] = []
        self.lateness = pipeline.lateness_rule(settings)
        # The last batch Spark had planned when this run's query started: only a batch up to it can be a replay of
        # one that began before (None until the query starts: then any batch may be).
        self.replayable_through: int | None = None
        # Under the high-water-mark lateness rule: per partition, the mark the committed candidates leave (epoch
        # microseconds), read from the candidates table at the first batch and advanced by each batch after it.
        self.high_water: dict[int, int] | None = None

    def path(self, table: str) -> str:
        return str(table_path(self.settings, table))

    # ---- tables -------------------------------------------------------------------------------

    def ensure_tables(self) -> None:
        """Create every stream table (empty) with the schema the transforms produce, after refusing a
        pipeline whose gold functions are not deterministic (so a refused one leaves no table behind)."""
        schema = self.pipeline.schema
        raw = self.spark.createDataFrame([], "key binary, value binary, topic string, partition int, "
                                             "offset long, timestamp timestamp, timestampType int")
        parsed = parse_records(raw, schema)
        candidates = with_high_water(candidate_rows(parsed, schema), schema.time_field, self.lateness)
        events = winners(candidates, schema.id_field, schema.time_field, self.lateness)
        on_time = events.where("NOT is_late")
        assert_deterministic(self.pipeline, on_time, self.settings)
        merged = MERGE_TARGET_PROPERTIES
        cdf = {"delta.enableChangeDataFeed": "true"}
        tables = {self.tables.bronze: (parsed.select(*BRONZE_COLUMNS).schema, {}),
                  self.tables.dead_letters: (dead_letters(parsed).schema, {}),
                  self.tables.candidates: (candidates.schema, {}),
                  self.tables.events: (events.schema, merged | cdf),
                  self.tables.commits: (_commits_schema(), {})}
        small = GOLD_TABLE_PROPERTIES
        for gold in self.pipeline.gold_tables:
            output = gold.compute(gold.key_rows(on_time, self.settings), self.settings)
            tables[self.tables.gold(gold.name)] = (output.schema, (small | cdf) if gold.change_data_feed else small)
        checkpoints = staggered_checkpoints(list(tables))
        for name, (table_schema, properties) in tables.items():
            ensure_table(self.spark, self.settings, name, table_schema, properties=properties | checkpoints[name])
        large_gold_tables_get_deletion_vectors(self.spark, self.settings, self.pipeline, self.generation)
        register_derived_views(self.spark, self.settings, self.pipeline, self.generation)

    # ---- checkpoint safety -------------------------------------------------------------------

    def check_checkpoint(self) -> str:
        """Return the app id tied to this checkpoint, refusing any state that would skip or repeat data."""
        done = lineage.committed_batches(self.checkpoint)
        last_done = done[-1] if done else -1
        commits = self.spark.read.format("delta").load(self.path(self.tables.commits))
        last_per_app = commits.groupBy("app_id").agg({"batch_id": "max"}).collect()
        recorded = {r["app_id"]: r["max(batch_id)"] for r in last_per_app}
        app_id = read_app_id(self.checkpoint)
        problem = checkpoint_problem(app_id, recorded, last_done, last_done,
                                     planned=bool(lineage.planned_batches(self.checkpoint)))
        if problem:
            raise CheckpointMismatch(f"checkpoint {self.checkpoint} of {self.tables.commits}: {problem}. Run "
                                     "`kappa stream --reset --yes` to rebuild every stream table from offset 0")
        self.recorded_through = recorded.get(app_id, -1) if app_id is not None else -1
        if app_id is None:
            self.checkpoint.mkdir(parents=True, exist_ok=True)
            (self.checkpoint / APP_ID_FILE).write_text(f"kappa-{self.pipeline.name}-{uuid.uuid4()}\n")
            app_id = read_app_id(self.checkpoint)
        return app_id

    def reset(self) -> None:
        """Delete this job's checkpoint and stream tables (the log is untouched); never under a running instance."""
        import shutil

        self.fence.acquire()
        for table in self.pipeline.stream_table_names(self.tables.generation):
            self.spark.sql(f"DROP TABLE IF EXISTS {table}")
            shutil.rmtree(self.path(table), ignore_errors=True)
        shutil.rmtree(self.checkpoint, ignore_errors=True)
        self.high_water = None

    # ---- the micro-batch ----------------------------------------------------------------------

    def process_batch(self, batch_df, batch_id: int) -> None:
        """Apply one micro-batch to every table; safe to call again with the same batch id."""
        started = time.monotonic()
        timings: dict[str, float] = {}
        end = lineage.batch_end_offsets(self.checkpoint, batch_id, self.topic)
        if batch_id <= self.recorded_through:
            # Its commit row, the last write of a batch, is there: a crash came between it and Spark's commit log.
            # Every write would be skipped by its (app id, batch id) anyway; skipping the work saves a whole batch.
            log.info("batch %d: already in every table (recorded in %s); nothing to redo", batch_id,
                     self.tables.commits)
            self.stats.append(BatchStats(batch_id, 0, 0, time.monotonic() - started, {}, end))
            return
        spark = batch_df.sparkSession
        for key, value in STREAM_SESSION_CONF.items():
            spark.conf.set(key, value)
        start = lineage.batch_start_offsets(self.checkpoint, batch_id, self.topic)
        records = lineage.records_between(start, end)
        choose_execution(spark, records)
        app_id = self.app_id
        meta = {"pipeline": self.pipeline.name, "app_id": app_id, "batch_id": batch_id, "topic": self.topic,
                "end_offsets": {str(p): o for p, o in sorted(end.items())},
                "stream_start_offsets": {str(p): o for p, o in
                                         sorted(lineage.initial_offsets(self.checkpoint, self.topic).items())}}
        with commit_metadata(spark, meta):
            with timed(timings, "parse"):
                # Read Kafka and parse once; every write below reuses these rows.
                parsed = parse_records(batch_df, self.pipeline.schema).localCheckpoint(eager=True)
                n_valid, n_dead, n_future = self._tally(parsed)
            candidates = self._candidate_rows(spark, parsed, start)
            # The four tables below read only this batch's rows, not each other: written at once, each in a session
            # of its own, so one's commit overlaps another's planning. Gold follows silver in silver's own thread.
            with timed(timings, "tables"):
                write_in_parallel(spark, {
                    "bronze": lambda _: self._append_bronze(parsed, app_id, batch_id),
                    "dead_letters": lambda _: self._append_dead_letters(parsed, n_dead, app_id, batch_id),
                    "candidates": lambda _: self._append_candidates(parsed, candidates, app_id, batch_id),
                    "silver_and_gold": lambda session: self._silver_and_gold(
                        session, candidates, n_valid, app_id, batch_id, records <= KEYS_IN_DRIVER_MAX_RECORDS,
                        timings),
                }, timings)
            self.faults.reached("after_gold", batch_id)
            with timed(timings, "commit_record"):
                self._record_commit(spark, meta, start, n_valid + n_dead, n_dead, time.monotonic() - started)
            self.recorded_through = batch_id
            with timed(timings, "serving_cut"):
                self._move_serving_cut(spark, app_id, batch_id, end)
            self.faults.reached("before_checkpoint_commit", batch_id)
        stats = BatchStats(batch_id, n_valid + n_dead, n_dead, time.monotonic() - started, timings, end,
                           future_events=n_future)
        self.stats.append(stats)
        log.info("batch %d: %d records in %.1fs (%s)", batch_id, stats.records, stats.duration_s,
                 phase_times(timings))

    def _append(self, rows, table: str, app_id: str, batch_id: int) -> None:
        """Append a batch's rows to one of the stream's tables once (``append_once``): only a batch this run may be
        replaying looks for its own commit first."""
        replayed = self.replayable_through is None or batch_id <= self.replayable_through
        append_once(rows, self.path(table), app_id, batch_id, replayed)

    def _append_bronze(self, parsed, app_id: str, batch_id: int) -> None:
        self._append(parsed.select(*BRONZE_COLUMNS), self.tables.bronze, app_id, batch_id)
        self.faults.reached("after_bronze", batch_id)

    def _append_dead_letters(self, parsed, n_dead: int, app_id: str, batch_id: int) -> None:
        if n_dead:
            self._append(dead_letters(parsed), self.tables.dead_letters, app_id, batch_id)
        self.faults.reached("after_dead_letters", batch_id)

    def _candidate_rows(self, spark, parsed, start: dict[int, int]):
        """The batch's valid records; under the high-water-mark rule each carries its partition's mark.

        The marks a batch starts from are those of the candidates before its start offsets, read from the table at
        the first batch of a run and carried in memory after it. A batch replayed after a crash therefore gets the
        very rows it appended the first time, whose append is then skipped."""
        schema = self.pipeline.schema
        rows = candidate_rows(parsed, schema)
        if self.lateness.uses_high_water_mark:
            if self.high_water is None:
                self.high_water = self._marks(self._candidates_before(spark, start))
            rows = with_high_water(rows, schema.time_field, self.lateness, self.high_water)
        return rows

    def _append_candidates(self, parsed, candidates, app_id: str, batch_id: int) -> None:
        """Append the candidate rows, then carry their marks forward (``candidates`` already holds the marks
        they started from, so the batch's other writes never see the new ones)."""
        self._append(candidates, self.tables.candidates, app_id, batch_id)
        if self.lateness.uses_high_water_mark:
            for partition, mark in self._marks(candidate_rows(parsed, self.pipeline.schema)).items():
                self.high_water[partition] = max(mark, self.high_water.get(partition, mark))
        self.faults.reached("after_candidates", batch_id)

    def _candidates_before(self, spark, start: dict[int, int]):
        """The candidates table's records before ``start`` (per partition; a partition not in it starts at 0)."""
        from pyspark.sql import functions as F

        table = spark.read.format("delta").load(self.path(self.tables.candidates))
        if not start:
            return table.where(F.lit(False))
        ends = F.create_map(*[F.lit(value) for p, o in sorted(start.items()) for value in (p, o)])
        return table.where(F.col("offset") < F.coalesce(F.try_element_at(ends, F.col("partition")), F.lit(0)))

    def _marks(self, candidates) -> dict[int, int]:
        return {int(r["partition"]): int(r["mark"]) for r in
                high_water_marks(candidates, self.pipeline.schema.time_field, self.lateness).collect()}

    def _tally(self, parsed) -> tuple[int, int, int]:
        """(valid records, dead letters, valid events from the future) of a batch, in one query."""
        from pyspark.sql import functions as F

        ok = F.col(REASON_COLUMN).isNull()
        future = ok & future_flag(self.pipeline.schema.time_field, self.settings.future_skew_s)
        row = parsed.agg(F.count(F.when(ok, True)).alias("valid"), F.count(F.when(~ok, True)).alias("dead"),
                         F.count(F.when(future, True)).alias("future")).first()
        return row["valid"], row["dead"], row["future"]

    def _silver_and_gold(self, spark, candidates, n_valid: int, app_id: str, batch_id: int, in_driver: bool,
                         timings: dict[str, float]) -> None:
        """MERGE the batch's first record of each event id into ``silver.events`` (the earliest in the log wins),
        then recompute every gold key the batch may have changed.

        The winner of an id is the minimum of its records' log positions, so merging each batch's minimum into
        the table gives the minimum over every batch without reading the earlier candidates. Gold keys change
        where an on-time record of the batch belongs (a superset: one that lost its id changes nothing, and
        recomputing its key gives the row it had) and where a winner the batch displaced belonged."""
        if not n_valid:
            return
        schema = self.pipeline.schema
        key = (schema.id_field,)
        events = self.path(self.tables.events)
        with timed(timings, "silver_events"):
            first = winners(candidates, schema.id_field, schema.time_field, self.lateness)
            ids = key_set(touched_keys(first, key), key, in_driver)
            replaced = with_retries(
                lambda: merge_earliest(spark, events, ids, first, earlier_in_log("s", "t"), app_id, batch_id),
                f"MERGE into {self.tables.events} (stream)")
            # Only an on-time record can add to gold (a winner's lateness is its own record's), and only a
            # displaced winner can leave it: a late event changes no gold row. Leaving late ones out keeps the key
            # ranges (and the files a gold read skips by them) to what the batch brought, without ranking the
            # batch's records again for every gold table.
            touched = candidates.where(~lateness_flag(schema.time_field, self.lateness))
            folds = any(extends_sessions(g) for g in self.pipeline.gold_tables)
            commit = batch_commit(events, app_id, batch_id) if replaced != 0 or folds else None
            displaced = None if replaced == 0 else self._displaced_winners(spark, first, commit)
            if displaced is not None:
                touched = touched.unionByName(displaced.select(*candidates.columns))
            added = self._added_winners(spark, first, commit) if folds and commit is not None else None
        self.faults.reached("after_silver", batch_id)
        on_time = spark.read.format("delta").load(events).where("NOT is_late")

        def upsert(gold):
            def write(session) -> None:
                self._upsert_gold(session, gold, on_time, touched, added, displaced, in_driver, app_id, batch_id)
            return write

        # No gold table reads another: they are written at once (each MERGE in a session of its own).
        with timed(timings, "gold"):
            write_in_parallel(spark, {f"gold_{g.name}": upsert(g) for g in self.pipeline.gold_tables}, timings)

    def _displaced_winners(self, spark, first, commit: BatchCommit | None):
        """The winners this batch's MERGE into ``silver.events`` replaced (a record earlier in the log than the one
        the table had: a repeat of an event id on a lower partition), as they were; None when it replaced none.

        Read from the MERGE's own ``commit``, made now or by an earlier attempt of this batch: its metrics say
        whether it replaced any row, and the version before it holds the replaced rows. Asked only when the MERGE
        did not already say it replaced none."""
        if commit is None or int(commit.metrics.get("numTargetRowsUpdated") or 0) == 0:
            return None
        path = self.path(self.tables.events)
        before = spark.read.format("delta").option("versionAsOf", commit.version - 1).load(path)
        key = self.pipeline.schema.id_field
        return (before.alias("t").join(first.alias("s"), key).where(earlier_in_log("s", "t"))
                .select("t.*"))

    def _added_winners(self, spark, first, commit: BatchCommit):
        """The on-time rows this batch's MERGE into ``silver.events`` (its ``commit``) put there: the batch's first
        records that won their ids, found among the rows of the files the commit added. A first record that lost to
        the table's winner is in none of them, and a row a MERGE only copied is no first record of this batch."""
        written = rows_added(spark, Path(self.path(self.tables.events)), commit.version - 1, commit.version)
        return added_winners(first, written, self.pipeline.schema.id_field)

    def _move_serving_cut(self, spark, app_id: str, batch_id: int, end: dict[int, int]) -> None:
        """Serve this batch, when the pipeline's serving cut follows this stream. A catalog that fails here leaves
        serving on the previous cut (said in the log) and the stream writing: the next batch moves the cut."""
        try:
            serving_cut.follow_stream(spark, self.settings, self.pipeline.name, self.generation, app_id, batch_id,
                                      end)
        except Exception as exc:  # noqa: BLE001 - serving lags a batch; the tables must not
            log.warning("batch %d: the serving cut of %s stays where it was: %s", batch_id, self.pipeline.name,
                        str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)

    def _upsert_gold(self, spark, gold, on_time, touched, added, displaced, in_driver: bool, app_id: str,
                     batch_id: int) -> None:
        """Write into the gold table what ``touched`` may change: ``upsert_gold_keys``, or for sessions that fold,
        the stored sessions extended by the ``added`` winners (``sessions_after``; a key a ``displaced`` winner left
        is recomputed). Retried (bounded, logged) when a concurrent commit such as the OPTIMIZE of
        `kappa maintain` conflicts with the MERGE: a retry re-reads the table (a table of sessions finds its spans
        and stored sessions in it again), and the (app id, batch id) pair keeps it idempotent."""
        table = self.tables.gold(gold.name)
        path = self.path(table)

        def attempt() -> None:
            changes = gold_changes(gold, touched, lambda: spark.read.format("delta").load(path), self.settings)
            affected = fixed_changes(gold, changes, in_driver)
            if added is not None and extends_sessions(gold):
                extended = sessions_after(gold, spark.read.format("delta").load(path), added, displaced, on_time,
                                          affected.rows_of, self.settings)
                upsert_recomputed(spark, path, gold.primary_keys, affected, extended, app_id, batch_id)
            else:
                upsert_gold_keys(spark, path, gold, on_time, affected, self.settings, app_id, batch_id)
        with_retries(attempt, f"MERGE into {table} (stream)")

    def _record_commit(self, spark, meta: dict, start: dict[int, int], records: int, dead: int,
                       duration: float) -> None:
        from pyspark.sql import Row

        batch_id = meta["batch_id"]
        row = Row(pipeline=meta["pipeline"], app_id=meta["app_id"], batch_id=batch_id, topic=self.topic,
                  start_offsets={int(p): int(o) for p, o in start.items()},
                  end_offsets={int(p): int(o) for p, o in meta["end_offsets"].items()},
                  records=records, dead_letters=dead, duration_ms=int(duration * 1000))
        frame = spark.createDataFrame([row], _commits_schema())
        self._append(frame, self.tables.commits, meta["app_id"], batch_id)

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
        self.replayable_through = max(lineage.planned_batches(self.checkpoint), default=-1)
        reader = (self.spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", self.settings.kafka_bootstrap_servers)
                  .option("subscribe", self.topic)
                  .option("startingOffsets", "earliest")
                  .option("failOnDataLoss", "true")
                  .option("maxOffsetsPerTrigger", str(self.settings.max_offsets_per_trigger)))
        writer = (reader.load().writeStream
                  .queryName(f"kappa-{self.pipeline.name}")
                  .option("checkpointLocation", str(self.checkpoint))
                  .foreachBatch(self.process_batch))
        if until_caught_up:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.settings.trigger_interval_s} seconds")
        return writer.start()

    def run(self, until_caught_up: bool = True, heartbeat: Path | None = None) -> list[BatchStats]:
        """Run the query in the foreground; SIGTERM or Ctrl-C stops it between checks, safely."""
        try:
            return self._run_query(until_caught_up, heartbeat)
        finally:
            self.fence.release()

    def _run_query(self, until_caught_up: bool, heartbeat: Path | None) -> list[BatchStats]:
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
                                    self.topic_id)
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
                            self.topic_id)
        return self.stats


def register_derived_views(spark, settings: Settings, pipeline: Pipeline, generation: str = "") -> list[str]:
    """Create (or point at this warehouse's tables) the views the stream's derived tables are: the late events and
    the duplicates of ``generation``, each over the candidates and events tables by their folders."""
    tables = pipeline.tables(generation)
    events, candidates = (delta_relation(settings, t) for t in (tables.events, tables.candidates))
    ensure_view(spark, tables.late_events, late_events_query(events))
    ensure_view(spark, tables.duplicates, duplicates_query(pipeline.schema.id_field, candidates, events))
    return tables.derived()


def write_heartbeat(path: Path, query, stats: list[BatchStats], topic: str, window_s: int,
                    topic_id: str | None = None) -> None:
    """What a supervisor reads: last batch, its offsets and lag, durations, when, the records, dead letters and
    future events of the batches that finished within the last ``window_s`` seconds, and the id of the topic the
    stream reads.

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
        "query_active": query.isActive,
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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    tmp.replace(path)


def _offsets(reported) -> dict[str, dict[str, int]] | None:
    """Spark reports a Kafka source's offsets as a JSON string (``{"topic": {"0": 42}}``); the heartbeat keeps
    them as JSON numbers, so a script polling it reads them directly."""
    return json.loads(reported) if isinstance(reported, str) else reported


def _commits_schema():
    from pyspark.sql.types import IntegerType, LongType, MapType, StringType, StructField, StructType

    offsets = MapType(IntegerType(), LongType())
    return StructType([
        StructField("pipeline", StringType()), StructField("app_id", StringType()),
        StructField("batch_id", LongType()), StructField("topic", StringType()),
        StructField("start_offsets", offsets), StructField("end_offsets", offsets),
        StructField("records", LongType()), StructField("dead_letters", LongType()),
        StructField("duration_ms", LongType()),
    ])
