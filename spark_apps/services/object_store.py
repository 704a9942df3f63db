"""Lifecycle of the embedded S3-compatible server: S3Proxy (from Maven Central) on a local folder.

A real server, so the platform meets an object store's behaviour (listing, multipart uploads, no rename) on one
machine; production points ``KAPPA_S3_ENDPOINT`` at its own. It runs as a background JVM bound to the configured host
only, with its buckets, log, pid file and configuration under ``s3_dir``. Its secret key is the setting's, or one it
generates at first start and keeps in ``s3_dir/credentials`` (readable by its owner only); it is never printed.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from spark_apps.core.errors import PlatformError
from spark_apps.core.settings import S3_CREDENTIALS_FILE, Settings
from spark_apps.services.daemon import Daemon
from spark_apps.services.processes import java_binary, port_in_use

STOP_TIMEOUT_S = 30.0
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


class ObjectStoreError(PlatformError):
    """The embedded S3-compatible server is missing, down, or could not start."""


@dataclass(frozen=True)
class ObjectStorePaths:
    root: Path

    @property
    def pid_file(self) -> Path:
        return self.root / "s3.pid"

    @property
    def log_file(self) -> Path:
        return self.root / "s3proxy.log"

    @property
    def config_file(self) -> Path:
        return self.root / "s3proxy.properties"

    @property
    def credentials_file(self) -> Path:
        return self.root / S3_CREDENTIALS_FILE

    @property
    def buckets_dir(self) -> Path:
        return self.root / "buckets"


def embedded_endpoint(settings: Settings) -> str:
    return f"http://{settings.s3_host}:{settings.s3_port}"


def embedded_buckets(settings: Settings) -> list[str]:
    """The buckets of the warehouse and checkpoint root when they live on the embedded server (the endpoint
    setting names its address), which `make up` then starts; none otherwise."""
    if settings.s3_endpoint.rstrip("/") != embedded_endpoint(settings):
        return []
    return settings.object_store_buckets()


def secret_key(settings: Settings) -> str:
    """The secret key for the endpoint: the setting's, else the one the embedded server generated ("" if none)."""
    return settings.object_store_access().secret_key()


class ObjectStoreServer:
    """Starts in the background, waits until it answers, creates buckets, stops cleanly."""

    def __init__(self, settings: Settings, stop_with_parent: bool = False) -> None:
        self.settings = settings
        self.paths = ObjectStorePaths(settings.s3_dir)
        self.stop_with_parent = stop_with_parent
        self.daemon = Daemon("S3-compatible server", self.paths.pid_file, str(self.paths.config_file),
                             self.paths.log_file, STOP_TIMEOUT_S)

    @property
    def endpoint(self) -> str:
        return embedded_endpoint(self.settings)

    def pid(self) -> int | None:
        return self.daemon.pid()

    def answers(self) -> bool:
        return port_in_use(self.settings.s3_host, self.settings.s3_port)

    def start(self) -> None:
        """Start the server unless it already runs; return once it accepts connections."""
        if self.pid() is not None:
            return
        if self.answers():
            raise ObjectStoreError(f"port {self.settings.s3_port} on {self.settings.s3_host} is taken by another "
                                   "process; stop it or set KAPPA_S3_PORT to a free port")
        jars = sorted(self.settings.s3_jars_dir.glob("s3proxy-*.jar"))
        if not jars:
            raise ObjectStoreError(f"the S3-compatible server's jar is missing in {self.settings.s3_jars_dir}; "
                                   "run `make jars`")
        self._configure()
        process = self.daemon.launch(
            [java_binary(), "-Xmx256m", "-Djava.awt.headless=true", "-jar", str(jars[-1]),
             "--properties", str(self.paths.config_file)],
            output=self.paths.log_file, stop_with_parent=self.stop_with_parent)
        if not self.daemon.wait_ready(process, self.answers, self.settings.s3_start_timeout_s, ObjectStoreError,
                                      every_s=0.2):
            self.stop()
            raise ObjectStoreError(f"the S3-compatible server did not answer on {self.endpoint} within "
                                   f"{self.settings.s3_start_timeout_s:.0f}s; see {self.paths.log_file}")

    def stop(self) -> bool:
        return self.daemon.stop()

    def create_bucket(self, name: str) -> None:
        """A bucket is a folder of the server's file backend; creating one that exists changes nothing."""
        if not BUCKET_NAME.fullmatch(name):
            raise ObjectStoreError(f"{name!r} is not a bucket name: 3-63 lower-case letters, digits, dots and "
                                   "hyphens, starting and ending with a letter or digit")
        (self.paths.buckets_dir / name).mkdir(parents=True, exist_ok=True)

    def _configure(self) -> None:
        """The server's configuration, readable by its owner only: it holds the secret key."""
        self.paths.buckets_dir.mkdir(parents=True, exist_ok=True)
        if not self.settings.s3_secret_key and not self.paths.credentials_file.exists():
            _private(self.paths.credentials_file, secrets.token_urlsafe(24) + "\n")
        _private(self.paths.config_file, "\n".join([
            f"s3proxy.endpoint={self.endpoint}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={self.settings.s3_access_key}",
            f"s3proxy.credential={secret_key(self.settings)}",
            "jclouds.provider=filesystem",
            f"jclouds.filesystem.basedir={self.paths.buckets_dir}"]) + "\n")


def _private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(text)
