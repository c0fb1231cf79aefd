"""`run` and `list`: crawl sources; show the registered ones."""
from __future__ import annotations

import json
import logging

from ..errors import ConfigError
from ..progress import ProgressBar
from ..registry import discover
from ..store import Store
from . import iso_date

log = logging.getLogger("basecrawler")


def register(sub) -> None:
    run = sub.add_parser("run", help="crawl one or more sources")
    which = run.add_mutually_exclusive_group(required=True)
    which.add_argument("--source", action="append", metavar="ID", help="source id (repeatable)")
    which.add_argument("--all", action="store_true", help="every registered source")
    run.add_argument("--mode", choices=["incremental", "full"], default="incremental")
    run.add_argument("--since", type=iso_date, help="lower bound on recall_date (YYYY-MM-DD)")
    run.add_argument("--until", type=iso_date, help="upper bound on recall_date (YYYY-MM-DD)")
    run.add_argument("--record", metavar="DIR", help="save every HTTP exchange into DIR")
    run.add_argument("--replay", metavar="DIR", help="serve every HTTP request from DIR (offline)")
    run.set_defaults(func=cmd_run)

    lst = sub.add_parser("list", help="registered sources")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=cmd_list)


def run_sources(source_ids, *, settings, mode="incremental", since=None, until=None, transport=None,
                registry: dict | None = None) -> list:
    """Run each source in isolation; one failing never stops the others. Returns RunResults."""
    registry = discover() if registry is None else registry
    store = Store(settings.db_path)
    results = []
    try:
        for source_id in source_ids:
            if source_id not in registry:
                raise ConfigError(f"unknown source {source_id!r}; known sources: {', '.join(registry) or '(none)'}")
            progress = ProgressBar.for_terminal(f"{source_id} fetched", unit="items")
            crawler = registry[source_id](store, mode=mode, since=since, until=until, settings=settings,
                                          transport=transport, progress=progress)
            results.append(crawler.run())
    finally:
        store.close()
    return results


def cmd_run(args) -> int:
    registry = discover()
    if args.all:
        ids = list(registry)
    else:
        unknown = [s for s in args.source if s not in registry]
        if unknown:
            raise ConfigError(f"unknown source {unknown[0]!r}; known sources: {', '.join(registry) or '(none)'}")
        ids = list(dict.fromkeys(args.source))
    settings = args.settings.with_(record_dir=args.record, replay_dir=args.replay)
    results = run_sources(ids, settings=settings, mode=args.mode, since=args.since, until=args.until,
                          registry=registry)
    failed = [r for r in results if not r.ok]
    if len(results) > 1:
        log.info("all: %d sources, %d succeeded, %d failed or suspect (%s)", len(results),
                 len(results) - len(failed), len(failed), ", ".join(f"{r.source}={r.status}" for r in results))
    return 1 if failed else 0


def cmd_list(args) -> int:
    rows = []
    for source_id, cls in discover().items():
        rows.append({"id": source_id, "country": cls.country, "language": cls.source_lang,
                     "endpoints": dict(cls.endpoints), "two_phase": cls.has_detail_phase(),
                     "doc": (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""})
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    for row in rows:
        endpoints = " ".join(f"{k}={v}" for k, v in row["endpoints"].items())
        print(f"{row['id']:<6} {row['country']:<4} {row['language']:<4} {endpoints}  {row['doc']}")
    return 0
