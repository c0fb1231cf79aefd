"""Datasette plugin for basecrawler's `browse` (loaded with --plugins-dir; the recalls table only).

- Search: `?_search=` on recalls runs the CLI's own text condition (basecrawler.search), so
  terms of 1–2 characters (燃料, 브레) fall back to LIKE exactly as `basecrawler search` does;
  Datasette's built-in FTS search would ask the trigram index, which cannot match them.
- Opens on data: the table page without a column choice redirects to the same query with a
  short default column set (?_bc_all=1 shows every column).
- Cells: the Korean summary shows the original beside it (or alone while untranslated); the
  source link is short.
- A Korean search says how many recalls are translated while some are not (as `search` does).
- A "month" facet type (recalls per YYYY-MM of recall_date) — Datasette facets by day only.
"""
from __future__ import annotations

import urllib.parse

import markupsafe
from datasette import hookimpl
from datasette.facets import Facet
from datasette.filters import FilterArguments
from datasette.database import QueryInterrupted
from datasette.utils import path_with_added_args, path_with_removed_args

from basecrawler.browse import DEFAULT_COLUMNS
from basecrawler.search import RecallFilter, build_query, has_korean, translation_progress

TABLE = "recalls"


def _named(sql: str, params: list) -> tuple[str, dict]:
    """build_query's positional `?` parameters as named ones, which Datasette's filters need.
    Safe: the SQL it builds has no `?` inside string literals."""
    names = {}
    parts = sql.split("?")
    out = [parts[0]]
    for n, (part, value) in enumerate(zip(parts[1:], params)):
        name = f"bc_search_{n}"
        names[name] = value
        out.append(f":{name}{part}")
    return "".join(out), names


@hookimpl(trylast=True)  # run after Datasette's own search filter so our extra_context wins
def filters_from_request(request, database, table, datasette):
    if table != TABLE:
        return None
    text = (request.args.get("_search") or "").strip()
    context = {"supports_search": True, "search": text}
    if not text:
        return FilterArguments([], extra_context=context)
    sql, params = build_query(RecallFilter(text=text), columns="r.id", ordered=False)
    sql, named = _named(sql, params)
    description = f'search matches "{text}"'
    if not has_korean(text):
        return FilterArguments([f"id IN ({sql})"], named, [description], context)

    async def with_translation_progress():
        # As the CLI says it: Korean words only find rows the translator has reached.
        db = datasette.get_database(database)
        translated, total = await db.execute_fn(lambda conn: translation_progress(conn, RecallFilter(text=text)))
        note = description
        if translated < total:
            note += f" (Korean words only find translated recalls: {translated} of {total} recalls translated)"
        return FilterArguments([f"id IN ({sql})"], named, [note], context)
    return with_translation_progress()


ALL_COLUMNS_ARG = "_bc_all"   # ?_bc_all=1: every column (Datasette ignores unknown _ arguments)


def default_columns_location(path: str, query_string: bytes) -> str | None:
    """Where to send a request for the recalls HTML page that chose no columns: the same query
    plus the default column set. None when the request is served as it is (JSON and other
    formats, other tables, a column choice or ?_bc_all=1 present)."""
    if not path.endswith(f"/{TABLE}") or path.count("/") != 2:
        return None
    pairs = urllib.parse.parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    if any(key in ("_col", "_nocol", ALL_COLUMNS_ARG) for key, _ in pairs):
        return None
    return f"{path}?{urllib.parse.urlencode(pairs + [('_col', c) for c in DEFAULT_COLUMNS])}"


@hookimpl
def asgi_wrapper(datasette):
    def wrap(app):
        async def default_columns(scope, receive, send):
            location = None
            if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD"):
                location = default_columns_location(scope["path"], scope.get("query_string") or b"")
            if location is None:
                await app(scope, receive, send)
                return
            await send({"type": "http.response.start", "status": 302,
                        "headers": [(b"location", location.encode("latin-1")), (b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b""})
        return default_columns
    return wrap


def _short_url(url: str) -> str:
    host = urllib.parse.urlsplit(url).netloc
    return host or url


@hookimpl
def render_cell(row, value, column, table, database, datasette):
    if table != TABLE:
        return None
    if column == "source_url" and isinstance(value, str) and value.startswith(("http://", "https://")):
        return markupsafe.Markup('<a class="bc-source" href="{}" rel="noopener">{} ↗</a>').format(value, _short_url(value))
    if column == "summary_ko":
        async def both():
            # The row holds only the columns on screen: fetch the original by id.
            db = datasette.get_database(database)
            found = (await db.execute("SELECT summary_original, source_lang FROM recalls WHERE id = ?", [row["id"]])).first()
            original = found["summary_original"] if found else None
            lang = (found["source_lang"] if found else None) or ""
            parts = []
            if value:
                parts.append(markupsafe.Markup('<div class="bc-ko" lang="ko">{}</div>').format(value))
            else:
                parts.append(markupsafe.Markup('<div class="bc-pending">번역 대기 · not yet translated</div>'))
            if original:
                parts.append(markupsafe.Markup('<div class="bc-original" lang="{}">{}</div>').format(lang, original))
            return markupsafe.Markup("").join(parts)
        return both
    return None


class MonthFacet(Facet):
    """Facet a date column by month: `{"month": "recall_date"}` in the table's facets."""

    type = "month"

    async def suggest(self):
        return []

    async def facet_results(self):
        results, timed_out = [], []
        pairs = self.get_querystring_pairs()
        for source_and_config in self.get_configs():
            column = source_and_config["config"].get("simple") or source_and_config["config"].get("column")
            key = f"{column}__startswith"
            size = self.get_facet_size()
            sql = (f"SELECT substr([{column}], 1, 7) AS value, count(*) AS count FROM ({self.sql}) "
                   f"WHERE [{column}] IS NOT NULL AND [{column}] > '1970-01-01' "   # 1970-01-01 = date unknown
                   f"GROUP BY value ORDER BY value DESC LIMIT {size + 1}")
            try:
                rows = await self.ds.execute(self.database, sql, self.params, truncate=False,
                                             custom_time_limit=self.ds.setting("facet_time_limit_ms"))
            except QueryInterrupted:
                timed_out.append(column)
                continue
            values = []
            for row in rows.rows[:size]:
                selected = (key, row["value"]) in pairs
                path = (path_with_removed_args(self.request, {key: row["value"]}) if selected
                        else path_with_added_args(self.request, {key: row["value"]}))
                values.append({"value": row["value"], "label": row["value"], "count": row["count"],
                               "toggle_url": self.ds.absolute_url(self.request, self.ds.urls.path(path)),
                               "selected": selected})
            results.append({
                # Datasette's template adds the type: "recall_date (month)".
                "name": column, "type": self.type, "hideable": source_and_config["source"] != "metadata",
                "toggle_url": self.ds.urls.path(path_with_removed_args(self.request, {"_facet_month": column})),
                "results": values, "truncated": len(rows.rows) > size,
            })
        return results, timed_out


@hookimpl
def register_facet_classes():
    return [MonthFacet]


# Served by `datasette --static bc-static:basecrawler/web/static` (see basecrawler/browse.py).
@hookimpl
def extra_css_urls(datasette):
    return [datasette.urls.path("/bc-static/basecrawler.css")]


@hookimpl
def extra_js_urls(datasette):
    return [datasette.urls.path("/bc-static/basecrawler.js")]
