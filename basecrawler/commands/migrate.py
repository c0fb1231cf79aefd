"""`migrate --to TARGET`: copy the whole store (--db) into another engine, e.g. a SQLite file
into PostgreSQL (`--to postgresql://…`) or a PostgreSQL database into a local SQLite copy
(`--to copy.db`), then compare the row counts of every table (exit 1 when one differs)."""
from __future__ import annotations

from ..engines import redact
from ..engines.transfer import copy_store
from ..store import Store


def register(sub) -> None:
    parser = sub.add_parser("migrate", help="copy the store into another database (SQLite ↔ PostgreSQL)")
    parser.add_argument("--to", required=True, metavar="TARGET",
                        help="postgresql://user@host/db or a SQLite file path; must be empty")
    parser.set_defaults(func=cmd_migrate)


def cmd_migrate(args) -> int:
    source = Store(args.settings.db_path)
    target = Store(args.to)
    try:
        counts = copy_store(source, target)   # TargetNotEmpty is a ConfigError: the CLI exits 2
    finally:
        source.close()
        target.close()
    width = max(len(t) for t in counts)
    mismatched = [t for t, (a, b) in counts.items() if a != b]
    for table, (a, b) in counts.items():
        print(f"{table:<{width}}  {a:>9} → {b:<9} {'✓' if a == b else '✗ counts differ'}")
    print(f"{'copied' if not mismatched else 'INCOMPLETE'}: {redact(args.settings.db_path)} → {redact(args.to)}")
    return 1 if mismatched else 0
