"""What a request will cost, decided before it takes a slot, and fairness within a lane
(issue #34.6, last line: every page within 1 s while four clients attack); used by
plugins/basecrawler_guard.py beside the shape rules of limits.py.

- Cost-based admission (`search_lane`): an ordinary search (limits.lane's "search") is "quick"
  when every one of its terms is rare in every type's table the page searches and counts
  (`search_rows`: a term's records counted in the type's full-text index, a 1–2 character
  term's in the index's trigram vocabulary, each up to RARE_ROWS, under a few milliseconds'
  time limit), or when the very same page was answered within QUICK_SERVED_S lately (its
  counts are kept: a common term's page seen before costs what a rare one does). A number
  lookup (`#12345`) is a rare term. The quick lane has slots of its own, so the searches a
  key or a rare term answers never wait behind expensive ones; a common term's fresh page,
  a term no index can count (a cased letter outside ASCII), or an estimate that ran out of
  time is the "search" lane's, which attackers can fill without reaching the quick one.
- Fairness within a lane: a shape of new searches that ran long again and again (`Ledger`:
  the same client, lane, table and argument names, pages not answered before, REPEATS times
  within WINDOW_S over LONG_RUN_S) gets a shorter time limit (`REPEAT_LIMIT_MS`), so its
  slots come free sooner. Only new pages: a page asked again is answered from the counts
  kept for it, and a reader's own repeated page is never cut short for being a repeat; a
  client that keeps sending searches nobody asked before is what fills the slots. A client of
  another address holds at most all but one of a lane's slots (`ClientSlots`). Loopback
  clients all share 127.0.0.1 (the bench, a reverse proxy on the machine, the operator's
  browser and scripts alike): nothing in a request tells them apart that a client could not
  change at will (a cookie, a connection), so a per-client cap there would cap the reader
  with the attackers. On loopback fairness is by what a shape costs, not by who sends it.
- Background work yields to readers' pages (`pause_for_readers`): a summary's or a count's
  SQL (limits.in_background) pauses at its progress handler while the SQL of a light page (a
  table, a card, a filter an index answers) other than the one that started it runs, at most
  PAUSE_TOTAL_S per query, so four attackers' background counts never take the cores a
  reader's page needs (the pause sleeps: it holds neither Python's lock nor a page's slot).
  Only while the page's SQL runs, not its whole request: a page that waited for background
  work (a facet count another visit started) paused that work for as long as it waited.
"""
from __future__ import annotations

import collections
import contextlib
import contextvars
import itertools
import sqlite3
import threading
import time
import urllib.parse

from cachetools import LRUCache, TTLCache

from basecrawler.reading.search import indexed_search
from basecrawler.reading.search_text import fts_phrase, fts_table, gram_indexed, gram_range, short_index
from basecrawler.reading.web import limits
from basecrawler.recordtypes.tables import fts_vocab_table
from basecrawler.store.engines.dialect import SQLITE

QUICK = "quick"
RARE_ROWS = 2_000          # a term in at most this many records of each table is rare: read by id
ESTIMATE_LIMIT_S = 0.05    # the estimate's own time limit: past it, the search is not called quick
ESTIMATES_KEPT = 512       # (database, text) → its estimate …
ESTIMATE_TTL_S = 60.0      # … for this long (a run may make a rare term common)
QUICK_SERVED_S = 0.3       # the same page answered within this lately is quick …
SERVED_TTL_S = 300.0       # … when it was answered that fast within this long
SERVED_KEPT = 4_096     # (new searches of every attacker pass through it too)

LONG_RUN_S = 0.3           # a request that held its lane's slot longer ran long …
REPEATS = 2                # … this many times within …
WINDOW_S = 30.0            # … this long: the shape's next requests get a shorter time limit
REPEAT_LIMIT_MS = {"search": 300, QUICK: 300}   # (the heavy lane's own limit is short already)
LEDGER_KEPT = 1_024

PAUSE_STEP_S = 0.005       # a paused background query looks again this often …
PAUSE_TOTAL_S = 5.0        # … and pauses at most this long in all (then runs on: it is bounded)

# The time limit of the request's queries when shorter than its lane's (None: the lane's).
TIME_LIMIT_MS: contextvars.ContextVar[int | None] = contextvars.ContextVar("basecrawler_limit_ms", default=None)
# The request a piece of work was started for (inherited by the tasks it starts).
ORIGIN: contextvars.ContextVar[int | None] = contextvars.ContextVar("basecrawler_origin", default=None)
# Whether the request is a reader's light page (its SQL, while it runs, pauses background work).
LIGHT_PAGE: contextvars.ContextVar[bool] = contextvars.ContextVar("basecrawler_light_page", default=False)
# Whether the work is the start-up warm-up's (plugins/basecrawler_facets.py), which nobody waits
# for: its SQL runs as the background's does (paused while a reader's page runs, at the
# background's priority), one query at a time however long it waits (not in a lane's slots,
# which a count not given one within a second gives up): a table's five facet counts at once
# held Python's lock so often that a first visitor's page, rendering, waited seconds for it.
WARMING: contextvars.ContextVar[bool] = contextvars.ContextVar("basecrawler_warming", default=False)


@contextlib.contextmanager
def as_warm_up():
    """Work started inside the block (a task, which copies the context) is the warm-up's kind,
    whatever the request's lane: counts finished for a page's next visitor (web/facetcache.py,
    plugins/basecrawler_web.py) run as the start-up's do."""
    tokens = (limits.LANE.set(None), WARMING.set(True))
    try:
        yield
    finally:
        WARMING.reset(tokens[1])
        limits.LANE.reset(tokens[0])


_serial = itertools.count(1)


def new_origin() -> int:
    return next(_serial)


# ---- cost ------------------------------------------------------------------------------------
def term_rows(conn, record_type, term: str, cap: int = RARE_ROWS) -> int | None:
    """How many records of the type hold `term`, counted up to `cap` + 1 in its full-text index
    (a 1–2 character term: its trigrams' occurrences in the index's vocabulary, at least the
    records); None when no index counts it (then only a pass over the table finds it)."""
    if len(term) >= 3:
        fts = fts_table(record_type)
        return conn.execute(SQLITE.query(f"SELECT count(*) FROM (SELECT 1 FROM [{fts}] WHERE [{fts}] MATCH ? LIMIT ?)"),
                            [fts_phrase(term), cap + 1]).fetchone()[0]
    if not gram_indexed(term) or not short_index(conn, record_type):
        return None
    low, high = gram_range(term)
    return conn.execute(SQLITE.query(f"SELECT count(*) FROM (SELECT 1 FROM temp.[{fts_vocab_table(record_type)}] "
                                     "WHERE term >= ? AND term <= ? LIMIT ?)"), [low, high, cap + 1]).fetchone()[0]


def search_rows(conn, record_types, text: str, cap: int = RARE_ROWS) -> int | None:
    """The most records any term of `text` is held by in any of `record_types`' tables on this
    store (capped at `cap` + 1): what the search page, its count and its summary read at most.
    None when a term cannot be counted or the estimate took longer than ESTIMATE_LIMIT_S."""
    terms = sorted(set(text.split()))
    if not terms:
        return None
    present = {row[0] for row in conn.execute(SQLITE.query("SELECT name FROM sqlite_master WHERE type = 'table'"))}
    most = 0
    try:
        with limits.deadline(conn, ESTIMATE_LIMIT_S):
            for record_type in record_types:
                if record_type.table not in present:
                    continue
                if not indexed_search(record_type):   # a LIKE over its rows: cheap only for a few
                    rows = conn.execute(SQLITE.query(f"SELECT max(rowid) FROM [{record_type.table}]")).fetchone()[0]
                    found = [rows or 0]
                else:
                    found = [term_rows(conn, record_type, term, cap) for term in terms]
                if None in found:
                    return None
                most = max(most, *found)
    except sqlite3.OperationalError:   # interrupted (or not a store of ours): not known to be cheap
        return None
    return most


# (database, text) → its estimate, and (path, query) → how long it took: each valid for its
# time to live, the least recently used dropped first (cachetools: not thread-safe, and only
# the event loop's thread reads and writes them).
estimates = TTLCache(ESTIMATES_KEPT, ESTIMATE_TTL_S, timer=time.monotonic)
served = TTLCache(SERVED_KEPT, SERVED_TTL_S, timer=time.monotonic)


def page_key(path: str, query_string: bytes | str) -> tuple[str, str]:
    if isinstance(query_string, bytes):
        query_string = query_string.decode("latin-1")
    return path, query_string


async def search_lane(datasette, path: str, args: list[tuple[str, str]], query_string, types: dict) -> str:
    """QUICK or "search" for an ordinary search page (limits.lane said "search"), by its cost."""
    seconds = served.get(page_key(path, query_string))
    if seconds is not None and seconds <= QUICK_SERVED_S:
        return QUICK
    parts = path.split("/")
    text = " ".join(value for name, value in args if name == "_search").strip()
    if len(parts) != 3 or not text:
        return "search"
    table = parts[2].removesuffix(".json")
    database = urllib.parse.unquote(parts[1])
    if table not in types:
        return "search"
    key = (database, text)
    rows = estimates.get(key)
    if rows is None:
        try:
            db = datasette.get_database(database)
        except KeyError:
            return "search"
        rows = await db.execute_fn(lambda conn: search_rows(conn, list(types.values()), text))
        rows = -1 if rows is None else rows
        estimates[key] = rows
    return QUICK if 0 <= rows <= RARE_ROWS else "search"


def note_served(path: str, query_string, seconds: float, status: int) -> None:
    """How long a search page took to answer (its slot held), for the next visit's lane: its
    fastest answer within SERVED_TTL_S. A slower answer of the same page measured the machine's
    load, not the page (its counts are kept); kept as the page's cost, it sent a reader's page
    to the search lane, where a long query is demoted and ran slower again, so the page never
    came back to the quick lane while the attack lasted."""
    if status != 200:
        return
    key = page_key(path, query_string)
    fastest = served.get(key)
    if fastest is None or seconds <= fastest:   # (a slower answer leaves its time to live alone)
        served[key] = seconds


# ---- fairness ---------------------------------------------------------------------------------
def shape(client: str, lane: str | None, path: str, args: list[tuple[str, str]], query_string=b"") -> tuple:
    """What makes two requests the same kind of work: who, which lane and table, which arguments
    (their names; the values change with every attack and every visit), and whether the page
    is new (not answered within SERVED_TTL_S)."""
    table = path.rstrip("/").rsplit("/", 1)[-1].split(".")[0]
    new = served.get(page_key(path, query_string)) is None
    return client, lane, table, tuple(sorted({name for name, _ in args})), new


class Ledger:
    """Per shape, when its requests ran long (held their lane's slot over LONG_RUN_S)."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.runs: LRUCache = LRUCache(LEDGER_KEPT)   # shape → when it ran long (the last REPEATS)

    def note(self, key: tuple, seconds: float) -> None:
        if seconds <= LONG_RUN_S:
            return
        runs = self.runs.get(key) or collections.deque(maxlen=REPEATS)
        runs.append(self.clock())
        self.runs[key] = runs

    def limit_ms(self, key: tuple) -> int | None:
        """The shorter time limit of a shape of new pages that ran long REPEATS times within
        WINDOW_S (None: its lane's)."""
        runs = self.runs.get(key)
        if not key[-1] or not runs or len(runs) < REPEATS or self.clock() - runs[0] > WINDOW_S:
            return None
        return REPEAT_LIMIT_MS.get(key[1])


ledger = Ledger()


def is_loopback(address: str | None) -> bool:
    return address is None or address.startswith("127.") or address in ("::1", "localhost", "testclient")


class ClientSlots:
    """A client of another address holds at most all but one of a lane's slots at once: the
    last one stays for somebody else. Loopback clients are not counted (see the module)."""

    def __init__(self):
        self.held: dict[tuple, int] = collections.Counter()

    def cap(self, lane: str) -> int:
        return max(1, (limits.SLOTS.get(lane) or 1) - 1)

    @contextlib.contextmanager
    def slot(self, lane: str, address: str | None):
        """Counts the client's slot of `lane`; raises LookupError when it holds its share."""
        if is_loopback(address):
            yield
            return
        key = (lane, address)
        if self.held[key] >= self.cap(lane):
            raise LookupError(key)
        self.held[key] += 1
        try:
            yield
        finally:
            self.held[key] -= 1
            if not self.held[key]:
                del self.held[key]


clients = ClientSlots()


# ---- background yields to readers ---------------------------------------------------------------
_reading: collections.Counter = collections.Counter()   # origin → its light pages being served
_reading_lock = threading.Lock()


@contextlib.contextmanager
def reading(origin: int):
    """A reader's light page's SQL is running (background work pauses meanwhile)."""
    with _reading_lock:
        _reading[origin] += 1
    try:
        yield
    finally:
        with _reading_lock:
            _reading[origin] -= 1
            if not _reading[origin]:
                del _reading[origin]


def readers_besides(origin: int | None) -> bool:
    with _reading_lock:
        return any(key != origin for key in _reading)


def pause_for_readers(origin: int | None, sleep=time.sleep, clock=time.monotonic):
    """A progress-handler hook for background SQL: while a reader's light page other than
    `origin`'s is served, sleep (PAUSE_STEP_S at a time, PAUSE_TOTAL_S in all); the seconds
    slept, which the query's deadline is moved by."""
    paused = [0.0]

    def pause() -> float:
        if paused[0] >= PAUSE_TOTAL_S or not readers_besides(origin):
            return 0.0
        started = clock()
        while readers_besides(origin) and paused[0] + clock() - started < PAUSE_TOTAL_S:
            sleep(PAUSE_STEP_S)
        took = clock() - started
        paused[0] += took
        return took
    return pause
