"""Exporting records of any type to CSV, JSON Lines or XLSX, streamed row by row from a cursor.

Every column of the type's table is written, `_original` and `_ko` text included (and derived
columns such as a normalised maker key), plus `best_text`: the line screens show for
the record (the type's display rule, Korean when translated). CSV and JSON Lines keep the
database's column names and order with `best_text` last; XLSX is laid out for people from the
declaration (basecrawler/reading/xlsx.py). CSV and XLSX text cells that a spreadsheet would read as a
formula are neutralised (basecrawler/reading/cellsafe.py); JSON Lines is data for programs and keeps
the text exactly. Rows come straight
from an SQLite cursor and go straight to the file, so memory stays flat however many records
there are (see bench/bench_export.py). The file is written under a temporary name and renamed
when complete, so a failed export never leaves a half file that looks finished.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator

from basecrawler.reading.cellsafe import neutralise_row
from basecrawler.recordtypes import RecordType
from basecrawler.reading.search import BEST_TEXT, RecallFilter, iter_recalls
from basecrawler.reading.xlsx import header_of, write_xlsx

log = logging.getLogger(__name__)

FORMATS = ("csv", "jsonl", "xlsx")

def export_recalls(conn: sqlite3.Connection, filters: RecallFilter, fmt: str, output: str | Path,
                   *, limit: int | None = None, progress: Callable[[int], None] | None = None,
                   lang: str = "en", csv_labels: bool = False) -> int:
    """Write every recall matching `filters` (newest first, at most `limit`) to `output`
    ("-" = stdout for csv/jsonl). Returns the number of records written. `lang`: the language
    of the XLSX headers (the declared labels); CSV and JSON Lines keep the column names, which
    programs read, unless `csv_labels` asks for the declared labels in the CSV's header too."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, not {fmt!r}")
    record_type = filters.declaration()
    columns, rows = iter_recalls(conn, filters, limit=limit)
    rows = with_best_text(record_type, columns, rows)
    columns = [*columns, BEST_TEXT]
    header = [header_of(record_type, c, lang) for c in columns] if csv_labels else None
    writers = {"csv": (lambda c, r, b: write_csv(c, r, b, header=header)) if header else write_csv, "xlsx": lambda c, r, b: write_xlsx(c, r, b, record_type, lang),
               "jsonl": lambda c, r, b: write_jsonl(c, r, b, json_columns=_json_columns(record_type))}
    writer = writers[fmt]
    if str(output) == "-":
        if fmt == "xlsx":
            raise ValueError("xlsx cannot be written to stdout; give a file name with -o")
        return writer(columns, _counting(rows, progress), sys.stdout.buffer)
    with _atomic_file(Path(output)) as handle:
        return writer(columns, _counting(rows, progress), handle)


def with_best_text(record_type: RecordType, columns: list[str], rows: Iterable[tuple]) -> Iterator[tuple]:
    """Each row with the display rule's text appended: the Korean of the first declared
    display field that has text, else its original."""
    pairs = [(columns.index(f"{base}_ko"), columns.index(f"{base}_original")) for base in record_type.display
             if f"{base}_ko" in columns and f"{base}_original" in columns]
    for row in rows:
        best = None
        for ko, original in pairs:
            if row[ko] or row[original]:
                best = row[ko] or row[original]
                break
        yield (*row, best)


def _json_columns(record_type: RecordType) -> tuple[str, ...]:
    return tuple(getattr(record_type, "json_columns", ("extra",)))


def _counting(rows: Iterable[tuple], progress) -> Iterator[tuple]:
    if progress is None:
        yield from rows
        return
    for n, row in enumerate(rows, start=1):
        yield row
        if n % 10_000 == 0:
            progress(n)


@contextlib.contextmanager
def _atomic_file(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def write_csv(columns: list[str], rows: Iterable[tuple], binary, *, header: list[str] | None = None) -> int:
    # utf-8-sig writes the BOM: without it Excel reads the file as the local code page and
    # shows Korean and Japanese as mojibake.
    text = io.TextIOWrapper(binary, encoding="utf-8-sig", newline="", write_through=False)
    try:
        writer = csv.writer(text)
        writer.writerow(neutralise_row(header) if header else columns)
        n = 0
        for row in rows:
            writer.writerow(neutralise_row(row))   # a spreadsheet opens it: no cell may be a formula
            n += 1
        text.flush()
    finally:
        text.detach()
    return n


def write_jsonl(columns: list[str], rows: Iterable[tuple], binary, *, json_columns=("extra",)) -> int:
    decoded = [c for c in json_columns if c in columns]
    n = 0
    for values in rows:
        record = dict(zip(columns, values))
        for column in decoded:
            if isinstance(record[column], str) and record[column]:
                try:  # stored as JSON text; export it as an object, not a string inside a string
                    record[column] = json.loads(record[column])
                except ValueError:
                    pass
        binary.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
        n += 1
    binary.flush()
    return n


__all__ = ["export_recalls", "write_csv", "write_jsonl", "write_xlsx", "FORMATS"]
