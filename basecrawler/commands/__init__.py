"""CLI sub-commands, one module each with register(subparsers); argument types they share."""
from __future__ import annotations

import argparse
import datetime as dt
from ..engines import is_postgres_url


def iso_date(text: str) -> dt.date:
    """argparse type for YYYY-MM-DD (a bad value is a usage error, exit 2)."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def require_database(settings) -> str:
    """Read commands (status, search, export, dead-letters list) look at an existing database;
    opening a missing one would create it and its folders and report "0 recalls"."""
    from pathlib import Path

    from ..errors import ConfigError

    path = settings.db_path
    if is_postgres_url(path):   # a server: it answers for itself
        return path
    if not Path(path).is_file():
        raise ConfigError(f"no database at {path} (crawl first with `basecrawler run`, or pass --db)")
    return path


def check_source(source_id, known) -> None:
    """`--source ID` of a read command: an unknown id is a usage error, not an empty answer."""
    from ..errors import UnknownSource

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
