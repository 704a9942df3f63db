"""Great Expectations 1.x on Spark: the stream-vs-batch proof and data quality, per stream table.

Each stream table gets one suite, validated against the stream table at version ``V``:

- stream vs batch: equal row counts, and no row on either side without an identical row on the other
  (anti joins both ways, limited to the buckets whose fingerprints differ), written as
  ``UnexpectedRowsExpectation`` queries over ``{batch}`` joined with session views of the snapshot;
- data quality: keys unique and not null, plus the table's own rules from
  ``expectations/<pipeline>/<table>.json`` (GX expectation types and kwargs).

A checkpoint per table stores the validation results and rebuilds the Data Docs on the local disk.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings

log = logging.getLogger(__name__)
DATA_SOURCE = "kappa_reconciliation"


@dataclass(frozen=True)
class ExpectationOutcome:
    description: str
    success: bool
    observed: str
    compares_with_batch: bool
    samples: tuple[str, ...] = ()  # a failing data-quality rule: a few of the rows it caught, by key


@dataclass
class SuiteOutcome:
    """What GX said about one stream table."""

    suite: str
    success: bool
    result_url: str
    expectations: list[ExpectationOutcome] = field(default_factory=list)

    @property
    def stream_equals_batch(self) -> bool:
        return all(e.success for e in self.expectations if e.compares_with_batch)

    @property
    def quality_ok(self) -> bool:
        return all(e.success for e in self.expectations if not e.compares_with_batch)


def _view_name(kind: str, label: str) -> str:
    return f"kappa_{kind}__{label.replace('.', '__')}"


def comparison_expectations(label: str, columns: list[str], keys: tuple[str, ...], bucket: str) -> list:
    """The stream-vs-batch expectations; ``{batch}`` is the stream table at ``V``."""
    import great_expectations.expectations as gxe

    snapshot, buckets = _view_name("snapshot", label), _view_name("buckets", label)
    same_row = " AND ".join(f"s.`{c}` <=> b.`{c}`" for c in columns)
    listed = lambda alias: ", ".join(f"{alias}.`{c}`" for c in columns)  # noqa: E731
    in_buckets = f"{bucket} IN (SELECT bucket FROM {buckets})"
    stream_side = f"(SELECT * FROM {{batch}} WHERE {in_buckets})"
    batch_side = f"(SELECT * FROM {snapshot} WHERE {in_buckets})"
    return [
        gxe.UnexpectedRowsExpectation(
            description=f"{label}: the stream has as many rows as the batch snapshot",
            unexpected_rows_query=(f"SELECT s.n AS stream_rows, b.n AS batch_rows FROM (SELECT count(*) AS n FROM "
                                   f"{{batch}}) s CROSS JOIN (SELECT count(*) AS n FROM {snapshot}) b "
                                   "WHERE s.n <> b.n")),
        gxe.UnexpectedRowsExpectation(
            description=f"{label}: every row has an identical row on the other side (stream vs batch snapshot)",
            unexpected_rows_query=(
                f"SELECT 'only in stream' AS side, {listed('s')} FROM {stream_side} s LEFT ANTI JOIN {batch_side} b "
                f"ON {same_row} UNION ALL SELECT 'only in batch' AS side, {listed('b')} FROM {batch_side} b "
                f"LEFT ANTI JOIN {stream_side} s ON {same_row}")),
    ]


def key_expectation(label: str, keys: tuple[str, ...]):
    import great_expectations.expectations as gxe

    key_list = ", ".join(f"`{k}`" for k in keys)
    nulls = " OR ".join(f"`{k}` IS NULL" for k in keys)
    return gxe.UnexpectedRowsExpectation(
        description=f"{label}: keys ({', '.join(keys)}) are unique and not null",
        unexpected_rows_query=(f"SELECT {key_list}, count(*) AS copies FROM {{batch}} GROUP BY {key_list} "
                               f"HAVING count(*) > 1 OR {nulls}"))


def table_rules(settings: Settings, pipeline_name: str, label: str) -> list:
    """The table's own data-quality expectations, if ``expectations/<pipeline>/<label>.json`` exists."""
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    path: Path = settings.expectations_dir / pipeline_name / f"{label}.json"
    if not path.exists():
        return []
    try:
        declared = json.loads(path.read_text())["expectations"]
        return [ExpectationConfiguration(type=e["type"], kwargs=e["kwargs"], meta=e.get("meta", {})).to_domain_obj()
                for e in declared]
    except (ValueError, KeyError, TypeError) as exc:
        raise PlatformError(f"{path}: not a valid expectation list ({type(exc).__name__}: {exc})") from None


class Validator:
    """One file-backed GX context for a reconciliation run."""

    def __init__(self, settings: Settings, pipeline_name: str) -> None:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.settings = settings
        self.pipeline_name = pipeline_name
        settings.gx_dir.mkdir(parents=True, exist_ok=True)
        self.context = gx.get_context(mode="file", project_root_dir=str(settings.gx_dir))
        if self.context.variables.analytics_enabled is not False:
            self.context.enable_analytics(False)  # kept in great_expectations.yml: no usage data leaves the machine
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self.source = self.context.data_sources.add_or_update_spark(DATA_SOURCE)

    def validate(self, spark, label: str, stream, snapshot, keys: tuple[str, ...], bucket: str,
                 differing_buckets: list[str]) -> SuiteOutcome:
        """Run the table's suite on the stream frame, with the snapshot and differing buckets as views."""
        import great_expectations as gx
        from great_expectations.checkpoint import UpdateDataDocsAction

        snapshot.createOrReplaceTempView(_view_name("snapshot", label))
        spark.createDataFrame([(b,) for b in differing_buckets], "bucket string") \
            .createOrReplaceTempView(_view_name("buckets", label))
        name = f"{self.pipeline_name}.{label}"
        comparisons = comparison_expectations(label, sorted(snapshot.columns), keys, bucket)
        suite = gx.ExpectationSuite(name=name, expectations=[*comparisons, key_expectation(label, keys),
                                                             *table_rules(self.settings, self.pipeline_name, label)])
        suite = self.context.suites.add_or_update(suite)
        asset = next((a for a in self.source.assets if a.name == name), None) or self.source.add_dataframe_asset(name)
        batch = next((b for b in asset.batch_definitions if b.name == "stream_version"), None) \
            or asset.add_batch_definition_whole_dataframe("stream_version")
        definition = self.context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=name, data=batch, suite=suite))
        checkpoint = self.context.checkpoints.add_or_update(gx.Checkpoint(
            name=name, validation_definitions=[definition], actions=[UpdateDataDocsAction(name="data_docs")],
            result_format={"result_format": "SUMMARY"}))
        result = checkpoint.run(batch_parameters={"dataframe": stream})
        identifier, validation = next(iter(result.run_results.items()))
        urls = self.context.get_docs_sites_urls(resource_identifier=identifier)
        comparison_texts = {e.description for e in comparisons}
        outcomes = []
        for r in validation.results:
            compares = r.expectation_config.description in comparison_texts
            samples = () if r.success or compares else _samples(spark, r, stream, keys, label)
            outcomes.append(ExpectationOutcome(
                description=r.expectation_config.description or r.expectation_config.type, success=bool(r.success),
                observed=_observed(r.result, r.expectation_config.type), compares_with_batch=compares, samples=samples))
        return SuiteOutcome(suite=name, success=bool(validation.success),
                            result_url=(urls[0].get("site_url") or "") if urls else "", expectations=outcomes)

    def docs_index(self) -> str:
        urls = self.context.get_docs_sites_urls()
        return (urls[0].get("site_url") or "") if urls else ""


SAMPLES = 5


def _samples(spark, result, stream, keys: tuple[str, ...], label: str) -> tuple[str, ...]:
    """A few rows a failing data-quality rule caught, as ``key=value`` of the table's keys, so on-call can look them
    up: a row query is run again (GX reports only a count), a column rule gives its unexpected values."""
    config = result.expectation_config
    query = config.kwargs.get("unexpected_rows_query")
    if query:
        view = _view_name("stream", label)
        stream.createOrReplaceTempView(view)
        caught = spark.sql(query.replace("{batch}", view))
        shown = [k for k in keys if k in caught.columns] or caught.columns
        return tuple(", ".join(f"{k}={row[k]}" for k in shown)
                     for row in caught.select(*shown).limit(SAMPLES).collect())
    column = config.kwargs.get("column")
    values = (result.result or {}).get("partial_unexpected_list") or []
    return tuple(f"{column}={value!r}" for value in values[:SAMPLES])


def _observed(result: dict, kind: str) -> str:
    """What GX saw, in words: a row rule's observed value is the number of rows it caught."""
    if result.get("unexpected_count") is not None:
        return f"{result['unexpected_count']} unexpected"
    observed = result.get("observed_value")
    if kind == "unexpected_rows_expectation" and observed is not None:
        return f"{observed} unexpected"
    return "" if observed is None else f"observed {observed}"
