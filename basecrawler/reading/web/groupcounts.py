"""A grouped table page's two counts, each counted once per data version
(`summary_cache.run_marker`): how many records of the type are another publisher's copy, and the
table's rows. Every page of a grouped table asks for them (its count is the rows less the copies,
its facets count the shown records when copies are left out), and counting them per page read
every link of the group table, twice. No Datasette hooks here (plugins/basecrawler_groups.py and
plugins/basecrawler_facets.py ask). The pages read SQLite: the statements are SQLITE's.
"""
from __future__ import annotations

from cachetools import LRUCache

from basecrawler.reading.summary_cache import run_marker
from basecrawler.reading.web.groups import shows_copies
from basecrawler.store import groups
from basecrawler.store.engines.dialect import SQLITE

VERSIONS_KEPT = 64   # (two counts per table and version: a few databases, a few versions each)
_counts: LRUCache = LRUCache(VERSIONS_KEPT)   # (database, table, data version, what) → a count of that version


def copies_count(conn, record_type) -> int:
    """How many records of the type are another publisher's copy."""
    try:
        return conn.execute(SQLITE.query(f'SELECT count(*) FROM "{groups.TABLE}" WHERE record_type = ?'),
                            [record_type.name]).fetchone()[0]
    except Exception:   # a store made before record groups: none
        return 0


def has_copies(conn, record_type) -> bool:
    """Whether any record of the type is another publisher's copy (one entry of the group
    table's key, not a count of them)."""
    try:
        return groups.has_copies(conn, record_type)
    except Exception:   # a store made before record groups: none
        return False


def _rows(conn, table: str) -> int:
    return conn.execute(SQLITE.query(f"SELECT count(*) FROM [{table}]")).fetchone()[0]


async def _counted(datasette, database: str, table: str, request, what: str, count) -> int:
    """`count` (a function of a connection) of this table at the page's data version, counted
    once per version."""
    key = (database, table, await run_marker(datasette, database, table, request), what)
    if key not in _counts:
        _counts[key] = await datasette.get_database(database).execute_fn(count)
    return _counts[key]


async def copies(datasette, database: str, record_type, request) -> int:
    """How many of the type's records are copies, at the page's data version."""
    return await _counted(datasette, database, record_type.table, request, "copies",
                          lambda conn: copies_count(conn, record_type))


async def rows(datasette, database: str, record_type, request) -> int:
    """The type's table's rows, copies included, at the page's data version."""
    table = record_type.table
    return await _counted(datasette, database, table, request, "rows", lambda conn: _rows(conn, table))


async def hides_copies(datasette, database: str, record_type, request) -> bool:
    """Whether the page leaves other publishers' copies out: the type has some and the page did
    not ask for every copy (plugins/basecrawler_groups.py then adds the condition that does)."""
    return not shows_copies(request.args) and await copies(datasette, database, record_type, request) > 0
