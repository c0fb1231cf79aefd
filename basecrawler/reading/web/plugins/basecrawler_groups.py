"""Datasette plugin: a record type's table shows each group of publishers once (the group's
primary record, as `basecrawler search` does), unless the page asks for every copy with
`?_bc_copies=1` (`--all-copies`); the page gets the switch between the two (`bc_copies`,
templates/table.html). The helpers are basecrawler/reading/web/groups.py; no record type is
named here.

The count of a page that shows the whole table once per group is the table's count less its
copies (`bc_copies.count`; Datasette's own count is spared with `_nocount`): counting the rows
that are no copy tests each of them, most of a second at a million records. Both counts are
kept per data version (reading/web/groupcounts.py): every page counted every link of the group
table, twice, and a whole-table page the table's rows. Whether a page shows the whole table is
read from its arguments (reading/web/pageargs.py).
"""
from __future__ import annotations

import urllib.parse

from datasette import hookimpl
from datasette.filters import FilterArguments
from datasette.utils import path_with_added_args, path_with_removed_args

from basecrawler.reading.browse import types_by_table
from basecrawler.reading.web import groupcounts
from basecrawler.reading.web.groups import COPIES_ARG, copies_condition, shows_copies
from basecrawler.reading.web.pageargs import narrows, whole_table

TYPES = types_by_table()


@hookimpl
def filters_from_request(request, database, table, datasette):
    record_type = TYPES.get(table)
    if record_type is None or request is None:
        return None

    async def conditions():
        copies = await groupcounts.copies(datasette, database, record_type, request)
        if not copies:   # no groups: the table's plain queries (and their kept counts) stay
            return None
        shown = shows_copies(request.args)
        # The switch keeps the page's search and filters; a later page's `_next` would not fit.
        url = (path_with_removed_args(request, {COPIES_ARG, "_next"}) if shown
               else path_with_added_args(request, {COPIES_ARG: "1", "_next": None}))
        context = {"bc_copies": {"shown": shown, "copies": copies, "url": datasette.urls.path(url), "count": None}}
        if shown:
            return FilterArguments([], extra_context=context)
        if whole_table(request.args):
            rows = await groupcounts.rows(datasette, database, record_type, request)
            context["bc_copies"]["count"] = max(rows - copies, 0)
        return FilterArguments([copies_condition(record_type, table)], extra_context=context)
    return conditions()


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
    if not narrows(keys) and not shows_copies(dict(pairs)):
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
        return await db.execute_fn(lambda conn: groupcounts.has_copies(conn, TYPES[parts[2]]))
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
