"""`migrate --to TARGET`: copy the whole store (--db) into another engine, e.g. a SQLite file
into PostgreSQL (`--to postgresql://…`) or a PostgreSQL database into a local SQLite copy
(`--to copy.db`). Every table the source database holds is copied (discovered, not listed),
then the row counts of each are compared: exit TransferFailed's code (1) naming every table
that could not be copied or whose counts differ; ✓ only for a table copied whole."""
from __future__ import annotations

import sys

from basecrawler.errors import EXIT_OK, CrawlerError
from basecrawler.store.engines import redact, scrub
from basecrawler.store.engines.transfer import TransferFailed, copy_store, failed_tables
from basecrawler.store.core import Store


def register(sub) -> None:
    parser = sub.add_parser("migrate", help="copy the store into another database (SQLite ↔ PostgreSQL)")
    parser.add_argument("--to", required=True, metavar="TARGET",
                        help="postgresql://user@host/db or a SQLite file path; must be empty")
    parser.set_defaults(func=cmd_migrate)


def _open_target(target: str) -> Store | None:
    """The target store, or None after one line naming it (never the source) and why."""
    from basecrawler.errors import ConfigError

    try:
        return Store(target)
    except ConfigError:
        raise   # already one line naming the target (an invalid URL): exit 2
    except Exception as exc:   # unreachable server, unusable file: "the database cannot be opened"
        text = scrub(" ".join(str(exc).split()), target)
        where = redact(target)
        print(f"basecrawler: cannot open the target {where}: {text}" if where not in text else f"basecrawler: {text}",
              file=sys.stderr)
        return None


def cmd_migrate(args) -> int:
    source = Store(args.settings.db_path)
    try:
        target = _open_target(args.to)
        if target is None:
            return CrawlerError.exit_code
        try:
            result = copy_store(source, target)   # TargetNotEmpty is a ConfigError: the CLI exits 2
        finally:
            target.close()
    finally:
        source.close()
    width = max((len(t) for t in result), default=5)
    for table, copy in result.items():
        verdict = "✓" if copy.ok else f"✗ {copy.error or 'counts differ'}"
        made = " (created in the target)" if copy.created else ""
        target_rows = "?" if copy.target_rows is None else copy.target_rows
        print(f"{table:<{width}}  {copy.source_rows:>9} → {target_rows!s:<9} {verdict}{made}")
    failed = failed_tables(result)
    if failed:
        print(f"INCOMPLETE: {redact(args.settings.db_path)} → {redact(args.to)}; not copied: {', '.join(failed)}")
        return TransferFailed.exit_code
    print(f"copied {len(result)} tables: {redact(args.settings.db_path)} → {redact(args.to)}")
    return EXIT_OK
