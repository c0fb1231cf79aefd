"""`search`: find records of any type (`--type`, default: vehicle recalls) by text (Japanese,
Korean, English …) and filters; a table for people, `--json` for machines. Also holds the
filter options that `export` shares."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import replace

from basecrawler.formats.countries import country_codes
from basecrawler.errors import ConfigError
from basecrawler.i18n import gettext as _, number
from basecrawler.recordtypes import RecordType, get_record_type, record_types
from basecrawler.recordtypes.registry import UnknownRecordType
from basecrawler.pipeline.registry import discover, known_countries
from basecrawler.reading.search import (BEST_TEXT, COUNT_CAP, DEFAULT_TYPE, MAX_QUERY_CHARS, MAX_QUERY_TERMS, RecallFilter,
                                       check_facets, check_query_size, count_upto, has_korean, search,
                                       translation_progress, untranslated_hint)
from basecrawler.store.core import Store
from basecrawler.reading.tables import clip, display_width, render_table
from basecrawler.commands import (add_lang_argument, check_source, in_reader_language, iso_date, positive_int,
                                  require_database)


def _year(text: str) -> int:
    if not (text.isdigit() and len(text) == 4):
        raise argparse.ArgumentTypeError(f"not a model year (YYYY): {text!r}")
    return int(text)


def facet_pair(text: str) -> tuple[str, str]:
    """argparse type for FIELD=VALUE."""
    field, sep, value = text.partition("=")
    if not sep or not field.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"not FIELD=VALUE: {text!r}")
    return field.strip(), value.strip()


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """The filters search and export share; all combine with AND."""
    parser.add_argument("--type", default=None, metavar="NAME",
                        help=f"record type (default {DEFAULT_TYPE}; `search` then also counts the matches of "
                             "every other type; `basecrawler types` lists them)")
    parser.add_argument("--filter", action="append", type=facet_pair, default=[], metavar="FIELD=VALUE",
                        help="a facet of the type equals VALUE (any value of a multi-valued one; repeatable)")
    parser.add_argument("--country", action="append", metavar="CC",
                        help="country code or name, e.g. JP or Japan (repeatable or comma-separated)")
    parser.add_argument("--manufacturer", metavar="TEXT", help="manufacturer: the same normalised maker (Ford = FORD MOTOR CO.) or a name containing TEXT (original or Korean)")
    parser.add_argument("--model", metavar="TEXT", help="model contains TEXT (original or Korean)")
    parser.add_argument("--year", type=_year, metavar="YYYY", help="model year (inside a range like 2019-2021 too)")
    parser.add_argument("--since", type=iso_date, metavar="DATE", help="record date on or after (YYYY-MM-DD)")
    parser.add_argument("--until", type=iso_date, metavar="DATE", help="record date on or before (YYYY-MM-DD)")
    parser.add_argument("--source", metavar="ID", help="only records of this source")
    parser.add_argument("--all-copies", action="store_true",
                        help="show every publisher's copy of a recall as its own record (default: one per group)")


def filter_from_args(args, text: str | None = None) -> RecallFilter:
    """The filter the options describe; an unknown type or an undeclared facet is a usage
    error (exit 2) before any database is opened."""
    check_query_size(text)
    try:
        record_type = get_record_type(args.type or DEFAULT_TYPE)
    except UnknownRecordType as exc:   # its KeyError side would print the message in quotes
        raise ConfigError(f"unknown record type {exc.name!r}; known: {', '.join(exc.known) or 'none'}") from None
    facets = tuple(args.filter or ())
    check_facets(record_type, facets)
    # names or codes; one no source publishes is a usage error
    countries = country_codes(args.country, known_countries()) if args.country else ()
    return RecallFilter(text=text, countries=countries, manufacturer=args.manufacturer, model=args.model,
                        year=args.year, since=args.since, until=args.until, source=args.source,
                        record_type=record_type.name, facets=facets, all_copies=bool(getattr(args, "all_copies", False)))


def register(sub) -> None:
    parser = sub.add_parser("search", help="find records by text and filters")
    parser.add_argument("text", nargs="*", help="words that must all appear (any language; 1+ characters; "
                        f"at most {MAX_QUERY_TERMS} words, {MAX_QUERY_CHARS:,} characters)")
    add_filter_arguments(parser)
    parser.add_argument("--limit", type=positive_int, default=50, help="at most this many results (default 50)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_lang_argument(parser)
    parser.set_defaults(func=cmd_search)


@in_reader_language
def cmd_search(args) -> int:
    filters = filter_from_args(args, " ".join(args.text) or None)   # usage errors before the database
    require_database(args.settings)
    check_source(args.source, discover())
    store = Store(args.settings.db_path)
    try:
        matched = {}
        if args.type is None and not args.json:   # one search over everything: every type counted
            matched = matches_by_type(store.db.conn, filters)
            if not matched.get(filters.record_type) and any(matched.values()):
                # Nothing of the default type: the type with the most matches is shown instead.
                filters = replace(filters, record_type=max(matched, key=matched.get))
        rows = search(store.db.conn, filters, limit=args.limit)
        total = count_upto(store.db.conn, filters) if not args.json else None
        if args.json:
            hint = untranslated_hint(store.db.conn, filters) if not rows else None
        else:
            hint = korean_hint(store.db.conn, filters) if not rows else None
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        if hint:  # stdout stays pure JSON for machines
            print(f"basecrawler: {hint}", file=sys.stderr)
        return 0
    record_type = filters.declaration()
    print_table(record_type, rows, sys.stdout)
    print(count_line(record_type, len(rows), total))
    if hint:
        print(hint)
    if len([n for n in matched.values() if n]) > 1 or (matched and filters.record_type != (args.type or DEFAULT_TYPE)):
        print(matched_line(matched))
    return 0


# ---- the lines a person reads, in the reader's language (basecrawler/i18n) ----------------------
def count_line(record_type: RecordType, shown: int, total: int) -> str:
    """"3 of 12 matching vehicle recalls (newest first; --limit for more)" / "일치하는 차량 리콜 12 중 3건 …"."""
    matching = _("more than %(num)s", num=number(COUNT_CAP)) if total > COUNT_CAP else number(total)
    line = _("%(shown)s of %(total)s matching %(type)s", shown=number(shown), total=matching,
             type=_(record_type.title).lower())
    return line + (_(" (newest first; --limit for more)") if total > shown else "")


def korean_hint(conn, filters: RecallFilter) -> str | None:
    """A Korean query that found nothing while records are untranslated: say how far
    translation is (Korean words only find translated records)."""
    if not has_korean(filters.text):
        return None
    translated, total = translation_progress(conn, filters)
    if translated >= total:
        return None
    return _("Korean words only find translated records: %(translated)s of %(total)s %(type)s translated. "
             "Search the original language too, or run `basecrawler translate`.",
             translated=number(translated), total=number(total), type=_(filters.declaration().title).lower())


def matches_by_type(conn, filters: RecallFilter) -> dict[str, int]:
    """{type name: matching records (up to the cap)} for every type the filters apply to."""
    counts = {}
    for name in record_types():
        try:
            counts[name] = count_upto(conn, replace(filters, record_type=name))
        except ConfigError:   # a facet or option that type does not have: it cannot match
            continue
    return counts


def matched_line(matched: dict[str, int]) -> str:
    """"찾은 곳: 제품 경보 2 · 차량 리콜 0 (--type NAME으로 좁힘)" / "Matched: Product alerts 2 · …"."""
    order = sorted(matched, key=lambda name: -matched[name])
    def part(name):
        count = number(COUNT_CAP) + "+" if matched[name] > COUNT_CAP else number(matched[name])
        return f"{_(get_record_type(name).title)} {count}"
    return _("Matched: %(types)s (--type NAME narrows)", types=" · ".join(part(name) for name in order))


# ---- the table -------------------------------------------------------------------------------
COLUMN_MAX = 18      # every listed column is cut to this many terminal columns …
TEXT_MIN = 20        # … and the record's best text takes the rest of the line (at least this)


def _heading(record_type: RecordType, column: str) -> str:
    return _(record_type.label(column)).lower()


def _cell(record_type: RecordType, column: str, row: dict):
    """A listed column's value as shown: Korean beside an original when translated; an
    unknown date says so."""
    if column == record_type.date_field and row.get("date_unknown"):
        return _("date unknown")
    if column.endswith("_original"):
        return row.get(column[: -len("_original")] + "_ko") or row.get(column)
    value = row.get(column)
    return ", ".join(map(str, value)) if isinstance(value, list) else value


def table_rows(record_type: RecordType, rows: list[dict], total_width: int) -> tuple[list[str], list[list[str]]]:
    """Headings and cells: the type's `listing` columns, each cut to COLUMN_MAX, then the best
    text cut to what is left of `total_width`."""
    columns = list(record_type.listing)
    headings = [_heading(record_type, c) for c in columns] + [_("text")]
    cells = [[clip(" ".join(str(_cell(record_type, c, row) or "").split()), COLUMN_MAX) for c in columns]
             for row in rows]
    widths = [max([display_width(h), *(display_width(r[i]) for r in cells)]) for i, h in enumerate(headings[:-1])]
    rest = max(total_width - sum(widths) - 2 * len(widths) - 1, TEXT_MIN)
    for row, cut in zip(rows, cells):
        cut.append(clip(" ".join(str(row.get(BEST_TEXT) or "").split()), rest))
    return headings, cells


def print_table(record_type: RecordType, rows: list[dict], out) -> None:
    total_width = max(shutil.get_terminal_size((160, 24)).columns, 80)
    headings, cells = table_rows(record_type, rows, total_width)
    out.write(render_table(headings, cells) + "\n")
