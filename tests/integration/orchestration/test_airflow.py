"""The Airflow layer end to end: the reconcile DAG under ``dag.test()`` against the real broker and Spark,
its reruns, and the serving state machine moving gold tables between batch and stream, with alerts."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid

import pytest

from spark_apps.audit.ledger import LEDGER_TABLE
from spark_apps.cli import main
from spark_apps.core.paths import dbt_docs_index
from spark_apps.core.settings import PROJECT_ROOT, is_loopback
from spark_apps.core.waiting import wait_for
from spark_apps.io.catalog import table_path
from spark_apps.marketplace.pipeline import PIPELINE
from spark_apps.services import airflow_standalone
from spark_apps.services.airflow_env import airflow_environment
from spark_apps.services.processes import cmdline, free_port, group_members, process_alive
from spark_apps.serving import state as serving
from tests.support.sockets import listening_addresses, process_tree
from tests.support.streams import (
    add_to_gold,
    fresh_stream_settings,
    produce_hard_cases,
    read_stream_table,
    restore_store,
    run_stream,
)

pytestmark = pytest.mark.integration
GOLD = [PIPELINE.tables().gold(g.name) for g in PIPELINE.gold_tables]
PROBE = PROJECT_ROOT / "tests" / "support" / "airflow_probe.py"
# A hang guard: DAG parsing, the task's JVM and the log read come first on two busy cores.
RECOMPUTE_SNAPSHOT_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def served(kafka_broker, spark, settings, tmp_path_factory, webhook):
    """A small stream of its own (own topic, warehouse and Airflow metadata DB), K=2 for serving."""
    from spark_apps.io.topics import admin_client

    home = tmp_path_factory.mktemp("airflow-stream")
    topic = f"test.airflow.{uuid.uuid4().hex[:8]}"
    # No deadline under dag.test(): a run killed mid-way keeps its deadline row, and dag.test() of the same logical
    # date then cannot delete that run (the scheduler clears a run instead; the last test runs it with a deadline).
    stream_settings = fresh_stream_settings(settings, home, topic, max_offsets=100_000).with_overrides(
        home=home, serving_exact_runs=2, serving_min_span_s=0, alert_webhook_url=f"{webhook.url}/hook",
        reconcile_deadline_s=0)
    produce_hard_cases(stream_settings, total=400, seed=11)
    run_stream(spark, stream_settings)
    env = {**stream_settings.as_env(), **airflow_environment(stream_settings)}
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, check=True, capture_output=True,
                   cwd=PROJECT_ROOT)
    yield stream_settings, env
    with admin_client(settings) as admin:
        admin.delete_topics([topic])


def dag_test(env: dict, dag_id: str, logical_date: dt.datetime) -> dict:
    done = subprocess.run([sys.executable, str(PROBE), "test", str(PROJECT_ROOT / "dags"), dag_id,
                           logical_date.isoformat()], env=env, capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    # The task logs come last in a failed run's assertion message, so it says why.
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "log_tail": (done.stdout + done.stderr)[-4000:]}


def asset_events(env: dict) -> list[tuple[str, dict]]:
    db = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///")
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT asset.name, asset_event.extra FROM asset_event "
                            "JOIN asset ON asset.id = asset_event.asset_id ORDER BY asset_event.id").fetchall()
    return [(name, json.loads(extra)) for name, extra in rows]


def ledger_runs(spark, settings) -> dict[str, bool]:
    rows = spark.read.format("delta").load(str(table_path(settings, LEDGER_TABLE))).collect()
    runs: dict[str, bool] = {}
    for r in rows:
        runs[r.run_id] = runs.get(r.run_id, True) and r.success
    return runs


def state_rows(spark, settings) -> int:
    return spark.read.format("delta").load(str(table_path(settings, serving.SERVING_STATE_TABLE))).count()


def read(spark, settings, table: str):
    """A table of this warehouse: a gold table by its view over the store, any other by its folder."""
    if table.startswith("gold."):
        return read_stream_table(spark, settings, table)
    return spark.read.format("delta").load(str(table_path(settings, table)))


def kappa(settings, monkeypatch, *args: str) -> int:
    for key, value in settings.as_env().items():
        monkeypatch.setenv(key, value)
    return main(list(args))


def killed_mid_recompute(env: dict, dag_id: str, logical_date: dt.datetime, snapshot_log) -> None:
    """Start ``dag.test()`` and SIGKILL its whole process group (the task's child `kappa reconcile` and its JVM)
    once the batch recompute has committed a first snapshot, before the ledger is written."""
    run = subprocess.Popen([sys.executable, str(PROBE), "test", str(PROJECT_ROOT / "dags"), dag_id,
                            logical_date.isoformat()], env=env, cwd=PROJECT_ROOT, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: snapshot_log.exists() or run.poll() is not None, "the recompute's first snapshot",
                 RECOMPUTE_SNAPSHOT_TIMEOUT_S, every_s=0.2)
        assert run.poll() is None, "the run ended before it could be killed mid-way"
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()


@pytest.fixture(scope="module")
def first_dag_run(spark, served):
    """The first reconcile DAG run, killed (kill -9) in the middle of its recompute, then run again."""
    stream_settings, env = served
    logical = dt.datetime.now(dt.UTC).replace(microsecond=0)
    killed_mid_recompute(env, "kappa_marketplace_reconcile", logical,
                         table_path(stream_settings, "batch.events_raw") / "_delta_log" / f"{0:020d}.json")
    assert not (table_path(stream_settings, LEDGER_TABLE) / "_delta_log").exists(), "killed before the ledger"
    return logical, dag_test(env, "kappa_marketplace_reconcile", logical)


def test_a_reconcile_run_killed_mid_way_and_rerun_writes_the_ledger_emits_assets_and_advances_serving_once(
        spark, served, first_dag_run):
    stream_settings, env = served
    logical, run = first_dag_run
    assert run["state"] == "success", run
    assert set(run["tasks"].values()) == {"success"}, run["tasks"]
    run_id = f"kappa_marketplace_reconcile.{logical:%Y%m%dT%H%M%SZ}"
    assert ledger_runs(spark, stream_settings) == {run_id: True}
    decisions = serving.current(spark, stream_settings, PIPELINE.name)
    assert sorted(decisions) == sorted(GOLD)
    assert all(d.mode == serving.LAMBDA and d.run_id == run_id and "1 of 2" in d.reason
               for d in decisions.values())
    assert state_rows(spark, stream_settings) == len(GOLD), "one serving decision per table, not two"
    snapshot = spark.sql(f"DESCRIBE HISTORY delta.`{table_path(stream_settings, 'batch.events_raw')}` LIMIT 1").first()
    assert run_id in snapshot["userMetadata"], "the rerun rewrote the snapshot the killed run left half done"
    events = asset_events(env)
    assert sorted(name for name, _ in events) == sorted(serving.serving_view(t) for t in GOLD)
    assert all(extra["run_id"] == run_id and extra["mode"] == "lambda" and extra["source_table"].startswith("batch.")
               for _, extra in events)


def test_rerunning_the_same_logical_date_changes_no_table_ledger_or_serving_state(spark, served, first_dag_run):
    stream_settings, env = served
    logical, _ = first_dag_run
    snapshot = table_path(stream_settings, "batch.order_status")
    before = (ledger_runs(spark, stream_settings), state_rows(spark, stream_settings),
              spark.sql(f"DESCRIBE HISTORY delta.`{snapshot}`").count())
    rerun = dag_test(env, "kappa_marketplace_reconcile", logical)
    assert rerun["state"] == "success", rerun
    after = (ledger_runs(spark, stream_settings), state_rows(spark, stream_settings),
             spark.sql(f"DESCRIBE HISTORY delta.`{snapshot}`").count())
    assert after == before


def test_k_exact_runs_serve_the_stream_and_one_corrupted_run_falls_back_and_alerts(
        spark, served, first_dag_run, webhook, monkeypatch, capsys):
    stream_settings, _ = served
    only = ",".join(GOLD)
    produce_hard_cases(stream_settings, total=60, seed=12)
    run_stream(spark, stream_settings)
    assert kappa(stream_settings, monkeypatch, "reconcile", "--only", only) == 0
    decisions = serving.current(spark, stream_settings, PIPELINE.name)
    assert {d.mode for d in decisions.values()} == {serving.KAPPA}
    assert all(d.changed and len(d.evidence) == 2 for d in decisions.values())
    for table in GOLD:
        view, stream = spark.table(serving.serving_view(table)), read(spark, stream_settings, table)
        assert view.exceptAll(stream).count() == 0 and stream.exceptAll(view).count() == 0

    honest = read(spark, stream_settings, "gold.order_status").where("paid_cents > 0").orderBy("order_id").first()
    clean = add_to_gold(spark, stream_settings, "gold.order_status", "paid_cents", 1,
                        {"order_id": honest["order_id"]})
    assert kappa(stream_settings, monkeypatch, "reconcile", "--only", only) == 1
    decisions = serving.current(spark, stream_settings, PIPELINE.name)
    assert all(d.mode == serving.LAMBDA and d.previous_mode == serving.KAPPA for d in decisions.values())
    fallback = decisions["gold.order_status"]
    assert fallback.source_table == "batch.order_status" and fallback.source_version is not None
    readers_see = spark.table("serving.order_status").where(f"order_id = '{honest['order_id']}'").first()
    assert readers_see["paid_cents"] == honest["paid_cents"], "serving reads the batch, not the corrupted stream"

    alerts = [body for body in webhook.bodies("/hook") if body.get("table") == "gold.order_status"]
    assert alerts, webhook.received
    alert = alerts[-1]
    assert alert["severity"] == "critical"
    assert alert["dedup_key"] == "reconcile:marketplace:gold.order_status"
    assert alert["runbook"].endswith("docs/runbook.md#reconciliation-mismatch")
    assert "fell back" in alert["summary"]

    capsys.readouterr()
    assert kappa(stream_settings, monkeypatch, "serving", "history", "--table", "gold.order_status") == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[1:4] for line in lines if "->" in line] == [["lambda", "->", "kappa"],
                                                                    ["kappa", "->", "lambda"]]

    # The outside write is reverted: the next exact reconciliation closes every incident the mismatch opened.
    restore_store(spark, stream_settings, "gold.order_status", clean)
    assert kappa(stream_settings, monkeypatch, "reconcile", "--only", only) == 0
    actions = {}
    for body in webhook.bodies("/hook"):
        if body["dedup_key"].startswith("reconcile:marketplace:"):
            actions.setdefault(body["dedup_key"], []).append(body["action"])
    assert actions and all(sent[-1] == "resolve" and sent.count("resolve") == 1 for sent in actions.values()), actions


def test_dbt_dag_builds_the_marts_on_the_batch_snapshot_after_a_failed_reconciliation(spark, served):
    """After the corrupted run above, every gold table serves its batch snapshot: dbt builds on that and says so."""
    stream_settings, env = served
    decisions = serving.current(spark, stream_settings, PIPELINE.name)
    assert {d.mode for d in decisions.values()} == {serving.LAMBDA}, "the previous test left serving on the batch"
    run = dag_test(env, "kappa_marketplace_dbt", dt.datetime.now(dt.UTC).replace(microsecond=0))
    assert run["state"] == "success", run
    assert run["tasks"] == {"dbt": "success", "verdict": "success"}
    funnel = read(spark, stream_settings, "marts.order_funnel")
    assert {r.served_from for r in funnel.select("served_from").distinct().collect()} == {
        serving.served_from(decisions["gold.order_status"])}
    assert funnel.count() > 0
    assert dbt_docs_index(stream_settings, PIPELINE.name).exists()


def replay_dag_test(env: dict, logical_date: dt.datetime, confirm: bool) -> dict[str, str]:
    """``dag.test()`` of the replay DAG with ``confirm``: each task's final state."""
    script = ("import datetime as dt, json, sys\nfrom airflow.dag_processing.dagbag import DagBag\n"
              "run = DagBag(dag_folder=sys.argv[1]).get_dag('kappa_marketplace_replay').test(\n"
              "    logical_date=dt.datetime.fromisoformat(sys.argv[2]), run_conf={'confirm': sys.argv[3] == 'yes'})\n"
              "print(json.dumps({ti.task_id: str(ti.state) for ti in run.get_task_instances()}))")
    done = subprocess.run([sys.executable, "-c", script, str(PROJECT_ROOT / "dags"), logical_date.isoformat(),
                           "yes" if confirm else "no"], env=env, capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_replay_triggered_without_confirm_is_skipped_and_pages_nobody(spark, served, webhook):
    stream_settings, env = served
    pages = len(webhook.bodies("/hook"))
    tasks = replay_dag_test(env, dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(days=1), False)
    assert set(tasks.values()) == {"skipped"} and len(tasks) == 5, tasks
    assert len(webhook.bodies("/hook")) == pages, webhook.received
    assert _generation_events(spark, stream_settings) == [], "nothing was built"


def _generation_events(spark, settings) -> list:
    from spark_apps.target import generations

    return generations.read(spark, settings, PIPELINE.name)


def test_replay_dag_builds_a_new_generation_reconciles_it_and_swaps_serving_to_it(spark, served):
    """The manual replay DAG, confirmed: the rebuilt generation is exact (the stream's corrupted row is not in the
    log), so every view moves to it in its mode; no supervised stream ran, so none is started."""
    from spark_apps.target import generations

    stream_settings, env = served
    before = serving.current(spark, stream_settings, PIPELINE.name)
    logical = dt.datetime.now(dt.UTC).replace(microsecond=0)
    tasks = replay_dag_test(env, logical, True)
    assert set(tasks.values()) == {"success"} and len(tasks) == 5, tasks
    assert generations.active(spark, stream_settings, PIPELINE.name) == "g1"
    run_id = f"kappa_marketplace_replay.{logical:%Y%m%dT%H%M%SZ}"
    snapshots = {r.table: r.snapshot_version for r in read(spark, stream_settings, LEDGER_TABLE)
                 .where(f"run_id = '{run_id}'").collect()}
    for table, decision in serving.current(spark, stream_settings, PIPELINE.name).items():
        mode = before[table].mode if table in before else serving.LAMBDA
        expected = ((f"{table}__g1", None) if mode == serving.KAPPA
                    else (f"batch.{table.split('.')[1]}", snapshots[table]))
        assert (decision.mode, decision.run_id) == (mode, run_id)
        assert (decision.source_table, decision.source_version) == expected
    assert not (stream_settings.run_dir / f"{PIPELINE.name}.stream.pid").exists()


def reconcile_runs(env: dict) -> dict[str, str | None]:
    """run id -> state of every kappa_reconcile run in Airflow's metadata database."""
    db = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///")
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT run_id, state FROM dag_run "
                                 "WHERE dag_id = 'kappa_marketplace_reconcile'").fetchall())


def airflow_cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "airflow", *args], env=env, capture_output=True, text=True,
                          cwd=PROJECT_ROOT, timeout=300)


def test_the_real_scheduler_and_executor_run_the_reconcile_dag_and_airflow_listens_on_loopback_only(
        served, webhook):
    """`kappa airflow start` as on-call runs it (API server, scheduler, DAG processor, triggerer, log server): once
    the reconcile DAG is unpaused, the scheduler creates its run on schedule (every minute here), the LocalExecutor
    runs its tasks (the reconcile task's `kappa reconcile` and its JVM included) and the run succeeds; with a
    deadline shorter than the run, the triggerer pages that it is late; every socket Airflow holds is on loopback;
    `kappa airflow stop` (what `make down` runs) ends every one of its processes."""
    stream_settings, _ = served
    on_call = stream_settings.with_overrides(airflow_port=free_port(), airflow_log_server_port=free_port(),
                                             reconcile_schedule="* * * * *", reconcile_deadline_s=5)
    env = {**os.environ, **on_call.as_env()}
    airflow_env = {**env, **airflow_environment(on_call)}
    earlier = set(reconcile_runs(airflow_env))
    started = subprocess.run([sys.executable, "-m", "spark_apps.cli", "airflow", "start"], env=env,
                             capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=600)
    group = airflow_standalone.running_group(on_call)
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        assert "password in " in started.stdout and "readable by you only" in started.stdout
        listening = listening_addresses(set(group_members(group)))
        assert len(listening) >= 2 and all(is_loopback(address) for address, _ in listening), listening
        wait_for(lambda: airflow_cli(airflow_env, "dags", "unpause", "kappa_marketplace_reconcile").returncode == 0,
                 "the DAG processor to parse the reconcile DAG", 300, every_s=5)

        def first_scheduled_run_done() -> tuple[str, str] | None:
            done = [(run_id, state) for run_id, state in reconcile_runs(airflow_env).items()
                    if run_id not in earlier and state in ("success", "failed")]
            return min(done) if done else None

        run_id, state = wait_for(first_scheduled_run_done, "the scheduler to run the reconcile DAG",
                                 RECOMPUTE_SNAPSHOT_TIMEOUT_S, every_s=2)
        assert run_id.startswith("scheduled__") and state == "success", \
            airflow_standalone.log_file(on_call).read_text()[-4000:]
        late = wait_for(lambda: [body for body in webhook.bodies("/hook") if body["dedup_key"] == "deadline:"
                                 "kappa_marketplace_reconcile" and body["action"] == "trigger"
                                 and body["details"]["run_id"] == run_id],
                        "the triggerer to page the missed deadline", 120)
        assert late[0]["severity"] == "critical" and late[0]["runbook"].endswith("#audit-late")
        # The run finished, late: the DAG's success callback (run by the DAG processor) closes the incident.
        wait_for(lambda: [body for body in webhook.bodies("/hook") if body["dedup_key"] == "deadline:"
                          "kappa_marketplace_reconcile" and body["action"] == "resolve"],
                 "the DAG processor to resolve the missed deadline", 120)
        # The next scheduled run follows at once; its task runs `kappa reconcile` in a process group of its own.
        reconciling = wait_for(lambda: running_reconciles(group), "the next run's `kappa reconcile`", 300)
    finally:
        stopped = subprocess.run([sys.executable, "-m", "spark_apps.cli", "airflow", "stop"], env=env,
                                 capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120)
    assert stopped.stdout.strip() == "airflow stopped" and not group_members(group)
    assert not [pid for pid in reconciling if process_alive(pid)], "a task's `kappa reconcile` outlived Airflow"


def running_reconciles(group: int) -> set[int]:
    """The `kappa reconcile` processes (and their JVMs) under Airflow's processes."""
    found = set()
    for member in group_members(group):
        for pid in process_tree(member):
            if any("spark_apps.cli" in arg for arg in cmdline(pid)) and "reconcile" in cmdline(pid):
                found |= process_tree(pid)
    return found
