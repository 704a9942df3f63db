"""Deleting a test's topics for good: the broker deletes asynchronously, and the next test on the same broker may
create a topic of the same name (a pipeline's declared topic, such as the sensor pipeline's)."""

from __future__ import annotations

from spark_apps.core.settings import Settings
from spark_apps.core.waiting import wait_for


def list_topics(settings: Settings) -> list[str]:
    from spark_apps.io.topics import admin_client

    with admin_client(settings) as admin:
        return admin.list_topics()


def delete_topics(settings: Settings, names: list[str]) -> None:
    from spark_apps.io.topics import admin_client

    with admin_client(settings) as admin:
        admin.delete_topics(names)
        wait_for(lambda: not set(names) & set(admin.list_topics()), f"the deletion of {', '.join(names)}", 60)
