"""Settings that put a test's warehouse and checkpoints on the session's S3-compatible server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spark_apps.core.settings import Settings
from spark_apps.services.object_store import ObjectStoreServer


def on_object_store(settings: Settings, server: ObjectStoreServer, bucket: str) -> Settings:
    """``settings`` with the warehouse and the checkpoints in a new ``bucket`` of ``server``."""
    server.create_bucket(bucket)
    return settings.with_overrides(s3_dir=server.settings.s3_dir, s3_port=server.settings.s3_port,
                                   s3_endpoint=server.endpoint, warehouse_dir=f"s3a://{bucket}/warehouse",
                                   checkpoint_root=f"s3a://{bucket}/checkpoints")


@contextmanager
def stream_on_object_store(settings: Settings, server: ObjectStoreServer, bucket: str, home: Path,
                           max_offsets: int, **overrides: Any) -> Iterator[Settings]:
    """A stream's settings of its own: a new topic (deleted after), its home's run and alert files, and its
    warehouse and checkpoints in ``bucket``; the running session is given the bucket's S3A settings, as every
    command's start gives them."""
    from spark_apps.io.spark_session import get_spark
    from tests.support.streams import fresh_stream_settings
    from tests.support.topics import delete_topics

    topic = f"test.{bucket}.{uuid.uuid4().hex[:8]}"
    local = fresh_stream_settings(settings, home, topic, max_offsets).with_overrides(
        run_dir=home / "run", alerts_outbox=home / "alerts" / "outbox.jsonl", **overrides)
    lakehouse = on_object_store(local, server, bucket)
    get_spark(lakehouse)
    try:
        yield lakehouse
    finally:
        delete_topics(settings, [topic])
