"""Watches in the web view (issue #33): each watch's Atom feed at `/-/watch/NAME.atom` (and
everything new at `/-/watch/all.atom`), read from the store's outbox; and a "watch this
search" action on a record table, which shows the `basecrawler watch add` command for the
search on screen (the web view reads a read-only file: the watch is made on the command line)."""
from __future__ import annotations

import html
import json
import shlex

from datasette import hookimpl

from basecrawler.watch import strings

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
            found = (await db.execute("SELECT id FROM watches WHERE name = ?", [name])).first()
            if found is None:
                return Response.text("no such watch", status=404)
            watch_id = found[0]
        where = "state IN ('sent', 'pending')" + (" AND watch_id = ?" if watch_id is not None else "")
        result = await db.execute(f"SELECT * FROM watch_outbox WHERE {where} ORDER BY id DESC LIMIT 100",
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


async def watch_this(request, datasette):
    from datasette.utils.asgi import Response

    from basecrawler.reading.browse import types_by_table

    table = request.args.get("table") or ""
    record_type = types_by_table().get(table)
    if record_type is None:
        return Response.text("unknown table", status=404)
    words = ["basecrawler", "watch", "add", "NAME", "--type", record_type.name]
    if request.args.get("_search"):
        words += ["--text", request.args["_search"]]
    for key in list(request.args):
        value = request.args.get(key)
        field = key[len("_bcf_"):] if key.startswith("_bcf_") else key
        if record_type.facet(field) is not None and field != "source":
            words += ["--filter", f"{field}={value}"]
        elif field == "source":
            words += ["--source", value]
    words += ["--feed"]
    command = " ".join(shlex.quote(w) for w in words)
    body = (f"<!doctype html><html lang='ko'><meta charset='utf-8'><title>{html.escape(strings.WATCH_THIS)}</title>"
            f"<h1>{html.escape(strings.WATCH_THIS)}</h1><pre>{html.escape(command)}</pre></html>")
    return Response.html(body)


@hookimpl
def register_routes():
    return [(FEED_PATH + r"/(?P<name>[A-Za-z0-9_.-]+)\.atom$", feed), (FEED_PATH + r"-this$", watch_this)]


@hookimpl
def table_actions(datasette, actor, database, table, request=None):
    from urllib.parse import urlencode

    from basecrawler.reading.browse import types_by_table

    if table not in types_by_table():
        return []
    query = {k: request.args.get(k) for k in request.args} if request is not None else {}
    return [{"href": f"{FEED_PATH}-this?" + urlencode({**query, "table": table}), "label": strings.WATCH_THIS}]
