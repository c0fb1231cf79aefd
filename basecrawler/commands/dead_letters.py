"""`dead-letters [list|retry]`: what could not be stored, and re-parsing it from the kept raw
input with the current parser (after a parser fix) without fetching again."""
from __future__ import annotations

import json

from basecrawler.errors import EXIT_OK
from basecrawler.pipeline.registry import discover, get_source
from basecrawler.store.core import Store
from basecrawler.reading.tables import render_table
from basecrawler.commands import check_source, require_database


# A cell wider than this is cut with "…": the full error is in `--json`.
ERROR_COLUMNS = 80


def register(sub) -> None:
    parser = sub.add_parser("dead-letters", help="list or retry records that could not be stored")
    parser.add_argument("action", nargs="?", choices=["list", "retry"], default="list",
                        help="list (default) or retry: re-parse open parse/store letters from the kept raw input")
    parser.add_argument("--source", metavar="ID", help="only this source")
    parser.add_argument("--all", action="store_true", help="list resolved ones too")
    parser.add_argument("--json", action="store_true", help="print JSON (every field, errors uncut)")
    parser.add_argument("--limit", type=int, default=100, help="rows to list (default 100)")
    parser.set_defaults(func=cmd_dead_letters)


def cmd_dead_letters(args) -> int:
    require_database(args.settings)  # nothing to list or retry in a database that does not exist
    check_source(args.source, discover())
    store = Store(args.settings.db_path)
    try:
        if args.action == "retry":
            return _retry(args, store)
        return _list(args, store)
    finally:
        store.close()


def _list(args, store: Store) -> int:
    rows = store.dead_letters.list_dead_letters(args.source, include_resolved=args.all, limit=args.limit)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print("no dead letters")
        return EXIT_OK
    table = [[row["id"], row["source"], row["stage"], row["kind"], "resolved" if row["resolved_at"] else "open",
              row["record_key"] or row["url"] or "", row["error"]] for row in rows]
    print(render_table(["id", "source", "stage", "kind", "state", "record key or URL", "error"], table,
                       align=[">"], max_width=ERROR_COLUMNS))
    return EXIT_OK


def _retry(args, store: Store) -> int:
    sources = [args.source] if args.source else store.dead_letters.sources_with_open_dead_letters()
    registry = discover()
    totals = {"retried": 0, "resolved": 0, "still_failing": 0}
    for source_id in sources:
        if source_id not in registry:
            get_source(source_id)  # raises UnknownSource with the list of known ids
        crawler = registry[source_id](store, settings=args.settings)
        outcome = crawler.retry_dead_letters()
        for key in totals:
            totals[key] += outcome[key]
    print(f"dead letters: retried {totals['retried']}, resolved {totals['resolved']}, still failing {totals['still_failing']}")
    return EXIT_OK
