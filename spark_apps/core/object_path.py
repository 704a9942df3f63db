"""Folders and files on object storage (``s3a://bucket/key``), named and read like local paths.

The warehouse and the checkpoints may live on an S3-compatible store (``KAPPA_WAREHOUSE_DIR=s3a://...``). Spark and
Delta reach them through Hadoop's S3A; what the platform reads itself without a JVM (Delta's commit files, the
checkpoint's offset and commit logs, its app id, the catalog's folder listing) goes through an :class:`ObjectPath`.
It answers the part of ``pathlib.Path``'s interface those readers use, so one reader serves both kinds of location.

An object store has no folders: a "folder" exists while some object's key starts with its name and a slash, making
one (``mkdir``) is free, and listing it lists those keys one level deep. ``str()`` gives the ``s3a://`` URI that Spark
reads. There is no ``__fspath__``: handing one to ``open()`` fails at once instead of making a local folder named
``s3a:``.
"""

from __future__ import annotations

import fnmatch
import functools
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_apps.core.errors import PlatformError, SettingsError
from spark_apps.core.secret import Secret

SCHEME = "s3a"
_URI = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<bucket>[^/]*)/?(?P<key>.*)")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


class ObjectStoreUnavailable(PlatformError):
    """The object store did not answer, or refused the platform's keys."""


@dataclass(frozen=True)
class ObjectStoreAccess:
    """How to reach the object store: its endpoint (empty: AWS's own) and keys. The secret key is the setting's, or
    else the one the embedded server generated and keeps in ``credentials_file``."""

    endpoint: str = ""
    access_key: str = ""
    secret: Secret = field(default_factory=Secret)
    credentials_file: Path | None = None

    def secret_key(self) -> str:
        if self.secret:
            return self.secret.reveal()
        if self.credentials_file is not None and self.credentials_file.exists():
            return self.credentials_file.read_text().strip()
        return ""

    def client(self) -> Any:
        return _client(self.endpoint, self.access_key, self.secret_key())


def is_uri(text: str) -> bool:
    """Whether ``text`` names a location by URI (``scheme://...``) rather than a local path."""
    return _URI.fullmatch(text) is not None


def parse(text: str, access: ObjectStoreAccess | None = None) -> ObjectPath:
    """The object-store location ``text`` names, or one readable error for a scheme or bucket this cannot use."""
    found = _URI.fullmatch(text.strip())
    if found is None:
        raise SettingsError(f"{text!r} is not a URI (s3a://bucket/folder)")
    if found["scheme"].lower() != SCHEME:
        raise SettingsError(f"{text!r}: only s3a:// object storage is supported (Hadoop's S3A client), "
                            f"not {found['scheme']}://")
    if not _BUCKET.fullmatch(found["bucket"]):
        raise SettingsError(f"{text!r} names no bucket: s3a://<bucket>/<folder>, a bucket of 3-63 lower-case "
                            "letters, digits, dots and hyphens")
    return ObjectPath(found["bucket"], found["key"].strip("/"), access)


class ObjectPath:
    """One name on the object store: a bucket and a key (no leading or trailing slash)."""

    __slots__ = ("bucket", "key", "access")

    def __init__(self, bucket: str, key: str = "", access: ObjectStoreAccess | None = None) -> None:
        self.bucket = bucket
        self.key = "/".join(part for part in key.split("/") if part)
        self.access = access

    # ---- names ---------------------------------------------------------------------------------

    def __str__(self) -> str:
        return f"{SCHEME}://{self.bucket}/{self.key}" if self.key else f"{SCHEME}://{self.bucket}"

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and (self.bucket, self.key) == (other.bucket, other.key)

    def __hash__(self) -> int:
        return hash((self.bucket, self.key))

    def __lt__(self, other: ObjectPath) -> bool:
        return (self.bucket, self.key) < (other.bucket, other.key)

    def __truediv__(self, part: str | Path) -> ObjectPath:
        return self.joinpath(part)

    def joinpath(self, *parts: str | Path) -> ObjectPath:
        return ObjectPath(self.bucket, "/".join([self.key, *(str(p) for p in parts)]), self.access)

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(self.bucket, self.key.rsplit("/", 1)[0] if "/" in self.key else "", self.access)

    @property
    def suffix(self) -> str:
        name = self.name
        return name[name.rfind("."):] if "." in name.lstrip(".") else ""

    @property
    def stem(self) -> str:
        return self.name.removesuffix(self.suffix) if self.suffix else self.name

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def with_suffix(self, suffix: str) -> ObjectPath:
        return self.with_name(self.stem + suffix)

    # ---- reading ---------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def is_file(self) -> bool:
        if not self.key:
            return False
        return self._call("head_object", missing=None, Key=self.key) is not None

    def is_dir(self) -> bool:
        listed = self._call("list_objects_v2", Prefix=self._prefix(), MaxKeys=1)
        return bool(listed.get("KeyCount")) or not self.key

    def iterdir(self) -> Iterator[ObjectPath]:
        """The folders and objects one level below, in key order."""
        prefix = self._prefix()
        token: dict[str, str] = {}
        while True:
            page = self._call("list_objects_v2", Prefix=prefix, Delimiter="/", **token)
            names = [p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes", [])]
            names += [o["Key"][len(prefix):] for o in page.get("Contents", []) if o["Key"] != prefix]
            yield from (self / name for name in sorted(names) if name)
            if not page.get("IsTruncated"):
                return
            token = {"ContinuationToken": page["NextContinuationToken"]}

    def glob(self, pattern: str) -> Iterator[ObjectPath]:
        """Names matching ``pattern`` (``*``, ``?`` and ``[...]`` within one level, levels split by ``/``), found by
        listing one level per pattern part, never the whole tree below."""
        found = [self]
        for part in pattern.split("/"):
            if any(c in part for c in "*?["):
                found = [child for parent in found for child in parent.iterdir()
                         if fnmatch.fnmatchcase(child.name, part)]
            else:
                found = [p / part for p in found if (p / part).exists()]
        yield from found

    def read_bytes(self) -> bytes:
        body = self._call("get_object", missing=FileNotFoundError, Key=self.key)
        return body["Body"].read()

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def open(self, mode: str = "r", encoding: str = "utf-8") -> io.IOBase:
        """Read-only: an object is written whole, with ``write_text`` or ``write_bytes``."""
        if mode not in ("r", "rb"):
            raise ValueError(f"an object is opened for reading only, not {mode!r}")
        data = self.read_bytes()
        return io.BytesIO(data) if mode == "rb" else io.StringIO(data.decode(encoding))

    # ---- writing ---------------------------------------------------------------------------------

    def write_bytes(self, data: bytes) -> int:
        self._call("put_object", Key=self.key, Body=data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """A folder exists once an object is written under it: nothing to make."""

    def unlink(self, missing_ok: bool = False) -> None:
        if not missing_ok and not self.is_file():
            raise FileNotFoundError(str(self))
        self._call("delete_object", Key=self.key)

    def remove_tree(self) -> None:
        """Delete every object under this folder, one request each: S3-compatible servers differ in the checksum
        a batch delete needs, a single delete needs none. Objects go first, then any folder marker (a key ending
        in ``/``) still left: a server on a filesystem lists its folders as markers and drops them with their last
        object, while deleting a marker of a folder still full makes it wait seconds."""
        for markers in (False, True):
            for key in self._keys():
                if key.endswith("/") == markers:
                    self._call("delete_object", Key=key)

    def _keys(self) -> list[str]:
        """Every key under this folder."""
        keys: list[str] = []
        token: dict[str, str] = {}
        while True:
            page = self._call("list_objects_v2", Prefix=self._prefix(), **token)
            keys += [listed["Key"] for listed in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return keys
            token = {"ContinuationToken": page["NextContinuationToken"]}

    # ---- the store -------------------------------------------------------------------------------

    def _prefix(self) -> str:
        return f"{self.key}/" if self.key else ""

    def _call(self, operation: str, missing: Any = "raise", **arguments: Any) -> Any:
        """One request, with the store's refusals and silences turned into one readable line."""
        from botocore.exceptions import BotoCoreError, ClientError

        if self.access is None:
            raise ObjectStoreUnavailable(f"{self} has no object-store settings (KAPPA_S3_ENDPOINT and its keys)")
        try:
            return getattr(self.access.client(), operation)(Bucket=self.bucket, **arguments)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchKey", "NotFound") and missing != "raise":
                if isinstance(missing, type) and issubclass(missing, Exception):
                    raise missing(f"no object {self}") from None
                return missing
            raise ObjectStoreUnavailable(f"the object store refused {operation} on {self}: {code or exc}") from None
        except BotoCoreError as exc:
            raise ObjectStoreUnavailable(f"the object store at {self.access.endpoint or 'AWS'} did not answer "
                                         f"({type(exc).__name__}) for {self}") from None


Location = Path | ObjectPath  # a folder or file of the warehouse or the checkpoints, local or on the object store


def remove_tree(path: Location) -> None:
    """Delete a folder and everything in it, local or on the object store; a missing one is already gone."""
    if isinstance(path, ObjectPath):
        path.remove_tree()
    else:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


@functools.lru_cache(maxsize=8)
def _client(endpoint: str, access_key: str, secret_key: str) -> Any:
    """One S3 client per endpoint and keys: path-style requests (an S3-compatible server has no bucket
    subdomains), checksums only where S3 requires them (servers other than AWS refuse the newer defaults), a few
    retries and short timeouts, so a store that is down fails a command in seconds."""
    import boto3
    from botocore.config import Config

    config = Config(s3={"addressing_style": "path"}, request_checksum_calculation="when_required",
                    response_checksum_validation="when_required", retries={"max_attempts": 3, "mode": "standard"},
                    connect_timeout=5, read_timeout=30)
    keys = {"aws_access_key_id": access_key, "aws_secret_access_key": secret_key} if access_key else {}
    return boto3.session.Session().client("s3", endpoint_url=endpoint or None, region_name="us-east-1",
                                          config=config, **keys)
