"""Run in a child process with a throwaway AIRFLOW_HOME: parse the DAGs, or ``dag.test()`` one of them.

Prints one JSON object on its last line. A child process keeps Airflow's configuration, ORM and
logging out of the pytest process and gives each call a clean interpreter to check imports in.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import sys

HEAVY_MODULES = ("pyspark", "py4j", "delta", "kafka", "great_expectations", "dbt")


def schedule_text(dag) -> str:
    """The schedule as text: a timetable that also waits for Assets shows both its time summary and its Assets."""
    inner, condition = getattr(dag.timetable, "timetable", None), getattr(dag.timetable, "asset_condition", None)
    if inner is not None and condition is not None:
        return f"Asset or {inner.expression} | {condition}"
    return str(dag.schedule)


def _deadlines(dag) -> list:
    deadline = getattr(dag, "deadline", None)
    return [] if deadline is None else list(deadline) if isinstance(deadline, list) else [deadline]


def parse(dags_folder: str) -> dict:
    from airflow.dag_processing.dagbag import DagBag

    connections: list[str] = []
    connect = socket.socket.connect

    def spy(sock, address):
        connections.append(str(address))
        return connect(sock, address)

    socket.socket.connect = spy
    before = set(sys.modules)
    bag = DagBag(dag_folder=dags_folder)
    socket.socket.connect = connect
    loaded = set(sys.modules) - before
    return {
        "import_errors": {str(k): str(v) for k, v in bag.import_errors.items()},
        "heavy_modules": sorted(m for m in loaded if m.split(".")[0] in HEAVY_MODULES),
        "connections": connections,
        "dags": {dag_id: {
            "tags": sorted(dag.tags), "doc_md": bool(dag.doc_md), "schedule": schedule_text(dag),
            "fileloc": dag.fileloc, "params": dict(dag.params.dump()),
            "deadlines": [{"reference": type(d.reference).__name__, "interval_s": d.interval.total_seconds(),
                           "callback": d.callback.path} for d in _deadlines(dag)],
            "topological": [t.task_id for t in dag.topological_sort()],
            "tasks": {t.task_id: {"retries": t.retries, "failure_callbacks": len(t.on_failure_callback or []),
                                  "timeout_s": t.execution_timeout.total_seconds() if t.execution_timeout else None}
                      for t in dag.tasks},
        } for dag_id, dag in bag.dags.items()},
    }


def test(dags_folder: str, dag_id: str, logical_date: str) -> dict:
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=dags_folder).get_dag(dag_id)
    run = dag.test(logical_date=dt.datetime.fromisoformat(logical_date))
    return {"state": str(run.state), "run_id": run.run_id,
            "tasks": {ti.task_id: str(ti.state) for ti in run.get_task_instances()}}


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    result = parse(*args) if command == "parse" else test(*args)
    print(json.dumps(result, default=str))
