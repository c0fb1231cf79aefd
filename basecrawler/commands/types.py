"""`types`: the record types this installation knows — each with its table, key, date field,
fields (labels, translated or not), facets and how many records it holds per source;
`--json` for machines. Without a database it still lists the types (no counts), and it
never creates one."""
from __future__ import annotations

import json
from pathlib import Path

from basecrawler.i18n import gettext as _, number
from basecrawler.store.engines import is_postgres_url
from basecrawler.recordtypes import RecordType, record_types
from basecrawler.reading.search import counts_by_type
from basecrawler.store.core import Store
from basecrawler.reading.tables import render_table
from basecrawler.commands import add_lang_argument, check_existing_database, in_reader_language


def register(sub) -> None:
    parser = sub.add_parser("types", help="record types with their fields, facets and counts")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_lang_argument(parser)
    parser.set_defaults(func=cmd_types)


def describe(record_type: RecordType, counts: dict[str, int] | None) -> dict:
    translated = set(record_type.translated)
    fields = []
    for column in record_type.data_columns:
        base = column[: -len("_original")] if column.endswith("_original") else None
        fields.append({"field": base or column, "label": record_type.label(column),
                       "translated": base in translated})
    return {
        "name": record_type.name,
        "title": record_type.title,
        "table": record_type.table,
        "key": list(record_type.key_columns),
        "date_field": record_type.date_field,
        "fields": fields,
        "facets": [{"field": f.field, "label": f.label, "multi": f.multi} for f in record_type.facets],
        "display": list(record_type.display),
        "records": None if counts is None else sum(counts.values()),
        "sources": counts,
    }


def _counts(settings) -> dict[str, dict[str, int]] | None:
    path = settings.db_path
    if not is_postgres_url(path) and not Path(path).is_file():
        return None   # no database: the types, without counts
    check_existing_database(settings)   # an empty or foreign file stays untouched
    store = Store(path)
    try:
        return counts_by_type(store.db.conn)
    finally:
        store.close()


@in_reader_language
def cmd_types(args) -> int:
    counts = _counts(args.settings)
    types = [describe(t, None if counts is None else counts.get(name, {})) for name, t in record_types().items()]
    if args.json:
        print(json.dumps(types, indent=2, ensure_ascii=False))
        return 0
    for line in types_lines(types):
        print(line)
    if counts is None:
        print("\n" + _("(no database at %(path)s: no counts)", path=args.settings.db_path))
    return 0


def types_lines(types: list[dict]) -> list[str]:
    """What a person reads, in the reader's language: a table of the types, then each type's
    table, key, fields (by their declared labels) and display rule. Names a command takes
    (the type name, the field names `--filter` takes) stay as they are, beside the labels."""
    lines = [render_table([_("type"), _("title"), _("records"), _("sources"), _("facets")],
                          [[t["name"], _(t["title"]), "-" if t["records"] is None else number(t["records"]),
                            ", ".join(f"{s} {number(n)}" for s, n in (t["sources"] or {}).items()),
                            ", ".join(f["field"] + (" " + _("(multi)") if f["multi"] else "") for f in t["facets"])]
                           for t in types], align=["<", "<", ">"])]
    translated, otherwise = _("translated"), _(", else ")
    for t in types:
        lines.append("")
        lines.append(_("%(name)s (%(title)s): table %(table)s, key %(key)s, date %(date)s", name=t["name"],
                       title=_(t["title"]), table=t["table"], key=", ".join(t["key"]),
                       date=t["date_field"] or _("none")))
        fields = ", ".join(f"{f['field']} ({_(f['label'])}" + (f", {translated})" if f["translated"] else ")")
                           for f in t["fields"])
        lines.append("  " + _("fields: %(fields)s", fields=fields))
        lines.append("  " + _("shown by: %(fields)s", fields=otherwise.join(t["display"]) or "-"))
    return lines
