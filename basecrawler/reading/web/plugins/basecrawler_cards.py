"""Datasette plugin: a record type's cells and its card (the helpers they call live in
basecrawler/reading/web/cells.py, card.py and groups.py; no record type is named here).

- Cells: a link only for an http(s) URL, anything else as text; dates as the reader's language
  writes them ("날짜 미상" for the undated); a translated field Korean first with the original
  beneath; the best-text column the record's best text (the declaration's `display` chain),
  with "다른 출처 N" when other publishers carry the same recall (its group).
- Cards: `bc_card(table, row)` for templates/row.html, the same recall under another type or
  source (`bc_same_recall`) and the record's group (`bc_group`: the other publishers' records,
  the primary a copy belongs to).
"""
from __future__ import annotations

import contextvars
import json

import markupsafe
from datasette import hookimpl
from datasette.database import Database

from basecrawler import i18n
from basecrawler.i18n import gettext as _
from basecrawler.reading.browse import best_text_column
# One dict with the card's: a type added to it is known to both.
from basecrawler.reading.web.card import TYPES, card, facet_label, same_recall
from basecrawler.reading.web.cells import best_text_html, korean_first, link_or_text, listed, readable, unknown_date
from basecrawler.reading.web.groups import group_of, other_publishers
from basecrawler.store.engines.dialect import SQLITE



def other_sources_badge(others: int):
    """The row's mark that other publishers carry the same recall ("다른 출처 2")."""
    return markupsafe.Markup('<span class="bc-other-sources">{}</span>').format(
        _("other sources %(num)s", num=i18n.number(others)))


# What a row's cells need besides its own columns (the Korean of each translated column, the
# display chain, the other publishers), read for every row of the page in one go and kept for
# the request: fetched per cell, a page of 50 rows made ~150 trips to an SQL thread, each
# waiting its turn behind other requests' work — most of a light page's time under load.
OTHERS = "bc_other_publishers"
PAGE_ROWS_MAX = 1_000   # a result of more rows than this is not a page whose cells are drawn
PAGES_KEPT = 4          # results with ids a request remembers (its page is one of its first reads)
_extras_seen: contextvars.ContextVar[dict | None] = contextvars.ContextVar("bc_row_extras", default=None)


def row_extras_sql(record_type, table: str) -> str:
    """The statement of the rows' extras (`_row_extras`): every translated column's Korean, the
    display chain, the source's language, for the ids of a JSON list."""
    wanted = {f"{name}_ko" for name in record_type.translated}
    wanted |= {f"{b}_{kind}" for b in record_type.display for kind in ("original", "ko")}
    listed_columns = "".join(f"[{c}], " for c in sorted(wanted))
    return SQLITE.query(f"SELECT id AS bc_id, {listed_columns}source_lang FROM [{table}] "
                        "WHERE id IN (SELECT value FROM json_each(?))")


def _remember_page(database: str, sql, results) -> None:
    """The ids of a result with an `id` column read during this request: the rows whose cells
    are drawn next may be among them (their extras are then read at once). Which table they
    came from is not asked (nor read from the SQL): a row's extras are read from its own table
    by id (`_row_extras`), so ids of another table's result only cost a few rows read."""
    seen = _extras_seen.get()
    if seen is None or not isinstance(sql, str) or "id" not in (results.columns or []):
        return
    rows = results.rows
    if not rows or len(rows) > PAGE_ROWS_MAX:
        return
    column = results.columns.index("id")
    pages = seen.setdefault("pages", {}).setdefault(database, [])
    pages.append([r[column] for r in rows])
    del pages[:-PAGES_KEPT]


async def _row_extras(datasette, database: str, table: str, row) -> dict:
    """The row's extras, with the other publishers' count when its best-text cell is shown;
    read with those of the rest of its page."""
    record_type = TYPES[table]
    row_id = row["id"]
    counts_others = best_text_column(record_type) in (row.keys() if hasattr(row, "keys") else ())
    key = (database, table, row_id)
    seen = _extras_seen.get()
    if seen is not None and key in seen and (OTHERS in seen[key] or not counts_others):
        return seen[key]
    pages = (seen or {}).get("pages", {}).get(database, [])
    ids = next((page for page in reversed(pages) if row_id in page), [row_id])
    statement = row_extras_sql(record_type, table)

    def read(conn):
        cursor = conn.execute(statement, [json.dumps(ids)])
        names = [d[0] for d in cursor.description]
        found = {}
        for values in cursor:
            extras = dict(zip(names, values))
            found[extras.pop("bc_id")] = extras
        if counts_others:
            for extras_id, extras in found.items():
                extras[OTHERS] = other_publishers(conn, record_type, extras_id)
        return found
    found = await datasette.get_database(database).execute_fn(read)
    if seen is not None:
        seen.update({(database, table, i): extras for i, extras in found.items()})
    return found.get(row_id, {})


_datasette_execute = Database.execute


async def _remembering_execute(self, sql, params=None, *args, **kwargs):
    results = await _datasette_execute(self, sql, params, *args, **kwargs)
    _remember_page(self.name, sql, results)
    return results


Database.execute = _remembering_execute


@hookimpl
def asgi_wrapper(datasette):
    """Each request keeps its rows' extras (`_row_extras`) for itself."""
    def wrap(app):
        async def keeping(scope, receive, send):
            token = _extras_seen.set({})
            try:
                await app(scope, receive, send)
            finally:
                _extras_seen.reset(token)
        return keeping
    return wrap


@hookimpl
def render_cell(row, value, column, table, database, datasette):
    record_type = TYPES.get(table)
    if record_type is None:
        return None
    if column in record_type.url_fields:
        return link_or_text(value) if value else None
    if column == record_type.date_field and unknown_date(record_type, value):
        return markupsafe.Markup('<span class="bc-date-unknown">{}</span>').format(_("date unknown"))
    if column == record_type.date_field or column in record_type.date_columns:
        return i18n.date(value) if value else None
    if column == "country" and value:
        return readable(column, value)
    if column.endswith("_original") and column[: -len("_original")] in record_type.translated and value:
        async def pair():
            # Korean first, the original under it: the row holds only the columns on screen.
            found = await _row_extras(datasette, database, table, row)
            return korean_first(found.get(f"{column[: -len('_original')]}_ko"), value, found.get("source_lang") or "")
        return pair
    if isinstance(value, int) and not isinstance(value, bool) and column != "id" and column not in record_type.key:
        return i18n.number(value)
    facet = record_type.facet(column)
    if facet is not None and facet.multi and value:
        words = listed(value)
        return None if words is None else words
    if column == best_text_column(record_type):
        async def best():
            # The row holds only the columns on screen: the display chain, read by id.
            found = await _row_extras(datasette, database, table, row)
            text = best_text_html(record_type, {k: v for k, v in found.items() if k != OTHERS})
            others = found.get(OTHERS)
            return text + other_sources_badge(others) if others else text
        return best
    return None


def group_links(datasette, database: str, table: str, found: dict) -> dict:
    """The card's group: each other record with its publisher, number and card link."""
    def linked(item):
        return {**item, "url": datasette.urls.row(database, table, str(item["id"]))}
    return {"primary": linked(found["primary"]) if found["primary"] else None,
            "others": [linked(o) for o in found["others"]]}


@hookimpl
def extra_template_vars(view_name, table, database, request, datasette):
    context = {"bc_card": card, "bc_facet_label": facet_label, "bc_same_recall": [], "bc_group": None}
    if view_name != "row" or table not in TYPES or request is None:
        return context

    async def with_same_recall():
        row_id = request.url_vars.get("pks")
        if row_id and row_id.isdigit():
            db = datasette.get_database(database)
            found = await db.execute_fn(lambda conn: group_of(conn, TYPES[table], int(row_id)))
            grouped = {o["id"] for o in found["others"]}
            same = await same_recall(datasette, database, table, int(row_id))
            # A record of the group is listed once, under the group.
            context["bc_same_recall"] = [s for s in same if s.get("table") != table or s.get("id") not in grouped]
            context["bc_group"] = group_links(datasette, database, table, found) if found["others"] else None
        return context
    return with_same_recall
