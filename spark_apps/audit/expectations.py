"""Great Expectations 1.x on Spark: the stream-vs-batch proof and data quality, per stream table.

Each stream table gets one suite, validated against the stream table at version ``V``:

- stream vs batch, over every row and on its own (it never reads the fingerprint diff's result): every row, every
  column compared, as often on each side (keys both ways). It is one row query over ``{batch}`` and a session view
  of the snapshot; each failing row names its key and the kind of difference, and the Data Docs list them;
- data quality: keys unique and not null, plus the table's own rules from
  ``expectations/<pipeline>/<table>.json`` (GX expectation types and kwargs).

A checkpoint per table stores its validation result; ``publish`` then renders the run's pages and the Data Docs
index on the local disk, once per run. The index lists the newest ``DOCS_INDEX_RESULTS`` results: GX reads every
result it lists, so an unbounded index would make each audit slower than the one before.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import Settings

log = logging.getLogger(__name__)
DATA_SOURCE = "kappa_reconciliation"
SHOWN_ROWS = 20  # failing rows of a stream-vs-batch expectation kept in its result and its Data Docs page
DOCS_SITE = "local_site"
DOCS_INDEX_RESULTS = 500  # about fifty runs of a pipeline's stream tables; older pages stay on disk, unlisted
# A column rule's values caught are fetched by a query of their own, which scans the whole table when it caught
# none: they are listed only when some column rule failed, by validating again.
VALUES_NOT_LISTED = {"result_format": "SUMMARY", "partial_unexpected_count": 0}
VALUES_LISTED = {"result_format": "SUMMARY"}


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


ROWS_METRIC = "kappa_unexpected_rows_query.rows_and_count"
# GX's own row rule, which a rules file may declare: it is validated by the rule that runs its query once.
STOCK_ROW_RULE = "unexpected_rows_expectation"
GX_BATCH_VIEW = "kappa_gx_batch"  # what ``{batch}`` stands for in a row rule's query


@functools.cache
def _row_rule_classes():
    """GX's ``UnexpectedRowsExpectation`` evaluates its query twice, once for its first rows and once for their
    count, and each evaluation of the stream-vs-batch query groups and joins both sides. These run it once: the
    metric fetches one row more than it shows, and counts the rows again only when there are more (a failing table).
    ``(rule, comparison)``: the key rule uses the first, the stream-vs-batch proof the second."""
    from great_expectations.core.metric_domain_types import MetricDomainTypes
    from great_expectations.execution_engine import SparkDFExecutionEngine
    from great_expectations.expectations import UnexpectedRowsExpectation
    from great_expectations.expectations.metrics.metric_provider import metric_value
    from great_expectations.expectations.metrics.query_metric_provider import QueryMetricProvider

    class UnexpectedRowsAndCount(QueryMetricProvider):
        metric_name = ROWS_METRIC
        value_keys = ("unexpected_rows_query",)
        query_param_name = "unexpected_rows_query"

        @metric_value(engine=SparkDFExecutionEngine)
        def _spark(cls, execution_engine, metric_domain_kwargs: dict, metric_value_kwargs: dict, metrics: dict,
                   runtime_configuration: dict) -> dict:
            frame, _, _ = execution_engine.get_compute_domain(metric_domain_kwargs, domain_type=MetricDomainTypes.TABLE)
            frame.createOrReplaceTempView(GX_BATCH_VIEW)
            query = cls._format_query(cls._get_query_from_metric_value_kwargs(metric_value_kwargs),
                                      batch=GX_BATCH_VIEW)
            found = execution_engine.spark.sql(query)
            rows = found.limit(SHOWN_ROWS + 1).collect()
            count = len(rows) if len(rows) <= SHOWN_ROWS else found.count()
            return {"rows": [row.asDict() for row in rows[:SHOWN_ROWS]], "count": count}

    class ExpectNoUnexpectedRows(UnexpectedRowsExpectation):
        """No row the query returns may exist (GX's row rule, its query run once)."""

        metric_dependencies = (ROWS_METRIC,)

        def _validate(self, metrics: dict, runtime_configuration: dict | None = None, execution_engine=None) -> dict:
            count = metrics[ROWS_METRIC]["count"]
            return {"success": count == 0, "result": {"observed_value": count}}

    class ExpectStreamRowsToMatchBatchSnapshot(ExpectNoUnexpectedRows):
        """Stream vs batch: no row the query returns may exist; each returned row names a key and what differs,
        and is reported as GX's unexpected values, so the Data Docs list the offending keys (the stock row rule
        keeps them out of every result format the docs render)."""

        def _validate(self, metrics: dict, runtime_configuration: dict | None = None, execution_engine=None) -> dict:
            found = metrics[ROWS_METRIC]
            count = found["count"]
            shown = [", ".join(f"{column}={value}" for column, value in row.items() if value is not None)
                     for row in found["rows"]]
            return {"success": count == 0,
                    "result": {"observed_value": count, "unexpected_count": count, "partial_unexpected_list": shown}}

    return ExpectNoUnexpectedRows, ExpectStreamRowsToMatchBatchSnapshot


def comparison_expectations(label: str, columns: list[str], keys: tuple[str, ...]) -> list:
    """The stream-vs-batch expectation: one row query over ``{batch}`` (the stream table at ``V``) and the whole
    snapshot.

    Both sides are first compared as multisets of whole rows: one grouping of their union by every column keeps
    the rows the two sides do not hold equally often. Only those few rows are then grouped by key and named. A
    key's kind follows from its differing rows: ``extra_in_stream`` (rows only the stream has),
    ``missing_in_stream`` (rows only the batch has), ``copies_differ`` (the same rows, not as often),
    ``values_differ`` (one row on each side in place of the other: ``differing_columns`` names the columns) or
    ``rows_differ`` (anything else). ``stream_rows`` and ``batch_rows`` count the key's differing rows.

    One grouping of whole rows, not a grouping by key of each side joined both ways: the whole-snapshot query
    over the 1.4M rows of ``silver.events`` took 10.6 s that way, 5.2 s this way. One query, not one per kind: a
    run validates every stream table, so each query more costs every audit a scan of both sides.
    """
    snapshot = _view_name("snapshot", label)
    every = ", ".join(f"`{c}`" for c in columns)
    key_list = ", ".join(f"`{k}`" for k in keys)
    values = [c for c in columns if c not in keys]
    differing = (f"SELECT {every}, sum(s) AS s_n, sum(b) AS b_n FROM (SELECT {every}, 1 AS s, 0 AS b FROM {{batch}} "
                 f"UNION ALL SELECT {every}, 0 AS s, 1 AS b FROM {snapshot}) GROUP BY {every} "
                 "HAVING sum(s) <> sum(b)")
    swapped = "only_s = 1 AND only_b = 1 AND both_n = 0"  # one row of the key changed
    detail = firsts = ""
    if values:
        row = "struct(" + ", ".join(f"`{c}`" for c in values) + ")"
        firsts = (f", first(IF(b_n = 0, {row}, NULL), true) AS s_one, "
                  f"first(IF(s_n = 0, {row}, NULL), true) AS b_one")
        named = ", ".join(f"IF(s_one.`{c}` <=> b_one.`{c}`, NULL, '{c}')" for c in values)
        detail = f", IF({swapped}, concat_ws(', ', {named}), NULL) AS differing_columns"
    per_key = (f"SELECT {key_list}, count_if(b_n = 0) AS only_s, count_if(s_n = 0) AS only_b, "
               f"count_if(s_n > 0 AND b_n > 0) AS both_n, sum(s_n) AS stream_rows, sum(b_n) AS batch_rows{firsts} "
               f"FROM ({differing}) d GROUP BY {key_list}")
    kind = ("CASE WHEN only_s = 0 AND only_b = 0 THEN 'copies_differ' WHEN only_b = 0 THEN 'extra_in_stream' "
            f"WHEN only_s = 0 THEN 'missing_in_stream' WHEN {swapped} THEN 'values_differ' ELSE 'rows_differ' END")
    return [_row_rule_classes()[1](
        description=f"{label}: every key has the same rows in the stream as in the batch snapshot, both ways, "
                    "every column compared",
        unexpected_rows_query=(f"SELECT {kind} AS kind, {key_list}{detail}, stream_rows, batch_rows "
                               f"FROM ({per_key}) k"))]


def key_expectation(label: str, keys: tuple[str, ...]):
    key_list = ", ".join(f"`{k}`" for k in keys)
    nulls = " OR ".join(f"`{k}` IS NULL" for k in keys)
    return _row_rule_classes()[0](
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
        declared = [(e["type"], e["kwargs"], e.get("meta", {})) for e in json.loads(path.read_text())["expectations"]]
        return [_row_rule_classes()[0](**kwargs, meta=meta) if kind == STOCK_ROW_RULE
                else ExpectationConfiguration(type=kind, kwargs=kwargs, meta=meta).to_domain_obj()
                for kind, kwargs, meta in declared]
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
        self._bound_docs_index()
        self._validated: list[tuple[object, SuiteOutcome]] = []

    def _bound_docs_index(self) -> None:
        site = dict((self.context.variables.data_docs_sites or {}).get(DOCS_SITE) or {})
        index = dict(site.get("site_index_builder") or {"class_name": "DefaultSiteIndexBuilder"})
        if site and index.get("validation_results_limit") != DOCS_INDEX_RESULTS:
            self.context.update_data_docs_site(DOCS_SITE, {**site, "site_index_builder": {
                **index, "validation_results_limit": DOCS_INDEX_RESULTS}})

    def validate(self, spark, label: str, stream, snapshot, keys: tuple[str, ...]) -> SuiteOutcome:
        """Run the table's suite on the stream frame, with the snapshot as a view."""
        import great_expectations as gx

        snapshot.createOrReplaceTempView(_view_name("snapshot", label))
        name = f"{self.pipeline_name}.{label}"
        comparisons = comparison_expectations(label, sorted(snapshot.columns), keys)
        suite = gx.ExpectationSuite(name=name, expectations=[*comparisons, key_expectation(label, keys),
                                                             *table_rules(self.settings, self.pipeline_name, label)])
        suite = self.context.suites.add_or_update(suite)
        asset = next((a for a in self.source.assets if a.name == name), None) or self.source.add_dataframe_asset(name)
        batch = next((b for b in asset.batch_definitions if b.name == "stream_version"), None) \
            or asset.add_batch_definition_whole_dataframe("stream_version")
        definition = self.context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=name, data=batch, suite=suite))
        identifier, validation = self._run(name, definition, stream, VALUES_NOT_LISTED)
        if any(not r.success and "unexpected_rows_query" not in r.expectation_config.kwargs
               for r in validation.results):
            # A column rule failed: validated again, it lists the values it caught for on-call and the Data Docs.
            self.context.validation_results_store.remove_key(identifier.to_tuple())
            identifier, validation = self._run(name, definition, stream, VALUES_LISTED)
        comparison_texts = {e.description for e in comparisons}
        outcomes = []
        for r in validation.results:
            compares = r.expectation_config.description in comparison_texts
            if r.success:
                samples = ()
            elif compares:
                samples = tuple((r.result or {}).get("partial_unexpected_list") or ())[:SAMPLES]
            else:
                samples = _samples(spark, r, stream, keys, label)
            outcomes.append(ExpectationOutcome(
                description=r.expectation_config.description or r.expectation_config.type, success=bool(r.success),
                observed=_observed(r.result, "unexpected_rows_query" in r.expectation_config.kwargs),
                compares_with_batch=compares, samples=samples))
        outcome = SuiteOutcome(suite=name, success=bool(validation.success), result_url="", expectations=outcomes)
        self._validated.append((identifier, outcome))
        return outcome

    def _run(self, name: str, definition, stream, result_format: dict) -> tuple:
        """Validate ``stream`` through the table's checkpoint: (the stored result's identifier, the result)."""
        import great_expectations as gx

        checkpoint = self.context.checkpoints.add_or_update(gx.Checkpoint(
            name=name, validation_definitions=[definition], actions=[], result_format=result_format))
        result = checkpoint.run(batch_parameters={"dataframe": stream})
        return next(iter(result.run_results.items()))

    def publish(self) -> str:
        """Render this run's validation pages, the pages of their suites (each validation page links to its suite)
        and the index, once; fill each outcome's page URL and return the index's."""
        validations = [identifier for identifier, _ in self._validated]
        suites = list(dict.fromkeys(identifier.expectation_suite_identifier for identifier in validations))
        if validations:  # GX reads no identifiers as "every page of the site" and would render them all again
            self.context.build_data_docs(site_names=[DOCS_SITE], resource_identifiers=[*validations, *suites])
        for identifier, outcome in self._validated:
            urls = self.context.get_docs_sites_urls(resource_identifier=identifier, site_name=DOCS_SITE)
            outcome.result_url = (urls[0].get("site_url") or "") if urls else ""
        urls = self.context.get_docs_sites_urls(site_name=DOCS_SITE)
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


def _observed(result: dict, row_rule: bool) -> str:
    """What GX saw, in words: a row rule's observed value is the number of rows it caught."""
    if result.get("unexpected_count") is not None:
        return f"{result['unexpected_count']} unexpected"
    observed = result.get("observed_value")
    if row_rule and observed is not None:
        return f"{observed} unexpected"
    return "" if observed is None else f"observed {observed}"
