"""Command line: `basecrawler` = `python -m basecrawler`.

Thin wrappers over library calls. Each sub-command lives in `basecrawler/commands/<name>.py`
with `register(subparsers)`; this module only builds the parser, sets up logging and turns
errors into exit codes, one line each and never a traceback for an expected problem. A code
is the `exit_code` of the error class in brackets (basecrawler.errors; tests/test_cli_exit.py
checks this table against them):

    0  ok [EXIT_OK]
    1  a source failed or is suspect (a job failed); the database cannot be opened
       [CrawlerError, SourceFailed]
    2  usage or configuration: bad option, unknown source, missing --replay folder,
       no database at PATH, or PATH is not a basecrawler database (read commands never
       create, migrate or change one) [ConfigError, UnknownSource]
    3  a file, folder or port cannot be used: unwritable or missing folder, output is a
       directory, port in use, disk full; another crawl kept the run lock
       [UnusablePath, RunLockTimeout]
  130  interrupted (Ctrl-C / SIGTERM): what was stored is kept, the run is `interrupted`
       [Interrupted]
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import pkgutil
import sqlite3
import sys

from basecrawler import commands
from basecrawler.config import Settings
from basecrawler.store.diskfull import NoTracebackForDiskFull
from basecrawler.commands import READ_COMMANDS, check_existing_database, check_folder_of
from basecrawler.store.engines import redact, scrub
from basecrawler.errors import EXIT_OK, ConfigError, CrawlerError, Interrupted, SourceFailed, UnusablePath

COMMAND_ENTRY_POINTS = "basecrawler.commands"


class _Parser(argparse.ArgumentParser):
    """argparse's parser that exits 2 with a clear line, and remembers its sub-command groups
    (so the global options reach every sub-command without argparse's private attributes)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.subcommand_groups: list = []

    def add_subparsers(self, **kwargs):
        kwargs.setdefault("parser_class", _Parser)
        group = super().add_subparsers(**kwargs)
        self.subcommand_groups.append(group)
        return group

    def error(self, message):  # argparse exits 2 on usage errors too; keep its message clear
        self.print_usage(sys.stderr)
        self.exit(ConfigError.exit_code, f"{self.prog}: error: {message}\n")


def _global_options(parser: argparse.ArgumentParser, default) -> None:
    """--db, -v, -q: on the top-level parser with real defaults, and on every sub-command with
    SUPPRESS defaults, so `basecrawler status --db x.db` works and an option given before the
    sub-command is not reset by the sub-command's parser."""
    options = (
        (("--db",), {"default": default(None),
                     "help": "database file, or postgresql://user@host/db (env BASECRAWLER_DB, default ./basecrawler.db)"}),
        (("-v", "--verbose"), {"action": "store_true", "default": default(False), "help": "debug logging"}),
        (("-q", "--quiet"), {"action": "store_true", "default": default(False), "help": "warnings and errors only"}),
    )
    for names, spec in options:
        try:
            parser.add_argument(*names, **spec)
        except argparse.ArgumentError:   # the sub-command declares that option itself
            pass


def _subparsers(parser: argparse.ArgumentParser):
    for group in getattr(parser, "subcommand_groups", ()):
        for sub in dict.fromkeys(group.choices.values()):
            yield sub
            yield from _subparsers(sub)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the arguments of one call (`argv`) whose sub-command is a
    module of `basecrawler/commands`, only that module's commands: `run` then never imports
    the web view, the exporters, the scheduler or the translation worker (a few hundred ms of
    every run's start-up)."""
    parser = _Parser(prog="basecrawler", description="Collect public recall and safety data (vehicles, products, food, drugs, …) "
                                                       "from government publishers into one store, in Korean.",
                     epilog=f"exit codes: {EXIT_OK} ok, {SourceFailed.exit_code} a source failed, "
                            f"{ConfigError.exit_code} usage or configuration (also: no database), "
                            f"{UnusablePath.exit_code} a file, folder or port cannot be used, "
                            f"{Interrupted.exit_code} interrupted")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                        help="show the version and exit")
    _global_options(parser, lambda value: value)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    command = _command_of(argv) if argv is not None else None
    if command and _register_one(sub, command) is None:
        return build_parser()   # not one module's command: the whole command line answers it
    if not command:
        _register_all(sub)
    for subparser in _subparsers(parser):
        _global_options(subparser, lambda _value: argparse.SUPPRESS)
    return parser


def _register_all(sub) -> None:
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(module, "register"):
            module.register(sub)
    for entry_point in importlib.metadata.entry_points(group=COMMAND_ENTRY_POINTS):
        # Sub-commands of installed packages (translate); one that fails to load is left out.
        try:
            entry_point.load()(sub)
        except Exception as exc:
            logging.getLogger("basecrawler").warning("command %s could not be loaded: %s", entry_point.name, exc)


def _register_one(sub, command: str):
    """Register the commands module named like `command` (`dead-letters` → dead_letters);
    None when there is none or it does not define that command (`list`, a package's command,
    a typo argparse must answer): the caller then builds the whole command line."""
    name = command.replace("-", "_")
    if not name.isidentifier() or importlib.util.find_spec(f"{commands.__name__}.{name}") is None:
        return None
    module = importlib.import_module(f"{commands.__name__}.{name}")
    if not hasattr(module, "register"):
        return None
    module.register(sub)
    return module if command in sub.choices else None


def _command_of(argv: list[str]) -> str | None:
    """The sub-command word of a command line: the first argument that is neither a global
    option nor the value of `--db`; None for `-h` / `--version` before it (the whole help)."""
    args = iter(argv)
    for arg in args:
        if arg == "--db":
            next(args, None)
        elif arg in ("-h", "--help", "--version"):
            return None
        elif not arg.startswith("-"):
            return arg
    return None


def _version() -> str:
    try:
        return importlib.metadata.version("basecrawler")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout without installing
        return "unknown (not installed)"


class CurrentStderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a line is logged, not what it was when logging
    was set up: a caller that swaps stderr (a test's capture, a daemon's redirection) and later
    closes the old one must not leave the root logger writing into a closed file."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


def setup_logging(verbose: bool = False, quiet: bool = False) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    handler = CurrentStderrHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(message)s", "%H:%M:%S"))
    handler.addFilter(NoTracebackForDiskFull())   # a classified failure: one line, no traceback
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "pdfminer", "apscheduler.scheduler", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return ConfigError.exit_code
    setup_logging(args.verbose, args.quiet)
    try:
        args.settings = Settings.from_env(db_path=args.db)
        check_folder_of(args.settings.db_path)
        if args.command in READ_COMMANDS:
            check_existing_database(args.settings)   # before any Store opens (and migrates) the file
        return int(args.func(args) or EXIT_OK)
    except CrawlerError as exc:   # ours: its class says the code
        print(f"basecrawler: {_describe_os_error(exc) if isinstance(exc, OSError) else exc}", file=sys.stderr)
        return exc.exit_code
    except sqlite3.DatabaseError as exc:  # OperationalError, and "file is not a database"
        print(f"basecrawler: database error on {args.settings.db_path}: {exc}", file=sys.stderr)
        return CrawlerError.exit_code
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        # A path or port the user chose cannot be used: say which and why, no traceback.
        print(f"basecrawler: {_describe_os_error(exc)}", file=sys.stderr)
        return UnusablePath.exit_code
    except Exception as exc:
        # PostgreSQL unreachable, refusing, timed out or lost (any psycopg error): one line, like
        # SQLite's, naming the database without its password.
        if any(cls.__module__.startswith("psycopg") for cls in type(exc).__mro__):
            text, db = scrub(" ".join(str(exc).split()), args.settings.db_path), redact(args.settings.db_path)
            print(f"basecrawler: {text}" if db in text else f"basecrawler: database error on {db}: {text}",
                  file=sys.stderr)
            return CrawlerError.exit_code
        raise
    except KeyboardInterrupt:
        print("basecrawler: interrupted", file=sys.stderr)
        return Interrupted.exit_code


def _describe_os_error(exc: OSError) -> str:
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is not None:
        return f"cannot use {exc.filename}: {reason}"
    return reason


if __name__ == "__main__":
    raise SystemExit(main())
