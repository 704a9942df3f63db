"""Stopping a service reaches the process groups its children made for their own work, not detached daemons."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from spark_apps.core.waiting import wait_for
from spark_apps.services.processes import group_members, groups_of_tree

# A service (its own group) that runs a task in a group of its own, the way Airflow runs a task, and a daemon in a
# session of its own, the way `kappa supervise` starts the stream; it prints both pids.
SERVICE = """
import subprocess, sys, time
task = subprocess.Popen(["sleep", "60"], process_group=0)
daemon = subprocess.Popen(["sleep", "60"], start_new_session=True)
print(task.pid, daemon.pid, flush=True)
time.sleep(60)
"""


def test_the_groups_of_a_service_include_its_tasks_groups_but_not_a_detached_daemon():
    service = subprocess.Popen([sys.executable, "-c", SERVICE], start_new_session=True, stdout=subprocess.PIPE,
                               text=True)
    task, daemon = (int(pid) for pid in service.stdout.readline().split())
    try:
        groups = groups_of_tree(service.pid)
        assert groups == {service.pid, task}, (groups, service.pid, task, daemon)
        for group in groups:
            os.killpg(group, signal.SIGKILL)
        wait_for(lambda: not any(group_members(g) for g in groups), "the service and its task to end", 10,
                 every_s=0.05)
        assert group_members(daemon) == [daemon], "the detached daemon is left alone"
    finally:
        for group in (service.pid, task, daemon):
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        service.wait()
