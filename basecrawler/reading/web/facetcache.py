"""The web view's facet counts, each run once: a query already running for the same key is
awaited rather than started again, and results (and the counts a run kept in `meta`) are
cached per data version. Beside the plugin because Datasette loads every plugin file."""
from __future__ import annotations

import asyncio
import sqlite3
import time

from cachetools import LRUCache, TTLCache
from datasette.database import QueryInterrupted

from basecrawler.reading.facetcounts import stored_counts
from basecrawler.reading.web import admission
from basecrawler.reading.web.limits import deadline, in_background

CACHE_SIZE = 256
ASKED_KEPT = 16_384        # pages asked lately, remembered (by a hash of path and query) …
ASKED_TTL_S = 600.0        # … for this long

# Each kind its own table, the least recently used dropped first: a client sending filtered
# pages of one table over and over never pushes out the whole table's counts; and the counts
# of a page asked before (a reader's maker, country or search with a filter, visited again)
# are kept apart from those of pages never asked before, so a client sending new pages (every
# attacker's is new) never pushes them out. Counted again within the page's facet budget on a
# machine the attack kept busy, they made those pages the slow ones. (A scan-resistant cache
# in the manner of 2Q: new keys pass through a table of their own; a page asked again enters
# the kept one.)
filtered_counts: LRUCache = LRUCache(CACHE_SIZE)   # key → the facet rows of a page asked once
repeat_counts: LRUCache = LRUCache(CACHE_SIZE)     # key → the facet rows of a page asked again
whole_counts: LRUCache = LRUCache(CACHE_SIZE)      # key → a whole table's facet rows
asked: TTLCache = TTLCache(ASKED_KEPT, ASKED_TTL_S, timer=time.monotonic)   # hash(page) → True
# Filtered pages' counts that ran out of a page's time: a page asked again does not count them
# (nor wait for them) again within its budget, but has them finished for its next visit
# (`finish_later`) and shows them as still counting at once. Under attack such a page spent its
# whole facet budget on them, visit after visit, until they were finished.
timed_out: TTLCache = TTLCache(CACHE_SIZE * 4, ASKED_TTL_S, timer=time.monotonic)   # key → True
pending: dict[tuple, "asyncio.Future"] = {}
stored: LRUCache = LRUCache(CACHE_SIZE)   # (database, table, marker) → the counts a run kept in meta


def asked_again(request) -> bool:
    """Whether the request's page (path and query string) was asked within ASKED_TTL_S before
    this request; decided once per request (its facets ask one after the other)."""
    if request is None:
        return False
    if "bc_asked_again" not in request.scope:
        page = hash((request.path, request.query_string))
        request.scope["bc_asked_again"] = page in asked
        asked[page] = True
    return request.scope["bc_asked_again"]


def cached(key: tuple, again: bool = False) -> list[dict] | None:
    """The facet rows counted for `key` in this process, if still kept; a page asked `again`
    moves its rows from the new pages' table to the kept one."""
    for kept in (whole_counts, repeat_counts):
        found = kept.get(key)
        if found is not None:
            return found
    found = filtered_counts.get(key)
    if found is not None and again:
        repeat_counts[key] = filtered_counts.pop(key)
    return found


def forget() -> None:
    """Drop every facet count kept (the next page counts again)."""
    for kept in (whole_counts, repeat_counts, filtered_counts, asked, timed_out):
        kept.clear()


async def count_once(datasette, key: tuple, sql: str, params, limit_ms: int, whole: bool = False,
                     again: bool = False, later: bool = False) -> list[dict]:
    """Run one facet query into the cache; a query already running for the same key is
    awaited, not started twice (the start-up warm-up and the first visitor ask together).
    `whole`: a whole-table count (seconds at a million records, once per run), which the
    counts of filtered pages never push out: a client sending filtered pages of one table
    over and over made every visitor of its table page count the whole table again.
    `again`: the count of a page asked before (kept apart from new pages' counts); `later`:
    finished for its page's next visitor, under its own time limit as a whole-table count."""
    if key in pending:
        return await asyncio.shield(pending[key])
    future = asyncio.get_running_loop().create_future()
    pending[key] = future
    try:
        if whole or later:
            result = await count_whole_table(datasette, key[0], sql, params, limit_ms)
        else:
            rows = await datasette.execute(key[0], sql, params, truncate=False, custom_time_limit=limit_ms)
            result = [dict(zip(row.keys(), tuple(row))) for row in rows.rows]
        (whole_counts if whole else repeat_counts if again else filtered_counts)[key] = result
        future.set_result(result)
        return result
    except BaseException as exc:
        future.set_exception(exc)
        future.exception()   # retrieved: nobody else may be waiting
        raise
    finally:
        del pending[key]


BACKGROUND_COUNTS = 2   # filtered pages' counts finished in the background at once (the machine is shared) …
_finishing_again = [0]  # … and as many besides for pages asked again


def finish_later(datasette, key: tuple, sql: str, params, limit_ms: int, again: bool) -> None:
    """Finish a filtered page's count that ran out of its page's time, for the page's next
    visitor, unless it is going on already or too many are. A page asked `again` has an
    allowance of its own, and its count is the start-up warm-up's kind of work (one at a time
    however long it waits, at the background's priority, under its own time limit), not the
    background lane's: the new pages of a client sending them kept the shared allowance and
    the background's slots full, so a reader's maker page, counting the same month facet past
    its budget on every visit, never had it finished. (Run as its page's light work instead,
    six such counts of one page at once took the cores from the readers' pages.)"""
    if key in pending or (len(pending) >= BACKGROUND_COUNTS and not (again and _finishing_again[0] < BACKGROUND_COUNTS)):
        return
    with admission.as_warm_up() if again else in_background():
        task = asyncio.get_running_loop().create_task(
            count_once(datasette, key, sql, params, limit_ms, again=again, later=again))
    _finishing_again[0] += again

    def done(task):
        _finishing_again[0] -= again
        task.cancelled() or task.exception()   # a failed background count is dropped
    task.add_done_callback(done)


async def count_whole_table(datasette, database: str, sql: str, params, limit_ms: int) -> list[dict]:
    """A whole-table count (or one finished later) under its own time limit: Datasette's
    `custom_time_limit` may only shorten its page limit (3 s), and a multi-valued facet of a
    million records counted longer on a loaded machine, failed, and was counted again by every visitor."""
    def count(conn):
        with deadline(conn, limit_ms / 1000):
            cursor = conn.execute(sql, params)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]
    try:
        return await datasette.get_database(database).execute_fn(count)
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc):
            raise QueryInterrupted(exc, sql, params) from exc
        raise


async def kept_counts(datasette, database: str, table: str, marker: tuple) -> dict | None:
    """The whole-table counts the last run that changed data kept in `meta`
    (reading/facetcounts.py), when they are of the data as it is now; read once per version."""
    key = (database, table, marker)
    if key not in stored:
        stored[key] = await datasette.get_database(database).execute_fn(
            lambda conn: stored_counts(conn, table, list(marker)))
    return stored[key]
