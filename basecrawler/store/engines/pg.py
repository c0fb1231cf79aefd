"""PostgreSQL through psycopg 3, behind the sqlite3 surface the store and its callers use.

`PgConnection.execute(sql, params)` runs a statement its caller spelled for PostgreSQL with
the connection's dialect (`Statement`, engines/dialect.py) as written, and refuses anything
else (`MisspeltStatement`): plain SQL or a statement spelled for SQLite. Nothing rewrites SQL
text by regular expressions (issue #35); what only reads is what the statement says.

The connection is in autocommit mode and the store opens its transactions with BEGIN … COMMIT,
exactly as on SQLite. Connecting, timeouts and the watchdog that cuts a statement a hung
server never answers are engines/pg_connect.py; the cursor and value conversions
engines/pg_cursor.py.

A lost connection (server restart, network cut) is re-established with back-off for up to
BASECRAWLER_PG_RECONNECT_S (default 60 s). A statement outside a transaction that only reads
(a `Dialect.query`, or read_only=True) is simply run again on the new connection. Inside a
transaction, or for a lone write, the connection cannot know what the server kept, so it raises
`ConnectionLost`, which the store's retry treats like a deadlock: the whole transaction runs
again from BEGIN (the upsert is idempotent, so nothing is lost or duplicated). Every statement
of the broken transaction raises too, until its ROLLBACK; the next BEGIN reconnects.
"""
from __future__ import annotations

import logging
import time
from typing import Iterable

import psycopg
from psycopg import pq

from basecrawler.errors import CrawlerError
from basecrawler.store.engines import redact
from basecrawler.store.engines.dialect import POSTGRES, Statement
from basecrawler.store.engines.pg_connect import (APPLICATION_PREFIX, RECONNECT_FIRST_WAIT_S, RECONNECT_MAX_WAIT_S,
                                                  RECONNECT_S, ConnectionLost, DatabaseUnreachable, InvalidDatabaseUrl,
                                                  add_reconnect_hook, answer_deadline_s, application_name, connect,
                                                  connection_params, is_connection_lost, is_retryable, no_answer,
                                                  one_line, reconnect_hooks, remove_reconnect_hook, seconds_setting,
                                                  watchdog)
from basecrawler.store.engines.pg_cursor import EMPTY, Cursor, NumericLoader, bind

log = logging.getLogger(__name__)


class MisspeltStatement(psycopg.ProgrammingError, CrawlerError):
    """A statement not spelled for PostgreSQL reached it: plain SQL, or one stated for another
    engine's dialect. Every statement is stated with `dialect_of(conn)` (engines/dialect.py)."""

    kind = "misspelt_statement"


def stated(sql: str) -> tuple[str, bool]:
    """(the text to run, whether it only reads) of a Statement of this dialect; anything else
    is refused, never rewritten."""
    if not isinstance(sql, Statement):
        raise MisspeltStatement(f"plain SQL reached PostgreSQL; state it with its dialect "
                                f"(dialect_of(conn).query/write, engines/dialect.py): {sql[:80]!r}")
    if sql.dialect is not POSTGRES:
        raise MisspeltStatement(f"a statement spelled for {sql.dialect.name} reached PostgreSQL: {sql[:80]!r}")
    return sql, sql.read_only


class PgConnection:
    """sqlite3.Connection's surface over one psycopg connection (autocommit; BEGIN/COMMIT by
    the caller, as the store does on SQLite), re-established when it is lost (module docstring)."""

    dialect = "postgresql"   # engines/dialect.py: dialect_of(conn) is POSTGRES

    def __init__(self, url: str):
        self.url = url
        self._in_tx = False      # between the caller's BEGIN and its COMMIT / ROLLBACK
        self._lost = False       # the connection broke inside that transaction
        self._unwatched = False  # this transaction turned the statement timeout off
        self._hung = False       # the watchdog cut the last statement: one reconnect attempt, no back-off
        self._fence = None       # (hook, error) of a reconnect hook that refused this connection
        self.transactions = 0    # BEGINs so far: tells a caller whether it already acted in this transaction
        self.statements_in_transaction = 0   # since the last BEGIN: 0 = nothing to keep on a rollback
        self._deadline_s = answer_deadline_s(connection_params(url))
        self.raw = self._connect()

    def _connect(self) -> psycopg.Connection:
        raw = connect(self.url)
        raw.adapters.register_loader("numeric", NumericLoader)
        # What callers keep about this session (a temporary table they made): a new
        # connection starts without it.
        self.session: dict = {}
        return raw

    def _reconnect(self) -> None:
        """A new connection, waiting with growing pauses while the server is down or starting."""
        # A server that just hung gets one attempt (its connect timeout), not a minute of back-off.
        budget = 0.0 if self._hung else seconds_setting("BASECRAWLER_PG_RECONNECT_S", RECONNECT_S)
        started, wait = time.monotonic(), RECONNECT_FIRST_WAIT_S
        self.raw.close()
        while True:
            try:
                self.raw = self._connect()
            except psycopg.OperationalError as exc:
                waited = time.monotonic() - started
                if waited + wait > budget:
                    cause = str(exc).split(": ", 1)[-1]   # connect() already named the database
                    if self._hung:
                        raise ConnectionLost(f"{redact(self.url)} did not answer (server hung?) and took no new "
                                             f"connection: {cause}", retryable=False) from None
                    raise ConnectionLost(f"{redact(self.url)} unreachable for {waited:.0f}s "
                                         f"(BASECRAWLER_PG_RECONNECT_S={budget:g}): {cause}",
                                         retryable=False) from None
                time.sleep(wait)
                wait = min(wait * 2, RECONNECT_MAX_WAIT_S)
                continue
            self._hung = False
            log.info("PostgreSQL: reconnected to %s after %.1fs", redact(self.url), time.monotonic() - started)
            for hook in reconnect_hooks(self.url):
                try:
                    hook()
                except CrawlerError as exc:
                    # Refused (the run lock went to another crawl): until that hook is removed,
                    # this connection writes nothing but the run's own record (crawl_runs).
                    self._fence = (hook, exc)
                    raise
            return

    @property
    def in_transaction(self) -> bool:
        # A transaction whose connection broke still wants its ROLLBACK (a no-op, see run_statement).
        if self._lost:
            return True
        if self.raw.closed:
            return False
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    def run_statement(self, sql: str, run, read_only: bool | None = None):
        """Run `run(raw)` for statement `sql`, keeping the transaction state and turning a
        lost connection into a reconnect (a read outside a transaction) or ConnectionLost.
        `read_only`: whether the statement only reads (None: not said, taken as a write)."""
        head = sql.lstrip()[:12].upper()
        begins = head.startswith("BEGIN")
        ends = head.startswith(("COMMIT", "END")) or (head.startswith("ROLLBACK") and " TO " not in sql.upper())
        if self._lost:
            if ends and not head.startswith("COMMIT"):
                self._lost = self._in_tx = False
                return None
            if not begins:
                raise ConnectionLost(f"connection to {redact(self.url)} lost in this transaction")
            self._lost = self._in_tx = False
        if self._fence is not None:
            self._check_fence(sql, begins or ends or bool(read_only))
        if self.raw.closed and not self._in_tx:
            self._reconnect()
        try:
            result = self._watched(sql, run)
        except psycopg.Error as exc:
            if not is_connection_lost(exc, self.raw):
                raise
            self.raw.close()
            if isinstance(exc, ConnectionLost) and not exc.retryable:   # the server hung: no reconnect
                self._lost = self._in_tx
                self._unwatched = False
                raise
            if self._in_tx or not (begins or read_only):
                # What the server kept of this transaction (or lone write) is unknown: the
                # caller runs it again from its BEGIN (the store's retry line reports it).
                self._lost = self._in_tx
                raise ConnectionLost(f"connection to {redact(self.url)} lost: {one_line(exc, self.url)}") from None
            log.warning("PostgreSQL: connection to %s lost (%s); reconnecting", redact(self.url), one_line(exc, self.url))
            self._reconnect()
            result = self._watched(sql, run)
        if begins:
            self._in_tx = True
            self.transactions += 1
            self.statements_in_transaction = 0
        elif ends:
            self._in_tx = self._unwatched = False
        elif self._in_tx:
            self.statements_in_transaction += 1
        return result

    def _check_fence(self, sql: str, harmless: bool) -> None:
        hook, exc = self._fence
        if hook not in reconnect_hooks(self.url):
            self._fence = None   # the lock was released: the fence goes with it
            return
        head = sql.lstrip()[:10].upper()
        if harmless or head.startswith(("SAVEPOINT", "RELEASE", "ROLLBACK")) or "crawl_runs" in sql:
            return
        raise exc

    def _watched(self, sql: str, run):
        """`run(raw)` under the watchdog (module docstring); a cut statement raises
        ConnectionLost, not retried."""
        if "statement_timeout" in sql and sql.lstrip()[:3].upper() == "SET":
            self._unwatched = True   # SET LOCAL statement_timeout = 0: a long step on purpose
        fired = watchdog.watch(self.raw, None if self._unwatched else self._deadline_s)
        try:
            return run(self.raw)
        except psycopg.OperationalError:
            if fired:
                self._hung = True
                raise no_answer(self.url, self._deadline_s) from None
            raise
        finally:
            watchdog.done(fired)

    def execute(self, sql: str, params: Iterable | dict | None = None, *, read_only: bool | None = None) -> Cursor:
        """Run one statement: a Statement of this dialect as written (its own read-only
        intent, unless `read_only` says it); plain SQL is refused (MisspeltStatement)."""
        bound, _ = bind(params)
        text, intent = stated(sql)

        def run(raw):
            cursor = raw.cursor()
            # Never as a prepared statement: its generic plan cannot see the values, and for
            # a keyed `number = ANY(…)` lookup on a young table it scanned every row of the country (40×
            # slower). executemany keeps psycopg's preparing, where one plan serves many rows.
            cursor.execute(text, bound, prepare=False)
            return Cursor(cursor)
        return self.run_statement(sql, run, intent if read_only is None else read_only) or EMPTY

    def executemany(self, sql: str, seq: Iterable) -> Cursor:
        rows = [bind(p)[0] for p in seq]
        text, intent = stated(sql)

        def run(raw):
            cursor = raw.cursor()
            if rows:
                cursor.executemany(text, rows)
            return Cursor(cursor)
        return self.run_statement(sql, run, intent) or EMPTY

    def executescript(self, sql: str) -> None:
        """PostgreSQL DDL as written (no rewriting), several statements at once."""
        self.run_statement(sql, lambda raw: raw.execute(sql))

    def close(self) -> None:
        self.raw.close()



class PgDatabase:
    """What the store hands to `write()` operations on PostgreSQL: `.conn` as on sqlite-utils'
    Database, plus `execute` and `query` (rows as dicts)."""

    dialect = "postgresql"

    def __init__(self, url: str):
        self.conn = PgConnection(url)

    def execute(self, sql: str, params=None) -> Cursor:
        return self.conn.execute(sql, params)

    def query(self, sql: str, params=None):
        cursor = self.conn.execute(sql, params)
        names = [d[0] for d in cursor.description]
        for values in cursor:
            yield dict(zip(names, values))

    def executescript(self, sql: str) -> None:
        self.conn.executescript(sql)

    def table_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute(POSTGRES.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "ORDER BY table_name")).fetchall()]


__all__ = ["PgConnection", "PgDatabase", "Cursor", "ConnectionLost", "DatabaseUnreachable", "InvalidDatabaseUrl",
           "MisspeltStatement", "connect", "connection_params", "one_line", "add_reconnect_hook", "remove_reconnect_hook",
           "is_connection_lost", "application_name", "is_retryable", "stated", "APPLICATION_PREFIX"]
