"""The web view's facet counts, each run once: a query already running for the same key is
awaited rather than started again, and results (and the counts a run kept in `meta`) are
cached per data version. Beside the plugin because Datasette loads every plugin file."""
from __future__ import annotations

import asyncio

from basecrawler.reading.facetcounts import stored_counts

CACHE_SIZE = 256

cached: dict[tuple, list[dict]] = {}
pending: dict[tuple, "asyncio.Future"] = {}
stored: dict[tuple, dict | None] = {}   # (database, table, marker) → the counts a run kept in meta


async def count_once(datasette, key: tuple, sql: str, params, limit_ms: int) -> list[dict]:
    """Run one facet query into the cache; a query already running for the same key is
    awaited, not started twice (the start-up warm-up and the first visitor ask together)."""
    if key in pending:
        return await asyncio.shield(pending[key])
    future = asyncio.get_running_loop().create_future()
    pending[key] = future
    try:
        rows = await datasette.execute(key[0], sql, params, truncate=False, custom_time_limit=limit_ms)
        result = [dict(zip(row.keys(), tuple(row))) for row in rows.rows]
        if len(cached) >= CACHE_SIZE:
            cached.pop(next(iter(cached)))
        cached[key] = result
        future.set_result(result)
        return result
    except BaseException as exc:
        future.set_exception(exc)
        future.exception()   # retrieved: nobody else may be waiting
        raise
    finally:
        del pending[key]


async def kept_counts(datasette, database: str, table: str, marker: tuple) -> dict | None:
    """The whole-table counts the last run that changed data kept in `meta`
    (reading/facetcounts.py), when they are of the data as it is now; read once per version."""
    key = (database, table, marker)
    if key not in stored:
        if len(stored) >= CACHE_SIZE:
            stored.pop(next(iter(stored)))
        stored[key] = await datasette.get_database(database).execute_fn(
            lambda conn: stored_counts(conn, table, list(marker)))
    return stored[key]
