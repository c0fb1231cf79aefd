"""Watches in the web view (issue #33): each watch's Atom feed at `/-/watch/NAME.atom` (and
everything new at `/-/watch/all.atom`), read from the store's outbox; and "watch this search"
on a record table's page (and at `/-/watch-this?table=…&<the page's arguments>`): the exact
`basecrawler watch add` command for the search and its filters, in a block with a copy button
(the web view reads a read-only file: the watch is made on the command line;
basecrawler/reading/web/watchcommand.py writes the command)."""
from __future__ import annotations

import json
import shlex
import urllib.parse

from datasette import hookimpl

from basecrawler.i18n import gettext as _
from basecrawler.store.engines.dialect import SQLITE

FEED_PATH = "/-/watch"


async def feed(request, datasette):
    from datasette.utils.asgi import Response

    from basecrawler.watch.channels.atom import ALL, render

    name = request.url_vars["name"]
    db = datasette.get_database()
    try:
        if name == ALL:
            watch_id = None
        else:
            found = (await db.execute(SQLITE.query("SELECT id FROM watches WHERE name = ?"), [name])).first()
            if found is None:
                return Response.text("no such watch", status=404)
            watch_id = found[0]
        where = "state IN ('sent', 'pending')" + (" AND watch_id = ?" if watch_id is not None else "")
        result = await db.execute(SQLITE.query(f"SELECT * FROM watch_outbox WHERE {where} ORDER BY id DESC LIMIT 100"),
                                  [watch_id] if watch_id is not None else [])
    except Exception:   # a store from before migration 11: no watches
        return Response.text("no watches", status=404)
    rows, seen = [], set()
    for row in result.rows:
        row = dict(row)
        key = (row["record_type"], row["record_id"], row["version"])
        if key in seen:
            continue
        seen.add(key)
        row["payload"] = json.loads(row["payload"] or "{}")
        rows.append(row)
    return Response(render(None if name == ALL else name, rows), content_type="application/atom+xml; charset=utf-8")


def watch_context(table: str, request) -> dict | None:
    """The "watch this search" block of a type's table page (templates/_watch.html): the exact
    `basecrawler watch add` command for its search and filters, and what it cannot hold."""
    from basecrawler.reading.browse import types_by_table
    from basecrawler.reading.web.watchcommand import watch_command

    record_type = types_by_table().get(table)
    if record_type is None or request is None:
        return None
    pairs = [(k, v) for k, v in urllib.parse.parse_qsl(request.query_string, keep_blank_values=True) if k != "table"]
    command, left_out = watch_command(record_type, pairs)
    words = shlex.split(command)
    # Each word kept whole on a narrow screen (an option never split at its "--").
    return {"command": command, "words": [shlex.quote(w) for w in words], "left_out": left_out,
            "feed": f"{FEED_PATH}/{words[3]}.atom"}   # basecrawler watch add NAME …


async def watch_this(request, datasette):
    from datasette.utils.asgi import Response

    context = watch_context(request.args.get("table") or "", request)
    if context is None:
        return Response.text("unknown table", status=404)
    return Response.html(await datasette.render_template("watch_this.html", {"bc_watch": context}, request=request))


@hookimpl
def extra_template_vars(view_name, table, request):
    if view_name != "table" or not table:
        return {}
    return {"bc_watch": watch_context(table, request)}


@hookimpl
def register_routes():
    return [(FEED_PATH + r"/(?P<name>[A-Za-z0-9_.-]+)\.atom$", feed), (FEED_PATH + r"-this$", watch_this)]


@hookimpl
def table_actions(datasette, actor, database, table, request=None):
    from urllib.parse import urlencode

    from basecrawler.reading.browse import types_by_table

    if table not in types_by_table():
        return []
    pairs = urllib.parse.parse_qsl(request.query_string, keep_blank_values=True) if request is not None else []
    return [{"href": f"{FEED_PATH}-this?" + urlencode([*pairs, ("table", table)]), "label": _("Watch this search")}]
