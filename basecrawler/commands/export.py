"""`export`: write matching records of a type (`--type`, default: vehicle recalls; all fields and
the text they are shown by) to CSV, JSON Lines or XLSX, streamed."""
from __future__ import annotations

import errno
import logging
import os
import time
from pathlib import Path

from basecrawler.errors import ConfigError
from basecrawler.reading.export import FORMATS, export_recalls
from basecrawler.pipeline.registry import discover
from basecrawler.store.core import Store
from basecrawler import i18n
from basecrawler.commands import (add_lang_argument, check_folder_of, check_source, in_reader_language, positive_int,
                                  require_database)
from basecrawler.commands.search import add_filter_arguments, filter_from_args

log = logging.getLogger("basecrawler")


def register(sub) -> None:
    parser = sub.add_parser("export", help="export records to csv, jsonl or xlsx")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="file format (default: from the -o file extension, else csv)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="output file ('-' = stdout for csv/jsonl)")
    parser.add_argument("--text", metavar="WORDS", help="only records containing these words (as search)")
    add_filter_arguments(parser)
    parser.add_argument("--limit", type=positive_int, metavar="N", help="only the newest N matching records")
    parser.add_argument("--headers", choices=("names", "labels"), default="names",
                        help="csv header row: the column names programs read (default), or the declared labels "
                             "in the reader's language (--lang); xlsx always has the labels")
    add_lang_argument(parser)   # the XLSX headers (and CSV's with --headers labels)
    parser.set_defaults(func=cmd_export)


def _format(args) -> str:
    if args.format:
        return args.format
    suffix = Path(args.output).suffix.lower().lstrip(".")
    return suffix if suffix in FORMATS else "csv"


@in_reader_language
def cmd_export(args) -> int:
    fmt = _format(args)
    if fmt == "xlsx" and args.output == "-":
        raise ConfigError("xlsx cannot be written to stdout; give a file name with -o")
    filters = filter_from_args(args, args.text)   # usage errors before the database is touched
    require_database(args.settings)
    check_source(args.source, discover())
    if args.output != "-" and Path(args.output).is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder; give a file name with -o", args.output)
    if args.output != "-":
        check_folder_of(args.output)
    store = Store(args.settings.db_path)
    started = time.monotonic()
    try:
        written = export_recalls(store.db.conn, filters, fmt, args.output, limit=args.limit,
                                 progress=lambda n: log.info("export: %d records so far", n), lang=i18n.language(),
                                 csv_labels=args.headers == "labels")
    except OSError as exc:  # name the file the user asked for, not the temp file beside it
        raise OSError(exc.errno, exc.strerror or str(exc), args.output) from None
    finally:
        store.close()
    if args.output != "-":
        _usual_permissions(Path(args.output))
    log.info("export: %d records → %s (%s, %.1fs)", written, args.output, fmt, time.monotonic() - started)
    return 0


def _usual_permissions(path: Path) -> None:
    """The export is written through a private temp file (mode 0600) and renamed; give the
    result the mode a newly created file gets here (0666 minus the umask), like `cp` would."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)
