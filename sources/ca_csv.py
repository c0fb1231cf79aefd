"""Reading the Transport Canada CSV (sources/ca.py): two passes over the downloaded file, one
item per recall, in bounded memory. The rules (why two passes, what is shared) are in ca.py's
docstring, "Grouping"; this module is how.

Pass one (`count_rows`) counts the rows of every recall number; pass two (`group_rows`) hands
a recall on as soon as its last row is read, as columns (`_as_columns`), its varying cells the
objects of a table shared between recalls (`shared`).
"""
from __future__ import annotations

import csv
import io
import logging
from collections import Counter
from itertools import chain, groupby, islice
from pathlib import Path
from typing import Iterator

# The source's own logger: its warnings read as the source's, wherever in it they are raised.
log = logging.getLogger("sources.ca")

NUMBER = "RECALL_NUMBER_NUM"


# ---- vehicles shared between recalls ----------------------------------------------------
# A batch of records waits in memory until it is stored (5,000 recalls, ~115,000 vehicles), and
# the same make, model and year come back in recall after recall: each is one dict, and each
# varying cell one string, for all the recalls that name it, not one per row (~20 MB less at a
# batch's peak). Within one recall a vehicle listed twice still gets a dict per row, and equal
# texts are one object as before, so a record pickles to the same bytes (its input hash, by
# which the next run recognises it, is unchanged). Every string in a shared vehicle is the
# table's own, so the table is only ever emptied whole, between recalls, at SHARED_MAX entries.
SHARED_MAX = 1 << 15
SHARED: dict = {}


def bound_shared() -> None:
    if len(SHARED) >= SHARED_MAX:
        SHARED.clear()


def shared(value):
    """The one object for this value (a text, or None) among the recalls read lately."""
    return SHARED.setdefault(value, value) if value is not None else None


# ---- reading the file ----------------------------------------------------------------
MAX_FIELD_BYTES = 64 * 1024 * 1024

def open_csv(path: Path):
    """A csv reader over the file as text. `newline=""` lets csv see the line breaks inside
    quoted fields; surrogateescape keeps undecodable bytes for `clean_text` to repair."""
    handle = io.open(path, "r", encoding="utf-8-sig", errors="surrogateescape", newline="")
    # The csv module refuses fields over 128 KiB and would end the whole file there; read a
    # runaway field instead so that only its recall is refused (the model caps text fields).
    csv.field_size_limit(max(csv.field_size_limit(), MAX_FIELD_BYTES))
    return handle, csv.reader(handle)


def _header_index(header: list[str], path: Path) -> dict[str, int]:
    index = {name.strip(): position for position, name in enumerate(header)}
    missing = [name for name in (NUMBER, "MODEL_NAME_NM", "RECALL_DATE_DTE") if name not in index]
    if missing:
        from basecrawler import UnexpectedContent

        raise UnexpectedContent(f"CSV header lacks {', '.join(missing)}: {header[:15]!r} ({path.name})")
    return index


def count_rows(path: Path) -> Counter:
    """Pass one: rows per recall number (tells pass two when a recall is complete)."""
    handle, reader = open_csv(path)
    with handle:
        header = next(reader, None)
        if header is None:
            return Counter()
        column = _header_index(header, path)[NUMBER]
        cells_of_number = (cells[column] for cells in reader if len(cells) > column)
        counts: Counter = Counter()
        scattered = set()
        # groupby walks the adjacent runs in C: a number with a second run is scattered.
        for number, run in groupby(map(str.strip, cells_of_number)):
            if number in counts:
                scattered.add(number)
            counts[number] += len(list(run))
    if scattered:
        log.warning("ca: %d recall numbers have non-adjacent rows; they are held until their last row", len(scattered))
    return counts


# A recall's rows are kept as read (the transposition in parse() needs whole rows) until it
# has this many, or until its rows turn out not to be adjacent; from then on a row's cells
# that equal the first row's are that row's objects, so a recall with thousands of rows
# repeating the same long comment, or a file whose rows are all scattered, costs about a list
# of pointers a row instead of a copy of the row.
SHARE_AFTER_ROWS = 64


def group_rows(path: Path, rows_per_recall: Counter) -> Iterator[dict]:
    """Pass two: yield {"recall_number", "header", "rows", "columns"} when the last row of a
    recall has been read: each column's cells over the recall's rows; every row as wide as the header (a
    short row is completed from the recall's first row, a long one cut, as before: both logged).

    The rows come in adjacent runs of one number (`groupby`, in C): a run that is a whole recall
    of well-formed rows, the usual case, is handed on at once; any other run (a blank number, a
    row of the wrong width, a recall that is scattered, long or already open) goes row by row."""
    handle, reader = open_csv(path)
    with handle:
        header = next(reader, None)
        if header is None:
            return
        number_column = _header_index(header, path)[NUMBER]
        names = [name.strip() for name in header]
        width = len(names)
        open_groups: dict[str, dict] = {}
        previous = None     # the group of the row before: a group left open is a scattered one

        def add_row(cells: list, line_number: int) -> dict | None:
            """One row into its open group; the item to hand on when that completes it (or when
            the row has no number but has content: a dead letter of its own), else None."""
            nonlocal previous
            number = cells[number_column].strip() if len(cells) > number_column else ""
            if not number:
                if any(cell.strip() for cell in cells):
                    # Not a silent skip: handed on as an item of its own, which parse() turns
                    # into a dead letter that keeps the row (the run line counts it).
                    return {"recall_number": None, "line": line_number, "rows": [dict(zip(names, cells))]}
                return None
            group = open_groups.get(number)
            if len(cells) != width:
                log.warning("ca: row %d has %d cells, header has %d", line_number, len(cells), width)
                cells = _to_width(cells, width, group["rows"][0] if group else None)
            if group is None:
                group = open_groups[number] = {"recall_number": number, "header": names, "rows": [cells], "shared": False}
            else:
                rows = group["rows"]
                if group["shared"]:
                    cells = _share_cells(cells, rows[0])
                rows.append(cells)
                if not group["shared"] and len(rows) >= SHARE_AFTER_ROWS:
                    _share_group(group)
            if previous is not None and previous is not group and not previous["shared"]:
                _share_group(previous)      # its rows are not adjacent: it may stay open long
            previous = group
            if len(group["rows"]) >= rows_per_recall.get(number, 0):
                del open_groups[number]
                previous = None
                return _as_columns(group)
            return None

        def number_of(cells: list) -> str:
            return cells[number_column] if len(cells) > number_column else ""

        line_number = 2
        for raw_number, run in groupby(reader, number_of):
            number = raw_number.strip()
            rows = list(islice(run, SHARE_AFTER_ROWS))
            # A whole recall in one run: as many rows as pass one counted, and nothing after
            # them (a file that changed between the passes may hold more).
            more = [] if len(rows) < SHARE_AFTER_ROWS else list(islice(run, 1))
            if (number and number not in open_groups and len(rows) == rows_per_recall.get(number, 0) and not more
                    and all(map(width.__eq__, map(len, rows)))):
                if previous is not None and not previous["shared"]:
                    _share_group(previous)
                previous = None
                yield _as_columns({"recall_number": number, "header": names, "rows": rows})
                line_number += len(rows)
                continue
            for cells in chain(rows, more, run):
                item = add_row(cells, line_number)
                line_number += 1
                if item is not None:
                    yield item
        for group in open_groups.values():  # only if the file changed between the passes
            yield _as_columns(group)


def _as_columns(group: dict) -> dict:
    """A complete recall as the item handed on: the number of rows and its columns (one C
    transposition of the rows), a column whose cells are all equal as that one cell. The
    pipeline holds a batch of items until it is stored, and hashes each item (`repr`), so the
    item is kept small: a recall's comment once, not once per row."""
    rows = group["rows"]
    bound_shared()
    if len(rows) == 1:   # a recall of one row (a fifth of the published file): each cell is its column
        columns = list(zip(rows[0]))
    else:
        one_of = SHARED.setdefault
        count = len(rows)
        # A column that varies (model, year…): its cells as the objects shared between recalls.
        columns = [(values[0],) if values.count(values[0]) == count else tuple(map(one_of, values, values))
                   for values in zip(*rows)]
    return {"recall_number": group["recall_number"], "header": group["header"], "rows": len(rows),
            "columns": columns}


def _to_width(cells: list, width: int, first: list | None) -> list:
    """A row cut or completed to the header's width: missing cells of a later row are the
    first row's (it repeats them), of a first row None."""
    if len(cells) > width:
        return cells[:width]
    return cells + (first[len(cells):] if first is not None else [None] * (width - len(cells)))


def _share_cells(cells: list, first: list) -> list:
    return [mine if mine != theirs else theirs for mine, theirs in zip(cells, first)]


def _share_group(group: dict) -> None:
    rows = group["rows"]
    rows[1:] = [_share_cells(cells, rows[0]) for cells in rows[1:]]
    group["shared"] = True


__all__ = ["NUMBER", "SHARED", "SHARED_MAX", "bound_shared", "SHARE_AFTER_ROWS", "MAX_FIELD_BYTES", "shared", "open_csv",
           "count_rows", "group_rows"]
