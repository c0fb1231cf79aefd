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

import markupsafe
from datasette import hookimpl

from basecrawler import i18n
from basecrawler.i18n import gettext as _
from basecrawler.reading.browse import best_text_column
# One dict with the card's: a type added to it is known to both.
from basecrawler.reading.web.card import TYPES, card, facet_label, same_recall
from basecrawler.reading.web.cells import best_text_html, korean_first, link_or_text, listed, unknown_date
from basecrawler.reading.web.groups import group_of, other_publishers
from basecrawler.store.engines.dialect import SQLITE



def other_sources_badge(others: int):
    """The row's mark that other publishers carry the same recall ("다른 출처 2")."""
    return markupsafe.Markup('<span class="bc-other-sources">{}</span>').format(
        _("other sources %(num)s", num=i18n.number(others)))


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
    if column.endswith("_original") and column[: -len("_original")] in record_type.translated and value:
        async def pair():
            # Korean first, the original under it: the row holds only the columns on screen.
            db = datasette.get_database(database)
            found = (await db.execute(SQLITE.query(f"SELECT [{column[: -len('_original')]}_ko] AS ko, source_lang "
                                                   f"FROM [{table}] WHERE id = ?"), [row["id"]])).first()
            return korean_first(found["ko"] if found else None, value, (found["source_lang"] if found else "") or "")
        return pair
    if isinstance(value, int) and not isinstance(value, bool) and column != "id" and column not in record_type.key:
        return i18n.number(value)
    facet = record_type.facet(column)
    if facet is not None and facet.multi and value:
        words = listed(value)
        return None if words is None else words
    if column == best_text_column(record_type):
        async def best():
            # The row holds only the columns on screen: fetch the display chain by id.
            wanted = ", ".join(f"[{b}_original], [{b}_ko]" for b in record_type.display)
            db = datasette.get_database(database)
            found = (await db.execute(SQLITE.query(f"SELECT {wanted}, source_lang FROM [{table}] WHERE id = ?"),
                                      [row["id"]])).first()
            text = best_text_html(record_type, dict(found) if found else {})
            others = await db.execute_fn(lambda conn: other_publishers(conn, record_type, row["id"]))
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
