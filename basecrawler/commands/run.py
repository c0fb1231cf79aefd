"""`run` and `list`: crawl sources; show the registered ones."""
from __future__ import annotations

import json
import logging
import sys

from pathlib import Path

from basecrawler.store.diskfull import disk_full_line
from basecrawler.errors import EXIT_OK, ConfigError, Interrupted, SourceFailed, UnknownSource, UnusablePath
from basecrawler.operations.progress import ProgressBar
from basecrawler.pipeline.registry import discover
from basecrawler.pipeline.runner import run_sources, stop_on_signals
from basecrawler.commands import iso_date

log = logging.getLogger("basecrawler")


def register(sub) -> None:
    run = sub.add_parser("run", help="crawl one or more sources")
    which = run.add_mutually_exclusive_group(required=True)
    which.add_argument("--source", action="append", metavar="ID", help="source id (repeatable)")
    which.add_argument("--all", action="store_true", help="every registered source")
    run.add_argument("--mode", choices=["incremental", "full"], default="incremental",
                     help="incremental: from the newest stored date minus an overlap (default); full: everything")
    run.add_argument("--since", type=iso_date, help="lower bound on each record's date (YYYY-MM-DD)")
    run.add_argument("--until", type=iso_date, help="upper bound on each record's date (YYYY-MM-DD)")
    run.add_argument("--record", metavar="DIR", help="save every HTTP exchange into DIR")
    run.add_argument("--replay", metavar="DIR", help="serve every HTTP request from DIR (offline)")
    run.set_defaults(func=cmd_run)

    lst = sub.add_parser("list", help="registered sources")
    lst.add_argument("--json", action="store_true", help="print JSON")
    lst.set_defaults(func=cmd_list)


def cmd_run(args) -> int:
    registry = discover()
    if args.all:
        ids = list(registry)
    else:
        unknown = [s for s in args.source if s not in registry]
        if unknown:
            raise UnknownSource(unknown[0], list(registry))
        ids = list(dict.fromkeys(args.source))
    if args.replay is not None and not Path(args.replay).is_dir():
        raise ConfigError(f"--replay {args.replay}: no such folder")
    settings = args.settings.with_(record_dir=args.record, replay_dir=args.replay)
    with stop_on_signals() as stop:
        summary = run_sources({i: registry[i] for i in ids}, settings=settings, mode=args.mode, since=args.since,
                              until=args.until, stop=stop,
                              progress_factory=lambda i: ProgressBar.for_terminal(f"{i} fetched", unit="items"))
    if summary.disk_full:
        print(f"basecrawler: {disk_full_line(settings.db_path)}", file=sys.stderr)
        return UnusablePath.exit_code   # a place that cannot be written, like the CLI's other OSErrors
    if summary.stopped:
        return Interrupted.exit_code
    return EXIT_OK if summary.ok else SourceFailed.exit_code


def cmd_list(args) -> int:
    from basecrawler.reading.tables import render_table   # wcwidth: not a crawl's business
    from basecrawler.pipeline.registry import configure_hint, unconfigured

    rows = []
    for source_id, cls in discover().items():
        missing = unconfigured(cls)
        rows.append({"id": source_id, "country": cls.country, "many_countries": cls.many_countries,
                     "language": cls.source_lang,
                     "endpoints": dict(cls.endpoints), "two_phase": cls.has_detail_phase(),
                     "configured": not missing, "not_configured": configure_hint(cls, missing) if missing else None,
                     "doc": summary_line(cls.__doc__)})
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return EXIT_OK
    print(render_table(["id", "country", "language", "endpoints", "description"],
                       [[row["id"], row["country"] or ("(many)" if row["many_countries"] else ""), row["language"],
                         (" ".join(f"{k}={v}" for k, v in row["endpoints"].items()) or "(none: local file)")
                         if row["configured"] else f"({row['not_configured']})",
                         row["doc"]]
                        for row in rows]))
    return EXIT_OK


def summary_line(doc: str | None) -> str:
    """A docstring's summary: its first paragraph joined into one line (a summary that wraps
    onto a second line is not cut mid-sentence)."""
    paragraph = (doc or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split())
