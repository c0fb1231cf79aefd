"""Datasette plugin: a record type's table shows each group of publishers once (the group's
primary record, as `basecrawler search` does), unless the page asks for every copy with
`?_bc_copies=1` (`--all-copies`); the page gets the switch between the two (`bc_copies`,
templates/table.html). The helpers are basecrawler/reading/web/groups.py; no record type is
named here.

The count of a page that shows the whole table once per group is the table's count less its
copies (`bc_copies.count`; Datasette's own count is spared with `_nocount`): counting the rows
that are no copy tests each of them, most of a second at a million records. Both counts are
kept per data version (`summary_cache.run_marker`, which the page reads once for its facets
anyway): every page counted every link of the group table, twice, and a whole-table page the
table's rows, which is what a grouped page cost beyond a plain one (bench/README.md, w13-groups).
"""
from __future__ import annotations

import urllib.parse

from datasette import hookimpl
from datasette.filters import FilterArguments
from datasette.utils import path_with_added_args, path_with_removed_args

from basecrawler.reading.browse import types_by_table
from basecrawler.reading.summary_cache import run_marker
from basecrawler.reading.web.groups import COPIES_ARG, copies_condition, shows_copies
from basecrawler.store import groups
from basecrawler.store.engines.dialect import SQLITE

TYPES = types_by_table()


def copies_count(conn, record_type) -> int:
    """How many records of the type are another publisher's copy."""
    try:
        return conn.execute(SQLITE.query(f'SELECT count(*) FROM "{groups.TABLE}" WHERE record_type = ?'),
                            [record_type.name]).fetchone()[0]
    except Exception:   # a store made before record groups: none
        return 0


VERSIONS_KEPT = 64   # (two counts per table and version: a few databases, a few versions each)
_counts: dict[tuple, int] = {}   # (database, table, data version, what) → a count of that version


async def _counted(datasette, database: str, table: str, request, what: str, count) -> int:
    """`count` (a function of a connection) of this table at the page's data version, counted
    once per version."""
    key = (database, table, await run_marker(datasette, database, table, request), what)
    if key not in _counts:
        found = await datasette.get_database(database).execute_fn(count)
        if len(_counts) >= VERSIONS_KEPT:
            _counts.pop(next(iter(_counts)))
        _counts[key] = found
    return _counts[key]


def _rows(conn, table: str) -> int:
    return conn.execute(SQLITE.query(f"SELECT count(*) FROM [{table}]")).fetchone()[0]


def _has_copies(conn, record_type) -> bool:
    try:
        return groups.has_copies(conn, record_type)
    except Exception:   # a store made before record groups: none
        return False


@hookimpl
def filters_from_request(request, database, table, datasette):
    record_type = TYPES.get(table)
    if record_type is None or request is None:
        return None

    async def conditions():
        copies = await _counted(datasette, database, table, request, "copies",
                                lambda conn: copies_count(conn, record_type))
        if not copies:   # no groups: the table's plain queries (and their kept counts) stay
            return None
        shown = shows_copies(request.args)
        # The switch keeps the page's search and filters; a later page's `_next` would not fit.
        url = (path_with_removed_args(request, {COPIES_ARG, "_next"}) if shown
               else path_with_added_args(request, {COPIES_ARG: "1", "_next": None}))
        context = {"bc_copies": {"shown": shown, "copies": copies, "url": datasette.urls.path(url), "count": None}}
        if shown:
            return FilterArguments([], extra_context=context)
        if _whole_once(request.args.keys()):
            rows = await _counted(datasette, database, table, request, "rows", lambda conn: _rows(conn, table))
            context["bc_copies"]["count"] = max(rows - copies, 0)
        return FilterArguments([copies_condition(record_type, table)], extra_context=context)
    return conditions()


def _whole_once(keys) -> bool:
    """Whether a page's arguments only choose how the whole table shows (columns, order,
    size, page), nothing that narrows its rows."""
    return not any(not k.startswith("_") or k.startswith("_bcf_") or k in ("_search", "_where", "_filter_column")
                   for k in keys)


def _counted_query(pairs: list, grouped: bool) -> bytes | None:
    """The query a grouped type's HTML table page is served with (None: as it came). A page of
    the whole table once per group gets `_nocount` (its count is `bc_copies.count`); any other
    page without a search loses one its links carried over from such a page, so it is counted
    (a search page's own `_nocount` is basecrawler_web's: left alone)."""
    keys = [k for k, _v in pairs]
    if not grouped or "_search" in keys:
        return None
    if not any(k in ("_col", "_nocol", "_bc_all") for k in keys):
        return None   # sent on to its default columns first (basecrawler_web), decided there
    rest = [(k, v) for k, v in pairs if k != "_nocount"]
    if _whole_once(keys) and not shows_copies(dict(pairs)):
        rest.append(("_nocount", "1"))
    return None if rest == pairs else urllib.parse.urlencode(rest).encode("latin-1")


async def _grouped_page(datasette, scope) -> bool:
    """Whether this request is the HTML page of a type's table that has copies."""
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    parts = scope["path"].split("/")
    if len(parts) != 3 or parts[2] not in TYPES:
        return False
    try:
        db = datasette.get_database(urllib.parse.unquote(parts[1]))
        # (whether there are any: one entry of the group table's key, not a count of them)
        return await db.execute_fn(lambda conn: _has_copies(conn, TYPES[parts[2]]))
    except Exception:   # not a database of ours: Datasette counts as it would
        return False


@hookimpl
def asgi_wrapper(datasette):
    def wrap(app):
        async def spare_count(scope, receive, send):
            if scope["type"] == "http":
                pairs = urllib.parse.parse_qsl((scope.get("query_string") or b"").decode("latin-1"),
                                               keep_blank_values=True)
                if any(k in ("_col", "_nocol", "_bc_all") for k, _v in pairs):
                    query = _counted_query(pairs, await _grouped_page(datasette, scope))
                    if query is not None:
                        scope = {**scope, "query_string": query}
            await app(scope, receive, send)
        return spare_count
    return wrap
