"""Command line: `basecrawler` = `python -m basecrawler`.

Thin wrappers over library calls. Each sub-command lives in `basecrawler/commands/<name>.py`
with `register(subparsers)`; this module only builds the parser, sets up logging and turns
errors into exit codes (0 ok, 1 a source failed or is suspect, 2 usage / configuration).
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import pkgutil
import sqlite3
import sys

from . import commands
from .config import Settings
from .engines import redact
from .errors import ConfigError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits 2 on usage errors too; keep its message clear
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="basecrawler", description="Collect public vehicle recall data into one SQLite store.")
    parser.add_argument("--db", default=None, help="database file, or postgresql://user@host/db (env BASECRAWLER_DB, default ./basecrawler.db)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def setup_logging(verbose: bool = False, quiet: bool = False) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(message)s", "%H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "pdfminer", "apscheduler.scheduler", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    setup_logging(args.verbose, args.quiet)
    args.settings = Settings.from_env(db_path=args.db)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"basecrawler: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except sqlite3.OperationalError as exc:
        print(f"basecrawler: database error on {args.settings.db_path}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        # PostgreSQL unreachable or refusing (psycopg.OperationalError): the same one line.
        if type(exc).__module__.startswith("psycopg") and type(exc).__name__ == "OperationalError":
            print(f"basecrawler: database error on {redact(args.settings.db_path)}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        raise
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        print("basecrawler: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
