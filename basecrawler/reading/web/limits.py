"""What the web view lets a request make SQLite do (issue #34.6), used by
plugins/basecrawler_guard.py. Pure rules, no Datasette import, so they are tested directly.

- Declared views only: a query string that carries SQL of its own (`sql=`, `_where=`,
  `_through=`, Datasette's raw full-text search `_search_<column>=` / `_searchmode=`) or names a
  column by anything but a plain name (`_col`, `_sort`, `_facet` …) is refused before Datasette
  reads it, unless the operator turned SQL on (`basecrawler browse --allow-sql`). The SQL of a
  declared query (the chart's, fetched by the dashboard page) stays allowed.
- Bounded work per query: every connection gets SQLite limits (`LIMITS`): a value (string or
  blob, and a row) of at most `MAX_VALUE_BYTES`, so `randomblob(1e9)`, `zeroblob`, nested
  `replace`/`printf` amplification fail at once instead of allocating gigabytes inside one
  virtual-machine step, where no progress handler can stop them; short LIKE/GLOB patterns
  (their matching cost grows with the pattern); and a process-wide SQLite heap ceiling.
- Bounded time per query: `deadline(conn, seconds)` is the progress handler for work Datasette
  runs without its own (`execute_fn`: the search plan, summaries, facet counts).
- Bounded concurrency, in lanes (`lane`): a heavy request (`is_heavy`: a search, a sort other
  than the default, a facet, an operator filter, an unindexed filter, a large page, CSV) takes
  one of its lane's few slots, waits `HEAVY_WAIT_S` for one, else is answered "busy", so light
  pages (a table, a card, an indexed filter) keep their threads. A reader's ordinary search has
  a lane of its own ("search"), apart from the heaviest shapes a client can build ("heavy");
  each lane has a shorter time limit than Datasette's (`LANE_TIME_LIMIT_MS`). What a page leaves
  to the background (a summary, a facet count) and the start-up's warm-up take SQL slots of
  their own (`in_background`, `SQL_SLOTS`); heavy and background SQL runs at a lower CPU
  priority (`lane_priority`). What a lane answers is in the reader's language (`message`).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import http.cookies
import os
import re
import sqlite3
import sys
import threading
import time
import urllib.parse

from basecrawler import i18n

MAX_VALUE_BYTES = 8 * 1024 * 1024    # the largest string/blob/row a query may build or read
HEAP_LIMIT_BYTES = 160 * 1024 * 1024   # all of SQLite's memory in the web view's process
LIMITS = {
    sqlite3.SQLITE_LIMIT_LENGTH: MAX_VALUE_BYTES,
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 1_000_000,     # the search's own SQL of many terms fits
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 400,   # a LIKE/GLOB pattern's cost grows with it
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 200,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 50,
}
# Virtual-machine steps between two looks at the clock (about a millisecond): each look takes
# Python's lock, and a query looking every few microseconds starves the thread that renders
# the pages (Datasette's own limit looks every 1000 steps; plugins/basecrawler_guard.py puts
# this one in its place).
PROGRESS_STEPS = 20_000
BACKGROUND_LIMIT_S = 20.0   # work outside Datasette's own time limit (a summary pass, a count)


def _slots_setting() -> int:
    try:   # an operator's choice (BASECRAWLER_WEB_HEAVY_SLOTS); Datasette's threads follow it
        return max(1, min(8, int(os.environ.get("BASECRAWLER_WEB_HEAVY_SLOTS", "2"))))
    except ValueError:
        return 2


HEAVY_SLOTS = _slots_setting()   # heavy requests answered at once …
HEAVY_WAIT_S = 0.5     # … a further one waits this long for a slot, then is told "busy"
SEARCH_SLOTS = 2       # ordinary searches answered at once, besides the heavy ones …
QUICK_SLOTS = 2        # … and those a key or rare terms answer (web/admission.py), apart
SLOTS = {"heavy": HEAVY_SLOTS, "search": SEARCH_SLOTS, "quick": QUICK_SLOTS}
# SQL run at once per lane: a request's own queries, and the background's apart.
BACKGROUND_SLOTS = 2   # … and for the counts pages leave to the background (`in_background`)
WARM_UP_SLOTS = 1      # … and for the start-up's count of every table's facets (admission.WARMING)
SQL_SLOTS = {"heavy": HEAVY_SLOTS, "search": SEARCH_SLOTS, "quick": QUICK_SLOTS, "background": BACKGROUND_SLOTS,
             "warm-up": WARM_UP_SLOTS}
# Datasette's SQL threads: every lane's SQL slots and three for light pages.
SQL_THREADS = sum(SQL_SLOTS.values()) + 3

# The lane of the request a piece of SQL work was started for (None: light): set by the guard's
# ASGI wrapper (plugins/basecrawler_guard.py), inherited by the tasks a request starts.
LANE: contextvars.ContextVar[str | None] = contextvars.ContextVar("basecrawler_lane", default=None)


# Heavy and background SQL runs at a lower CPU priority than the pages a person is waiting
# for: on two cores four attackers' queries and the counts left to the background kept even a
# card (0.04 s alone) over a second. (Linux: a thread's own nice value; elsewhere unchanged.)
LANE_NICE = {"heavy": 10, "background": 10}


def renice_allowed() -> bool:
    """Whether this process may give a thread its priority back after lowering it (root, or
    RLIMIT_NICE allows it): tried once on a thread of its own."""
    if not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return False
    allowed = []

    def probe():
        tid = threading.get_native_id()
        try:
            before = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, before + 1)
            os.setpriority(os.PRIO_PROCESS, tid, before)
            allowed.append(True)
        except OSError:
            pass
    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return bool(allowed)


# A reader lane's query that has run this long costs what the heavy lane's do, whoever sent it:
# the rest runs at the heavy lane's priority (`deadline`'s `demote_after`). An ordinary-looking
# search (a fresh 2-character term: a LIKE over every row) cannot be told from a person's by its
# query string; its cost so far is the honest sign (a person's reads an index, done before this).
LANE_DEMOTE_AFTER_S = {"search": 0.25, "quick": 0.25}


@functools.cache   # (asked once per process)
def _may_renice() -> bool:
    return renice_allowed()


@contextlib.contextmanager
def lane_priority(lane: str | None):
    """Run the block (on an SQL thread) at its lane's priority (`LANE_NICE`), then back."""
    nice = LANE_NICE.get(lane) if _may_renice() else None
    if not nice:
        yield
        return
    tid = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, tid)
    os.setpriority(os.PRIO_PROCESS, tid, before + nice)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, tid, before)


# How long a thread keeps Python's lock while another waits (Python's default: 5 ms). The event
# loop's one thread renders every page and takes the lock back after each query; the SQL
# threads' Python (progress handlers, rows made into values) held it a whole turn each time.
SWITCH_INTERVAL_S = 0.0005


def share_pythons_lock() -> None:
    """The web view's process hands Python's lock on after `SWITCH_INTERVAL_S` (process-wide)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


@contextlib.contextmanager
def in_background():
    """Work started inside the block (a search's summary, a facet count finished for the next
    visitor) takes the background lane's SQL slots, not its page's: a summary counts in two
    parts at once for seconds (reading/summary.py), and in the search lane it held both slots
    while the next search page's own rows waited for one and were told "busy"."""
    token = LANE.set("background")
    try:
        yield
    finally:
        LANE.reset(token)


# A query of the heavy lane is stopped sooner than Datasette's limit: its slot is free again
# sooner, and what a person asks in the other lanes keeps the machine.
HEAVY_TIME_LIMIT_MS = 1500
# A search page's own queries (its rows, a count, not the counts it leaves to the background)
# stop within the page target: a search no index answers in time is told so, not waited for.
SEARCH_TIME_LIMIT_MS = 800
LANE_TIME_LIMIT_MS = {"heavy": HEAVY_TIME_LIMIT_MS, "search": SEARCH_TIME_LIMIT_MS, "quick": SEARCH_TIME_LIMIT_MS}
# An ordinary search: at most this many words and characters (a longer one is the heavy lane's).
SEARCH_MAX_WORDS = 6
SEARCH_MAX_CHARS = 80
# … and at most this many pattern characters: nobody types `%_%.*[a-z]+(a|b)*%` to find a
# recall, a client probing for a costly pattern does (the search escapes them: they match as text).
PATTERN_CHARS = frozenset("%_*?[](){}|\\^$+")
SEARCH_MAX_PATTERN_CHARS = 2
LIGHT_PAGE_SIZE = 100  # a page of at most this many rows is not heavy by its size

# Reader-visible refusals, Korean first with English beside (one place, for the catalogue).
MESSAGES = {
    "sql": ("이 웹 보기는 선언된 표와 검색만 보여 줍니다. 임의 SQL(sql=, _where= 등)은 꺼져 있습니다 "
            "(운영자가 basecrawler browse --allow-sql 로 켤 수 있습니다). / This view serves its declared "
            "tables and searches only: arbitrary SQL ({what}) is off (the operator can turn it on with "
            "basecrawler browse --allow-sql)."),
    "name": ("열 이름이 올바르지 않습니다: {what}. / Not a column name: {what}."),
    "method": "읽기 전용입니다: GET 요청만 받습니다. / Read-only: only GET requests are answered.",
    "memory": ("요청이 허용된 메모리(값 하나 {megabytes} MB)를 넘어 멈췄습니다. / The query was stopped: it "
               "needed more memory than a query may use ({megabytes} MB per value)."),
}

# What a lane answers, in the reader's language (the catalogue, basecrawler/i18n): `message`.
LANE_MESSAGES = {
    "busy": "Busy with other heavy requests (searches, sorts, facets): please try again in a few seconds.",
    "busy_search": ("Busy with other searches: please try again in a few seconds (the tables and filters "
                    "answer meanwhile)."),
    "time": ("The query did not finish within the time limit (%(seconds)s s) and was stopped: try a more "
             "specific search or fewer filters."),
}
LANG_ARG, LANG_COOKIE = "_lang", "bc_lang"   # as plugins/basecrawler_i18n.py reads them


def message(key: str, lang: str | None = None, **values) -> str:
    """A lane's answer (`LANE_MESSAGES`) in `lang`, else the request's language (i18n.use)."""
    return i18n.gettext(LANE_MESSAGES[key], lang, **values)


def reader_language(args: list[tuple[str, str]], cookie_header: str | None) -> str | None:
    """The language a request asks for (`?_lang=`, else its `bc_lang` cookie), for an answer
    given before the web view's language plugin has read it (a lane's "busy")."""
    chosen = next((i18n.normal(v) for k, v in args if k == LANG_ARG), None)
    if chosen:
        return chosen
    cookie = http.cookies.SimpleCookie()
    try:
        cookie.load(cookie_header or "")
    except http.cookies.CookieError:
        return None
    return i18n.normal(cookie[LANG_COOKIE].value) if LANG_COOKIE in cookie else None


SQL_ARGS = ("sql", "_where", "_through", "_searchmode")
SQL_ARG_PREFIXES = ("_search_",)   # Datasette's raw FTS search of one column
NAME_ARGS = ("_col", "_nocol", "_sort", "_sort_desc", "_facet", "_facet_array", "_facet_date", "_label")
PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
STATIC_PREFIXES = ("/-/static/", "/-/static-plugins/", "/bc-static/")
HEAVY_ARGS = ("_search", "_sort", "_sort_desc", "_facet", "_facet_array", "_facet_date", "_through",
              "_where", "sql")   # a declared facet's selection (_bcf_*) reads a kept index: light


def arguments(query_string: bytes | str) -> list[tuple[str, str]]:
    if isinstance(query_string, bytes):
        query_string = query_string.decode("latin-1")
    return urllib.parse.parse_qsl(query_string, keep_blank_values=True)


def refusal(method: str, path: str, args: list[tuple[str, str]], *, allow_sql: bool,
            declared_sql: frozenset[str] = frozenset()) -> tuple[int, str] | None:
    """(status, message) when the request must not reach Datasette; None to serve it."""
    if method not in ("GET", "HEAD", "OPTIONS"):
        return 405, MESSAGES["method"]
    for name, value in args:
        if allow_sql:
            continue
        if name == "sql" and value.strip() in declared_sql:
            continue
        if name in SQL_ARGS or (name.startswith(SQL_ARG_PREFIXES) and name != "_search"):
            return 403, MESSAGES["sql"].format(what=name)
        if name in NAME_ARGS and not PLAIN_NAME.fullmatch(value):
            return 400, MESSAGES["name"].format(what=f"{name}={value[:80]!r}")
    return None


def is_static(path: str) -> bool:
    return path.startswith(STATIC_PREFIXES) or path in ("/favicon.ico", "/-/versions.json")


def is_heavy(path: str, args: list[tuple[str, str]], default_sort: dict[str, str] | None = None) -> bool:
    """Whether the request may hold SQL threads for seconds: a search, a sort other than the
    table's default, a facet choice, an operator filter (`col__contains=`), a large page, a
    CSV download, a query. A table's first page, a plain `col=value` filter, a card are light."""
    if is_static(path) or path.startswith("/-/") and not path.startswith("/-/dashboards"):
        return False
    if path.endswith(".csv"):
        return True
    table = path.rstrip("/").rsplit("/", 1)[-1].split(".")[0]
    for name, value in args:
        if name in ("_sort", "_sort_desc") and (default_sort or {}).get(table) == value:
            continue
        if name.startswith(HEAVY_ARGS) or ("__" in name and not name.startswith("_")):
            return True
        if name == "_size" and (value == "max" or not value.isdigit() or int(value) > LIGHT_PAGE_SIZE):
            return True
        if name == "_format" and value == "csv":
            return True
    return False


def lane_time_limit_ms(lane: str | None, ms: int, page_limit_ms: int) -> int:
    """The time limit of a query asked for `ms` in `lane`: the heavy lane's every query, a
    reader lane's query at Datasette's page limit (not a background count given longer)."""
    cap = LANE_TIME_LIMIT_MS.get(lane) if lane else None
    if cap is None or (lane != "heavy" and ms > page_limit_ms):
        return ms
    return min(ms, cap)


def is_ordinary_search(path: str, args: list[tuple[str, str]],
                       default_sort: dict[str, str] | None = None) -> bool:
    """A search as a person types it: one `_search` of at most SEARCH_MAX_WORDS words,
    SEARCH_MAX_CHARS characters and SEARCH_MAX_PATTERN_CHARS pattern characters, and nothing
    else that would make the request heavy."""
    searches = [value for name, value in args if name == "_search"]
    if len(searches) != 1 or path.endswith(".csv"):
        return False
    text = searches[0].strip()
    if len(text) > SEARCH_MAX_CHARS or len(text.split()) > SEARCH_MAX_WORDS:
        return False
    if sum(char in PATTERN_CHARS for char in text) > SEARCH_MAX_PATTERN_CHARS:
        return False
    return not is_heavy(path, [(n, v) for n, v in args if n != "_search"], default_sort)


def lane(path: str, args: list[tuple[str, str]], default_sort: dict[str, str] | None = None,
         indexed: dict[str, frozenset[str]] | None = None) -> str | None:
    """The request's lane: None (light, no slot), "search" (an ordinary search), "heavy"
    (anything else heavy, or a plain filter on a column no index holds: it reads every row).
    `indexed`: table → the columns its indexes hold (`indexed_columns`; others: not checked)."""
    if is_heavy(path, args, default_sort):
        return "search" if is_ordinary_search(path, args, default_sort) else "heavy"
    if indexed and not is_static(path):
        table = path.rstrip("/").rsplit("/", 1)[-1].split(".")[0]
        columns = indexed.get(table)
        if columns is not None and any(not name.startswith("_") and name not in columns for name, _ in args):
            return "heavy"
    return None


def indexed_columns(conn: sqlite3.Connection) -> dict[str, frozenset[str]]:
    """Table → the columns one of its indexes holds, and its primary key (and `rowid`): a
    plain `column=value` filter on one of them reads an index, not every row."""
    found: dict[str, frozenset[str]] = {}
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        try:
            columns = {"rowid"} | {row[1] for row in conn.execute(f"PRAGMA table_info([{table}])") if row[5]}
            for index in conn.execute(f"PRAGMA index_list([{table}])").fetchall():
                columns |= {row[2] for row in conn.execute(f"PRAGMA index_info([{index[1]}])") if row[2]}
        except sqlite3.DatabaseError:   # a virtual table of a module this connection lacks
            continue
        found[table] = frozenset(columns)
    return found


def harden(conn: sqlite3.Connection) -> None:
    """Apply `LIMITS` to a connection, and the process-wide heap ceiling."""
    for limit, value in LIMITS.items():
        conn.setlimit(limit, value)
    # The heap ceiling counts every connection of the process; setting it again is harmless.
    conn.execute(f"PRAGMA hard_heap_limit = {HEAP_LIMIT_BYTES}")


@contextlib.contextmanager
def datasette_timelimit(conn: sqlite3.Connection, ms: int, demote_after: float | None = None):
    """Datasette's `sqlite_timelimit`, looking at the clock every `PROGRESS_STEPS` steps."""
    with deadline(conn, ms / 1000, demote_after):
        yield


@contextlib.contextmanager
def deadline(conn: sqlite3.Connection, seconds: float, demote_after: float | None = None, pause=None):
    """Stop what `conn` runs inside the block after `seconds` (sqlite3.OperationalError
    "interrupted"). Datasette's own limit replaces the handler inside its queries and removes
    it after; this one is put back for whatever the block runs next. `demote_after`: once
    the block has run this long, the rest runs at the heavy lane's priority (`LANE_NICE`).
    `pause()`: asked at each look, may sleep; the seconds it slept move the end."""
    started = time.monotonic()
    ends = [started + seconds]
    demote_at = started + demote_after if demote_after is not None and _may_renice() else None
    demoted: list[tuple[int, int]] = []   # (thread, its priority before)

    def handler():
        if pause is not None:
            ends[0] += pause()
        now = time.monotonic()
        if now >= ends[0]:
            return 1
        if demote_at is not None and now >= demote_at and not demoted:
            tid = threading.get_native_id()
            before = os.getpriority(os.PRIO_PROCESS, tid)
            demoted.append((tid, before))
            os.setpriority(os.PRIO_PROCESS, tid, before + LANE_NICE["heavy"])
        return 0

    conn.set_progress_handler(handler, PROGRESS_STEPS)
    try:
        yield
    finally:
        conn.set_progress_handler(None, PROGRESS_STEPS)
        for tid, before in demoted:
            os.setpriority(os.PRIO_PROCESS, tid, before)


def explain(error: BaseException, time_limit_s: float) -> tuple[int, str] | None:
    """A query's failure as the reader is told it (status, message); None for other errors."""
    text = str(error).lower()
    title = str(getattr(error, "title", "") or "").lower()
    if "interrupted" in text or title == "sql interrupted" or "took too long" in text:
        return 400, message("time", seconds=f"{time_limit_s:g}")
    if "too big" in text or "out of memory" in text:
        return 400, MESSAGES["memory"].format(megabytes=MAX_VALUE_BYTES // (1024 * 1024))
    return None


def scrub(body: bytes, paths: list[tuple[bytes, bytes]]) -> bytes:
    """`body` with each absolute path replaced (longest first) by what a reader may see."""
    for path, shown in paths:
        if path and path in body:
            body = body.replace(path, shown)
    return body
