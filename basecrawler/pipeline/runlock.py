"""Cross-process run lock: one crawl writes at a time (scheduler, manual runs, tests).

An advisory `flock` on `<db>.lock`: the kernel drops it when the holding process dies, so a
lock left by a crashed or killed run is taken over without any stale-PID guessing. The holder's
PID is written into the file for people reading it.

On PostgreSQL (`postgresql://…`) the lock is the server's advisory lock instead (`PgRunLock`),
held by a connection of its own: crawlers on several machines share it, and a crashed holder's
session ends, which releases it. There it is per source (`scope`): sources crawl in parallel on
one server, a source never twice at once. On SQLite one writer at a time is the point, so the
scope is ignored.

A server restart ends the lock's session, and with it the lock. The store's connection to the
same database notices the restart at its next statement and reconnects; right then (before that
statement, so before the next batch is written) the held lock checks its own session and, if it
is gone, takes the lock back on a new one. If another crawl took it meanwhile, `RunLockLost`
(one line) stops this run, and until `release()` the store's connection writes nothing but the
run's own record (pg.py's fence), so not even the batch it refused is flushed later.
"""
from __future__ import annotations

import fcntl
import logging
import os
import time
import zlib
from pathlib import Path

from basecrawler.store.engines import is_postgres_url, redact
from basecrawler.store.engines.dialect import POSTGRES
from basecrawler.errors import CrawlerError, RunLockTimeout

log = logging.getLogger(__name__)


class RunLock:
    def __new__(cls, db_path: str, *args, **kwargs):
        if cls is RunLock and is_postgres_url(db_path):
            return super().__new__(PgRunLock)
        return super().__new__(cls)

    def __init__(self, db_path: str, timeout_s: float | None = None, scope: str | None = None):
        self.path = None if db_path == ":memory:" else Path(f"{db_path}.lock")
        self.timeout_s = timeout_s
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock if free; False when another process holds it."""
        if self.path is None:
            return True
        self._open()
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self._stamp()
        return True

    def acquire(self) -> None:
        """Block until the lock is ours (or raise RunLockTimeout)."""
        if self.path is None:
            return
        self._open()
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() > deadline:
                    raise RunLockTimeout(f"another crawl (pid {self.holder_pid()}) still held {self.path} "
                                         f"after {self.timeout_s:.0f}s")
                time.sleep(0.1)
        self._stamp()

    def holder_pid(self) -> int | None:
        if self.path is None or not self.path.exists():
            return None
        try:
            return int(self.path.read_text().strip() or 0) or None
        except (ValueError, OSError):
            return None

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def _open(self) -> None:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def _stamp(self) -> None:
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


class RunLockLost(CrawlerError):
    """The PostgreSQL run lock went with a server restart and another crawl holds it now."""

    kind = "run_lock_lost"


# First half of every two-key advisory lock this project takes, so its locks cannot collide
# with another application's on the same database ("bc").
LOCK_NAMESPACE = 0x6263
# (the lock's own psycopg connection, not the store's: PostgreSQL's spelling, no adapter)
_TRY_LOCK = POSTGRES.write("SELECT pg_try_advisory_lock(%s, %s)")
_LOCK = POSTGRES.write("SELECT pg_advisory_lock(%s, %s)")


class PgRunLock(RunLock):
    """`pg_try_advisory_lock` / `pg_advisory_lock` on a dedicated connection.

    `path` is kept only as the lock's name (the scheduler derives its job and daemon locks by
    renaming it, as on SQLite); the key is a CRC of that name."""

    def __init__(self, db_path: str, timeout_s: float | None = None, scope: str | None = None):
        self.url = db_path
        self.timeout_s = timeout_s
        self.path = Path(f"{scope or 'crawl'}.lock")
        self._conn = None
        self._watching = False   # registered to take the lock back after a reconnect

    @property
    def key(self) -> int:
        return zlib.crc32(str(self.path.name).encode("utf-8")) & 0x7FFFFFFF

    def _connect(self):
        if self._conn is None:
            from basecrawler.store.engines.pg_connect import connect
            # No statement timeout: waiting in the lock queue is this connection's job
            # (bounded by lock_timeout when BASECRAWLER_LOCK_TIMEOUT is set).
            self._conn = connect(self.url, statement_timeout=False)
        return self._conn

    def try_acquire(self) -> bool:
        taken = bool(self._connect().execute(_TRY_LOCK,
                                             [LOCK_NAMESPACE, self.key]).fetchone()[0])
        if taken:
            self._watch()
        return taken

    def acquire(self) -> None:
        """Wait in the server's lock queue (no polling); lock_timeout bounds the wait."""
        import psycopg

        conn = self._connect()
        if self.timeout_s is not None:
            conn.execute(POSTGRES.write(f"SET lock_timeout = {max(int(self.timeout_s * 1000), 1)}"))
        try:
            conn.execute(_LOCK, [LOCK_NAMESPACE, self.key])
            self._watch()
        except psycopg.errors.LockNotAvailable:
            raise RunLockTimeout(f"another crawl (pid {self.holder_pid()}) still held {self.path.name} on "
                                 f"{redact(self.url)} after {self.timeout_s:.0f}s") from None
        finally:
            if self.timeout_s is not None:
                conn.execute(POSTGRES.write("RESET lock_timeout"))

    def holder_pid(self) -> int | None:
        """The OS pid of the holder (from its connection's application_name; it may run on
        another machine)."""
        conn = self._connect()
        row = conn.execute(POSTGRES.query(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s AND l.objsubid = 2 "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"),
            [LOCK_NAMESPACE, self.key]).fetchone()
        try:
            return int(row[0].rsplit(" ", 1)[-1]) if row else None
        except ValueError:
            return None

    def _watch(self) -> None:
        from basecrawler.store.engines.pg_connect import add_reconnect_hook
        if not getattr(self, "_watching", False):
            add_reconnect_hook(self.url, self._take_back)
            self._watching = True

    def _take_back(self) -> None:
        """After a reconnect to the database: keep the lock if its session lived, else take it
        again on a new session, or raise RunLockLost when another crawl holds it now."""
        import psycopg

        try:
            self._conn.execute(POSTGRES.query("SELECT 1"))
            return   # only the store's session was cut: the lock's own still holds it
        except psycopg.Error:
            self._conn.close()
            self._conn = None
        if bool(self._connect().execute(_TRY_LOCK,
                                        [LOCK_NAMESPACE, self.key]).fetchone()[0]):
            log.warning("run lock %s on %s lost with the server's restart; taken back", self.path.name,
                        redact(self.url))
            return
        raise RunLockLost(f"run lock {self.path.name} on {redact(self.url)} lost with the server's restart and "
                          f"taken by another crawl (pid {self.holder_pid()}) meanwhile; this run stops here")

    def release(self) -> None:
        if getattr(self, "_watching", False):
            from basecrawler.store.engines.pg_connect import remove_reconnect_hook
            remove_reconnect_hook(self.url, self._take_back)
            self._watching = False
        # Closing the session releases every advisory lock it holds.
        if self._conn is not None:
            self._conn.close()
            self._conn = None
