"""What a record's card shows (templates/row.html), read from its type's declaration: heading,
number, facts, texts, links, in the reader's language; and the same recall published under
another type or source (`same_as_field`). No Datasette hooks here (plugins/basecrawler_cards.py)."""
from __future__ import annotations

from basecrawler import i18n
from basecrawler.i18n import gettext as _
from basecrawler.reading.browse import http_url, types_by_table
from basecrawler.reading.web.cells import listed, readable, unknown_date
from basecrawler.recordtypes.declaration import as_read
from basecrawler.store.engines.dialect import SQLITE

TYPES = types_by_table()


def card(table: str, row) -> dict | None:
    """What templates/row.html shows for a record of a type: heading (what was recalled, the
    declaration's `heading`, Korean first), its number, facts, texts, links; labels in the
    reader's language."""
    record_type = TYPES.get(table)
    if record_type is None or row is None:
        return None
    row = dict(row) if isinstance(row, dict) else dict(zip(row.keys(), tuple(row)))   # a sqlite3.Row
    facts, texts, links = [], [], []
    lang = row.get("source_lang")
    for name in record_type.card:
        if name in record_type.translated:
            korean, original = as_read(row.get(f"{name}_ko"), row.get(f"{name}_original"), lang)
            if (original or korean) and name not in record_type.heading:
                texts.append({"field": name, "label": _(record_type.label(f"{name}_original")),
                              "original": original, "korean": korean})
        elif name in record_type.url_fields:
            if row.get(name):
                links.append({"label": _(record_type.label(name)), "url": http_url(row[name]), "text": row[name]})
        elif name == record_type.date_field and (row.get("date_unknown") or unknown_date(record_type, row.get(name))):
            facts.append({"label": _(record_type.label(name)), "value": _("date unknown")})
        elif name in record_type.heading or name in record_type.key:
            continue   # in the heading or the number line
        elif record_type.facet(name) is not None and record_type.facet(name).multi:
            if row.get(name) not in (None, "", "[]"):
                facts.append({"label": _(record_type.label(name)), "value": listed(row[name]) or row[name]})
        elif row.get(name) not in (None, ""):
            facts.append({"label": _(record_type.label(name)), "value": _fact(record_type, name, row[name])})
    for facet in record_type.facets:   # facet values the card does not show otherwise (e.g. a normalised key)
        if facet.field not in record_type.card and row.get(facet.field) not in (None, ""):
            facts.append({"label": _(record_type.label(facet.field)), "value": row[facet.field]})
    title, title_original = heading(record_type, row)
    number = " · ".join(f"{_(record_type.label(k))} {readable(k, row.get(k))}" for k in record_type.key
                        if row.get(k) not in (None, "") and k not in record_type.heading)
    return {"title": title, "title_original": title_original, "number": number,
            "type": _(record_type.title), "lang": row.get("source_lang") or "",
            "facts": facts, "texts": texts, "links": links}


def _fact(record_type, name: str, value):
    if isinstance(value, bool) or name == "archived":
        return _("yes") if value else _("no")
    if isinstance(value, int):
        return i18n.number(value)
    if name in record_type.date_columns:
        return i18n.date(value)
    return readable(name, value)


def heading(record_type, row: dict) -> tuple[str, str | None]:
    """(the heading, the original beneath it when the heading is Korean): the declared
    `heading` fields joined, each translated one in Korean where translated; else the best text."""
    shown, originals, translated = [], [], False
    lang = row.get("source_lang")
    for name in record_type.heading:
        if name in record_type.translated:
            korean, original = as_read(row.get(f"{name}_ko"), row.get(f"{name}_original"), lang)
            translated = translated or bool(korean)
            shown.append(korean or original)
            originals.append(original)
        else:
            shown.append(row.get(name))
            originals.append(row.get(name))
    words = " ".join(str(v) for v in shown if v not in (None, ""))
    if not words:
        korean, original = record_type.best_text(row)
        words, translated, originals = korean or original or "", bool(korean), [original]
    beneath = " ".join(str(v) for v in originals if v not in (None, "")) if translated else None
    return (words or " ".join(str(row.get(k) or "") for k in record_type.key).strip()), beneath or None


def facet_label(table: str, name: str) -> str | None:
    record_type = TYPES.get(table)
    facet = record_type.facet(name) if record_type else None
    return facet.label if facet else None


async def same_recall(datasette, database: str, table: str, row_id) -> list[dict]:
    """Records of any type, from any source, that carry the same publisher number in the same
    country (`same_as_field`): the same recall published twice, linked and never merged."""
    record_type = TYPES.get(table)
    if record_type is None or not record_type.same_as_field:
        return []
    db = datasette.get_database(database)
    this = (await db.execute(SQLITE.query(f"SELECT country, [{record_type.same_as_field}] AS number "
                                          f"FROM [{table}] WHERE id = ?"), [row_id])).first()
    if this is None or not this["number"]:
        return []
    present = set(await db.table_names())
    found = []
    for other_table, other in TYPES.items():
        if not other.same_as_field or other_table not in present:
            continue
        rows = await db.execute(SQLITE.query(
            f"SELECT id, source FROM [{other_table}] WHERE country = ? AND "
            f"[{other.same_as_field}] = ? AND NOT (? = '{other_table}' AND id = ?) LIMIT 20"),
            [this["country"], this["number"], table, row_id])
        found += [{"url": datasette.urls.row(database, other_table, str(r["id"])), "table": other_table, "id": r["id"],
                   "label": f"{_(other.title)} · {_('Source')} {r['source']} · {this['number']}"} for r in rows.rows]
    return found
