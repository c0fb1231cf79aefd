"""`search`: find recalls by text (Japanese, Korean, English …) and filters; a table for people,
`--json` for machines. Also holds the filter options that `export` shares."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import unicodedata

from ..registry import discover
from ..search import MAX_QUERY_CHARS, MAX_QUERY_TERMS, RecallFilter, check_query_size, count, search, untranslated_hint
from ..store import Store
from . import check_source, iso_date, positive_int, require_database


def _year(text: str) -> int:
    if not (text.isdigit() and len(text) == 4):
        raise argparse.ArgumentTypeError(f"not a model year (YYYY): {text!r}")
    return int(text)


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """The filters search and export share; all combine with AND."""
    parser.add_argument("--country", action="append", metavar="CC",
                        help="country code, e.g. JP (repeatable or comma-separated)")
    parser.add_argument("--manufacturer", metavar="TEXT", help="manufacturer: the same normalised maker (Ford = FORD MOTOR CO.) or a name containing TEXT (original or Korean)")
    parser.add_argument("--model", metavar="TEXT", help="model contains TEXT (original or Korean)")
    parser.add_argument("--year", type=_year, metavar="YYYY", help="model year (inside a range like 2019-2021 too)")
    parser.add_argument("--since", type=iso_date, metavar="DATE", help="recall date on or after (YYYY-MM-DD)")
    parser.add_argument("--until", type=iso_date, metavar="DATE", help="recall date on or before (YYYY-MM-DD)")
    parser.add_argument("--source", metavar="ID", help="only records of this source")


def filter_from_args(args, text: str | None = None) -> RecallFilter:
    countries = tuple(c.strip().upper() for value in (args.country or []) for c in value.split(",") if c.strip())
    return RecallFilter(text=text, countries=countries, manufacturer=args.manufacturer, model=args.model,
                        year=args.year, since=args.since, until=args.until, source=args.source)


def register(sub) -> None:
    parser = sub.add_parser("search", help="find recalls by text and filters")
    parser.add_argument("text", nargs="*", help="words that must all appear (any language; 1+ characters; "
                        f"at most {MAX_QUERY_TERMS} words, {MAX_QUERY_CHARS:,} characters)")
    add_filter_arguments(parser)
    parser.add_argument("--limit", type=positive_int, default=50, help="at most this many results (default 50)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=cmd_search)


def cmd_search(args) -> int:
    check_query_size(" ".join(args.text))   # a usage error before the database is touched
    require_database(args.settings)
    check_source(args.source, discover())
    filters = filter_from_args(args, " ".join(args.text) or None)
    store = Store(args.settings.db_path)
    try:
        rows = search(store.db.conn, filters, limit=args.limit)
        total = count(store.db.conn, filters) if not args.json else None
        hint = untranslated_hint(store.db.conn, filters) if not rows else None
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        if hint:  # stdout stays pure JSON for machines
            print(f"basecrawler: {hint}", file=sys.stderr)
        return 0
    print_table(rows, sys.stdout)
    print(f"{len(rows)} of {total} matching recalls" + (" (newest first; --limit for more)" if total > len(rows) else ""))
    if hint:
        print(hint)
    return 0


# ---- the table -------------------------------------------------------------------------------
TABLE_COLUMNS = (  # (heading, how to get the value, max width or None for "the rest")
    ("date", lambda r: r["recall_date"] if not r.get("date_unknown") else "unknown", 10),
    ("cc", lambda r: r["country"], 2),
    ("number", lambda r: r["recall_number"], 16),
    ("manufacturer", lambda r: r.get("manufacturer_ko") or r.get("manufacturer_original"), 18),
    ("model", lambda r: r.get("model_ko") or r.get("model_original"), 18),
    ("year", lambda r: r.get("model_year"), 9),
    ("summary", lambda r: r.get("summary_ko") or r.get("summary_original"), None),
)


def display_width(text: str) -> int:
    """Terminal columns `text` takes: CJK and Hangul are two columns wide."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 0 if unicodedata.combining(ch) else 1
               for ch in text)


def fit(text: str, width: int) -> str:
    """`text` cut (with …) or padded to exactly `width` terminal columns."""
    text = " ".join(str(text or "").split())
    if display_width(text) > width:
        out, used = [], 0
        for ch in text:
            w = display_width(ch)
            if used + w > width - 1:
                break
            out.append(ch)
            used += w
        text = "".join(out) + "…"
    return text + " " * (width - display_width(text))


def print_table(rows: list[dict], out) -> None:
    total_width = max(shutil.get_terminal_size((160, 24)).columns, 80)
    fixed = sum(w for _, _, w in TABLE_COLUMNS if w) + 2 * (len(TABLE_COLUMNS) - 1)
    rest = max(total_width - fixed - 1, 20)
    widths = [w or rest for _, _, w in TABLE_COLUMNS]
    out.write("  ".join(fit(h, w) for (h, _, _), w in zip(TABLE_COLUMNS, widths)).rstrip() + "\n")
    for row in rows:
        cells = [fit(get(row), w) for (_, get, _), w in zip(TABLE_COLUMNS, widths)]
        out.write("  ".join(cells).rstrip() + "\n")
