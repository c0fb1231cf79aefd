"""Connecting to PostgreSQL so that nothing waits forever, and telling a lost connection apart.

`connect` gives an autocommit psycopg connection with a connect timeout
(BASECRAWLER_PG_CONNECT_TIMEOUT_S, default 5 s), a statement timeout
(BASECRAWLER_PG_STATEMENT_TIMEOUT_S, default 300 s, 0 = none) and TCP keepalives (a server that
vanished mid-statement is noticed within about a minute). Values the URL sets itself
(`?connect_timeout=…`, `options=-c statement_timeout=…`) win. Each connection names itself
`basecrawler <host> <pid>` so the store can tell a live crawl on any machine from a crashed one
(pg_stat_activity).

A server that stops answering after it accepted the connection (a frozen host, a SIGSTOPped
server) never sends the statement timeout's cancel either, and keepalives are answered by the
kernel: the `watchdog` shuts the socket of any statement still waiting past the statement
timeout plus the connect timeout (`answer_deadline_s`), and the statement raises a
ConnectionLost that is not retried.

Reconnect hooks (`add_reconnect_hook`) run after a PgConnection (engines/pg.py) re-established
a lost connection: the run lock (pipeline/runlock.py) takes back the advisory lock a server
restart dropped, or raises to stop the crawl when another holder has it by now.
"""
from __future__ import annotations

import os
import re
import socket
import threading
import time

import psycopg

from basecrawler.errors import ConfigError, CrawlerError
from basecrawler.store.engines import redact, scrub
from basecrawler.store.engines.dialect import POSTGRES

APPLICATION_PREFIX = "basecrawler"

CONNECT_TIMEOUT_S = 5.0
STATEMENT_TIMEOUT_S = 300.0
RECONNECT_S = 60.0
RECONNECT_FIRST_WAIT_S = 0.25
RECONNECT_MAX_WAIT_S = 5.0
_reconnect_hooks: dict[str, list] = {}   # url → hooks (add_reconnect_hook)
# SQLSTATEs of a connection the server ended or cannot serve yet (besides libpq's own
# "server closed the connection", which has none): admin / crash shutdown, starting up.
_LOST_STATES = {"57P01", "57P02", "57P03"}


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


def seconds_setting(name: str, default: float) -> float:
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
        params["connect_timeout"] = max(2, round(seconds_setting("BASECRAWLER_PG_CONNECT_TIMEOUT_S", CONNECT_TIMEOUT_S)))
    for name, value in (("keepalives", 1), ("keepalives_idle", 30), ("keepalives_interval", 10),
                        ("keepalives_count", 3)):
        params.setdefault(name, value)
    params.setdefault("application_name", application_name())
    return params


class Watchdog:
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


watchdog = Watchdog()


def no_answer(url: str, seconds: float) -> "ConnectionLost":
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
            fired = watchdog.watch(raw, float(params["connect_timeout"]))
            try:
                raw.execute(POSTGRES.write(f"SET statement_timeout = {ms}"))
            except psycopg.OperationalError:
                if fired:
                    raw.close()
                    raise DatabaseUnreachable(f"cannot connect to {redact(url)}: no answer within "
                                              f"{params['connect_timeout']}s after the connection was accepted "
                                              "(server hung?)") from None
                raise
            finally:
                watchdog.done(fired)
        return raw
    except psycopg.OperationalError as exc:
        raise DatabaseUnreachable(f"cannot connect to {redact(url)}: {one_line(exc, url)}") from None


def statement_timeout_ms(params: dict) -> int | None:
    """The statement timeout to set (ms; 0 = none), or None when the URL's `options` set one."""
    if "statement_timeout" in str(params.get("options") or ""):
        return None
    return int(seconds_setting("BASECRAWLER_PG_STATEMENT_TIMEOUT_S", STATEMENT_TIMEOUT_S) * 1000)


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


def add_reconnect_hook(url: str, hook) -> None:
    """Run `hook()` after every reconnect to `url` (it may raise to refuse the new session)."""
    _reconnect_hooks.setdefault(url, []).append(hook)


def remove_reconnect_hook(url: str, hook) -> None:
    hooks = _reconnect_hooks.get(url, [])
    if hook in hooks:
        hooks.remove(hook)
    if not hooks:
        _reconnect_hooks.pop(url, None)


def reconnect_hooks(url: str) -> list:
    """The hooks to run after a reconnect to `url` (a copy: a hook may remove itself)."""
    return list(_reconnect_hooks.get(url, ()))


def application_name() -> str:
    """`basecrawler <host> <pid>` (63 bytes at most, PostgreSQL's limit)."""
    return f"{APPLICATION_PREFIX} {socket.gethostname()[:40]} {os.getpid()}"


def is_retryable(exc: BaseException) -> bool:
    """A deadlock, a serialisation failure or a lost connection (re-established at the next
    BEGIN): the transaction can simply run again."""
    if isinstance(exc, ConnectionLost):
        return exc.retryable
    return isinstance(exc, (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure))


__all__ = ["ConnectionLost", "DatabaseUnreachable", "InvalidDatabaseUrl", "Watchdog", "watchdog", "connect",
           "connection_params", "statement_timeout_ms", "answer_deadline_s", "no_answer", "one_line",
           "is_connection_lost", "seconds_setting", "add_reconnect_hook", "remove_reconnect_hook", "reconnect_hooks",
           "application_name", "is_retryable", "APPLICATION_PREFIX", "CONNECT_TIMEOUT_S", "STATEMENT_TIMEOUT_S",
           "RECONNECT_S", "RECONNECT_FIRST_WAIT_S", "RECONNECT_MAX_WAIT_S"]
