"""Locks that every process on every machine sees: rows of one table in the catalog's database server.

A warehouse on object storage has no lock of its own. Delta commits version ``N`` of a table by writing
``_delta_log/N.json`` only if no other writer did; on S3 its log store can check that only within its own JVM,
because a PUT cannot say "only if absent" (S3-compatible servers, the embedded one among them, do not enforce
conditional writes). Two drivers committing the same version of one table at once can then both "succeed", the
second overwriting the first. Here the stream, ``kappa maintain``, the auditor, a replay and every process that
records an alert are separate drivers, and several of them write the same table: the store (micro-batches,
compaction, OPTIMIZE), the audit and serving tables (every audit, alert and cutover).

So on object storage each write to a table holds that table's lock for the whole Delta transaction
(:func:`table_write`): one commit at a time per table. The next writer reads the log the last one left, finds its
version taken, and commits after it, checking conflicts as Delta always does. The same lock, held for a stream's
whole run under its checkpoint's name and never waited for, is the fence of a checkpoint on object storage
(``io.fencing``).

A lock is a row of ``KAPPA_LOCKS`` in the database ``kappa_locks`` of the catalog's Derby server, taken by
``SELECT ... FOR UPDATE`` in a transaction kept open on the holder's own connection. Derby drops it when that
transaction ends or the connection does, so a process that dies, ``kill -9`` included, leaves no lock behind.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from spark_apps.core.errors import PlatformError
from spark_apps.core.object_path import Location, ObjectPath
from spark_apps.core.settings import Settings

log = logging.getLogger(__name__)
DATABASE = "kappa_locks"
# How long one attempt waits for a held lock inside the database; a caller that waits longer tries again.
ATTEMPT_S = 1
_TIMEOUT_STATES = {"40XL1", "40XL2"}  # a lock wait timed out (or was a deadlock), and Derby rolled back
_READY: set[str] = set()


class LockTimeout(PlatformError):
    """Another process held the lock for longer than the caller would wait."""


def jdbc_url(settings: Settings) -> str:
    return f"jdbc:derby://{settings.catalog_host}:{settings.catalog_port}/{DATABASE};create=true"


class CatalogLock:
    """One named lock: held from :meth:`acquire` (or a true :meth:`try_acquire`) until :meth:`release`."""

    def __init__(self, spark, settings: Settings, name: str) -> None:
        self.spark = spark
        self.settings = settings
        self.name = name
        self._connection: Any = None

    @property
    def held(self) -> bool:
        return self._connection is not None

    def try_acquire(self, holder: str) -> bool:
        """Take the lock if it is free within one attempt; False when another process holds it."""
        if self._connection is not None:
            return True
        connection = _connect(self.spark, self.settings)
        try:
            _ensure_row(connection, self.name)
            select = connection.prepareStatement("SELECT HOLDER FROM KAPPA_LOCKS WHERE NAME = ? FOR UPDATE")
            select.setString(1, self.name)
            found = select.executeQuery()
            found.next()
            update = connection.prepareStatement("UPDATE KAPPA_LOCKS SET HOLDER = ? WHERE NAME = ?")
            update.setString(1, holder)
            update.setString(2, self.name)
            update.executeUpdate()
        except Exception as exc:
            _close(connection)
            if _sql_state(exc) in _TIMEOUT_STATES:
                return False
            raise
        self._connection = connection
        return True

    def acquire(self, holder: str, timeout_s: float) -> None:
        """Take the lock, waiting up to ``timeout_s`` for its holder to let it go."""
        deadline = time.monotonic() + timeout_s
        waited = False
        while not self.try_acquire(holder):
            if time.monotonic() >= deadline:
                raise LockTimeout(f"{self.holder()} has held {self.name} for more than {timeout_s:.0f}s; "
                                  "KAPPA_TABLE_LOCK_TIMEOUT_S says how long a write waits")
            if not waited:
                log.info("waiting for %s, held by %s", self.name, self.holder())
                waited = True

    def holder(self) -> str:
        """Who holds (or last held) the lock, read without waiting for it."""
        connection = _connect(self.spark, self.settings)
        try:
            select = connection.prepareStatement("SELECT HOLDER FROM KAPPA_LOCKS WHERE NAME = ? WITH UR")
            select.setString(1, self.name)
            found = select.executeQuery()
            return (found.getString(1) if found.next() else "") or "an unknown process"
        finally:
            _close(connection)

    def release(self) -> None:
        if self._connection is None:
            return
        connection, self._connection = self._connection, None
        try:
            connection.commit()
        finally:
            connection.close()


def holder_line(what: str) -> str:
    """Who a lock's holder is, for the refusal another process prints."""
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return f"{what}: pid {os.getpid()} on {socket.gethostname()}, since {started}"


@contextmanager
def table_write(spark, settings: Settings, location: Location, what: str) -> Iterator[None]:
    """Hold the write lock of the Delta table at ``location`` for the block, when it lives on object storage (a
    local table needs none: Delta's local log store writes a commit only if it is absent)."""
    if not isinstance(location, ObjectPath):
        yield
        return
    lock = CatalogLock(spark, settings, f"table {location}")
    lock.acquire(holder_line(what), settings.table_lock_timeout_s)
    try:
        yield
    finally:
        lock.release()


def _connect(spark, settings: Settings) -> Any:
    """A connection of this process to the locks database, through the Derby client the driver JVM has for the
    catalog; the database and its table are made on first use."""
    jvm = spark.sparkContext._jvm
    url = jdbc_url(settings)
    connection = jvm.org.apache.derby.client.ClientAutoloadedDriver().connect(url, jvm.java.util.Properties())
    if url not in _READY:
        _prepare(connection)
        _READY.add(url)
    connection.setAutoCommit(False)
    return connection


def _close(connection: Any) -> None:
    """End the connection's transaction (letting go of what it locked) and the connection."""
    try:
        connection.rollback()
    finally:
        connection.close()


def _prepare(connection: Any) -> None:
    """The locks table, and the database's lock wait of one attempt; both kept when already there."""
    statement = connection.createStatement()
    try:
        statement.execute("CREATE TABLE KAPPA_LOCKS (NAME VARCHAR(2000) NOT NULL PRIMARY KEY, HOLDER VARCHAR(2000))")
    except Exception as exc:
        if _sql_state(exc) != "X0Y32":  # already exists
            raise
    statement.execute("CALL SYSCS_UTIL.SYSCS_SET_DATABASE_PROPERTY('derby.locks.waitTimeout', "
                      f"'{ATTEMPT_S}')")


def _ensure_row(connection: Any, name: str) -> None:
    """The lock's row, inserted by the first process to name it (an insert of a row another process holds would
    wait for it, so the row is looked up first, without waiting)."""
    select = connection.prepareStatement("SELECT 1 FROM KAPPA_LOCKS WHERE NAME = ? WITH UR")
    select.setString(1, name)
    if select.executeQuery().next():
        return
    insert = connection.prepareStatement("INSERT INTO KAPPA_LOCKS (NAME, HOLDER) VALUES (?, '')")
    insert.setString(1, name)
    try:
        insert.executeUpdate()
        connection.commit()
    except Exception as exc:
        connection.rollback()
        if _sql_state(exc) != "23505":  # the row is there
            raise


def _sql_state(exc: Exception) -> str | None:
    """The SQLSTATE of a JDBC error raised through py4j."""
    java = getattr(exc, "java_exception", None)
    try:
        return java.getSQLState() if java is not None else None
    except Exception:
        return None
