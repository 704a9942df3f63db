"""The ledger says whether the stream and the batch that audits it ran the same code: a user's pipeline module,
changed between the stream and the audit, is named in the ledger, the printed lines and the report."""

from __future__ import annotations

import datetime as dt
import importlib
import uuid

import pytest

from spark_apps.audit.auditor import audit, summary_lines
from spark_apps.audit.ledger import run_rows
from spark_apps.core.settings import PROJECT_ROOT
from spark_apps.core.version import same_code
from spark_apps.io.topics import ensure_topic
from spark_apps.stream.job import StreamJob
from spark_apps.target.resolution import target_of
from tests.support.records import send, sensor_reading
from tests.support.topics import delete_topics

pytestmark = pytest.mark.integration


@pytest.fixture
def thermo(tmp_path, monkeypatch, settings, kafka_broker):
    """The tests' sensor pipeline as a user's own module outside the engine, on a topic of its own."""
    name = f"thermo_{uuid.uuid4().hex[:8]}"
    topic = f"test.code.{uuid.uuid4().hex[:8]}"
    source = (PROJECT_ROOT / "tests" / "support" / "sensor_pipeline.py").read_text()
    for old, new in (('name="sensors"', f'name="{name}"'), ('topic="sensors.readings"', f'topic="{topic}"'),
                     ('table_prefix="sensors_"', f'table_prefix="{name}_"')):
        source = source.replace(old, new)
    module = tmp_path / "pipelines" / f"{name}.py"
    module.parent.mkdir()
    module.write_text(source)
    monkeypatch.syspath_prepend(str(module.parent))
    pipeline = importlib.import_module(name).PIPELINE
    local = settings.with_overrides(warehouse_dir=tmp_path / "warehouse", checkpoint_root=tmp_path / "checkpoints",
                                    reports_dir=tmp_path / "reports", gx_dir=tmp_path / "gx")
    ensure_topic(local, topic, 1)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    send(local, topic, [sensor_reading(f"r{i}", now - dt.timedelta(seconds=i), f"dev-{i % 2}") for i in range(12)])
    yield local, pipeline, module
    delete_topics(settings, [topic])


def test_an_audit_after_the_pipeline_module_changed_says_the_code_differs(spark, thermo):
    local, pipeline, module = thermo
    StreamJob(spark, local, target_of(local, pipeline)).run(until_caught_up=True)

    same = audit(spark, local, target_of(local, pipeline))
    assert same.success and same.code_note == "", same.code_note
    assert same_code(same.position.code_version, same.snapshot.code_version)

    module.write_text(module.read_text() + "\nHOUR_S_DOUBLED = 2 * HOUR_S\n")  # a deploy the stream has not run
    changed = audit(spark, local, target_of(local, pipeline))
    assert changed.success, "the rows are the same: only the code moved"
    stream_code, batch_code = changed.position.code_version, changed.snapshot.code_version
    assert stream_code == same.position.code_version and not same_code(stream_code, batch_code)
    assert changed.code_note.startswith(f"the stream ran code {stream_code} for batch ")
    row = run_rows(spark, local, changed.run_id)[0]
    assert (row["stream_code_version"], row["code_version"]) == (stream_code, batch_code)
    assert any(line.startswith("code") and "DIFFERS" in line for line in summary_lines(changed))
    assert "Code differs: the stream ran code" in changed.report_path.read_text()
    assert "Code differs" not in same.report_path.read_text()
