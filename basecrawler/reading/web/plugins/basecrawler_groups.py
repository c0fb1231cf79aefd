"""Datasette plugin: a record type's table shows each group of publishers once (the group's
primary record, as `basecrawler search` does), unless the page asks for every copy with
`?_bc_copies=1` (`--all-copies`); the page gets the switch between the two (`bc_copies`,
templates/table.html). The helpers are basecrawler/reading/web/groups.py; no record type is
named here.
"""
from __future__ import annotations

from datasette import hookimpl
from datasette.filters import FilterArguments
from datasette.utils import path_with_added_args, path_with_removed_args

from basecrawler.reading.browse import types_by_table
from basecrawler.reading.web.groups import COPIES_ARG, copies_condition, shows_copies
from basecrawler.store import groups

TYPES = types_by_table()


def _copies(conn, record_type) -> int:
    """How many records of the type are another publisher's copy."""
    try:
        return conn.execute(f'SELECT count(*) FROM "{groups.TABLE}" WHERE record_type = ?',
                            [record_type.name]).fetchone()[0]
    except Exception:   # a store made before record groups: none
        return 0


@hookimpl
def filters_from_request(request, database, table, datasette):
    record_type = TYPES.get(table)
    if record_type is None or request is None:
        return None

    async def conditions():
        db = datasette.get_database(database)
        copies = await db.execute_fn(lambda conn: _copies(conn, record_type))
        if not copies:   # no groups: the table's plain queries (and their kept counts) stay
            return None
        shown = shows_copies(request.args)
        # The switch keeps the page's search and filters; a later page's `_next` would not fit.
        url = (path_with_removed_args(request, {COPIES_ARG, "_next"}) if shown
               else path_with_added_args(request, {COPIES_ARG: "1", "_next": None}))
        context = {"bc_copies": {"shown": shown, "copies": copies, "url": datasette.urls.path(url)}}
        if shown:
            return FilterArguments([], extra_context=context)
        return FilterArguments([copies_condition(record_type, table)], extra_context=context)
    return conditions()
