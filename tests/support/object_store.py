"""Settings that put a test's warehouse and checkpoints on the session's S3-compatible server."""

from __future__ import annotations

from spark_apps.core.settings import Settings
from spark_apps.services.object_store import ObjectStoreServer


def on_object_store(settings: Settings, server: ObjectStoreServer, bucket: str) -> Settings:
    """``settings`` with the warehouse and the checkpoints in a new ``bucket`` of ``server``."""
    server.create_bucket(bucket)
    return settings.with_overrides(s3_dir=server.settings.s3_dir, s3_port=server.settings.s3_port,
                                   s3_endpoint=server.endpoint, warehouse_dir=f"s3a://{bucket}/warehouse",
                                   checkpoint_root=f"s3a://{bucket}/checkpoints")
