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
"""
from __future__ import annotations

import sqlite3
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Sequence


class Finisher:
    """One background thread and the one batch it may be finishing."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None

    @property
    def busy(self) -> bool:
        return self._pending is not None

    def start(self, conn: sqlite3.Connection, statements: Sequence[tuple[str, Sequence]]) -> Future:
        """Run `statements` and COMMIT on `conn` (inside the transaction the caller opened)
        behind the caller. The caller must have settled the previous batch."""
        assert self._pending is None, "a batch is still finishing"
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="basecrawler-store-finish")
        self._pending = self._pool.submit(_finish, conn, tuple(statements))
        return self._pending

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


def _finish(conn: sqlite3.Connection, statements: tuple[tuple[str, Sequence], ...]) -> None:
    try:
        for sql, params in statements:
            conn.execute(sql, params)
        _commit(conn)
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


# A COMMIT that meets a lock past the busy timeout leaves the transaction open and may be asked
# again (SQLite's documented rule); the waited-for write retried its whole transaction as often.
COMMIT_RETRIES = 5
COMMIT_RETRY_BASE_WAIT_S = 0.2


def _commit(conn: sqlite3.Connection) -> None:
    for attempt in range(COMMIT_RETRIES + 1):
        try:
            conn.execute("COMMIT")
            return
        except sqlite3.OperationalError as exc:
            locked = "database is locked" in str(exc) or "database is busy" in str(exc)
            if not locked or attempt == COMMIT_RETRIES or not conn.in_transaction:
                raise
            time.sleep(COMMIT_RETRY_BASE_WAIT_S * 2 ** attempt)


__all__ = ["Finisher"]
