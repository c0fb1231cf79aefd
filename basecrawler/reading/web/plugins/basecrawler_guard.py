"""Datasette plugin: what the web view sends never executes (issue #22.4).

- Every response carries a Content-Security-Policy: scripts only from this server, plus the
  inline scripts Datasette and its plugins render with fixed content, allowed by their SHA-256
  hash (computed at start-up from the installed templates and `extra_body_script` hooks, so a
  Datasette upgrade keeps working). A record's text can never produce an allowed script: its
  hash would have to be one of these. Inline styles stay allowed (Datasette's pages and
  Vega-Embed use them; a style cannot run code).
- The CSV download is formula-safe: a text cell starting with = + - @ TAB or CR gets a leading
  `'` (OWASP's CSV-injection rule), so a spreadsheet shows it as text. Numbers stay numbers.
  JSON is left exact: it is the API the chart and scripts read, and no spreadsheet evaluates a
  JSON string as a formula.
- Declared views only, bounded work (issue #34.6, rules in basecrawler/reading/web/limits.py):
  SQL of a request's own is refused unless the operator turned it on; every connection has
  SQLite's size limits and every query a time limit that stops it; heavy requests and their SQL
  share a few slots of their lane (web/admission.py), a further one is told "busy" in the
  reader's language; the database's absolute path never leaves the server; an operator may
  have each response's Server-Timing header name its lane and what it waited for.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import inspect
import os
import re
import threading
import time
from pathlib import Path

import datasette as datasette_package
import datasette.database
from datasette import hookimpl
from datasette.database import Database
from datasette.plugins import pm
from datasette.utils.asgi import Response

from basecrawler.reading.browse import types_by_table
from basecrawler.reading.cellsafe import neutralise_csv   # the exports' rule too
from basecrawler.reading.web import admission, limits
from basecrawler.reading.web.refusal_page import TITLES, error_response as _error_response

INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)

POLICY = ("default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
          "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")

GUARD_NAME = "basecrawler_guard"   # its plugin config: {"allow_sql": true} turns SQL on
SERVER_TIMING = "BASECRAWLER_WEB_SERVER_TIMING"   # "1": answers name their lane and waits

_script_hashes: set[str] = set()
_declared_sql: set[str] = set()        # the SQL of declared queries (the dashboard fetches it)
_hidden_paths: list[tuple[bytes, bytes]] = []   # (absolute path, what is shown instead)
_default_sort: dict[str, str] = {}
_indexed: dict[str, frozenset[str]] = {}   # table → the columns its indexes hold, and its key


class Busy(RuntimeError):
    """Every slot of the request's lane stayed taken for the whole wait."""


# The lane of the request a piece of SQL work was started for (None: light): set by the ASGI
# wrapper, inherited by the tasks it starts (a search's summary pass goes on after its page
# was answered). Datasette runs SQL in threads, which do not inherit it: `_limited_execute_fn`
# hands it to the thread (`_thread_lane`) for the time limit.
_lane = limits.LANE   # (the plugins' background work sets it too: limits.in_background)
_thread_lane = threading.local()
_slots: dict[str, asyncio.Semaphore] = {}   # per lane and event loop (tests start several servers)


def _semaphore(kind: str, lane: str) -> asyncio.Semaphore:
    key = f"{kind}:{lane}:{id(asyncio.get_running_loop())}"
    if key not in _slots:
        _slots[key] = asyncio.Semaphore((limits.SQL_SLOTS if kind == "sql" else limits.SLOTS)[lane])
    return _slots[key]


def busy_message(lane: str | None, lang: str | None = None) -> str:
    return limits.message("busy_search" if lane in ("search", admission.QUICK) else "busy", lang)


async def _acquire(kind: str, lane: str, wait_s: float) -> asyncio.Semaphore:
    semaphore = _semaphore(kind, lane)
    try:
        await asyncio.wait_for(semaphore.acquire(), wait_s)
    except asyncio.TimeoutError:
        raise Busy(busy_message(lane)) from None
    return semaphore


_datasette_execute_fn = Database.execute_fn


async def _limited_execute_fn(self, fn):
    """Datasette's execute_fn (every read of every view and plugin goes through it) with a
    deadline for work Datasette does not time itself, and a heavy request's work in its lane's
    slots."""
    lane = _lane.get()
    limit_ms = admission.TIME_LIMIT_MS.get()   # a repeat long shape's shorter limit (admission.Ledger)
    background = lane == "background" or (lane is None and admission.WARMING.get())
    # Background work pauses while another request's light page runs its SQL (admission.py) …
    pause = admission.pause_for_readers(admission.ORIGIN.get()) if background else None
    # … which this marks, while it runs.
    reader = admission.ORIGIN.get() if lane is None and admission.LIGHT_PAGE.get() and not background else None

    def timed(conn):
        _thread_lane.value = lane
        _thread_lane.limit_ms = limit_ms
        try:
            with limits.deadline(conn, limits.BACKGROUND_LIMIT_S, limits.LANE_DEMOTE_AFTER_S.get(lane), pause), \
                    limits.lane_priority("background" if background else lane), \
                    (admission.reading(reader) if reader is not None else contextlib.nullcontext()):
                return fn(conn)
        finally:
            _thread_lane.value = _thread_lane.limit_ms = None
    if lane is None and background:   # the warm-up's
        async with _semaphore("sql", "warm-up"):
            return await _datasette_execute_fn(self, timed)
    if lane is None:
        return await _datasette_execute_fn(self, timed)
    semaphore = await _acquire("sql", lane, 2 * limits.HEAVY_WAIT_S)
    try:
        return await _datasette_execute_fn(self, timed)
    finally:
        semaphore.release()


_page_limit_ms = [3000]   # Datasette's sql_time_limit_ms, read at start-up


@contextlib.contextmanager
def _timelimit(conn, ms: int):
    """Datasette's per-query limit (`limits.datasette_timelimit`), shorter in a lane."""
    lane = getattr(_thread_lane, "value", None)
    ms = limits.lane_time_limit_ms(lane, ms, _page_limit_ms[0])
    shorter = getattr(_thread_lane, "limit_ms", None)
    if shorter is not None and ms <= _page_limit_ms[0]:   # (not a background count given longer)
        ms = min(ms, shorter)
    with limits.datasette_timelimit(conn, ms, limits.LANE_DEMOTE_AFTER_S.get(lane)):
        yield


# Once per process: Datasette loads its plugins' folder again for each server started in one
# process (as the tests do); the first module to load installs its wrapper, and no later load
# wraps it again (its lane rules would apply twice). Its state is shared (limits, admission).
if not hasattr(Database.execute_fn, "basecrawler_guard"):
    _limited_execute_fn.basecrawler_guard = True
    Database.execute_fn = _limited_execute_fn
    datasette.database.sqlite_timelimit = _timelimit


def allow_sql(datasette) -> bool:
    return bool((datasette.plugin_config(GUARD_NAME) or {}).get("allow_sql"))


@hookimpl
def prepare_connection(conn, database, datasette):
    limits.harden(conn)


def _collect_declared(datasette) -> None:
    """What the guard needs from the configuration, read once: the declared queries' SQL, the
    tables' default sort, the absolute paths to hide."""
    metadata = datasette.metadata() or {}
    for name, database in (metadata.get("databases") or {}).items():
        for query in (database.get("queries") or {}).values():
            sql = query.get("sql") if isinstance(query, dict) else query
            if sql:
                _declared_sql.add(sql.strip())
        for table, config in (database.get("tables") or {}).items():
            sort = config.get("sort_desc") or config.get("sort")
            if sort:
                _default_sort[table] = sort
    dashboards = datasette.plugin_config("datasette-dashboards") or {}
    for dashboard in dashboards.values():
        for chart in (dashboard.get("charts") or {}).values():
            if chart.get("query"):
                _declared_sql.add(chart["query"].strip())
    hidden: dict[str, str] = {}
    for database in datasette.databases.values():
        if database.path:
            for form in {str(database.path), str(Path(database.path).resolve())}:
                hidden[form] = Path(form).name
                hidden[str(Path(form).parent)] = "…"
    hidden.pop("/", None)
    hidden.pop("…", None)
    _hidden_paths[:] = sorted(((k.encode(), v.encode()) for k, v in hidden.items()),
                              key=lambda item: -len(item[0]))


def script_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _template_scripts() -> list[str]:
    """Inline scripts of Datasette's own templates that contain no template code, and the one
    that does but only takes a boolean (table.html's DATASETTE_ALLOW_FACET)."""
    scripts = []
    for template in (Path(datasette_package.__file__).parent / "templates").glob("*.html"):
        for body in INLINE_SCRIPT.findall(template.read_text("utf-8")):
            if "{{" not in body and "{%" not in body:
                scripts.append(body)
    scripts += [f"DATASETTE_ALLOW_FACET = {value};" for value in ("true", "false")]
    return scripts


@hookimpl
def startup(datasette):
    limits.share_pythons_lock()   # the pages' thread waits less behind the SQL threads' Python
    async def collect():
        _collect_declared(datasette)
        scripts = _template_scripts()
        # Plugins' body scripts (datasette-leaflet's settings): fixed per server.
        for result in pm.hook.extra_body_script(template="base.html", database=None, table=None,
                                                          columns=None, view_name="index", request=None,
                                                          datasette=datasette):
            while callable(result) or inspect.isawaitable(result):
                result = result() if callable(result) else await result
            if isinstance(result, dict):
                result = result.get("script")
            if result:
                scripts.append(str(result))
        _script_hashes.update(script_hash(s) for s in scripts)
        _page_limit_ms[0] = datasette.setting("sql_time_limit_ms")
        for database in datasette.databases.values():
            if database.name != "_internal":
                _indexed.update(await database.execute_fn(limits.indexed_columns))
    return collect


def content_security_policy() -> str:
    return POLICY.format(hashes=" ".join(sorted(_script_hashes)))


@hookimpl(tryfirst=True)
def handle_exception(datasette, request, exception):
    """A query a limit stopped, or that found no heavy slot, said so in the interface's words."""
    if isinstance(exception, Busy):
        status, message = 503, str(exception)
    else:
        limit_ms = datasette.setting("sql_time_limit_ms")
        lane = request.scope.get("bc_lane", "") if request is not None else ""
        limit_ms = limits.lane_time_limit_ms(_request_lane(request) if lane == "" else lane, limit_ms, limit_ms)
        if request is not None and request.scope.get("bc_limit_ms"):
            limit_ms = min(limit_ms, request.scope["bc_limit_ms"])
        explained = limits.explain(exception, limit_ms / 1000)
        if explained is None:
            return None
        status, message = explained

    async def inner():
        start, body = _error_response(request.path, status, message, TITLES.get(status, TITLES[400]))
        headers = {k.decode(): v.decode() for k, v in start["headers"] if k != b"content-type"}
        return Response(body, status=status, headers=headers,
                        content_type=dict(start["headers"])[b"content-type"].decode())
    return inner


def _request_lane(request) -> str | None:
    return None if request is None else limits.lane(request.path, limits.arguments(request.query_string or ""),
                                                    _default_sort, _indexed)


def _is_csv(scope) -> bool:
    return scope["path"].endswith(".csv") or b"_format=csv" in (scope.get("query_string") or b"")


@hookimpl(trylast=True)   # applied last, so outermost: the other plugins' redirects get the headers too
def asgi_wrapper(datasette):
    def wrap(app):
        async def guarded(scope, receive, send):
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            path = scope.get("path", "")
            args = limits.arguments(scope.get("query_string") or b"")
            refused = limits.refusal(scope.get("method", "GET"), path, args, allow_sql=allow_sql(datasette),
                                     declared_sql=frozenset(_declared_sql))
            lane = limits.lane(path, args, _default_sort, _indexed) if refused is None else None
            if lane == "search":   # what it will cost decides: a key or rare terms are quick
                asked = time.monotonic()
                lane = await admission.search_lane(datasette, path, args, scope.get("query_string") or b"", _TYPES)
                scope = {**scope, "bc_admission_s": time.monotonic() - asked}
            origin = admission.ORIGIN.set(admission.new_origin())
            try:
                if lane is not None:
                    refused = await _serve_in_lane(app, scope, receive, send, lane, args)
                    if refused is None:
                        return
                if refused is not None:
                    status, message = refused
                    start, body = _error_response(path, status, message, TITLES.get(status, TITLES[400]))
                    await _serve_fixed(start, body, send)
                    return
                if limits.is_static(path) or path.startswith("/-/"):   # (a page's script polls its counts there)
                    await _serve(app, scope, receive, send)
                    return
                light = admission.LIGHT_PAGE.set(True)   # its SQL pauses background work (admission.py)
                try:
                    await _serve(app, scope, receive, send)
                finally:
                    admission.LIGHT_PAGE.reset(light)
            finally:
                admission.ORIGIN.reset(origin)
        return guarded
    return wrap


_TYPES = types_by_table()


async def _serve_in_lane(app, scope, receive, send, lane: str, args) -> tuple[int, str] | None:
    """Serve the request in one of its lane's slots (None), or the "busy" answer to give: the
    lane's slots stayed taken, or the client (of another address) holds its share of them.
    A shape that ran long again and again gets a shorter time limit (admission.Ledger)."""
    path = scope.get("path", "")
    address = (scope.get("client") or (None,))[0]
    shape = admission.shape(address or "", lane, path, args, scope.get("query_string") or b"")
    try:
        with admission.clients.slot(lane, address):
            asked = time.monotonic()
            slot = await _acquire("request", lane, limits.HEAVY_WAIT_S)
            started = time.monotonic()
            status: list[int] = []
            limit_ms = admission.ledger.limit_ms(shape)
            scope = {**scope, "bc_lane": lane, "bc_limit_ms": limit_ms, "bc_slot_s": started - asked}
            tokens = (_lane.set(lane), admission.TIME_LIMIT_MS.set(limit_ms))
            try:
                await _serve(app, scope, receive, send, status)
            finally:
                admission.TIME_LIMIT_MS.reset(tokens[1])
                _lane.reset(tokens[0])
                slot.release()
                took = time.monotonic() - started
                admission.ledger.note(shape, took)
                if lane in ("search", admission.QUICK):
                    admission.note_served(path, scope.get("query_string") or b"", took, status[0] if status else 0)
            return None
    except (Busy, LookupError):   # said in the request's language (its language plugin runs inside)
        headers = dict(scope.get("headers") or [])
        lang = limits.reader_language(args, headers.get(b"cookie", b"").decode("latin-1"))
        return 503, busy_message(lane, lang)


async def _serve_fixed(start: dict, body: bytes, send) -> None:
    headers = [*start["headers"], (b"content-length", str(len(body)).encode("ascii")),
               (b"content-security-policy", content_security_policy().encode("ascii")),
               (b"x-content-type-options", b"nosniff")]
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def server_timing(scope) -> list[tuple[bytes, bytes]]:
    """The standard Server-Timing header, only where the operator set SERVER_TIMING (it tells a
    client how admission sorts its requests): the lane ("light" without one) and the ms of its
    search admission and of its wait for a slot, where it had them."""
    if os.environ.get(SERVER_TIMING) != "1":
        return []
    parts = [f'lane;desc="{scope.get("bc_lane") or "light"}"']
    parts += [f"{name};dur={scope[key] * 1000:.1f}" for name, key in (("admission", "bc_admission_s"),
                                                                         ("slot", "bc_slot_s")) if key in scope]
    return [(b"server-timing", ", ".join(parts).encode("ascii"))]


async def _serve(app, scope, receive, send, status: list[int] | None = None) -> None:
    """The response with the security headers, a formula-safe CSV, and no absolute path
    (its status appended to `status`)."""
    csv_request = _is_csv(scope)
    buffered = csv_request or not limits.is_static(scope.get("path", ""))
    start: dict = {}
    chunks: list[bytes] = []

    async def guarded_send(message):
        if message["type"] == "http.response.start":
            if status is not None:
                status.append(message.get("status", 0))
            headers = [(k, v) for k, v in message.get("headers", [])
                       if k.lower() not in (b"content-security-policy", b"x-content-type-options")]
            headers += [(b"content-security-policy", content_security_policy().encode("ascii")),
                        (b"x-content-type-options", b"nosniff")] + server_timing(scope)
            message = {**message, "headers": headers}
            if buffered:
                start.update(message)   # sent with the rewritten body's length
                return
        elif message["type"] == "http.response.body" and buffered:
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = limits.scrub(b"".join(chunks), _hidden_paths)
            if csv_request and start.get("status") == 200:
                body = neutralise_csv(body)
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode("ascii")))
            await send({**start, "headers": headers})
            message = {"type": "http.response.body", "body": body}
        await send(message)

    await app(scope, receive, guarded_send)
