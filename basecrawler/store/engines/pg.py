"""PostgreSQL through psycopg 3, behind the sqlite3 surface the store and its callers use.

`PgConnection.execute(sql, params)` takes the project's SQL as written for SQLite and rewrites
the few spellings that differ (cached per statement):
- `?` → `%s` (and a literal `%` → `%%`), `[column]` → `"column"`;
- `a IS b` / `a IS NOT b` between values → `IS [NOT] DISTINCT FROM` (SQLite's null-safe compare);
- `INSERT OR IGNORE` → `INSERT … ON CONFLICT DO NOTHING`;
- `LIKE` → `ILIKE` (SQLite's LIKE ignores ASCII case);
- `BEGIN IMMEDIATE` → `BEGIN`.
Everything else the project writes (ON CONFLICT … DO UPDATE, excluded.*, RETURNING, SAVEPOINT,
COALESCE, CASE) is already common to both. Values keep today's types: timestamps and JSON are
ISO / JSON text, booleans are stored as 0/1, and numeric results come back as int or float
rather than Decimal, as SQLite returns them.

The connection is in autocommit mode and the store opens its transactions with BEGIN … COMMIT,
exactly as on SQLite. Each connection names itself `basecrawler <host> <pid>` so the store can
tell a live crawl on any machine from a crashed one (pg_stat_activity).

Nothing waits forever (`connect`): a connect timeout (BASECRAWLER_PG_CONNECT_TIMEOUT_S,
default 5 s), a statement timeout (BASECRAWLER_PG_STATEMENT_TIMEOUT_S, default 300 s, 0 = none)
and TCP keepalives (a server that vanished mid-statement is noticed within about a minute).
Values the URL sets itself (`?connect_timeout=…`, `options=-c statement_timeout=…`) win.

A server that stops answering after it accepted the connection (a frozen host, a SIGSTOPped
server) never sends the statement timeout's cancel either, and keepalives are answered by the
kernel: a watchdog (`_Watchdog`) shuts the socket of any statement still waiting past the
statement timeout plus the connect timeout, and the statement raises a ConnectionLost that is
not retried (one line). A transaction that turned the statement timeout off (migrations' SET
LOCAL) is not watched. So no statement waits longer than connect + statement timeouts.

A lost connection (server restart, network cut) is re-established with back-off for up to
BASECRAWLER_PG_RECONNECT_S (default 60 s). A statement outside a transaction that only reads is
simply run again on the new connection. Inside a transaction, or for a lone write, the
connection cannot know what the server kept, so it raises `ConnectionLost`, which the store's
retry treats like a deadlock: the whole transaction runs again from BEGIN (the upsert is
idempotent, so nothing is lost or duplicated). Every statement of the broken transaction
raises too, until its ROLLBACK; the next BEGIN reconnects.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import socket
import threading
import time
from decimal import Decimal
from typing import Any, Iterable

import psycopg
from psycopg import pq
from psycopg.adapt import Loader

from basecrawler.errors import ConfigError, CrawlerError
from basecrawler.store.engines import redact, scrub

log = logging.getLogger(__name__)

_STRING = re.compile(r"('(?:[^']|'')*')")
_BRACKET = re.compile(r"\[(\w+)\]")
_NAMED = re.compile(r"(?<![:\w]):(\w+)")
_IS_NOT = re.compile(r"\bIS\s+NOT\s+(?!NULL\b|DISTINCT\b|TRUE\b|FALSE\b)", re.I)
_IS = re.compile(r"\bIS\s+(?!NOT\b|NULL\b|DISTINCT\b|TRUE\b|FALSE\b)", re.I)
_LIKE = re.compile(r"\bLIKE\b", re.I)
_BEGIN = re.compile(r"\bBEGIN\s+IMMEDIATE\b", re.I)
_OR_IGNORE = re.compile(r"\bINSERT\s+OR\s+IGNORE\b", re.I)
_IFNULL = re.compile(r"\bIFNULL\s*\(", re.I)
_RETURNING = re.compile(r"\sRETURNING\s", re.I)

APPLICATION_PREFIX = "basecrawler"

CONNECT_TIMEOUT_S = 5.0
STATEMENT_TIMEOUT_S = 300.0
RECONNECT_S = 60.0
RECONNECT_FIRST_WAIT_S = 0.25
RECONNECT_MAX_WAIT_S = 5.0
# url → callables run after each reconnect of a PgConnection to that url, before the statement
# that needed it: the run lock (pipeline/runlock.py) takes back the advisory lock a server
# restart dropped, or raises to stop the crawl when another holder has it by now.
_reconnect_hooks: dict[str, list] = {}
# SQLSTATEs of a connection the server ended or cannot serve yet (besides libpq's own
# "server closed the connection", which has none): admin / crash shutdown, starting up.
_LOST_STATES = {"57P01", "57P02", "57P03"}
_READ_ONLY = re.compile(r"^\s*(SELECT|SHOW|WITH|VALUES|EXPLAIN)\b(?!.*\b(INSERT|UPDATE|DELETE|FOR\s+UPDATE|nextval|setval|"
                        r"pg_advisory)\b)", re.I | re.S)


class InvalidDatabaseUrl(ConfigError):
    """A postgresql:// URL libpq cannot read (e.g. a raw `%` in the password); the message
    never holds the password."""

    kind = "invalid_database_url"


class DatabaseUnreachable(psycopg.OperationalError, CrawlerError):
    """The server could not be reached or refused the connection (one line, no password)."""

    kind = "database_unreachable"


class ConnectionLost(psycopg.OperationalError, CrawlerError):
    """The connection to PostgreSQL broke (`retryable`: the transaction can run again once
    reconnected) or could not be re-established in time (`retryable` False)."""

    kind = "connection_lost"

    def __init__(self, message: str, *, retryable: bool = True):
        super().__init__(message)
        self.retryable = retryable


def _seconds(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value in (None, ""):
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not a number of seconds") from None
    if seconds < 0:
        raise ConfigError(f"{name}={value!r} must be 0 or more")
    return seconds


def connection_params(url: str) -> dict:
    """libpq parameters for `url` with the project's defaults for what the URL leaves out
    (connect timeout, keepalives, application name). Raises InvalidDatabaseUrl (without the
    password) for a URL libpq cannot read."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise InvalidDatabaseUrl(f"invalid database URL {redact(url)}: {one_line(exc, url)} "
                                 "(percent-encode special characters of the password, e.g. % as %25)") from None
    if "connect_timeout" not in params:
        # libpq counts whole seconds and treats 1 as 2; 0 would mean "wait forever".
        params["connect_timeout"] = max(2, round(_seconds("BASECRAWLER_PG_CONNECT_TIMEOUT_S", CONNECT_TIMEOUT_S)))
    for name, value in (("keepalives", 1), ("keepalives_idle", 30), ("keepalives_interval", 10),
                        ("keepalives_count", 3)):
        params.setdefault(name, value)
    params.setdefault("application_name", application_name())
    return params


class _Watchdog:
    """One daemon thread for the process: shuts down the socket of every watched statement
    still running at its deadline (the blocked read then returns at once)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._watched: dict[int, tuple[float, psycopg.Connection, list]] = {}
        self._thread: threading.Thread | None = None

    def watch(self, raw: psycopg.Connection, seconds: float | None) -> list:
        """Start watching `raw` for `seconds`; returns the flag list (non-empty once fired)."""
        fired: list = []
        if not seconds:
            return fired
        with self._lock:
            self._watched[id(fired)] = (time.monotonic() + seconds, raw, fired)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="pg-watchdog", daemon=True)
                self._thread.start()
        return fired

    def done(self, fired: list) -> None:
        with self._lock:
            self._watched.pop(id(fired), None)

    def _loop(self) -> None:
        while True:
            time.sleep(0.2)
            now = time.monotonic()
            with self._lock:
                due = [key for key, (deadline, _, _) in self._watched.items() if deadline <= now]
                expired = [self._watched.pop(key) for key in due]
            for _, raw, fired in expired:
                fired.append(True)
                _shut(raw)


def _shut(raw: psycopg.Connection) -> None:
    try:
        fd = raw.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:   # the dup shares the connection's socket
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, psycopg.Error, ValueError):
        pass   # already closed: nothing waits on it


_watchdog = _Watchdog()


def _no_answer(url: str, seconds: float) -> "ConnectionLost":
    return ConnectionLost(f"{redact(url)} did not answer within {seconds:g}s (statement timeout + connect "
                          "timeout): server hung or host frozen?", retryable=False)


def answer_deadline_s(params: dict, statement_timeout: bool = True) -> float | None:
    """How long a statement may wait for the server before the watchdog cuts it: the
    statement timeout plus the connect timeout (None: no statement timeout, not watched)."""
    seconds = _url_statement_timeout_s(params) if statement_timeout else None
    if seconds is None:
        ms = statement_timeout_ms(params) if statement_timeout else None
        seconds = ms / 1000 if ms else None
    return seconds + float(params["connect_timeout"]) if seconds else None


def _url_statement_timeout_s(params: dict) -> float | None:
    found = re.search(r"statement_timeout\s*=\s*(\d+(?:\.\d+)?)\s*(ms|s|min)?", str(params.get("options") or ""))
    if not found:
        return None
    return float(found[1]) * {"ms": 0.001, "s": 1, "min": 60, None: 0.001}[found[2]]


def connect(url: str, *, statement_timeout: bool = True) -> psycopg.Connection:
    """An autocommit psycopg connection with the defaults above. A server that cannot be
    reached raises DatabaseUnreachable (a psycopg.OperationalError) with one line that names the
    database (redacted) and never the password."""
    params = connection_params(url)
    ms = statement_timeout_ms(params) if statement_timeout else None
    try:
        raw = psycopg.connect(autocommit=True, **params)
        if ms is not None:
            # SET rather than a startup `options`, which PgBouncer refuses by default. A server
            # that accepted the startup and then stalls is cut after the connect timeout.
            fired = _watchdog.watch(raw, float(params["connect_timeout"]))
            try:
                raw.execute(f"SET statement_timeout = {ms}")
            except psycopg.OperationalError:
                if fired:
                    raw.close()
                    raise DatabaseUnreachable(f"cannot connect to {redact(url)}: no answer within "
                                              f"{params['connect_timeout']}s after the connection was accepted "
                                              "(server hung?)") from None
                raise
            finally:
                _watchdog.done(fired)
        return raw
    except psycopg.OperationalError as exc:
        raise DatabaseUnreachable(f"cannot connect to {redact(url)}: {one_line(exc, url)}") from None


def statement_timeout_ms(params: dict) -> int | None:
    """The statement timeout to set (ms; 0 = none), or None when the URL's `options` set one."""
    if "statement_timeout" in str(params.get("options") or ""):
        return None
    return int(_seconds("BASECRAWLER_PG_STATEMENT_TIMEOUT_S", STATEMENT_TIMEOUT_S) * 1000)


def one_line(exc: BaseException, url: str) -> str:
    """An error's text on one line, password scrubbed (libpq adds hints on further lines)."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    text = text.replace("connection failed: ", "")
    return scrub(text, url) or type(exc).__name__


def is_connection_lost(exc: BaseException, raw: psycopg.Connection | None = None) -> bool:
    """Whether `exc` means the connection itself is gone (not that a statement failed)."""
    if isinstance(exc, ConnectionLost):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    if raw is not None and (raw.closed or raw.broken):
        return True
    state = getattr(exc, "sqlstate", None) or ""
    return state.startswith("08") or state in _LOST_STATES


@functools.lru_cache(maxsize=4096)
def translate(sql: str, named: bool = False) -> str:
    """The PostgreSQL spelling of one statement written for SQLite (string literals untouched
    except for `%`, which psycopg reads as a placeholder)."""
    parts = _STRING.split(sql)
    ignore = False
    for index, part in enumerate(parts):
        part = part.replace("%", "%%")
        if index % 2 == 0:   # outside string literals
            part = _BRACKET.sub(r'"\1"', part)
            part = _NAMED.sub(r"%(\1)s", part) if named else part.replace("?", "%s")
            part = _IS_NOT.sub("IS DISTINCT FROM ", part)
            part = _IS.sub("IS NOT DISTINCT FROM ", part)
            part = _LIKE.sub("ILIKE", part)
            part = _BEGIN.sub("BEGIN", part)
            part = _IFNULL.sub("COALESCE(", part)
            if _OR_IGNORE.search(part):
                part = _OR_IGNORE.sub("INSERT", part)
                ignore = True
        parts[index] = part
    out = "".join(parts)
    if ignore:
        match = _RETURNING.search(out)
        at = match.start() if match else len(out.rstrip().rstrip(";"))
        out = out[:at] + " ON CONFLICT DO NOTHING" + out[at:]
    return out


def _bind(params: Any) -> tuple[Any, bool]:
    """(params for psycopg, named?) with booleans as 0/1 like SQLite stores them."""
    if params is None:
        return [], False
    if isinstance(params, dict):
        return {k: int(v) if isinstance(v, bool) else v for k, v in params.items()}, True
    return [int(v) if isinstance(v, bool) else v for v in params], False


class _NumericLoader(Loader):
    """numeric (SUM, AVG of integers) as int or float, the types SQLite hands back."""

    def load(self, data):
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


class Cursor:
    """The part of sqlite3.Cursor the project uses."""

    def __init__(self, cursor: psycopg.Cursor):
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def description(self):
        return [(c.name, None, None, None, None, None, None) for c in self._cursor.description or ()]

    @property
    def lastrowid(self):
        raise NotImplementedError("PostgreSQL has no lastrowid: use INSERT … RETURNING id")

    def fetchone(self):
        return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self) -> list:
        return self._cursor.fetchall() if self._cursor.description else []

    def __iter__(self):
        return iter(self._cursor) if self._cursor.description else iter(())


class PgConnection:
    """sqlite3.Connection's surface over one psycopg connection (autocommit; BEGIN/COMMIT by
    the caller, as the store does on SQLite), re-established when it is lost (module docstring)."""

    dialect = "postgresql"

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
        raw.adapters.register_loader("numeric", _NumericLoader)
        # What callers keep about this session (a temporary table they made): a new
        # connection starts without it.
        self.session: dict = {}
        return raw

    def _reconnect(self) -> None:
        """A new connection, waiting with growing pauses while the server is down or starting."""
        # A server that just hung gets one attempt (its connect timeout), not a minute of back-off.
        budget = 0.0 if self._hung else _seconds("BASECRAWLER_PG_RECONNECT_S", RECONNECT_S)
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
            for hook in list(_reconnect_hooks.get(self.url, ())):
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

    def run_statement(self, sql: str, run):
        """Run `run(raw)` for statement `sql`, keeping the transaction state and turning a
        lost connection into a reconnect (a read outside a transaction) or ConnectionLost."""
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
            self._check_fence(sql, begins or ends)
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
            if self._in_tx or not (begins or _READ_ONLY.match(sql)):
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

    def _check_fence(self, sql: str, bracket: bool) -> None:
        hook, exc = self._fence
        if hook not in _reconnect_hooks.get(self.url, ()):
            self._fence = None   # the lock was released: the fence goes with it
            return
        head = sql.lstrip()[:10].upper()
        if bracket or head.startswith(("SAVEPOINT", "RELEASE", "ROLLBACK")) or _READ_ONLY.match(sql) \
                or "crawl_runs" in sql:
            return
        raise exc

    def _watched(self, sql: str, run):
        """`run(raw)` under the watchdog (module docstring); a cut statement raises
        ConnectionLost, not retried."""
        if "statement_timeout" in sql and sql.lstrip()[:3].upper() == "SET":
            self._unwatched = True   # SET LOCAL statement_timeout = 0: a long step on purpose
        fired = _watchdog.watch(self.raw, None if self._unwatched else self._deadline_s)
        try:
            return run(self.raw)
        except psycopg.OperationalError:
            if fired:
                self._hung = True
                raise _no_answer(self.url, self._deadline_s) from None
            raise
        finally:
            _watchdog.done(fired)

    def execute(self, sql: str, params: Iterable | dict | None = None) -> Cursor:
        bound, named = _bind(params)

        def run(raw):
            cursor = raw.cursor()
            # Never as a prepared statement: its generic plan cannot see the values, and for
            # a keyed `number = ANY(…)` lookup on a young table it scanned every row of the country (40×
            # slower). executemany keeps psycopg's preparing, where one plan serves many rows.
            cursor.execute(translate(sql, named), bound, prepare=False)
            return Cursor(cursor)
        return self.run_statement(sql, run) or _EMPTY

    def executemany(self, sql: str, seq: Iterable) -> Cursor:
        rows = [_bind(p)[0] for p in seq]

        def run(raw):
            cursor = raw.cursor()
            if rows:
                cursor.executemany(translate(sql, isinstance(rows[0], dict)), rows)
            return Cursor(cursor)
        return self.run_statement(sql, run) or _EMPTY

    def executescript(self, sql: str) -> None:
        """PostgreSQL DDL as written (no rewriting), several statements at once."""
        self.run_statement(sql, lambda raw: raw.execute(sql))

    def close(self) -> None:
        self.raw.close()


class _NoRows:
    """The cursor of a statement that did not need to run (ROLLBACK of a lost transaction)."""

    rowcount = 0
    description: list = []

    def fetchone(self):
        return None

    def fetchall(self) -> list:
        return []

    def __iter__(self):
        return iter(())


_EMPTY = _NoRows()


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
        return [r[0] for r in self.conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "ORDER BY table_name").fetchall()]


def add_reconnect_hook(url: str, hook) -> None:
    """Run `hook()` after every reconnect to `url` (it may raise to refuse the new session)."""
    _reconnect_hooks.setdefault(url, []).append(hook)


def remove_reconnect_hook(url: str, hook) -> None:
    hooks = _reconnect_hooks.get(url, [])
    if hook in hooks:
        hooks.remove(hook)
    if not hooks:
        _reconnect_hooks.pop(url, None)


def application_name() -> str:
    """`basecrawler <host> <pid>` (63 bytes at most, PostgreSQL's limit)."""
    return f"{APPLICATION_PREFIX} {socket.gethostname()[:40]} {os.getpid()}"


def is_retryable(exc: BaseException) -> bool:
    """A deadlock, a serialisation failure or a lost connection (re-established at the next
    BEGIN): the transaction can simply run again."""
    if isinstance(exc, ConnectionLost):
        return exc.retryable
    return isinstance(exc, (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure))


__all__ = ["PgConnection", "PgDatabase", "Cursor", "ConnectionLost", "DatabaseUnreachable", "InvalidDatabaseUrl", "connect",
           "connection_params", "one_line", "add_reconnect_hook", "remove_reconnect_hook", "is_connection_lost", "translate", "application_name", "is_retryable"]
