"""A search's summary (reading/summary.py) kept for the web view, per search and data version:
counted once however many pages and facets ask, awaited up to a page's wait and finished in the
background when it takes longer (the page's script shows it then), and counted again after a
run for the searches that were slow to count, so their next visitor does not wait.
"""
from __future__ import annotations

import asyncio
import logging

from cachetools import LRUCache

from basecrawler.reading.search import RecallFilter, covers_table
from basecrawler.reading.summary import SearchSummary, summarise_in

log = logging.getLogger(__name__)


def search_covers(table: str) -> bool:
    """Whether the web view answers `?_search=` on `table` with `build_query` (the CLI's own
    search, which the summary runs): every type with a full-text index."""
    return covers_table(table)


SUMMARY_CACHE_SIZE = 64
# A search page (its count line and every facet) waits this long for its summary; one that takes
# longer shows without them, and its script (static/basecrawler.js) fills them in when ready.
SUMMARY_WAIT_S = 0.4   # within the page target of 0.5 s: a term in 20 % of a million records fits
RECOUNT_AFTER_S = 0.2    # a summary that took longer than this is counted again when the data changes …
RECOUNT_MAX = 8          # … for the searches most recently asked, at most this many
_summaries: LRUCache = LRUCache(SUMMARY_CACHE_SIZE)   # (database, table, filters, marker) → its summary
_summarising: dict[tuple, "object"] = {}
_wait_until: dict[tuple, float] = {}   # a running summary is awaited until then, by every asker together
_slow: LRUCache = LRUCache(RECOUNT_MAX)   # (database, table, filters) of slow summaries → None


async def run_marker(datasette, database: str, table: str, request=None) -> tuple:
    """Changes whenever a run may have changed the table's counts: a run started or finished,
    a record added; the current minute while a run is going (`facetcounts.data_marker`, the
    version a run's kept counts are stamped with). Read once per request when given one (a
    page asks for it for its count and every facet)."""
    from basecrawler.reading.facetcounts import data_marker

    markers = request.scope.setdefault("bc_markers", {}) if request is not None else {}
    if (database, table) not in markers:
        db = datasette.get_database(database)
        markers[(database, table)] = tuple(await db.execute_fn(lambda conn: data_marker(conn, table)))
    return markers[(database, table)]


def _summary_task(datasette, database: str, table: str, filters: RecallFilter, marker: tuple):
    """The running count of this search at this data version (started when none is)."""
    import time

    from basecrawler.errors import ConfigError

    key = (database, table, filters, marker)
    task = _summarising.get(key)
    if task is not None:
        return task

    async def run() -> SearchSummary:
        started = time.perf_counter()
        try:
            try:
                summary = await summarise_in(datasette.get_database(database), filters)
            except ConfigError:   # a query too large is not run: it matches nothing
                summary = SearchSummary()
            _summaries[key] = summary
            if time.perf_counter() - started > RECOUNT_AFTER_S:
                _remember_slow(key[:3])
            return summary
        finally:
            _summarising.pop(key, None)
            _wait_until.pop(key, None)
    task = _summarising[key] = asyncio.get_running_loop().create_task(run())
    task.add_done_callback(lambda t: t.cancelled() or t.exception())   # a failed count is dropped
    return task


def _remember_slow(search: tuple) -> None:
    _slow[search] = None   # (asked again: among the last RECOUNT_MAX kept)


async def cached_summary(datasette, database: str, table: str, filters: RecallFilter,
                         wait_s: float, *, request=None, own_wait: bool = False) -> SearchSummary | None:
    """The summary of `filters` over the data as it is now: from the cache when this search
    was summarised since the data last changed, else counted (in Datasette's thread pool,
    once however many pages ask) and awaited up to `wait_s` after it started — None when it
    takes longer; it goes on, the page's script fetches it when done (`summary_state`) and
    the next visit finds it. The wait is counted from the start of the count, not per asker:
    a page asks once for its count and once per facet, and five facets waiting 0.3 s each
    kept a first visit 2 s. `own_wait`: wait `wait_s` from now (the script's poll)."""
    key = (database, table, filters, await run_marker(datasette, database, table, request))
    if key in _summaries:
        if key[:3] in _slow:
            _remember_slow(key[:3])   # asked again: among the last to drop
        return _summaries[key]
    loop = asyncio.get_running_loop()
    new = key not in _summarising
    task = _summary_task(datasette, database, table, filters, key[3])
    if new:
        _wait_until[key] = loop.time() + wait_s
    remaining = wait_s if own_wait else min(wait_s, _wait_until.get(key, 0.0) - loop.time())
    if task.done():
        return None if task.cancelled() or task.exception() else task.result()
    if remaining <= 0:
        return None
    try:
        return await asyncio.wait_for(asyncio.shield(task), remaining)
    except asyncio.TimeoutError:
        return None


async def recount_slow(datasette, seen: dict) -> int:
    """Count again, one after the other, the recently asked slow summaries whose data changed
    since `seen` ((database, table) → the data version last looked at; updated), once no run
    is going, so the next visitor of a common term finds its counts ready. How many it
    started."""
    started = 0
    for database, table, filters in list(_slow):
        try:
            marker = await run_marker(datasette, database, table)
        except Exception:   # the database went away: forget its searches
            _slow.pop((database, table, filters), None)
            continue
        # A run going (or no runs table: a version per minute) changes the data again soon.
        settled = len(marker) == 4 and marker[2] is None
        if not settled or marker == seen.get((database, table)):
            continue
        if (database, table, filters, marker) not in _summaries:
            started += 1
            await asyncio.wait([_summary_task(datasette, database, table, filters, marker)])
    for database, table, _ in list(_slow):
        try:
            seen[(database, table)] = await run_marker(datasette, database, table)
        except Exception:
            pass
    return started


RECOUNT_EVERY_S = 5.0    # how often the web view looks whether a run changed the data


async def keep_fresh(datasette) -> None:
    """The web view's background loop: `recount_slow` every RECOUNT_EVERY_S seconds."""
    seen: dict = {}
    while True:
        await asyncio.sleep(RECOUNT_EVERY_S)
        try:
            await recount_slow(datasette, seen)
        except Exception as exc:   # noqa: BLE001 — a cache: the next visitor counts for itself
            log.warning("search summaries not counted again: %s", exc)


__all__ = ["cached_summary", "run_marker", "search_covers", "recount_slow", "keep_fresh"]
