"""Finishing a SQLite batch behind the caller: the statements of a batch's write that need no
Python while they run (the full-text feed of its new rows and the COMMIT) go on one background
thread while the pipeline makes its next batch.

Why these and only these: SQLite's Python module releases the GIL for the whole of one
statement's step. The feed of 5,000 rows and the commit are one step each and take 30–45 % of a
first run (bench/README.md, "Where a first run's time goes"), about as long as the pipeline's
own Python work for the next batch (parse, validation, prepare), so on two cores the two
overlap. The `executemany` of the rows stays with the caller: it steps once per row and takes
the GIL back each time, so a whole batch written behind made both threads queue for the GIL
(9.8 against 6.9 s for 50,000 recalls, "tried and dropped" in bench/README.md).

The contract (Store keeps it):
- at most one batch is finishing; every other use of the connection first waits for it
  (`Store.db`, and every holder of the store's write lock, settle it), so statements never
  interleave and commits keep their order: after a kill -9 the file holds a prefix of the
  batches, as when each commit was waited for;
- a batch whose finishing fails (a full disk) is rolled back whole, and the failure is raised
  by the next use of the store; the caller that counted the batch asks its `Future` whether it
  was stored (pipeline/intake.py takes the counts of a batch that was not back).

The WAL checkpoint moves off that path too (`Checkpointer`): a COMMIT that finds the WAL past
`wal_autocheckpoint` pages first copies it into the database file, a quarter of a finishing
batch's time; a second connection on its own thread does it after each batch instead.
"""
from __future__ import annotations

import logging
import sqlite3
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Collection, Sequence

from basecrawler.store.engines.dialect import SQLITE

log = logging.getLogger(__name__)

COMMIT, ROLLBACK = SQLITE.write("COMMIT"), SQLITE.write("ROLLBACK")


# While batches finish behind, the writer checkpoints the WAL itself only past this many pages
# (64 MB), a bound for when the checkpointer falls behind; SQLite's default is 1,000.
WRITER_CHECKPOINT_PAGES = 16_384


class Finisher:
    """One background thread and the one batch it may be finishing; and the checkpointer that
    copies committed batches from the WAL into the database file meanwhile."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None
        self._checkpointer: Checkpointer | None = None
        self._held: tuple[str, Collection[tuple]] = ("", ())

    @property
    def busy(self) -> bool:
        return self._pending is not None

    @property
    def held(self) -> tuple[str, Collection[tuple]]:
        """The table and the keys of the batch finishing (or last finished): a lookup meanwhile
        leaves them out, as their rows are about to change."""
        return self._held

    def start(self, conn: sqlite3.Connection, statements: Sequence[tuple[str, Sequence]], file: Path,
              held: tuple[str, Collection[tuple]] = ("", ())) -> Future:
        """Run `statements` and COMMIT on `conn` (inside the transaction the caller opened)
        behind the caller. The caller must have settled the previous batch. `file` is the
        database's, for the checkpointer; `held` the batch's table and keys (a view of the
        caller's, not a copy: the caller does not change them)."""
        assert self._pending is None, "a batch is still finishing"
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="basecrawler-store-finish")
            # A COMMIT that finds the WAL past `wal_autocheckpoint` pages copies it into the file
            # first: a quarter of a finishing batch's time (10 of 38 µs a recall), on the path
            # the pipeline waits for. The checkpointer does it on its own connection instead.
            conn.execute(SQLITE.write(f"PRAGMA wal_autocheckpoint = {WRITER_CHECKPOINT_PAGES}"))
            self._checkpointer = Checkpointer(file)
        self._held = held
        self._pending = self._pool.submit(_finish, conn, tuple(statements), self._checkpointer)
        return self._pending

    def wait_checkpointed(self) -> None:
        """Wait until every batch committed so far was copied into the database file."""
        if self._checkpointer is not None:
            self._checkpointer.idle()

    def settle(self) -> None:
        """Wait for the batch finishing (if any); raise its failure (once)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        try:
            self.settle()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
            if self._checkpointer is not None:
                self._checkpointer.close()
                self._checkpointer = None


class Checkpointer:
    """Copies the WAL's committed pages into the database file on a connection and thread of
    its own, after each batch, one checkpoint at a time. PASSIVE: it never blocks the writer
    nor waits for it; what it cannot copy yet, the next one does. The writer resets the WAL
    when it begins a transaction after a checkpoint that copied everything, so the WAL stays
    near one batch; if the checkpointer falls behind, the writer's own checkpoint at
    WRITER_CHECKPOINT_PAGES bounds it. A checkpoint that fails loses nothing (the pages stay
    in the WAL for the next)."""

    def __init__(self, file: Path) -> None:
        self._conn = sqlite3.connect(file, check_same_thread=False, timeout=0)
        self._conn.execute(SQLITE.write("PRAGMA synchronous = NORMAL"))
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="basecrawler-store-checkpoint")
        self._running: Future | None = None
        self._wanted = False   # a batch was committed since the running checkpoint began
        self._lock = threading.Lock()
        self._warned = False

    def poke(self) -> None:
        """A batch was committed: checkpoint it (once more after the one running, if any)."""
        with self._lock:
            self._wanted = True
            if self._running is None:
                self._running = self._pool.submit(self._checkpoints)

    def idle(self) -> None:
        """Wait until every batch committed so far was checkpointed."""
        while True:
            with self._lock:
                running = self._running
            if running is None:
                return
            running.result()

    def _checkpoints(self) -> None:
        while True:
            with self._lock:
                if not self._wanted:
                    self._running = None
                    return
                self._wanted = False
            self._checkpoint()

    def _checkpoint(self) -> None:
        try:
            self._conn.execute(SQLITE.write("PRAGMA wal_checkpoint(PASSIVE)")).fetchall()
        except sqlite3.Error as exc:
            if not self._warned:
                self._warned = True
                log.warning("WAL checkpoint failed (nothing lost: the pages stay in the WAL for the next): %s", exc)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._conn.close()


def _finish(conn: sqlite3.Connection, statements: tuple[tuple[str, Sequence], ...],
            checkpointer: Checkpointer | None = None) -> None:
    try:
        for sql, params in statements:
            conn.execute(sql, params)
        _commit(conn)
    except BaseException:
        if conn.in_transaction:
            conn.execute(ROLLBACK)
        raise
    if checkpointer is not None:
        checkpointer.poke()


# A COMMIT that meets a lock past the busy timeout leaves the transaction open and may be asked
# again (SQLite's documented rule); the waited-for write retried its whole transaction as often.
COMMIT_RETRIES = 5
COMMIT_RETRY_BASE_WAIT_S = 0.2


def _commit(conn: sqlite3.Connection) -> None:
    for attempt in range(COMMIT_RETRIES + 1):
        try:
            conn.execute(COMMIT)
            return
        except sqlite3.OperationalError as exc:
            locked = "database is locked" in str(exc) or "database is busy" in str(exc)
            if not locked or attempt == COMMIT_RETRIES or not conn.in_transaction:
                raise
            time.sleep(COMMIT_RETRY_BASE_WAIT_S * 2 ** attempt)


__all__ = ["Finisher"]
