"""CLI sub-commands, one module each with register(subparsers); argument types they share."""
from __future__ import annotations

import argparse
import datetime as dt
from basecrawler.store.engines import is_postgres_url


def iso_date(text: str) -> dt.date:
    """argparse type for YYYY-MM-DD (a bad value is a usage error, exit 2)."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


# Commands that read a store someone else made: the CLI checks the file before any of them
# runs (basecrawler/store/dbfile.py), so none can create, migrate or damage it. Only `run` and
# `migrate` initialise a new or empty file.
READ_COMMANDS = frozenset({"status", "search", "export", "dead-letters", "browse", "types"})


def positive_int(text: str) -> int:
    """argparse type for a count that must be 1 or more (`--limit 0` / `-1` is a usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def check_existing_database(settings) -> None:
    """A database file that exists must be basecrawler's (checked without opening a Store,
    which would migrate it); a missing one is each command's own answer."""
    from pathlib import Path

    from basecrawler.store.dbfile import check_basecrawler_database

    path = settings.db_path
    if not is_postgres_url(path) and Path(path).exists():
        check_basecrawler_database(path)


def require_database(settings) -> str:
    """Read commands (status, search, export, dead-letters, browse) look at an existing
    basecrawler database; opening a missing one would create it and its folders and report
    "0 recalls", opening an empty or foreign file would write a schema into it."""
    from pathlib import Path

    from basecrawler.store.dbfile import check_basecrawler_database
    from basecrawler.errors import ConfigError

    path = settings.db_path
    if is_postgres_url(path):   # a server: it answers for itself
        return path
    if not Path(path).is_file():
        raise ConfigError(f"no database at {path} (crawl first with `basecrawler run`, or pass --db)")
    check_basecrawler_database(path)
    return path


def check_source(source_id, known) -> None:
    """`--source ID` of a read command: an unknown id is a usage error, not an empty answer."""
    from basecrawler.errors import UnknownSource

    if source_id is not None and source_id not in known:
        raise UnknownSource(source_id, sorted(known))


def check_folder_of(path) -> None:
    """The nearest existing ancestor of `path` must be a folder: `mkdir -p` under a file fails
    with a puzzling "File exists"; say plainly which part is a file (an OSError: exit 3)."""
    import errno
    from pathlib import Path

    for folder in Path(path).absolute().parents:
        if folder.exists():
            if not folder.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "is a file, not a folder", str(folder))
            return


def add_lang_argument(parser: argparse.ArgumentParser) -> None:
    """`--lang ko|en`: the language of what a person reads (tables, counts, export headers);
    --json keys and the operator's log lines stay as they are."""
    from basecrawler import i18n

    parser.add_argument("--lang", choices=i18n.LANGUAGES, default=None,
                        help=f"language of the output for people (default ${i18n.ENV}, else Korean)")


def in_reader_language(command):
    """Run a command function (args → exit code) with `args.lang` as the language of every
    `_()` it shows; without --lang, $BASECRAWLER_LANG, else Korean (basecrawler/i18n)."""
    import functools

    from basecrawler import i18n

    @functools.wraps(command)
    def run(args):
        token = i18n.use(getattr(args, "lang", None))
        try:
            return command(args)
        finally:
            i18n.reset(token)
    return run
