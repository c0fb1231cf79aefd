"""The XLSX export a person opens in Excel or LibreOffice: readable headers in a sensible order,
real date cells, a frozen header row with an autofilter, sized columns, clickable source links,
and `extra` (raw JSON) last. The store's bookkeeping (row id, translation status and claims) is
left out: it means nothing to a reader.

Nothing in it executes: every text cell is written as a text cell (never a formula, whatever
it starts with) and neutralised like the CSV (basecrawler/cellsafe.py); the only formulas are
the project's own `=HYPERLINK()` to an http(s) source link.

Memory stays flat whatever the row count: openpyxl's write-only mode streams rows to a
temporary file (inline strings, no shared-string table), column widths come from a fixed table
rather than from measuring every value, and links are `=HYPERLINK()` formulas, not hyperlink
objects (openpyxl keeps those in a list until the sheet is closed, and Excel refuses more than
65,530 of them per sheet).
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Iterable

from .cellsafe import neutralise_cell
from .model import TEXT_FIELDS

log = logging.getLogger(__name__)

# Excel refuses longer cell text and more rows per sheet; a formula's string literal is capped too.
XLSX_MAX_CELL_CHARS = 32_767
XLSX_MAX_ROWS = 1_048_576
XLSX_MAX_FORMULA_STRING = 255

_TEXT_LABELS = {
    "manufacturer": "Manufacturer", "model": "Model", "component": "Component", "summary": "Summary",
    "defect_cause": "Cause", "consequence": "Consequence", "remedy": "Remedy",
}

# (column, header, width in characters) in the order a reader wants them; `extra` last.
LAYOUT: tuple[tuple[str, str, int], ...] = (
    ("country", "Country", 8),
    ("recall_number", "Recall number", 16),
    ("recall_date", "Recall date", 12),
    ("manufacturer_key", "Manufacturer (normalised)", 20),
    *((f"{field}_{suffix}", f"{_TEXT_LABELS.get(field, field.replace('_', ' ').capitalize())} ({lang})",
       width)
      for field in TEXT_FIELDS
      for width in [{"manufacturer": 24, "model": 24, "component": 24}.get(field, 50)]
      for suffix, lang in (("ko", "Korean"), ("original", "original"))),
    ("model_year", "Model year", 11),
    ("affected_units", "Affected units", 10),
    ("source_url", "Source link", 40),
    ("source", "Source", 12),
    ("source_lang", "Original language", 10),
    ("date_unknown", "Date unreadable", 10),
    ("translated_at", "Translated (UTC)", 17),
    ("first_seen_at", "First seen (UTC)", 17),
    ("updated_at", "Updated (UTC)", 17),
    ("extra", "Extra (source-specific JSON)", 40),
)
_KNOWN = {name: (header, width) for name, header, width in LAYOUT}
DATE_COLUMNS = {"recall_date"}
TIMESTAMP_COLUMNS = {"translated_at", "first_seen_at", "updated_at"}
LINK_COLUMNS = {"source_url"}
DATE_FORMAT = "yyyy-mm-dd"
TIMESTAMP_FORMAT = "yyyy-mm-dd hh:mm"


def is_internal(column: str) -> bool:
    """The store's bookkeeping: the row id, the translator's status, note and claims
    (`translated_at`, when a row was translated, is kept: readers ask that)."""
    return column == "id" or column.startswith("translation_") or "claim" in column


def column_order(columns: list[str]) -> list[str]:
    """The layout's order for the columns the query returned, internal ones left out; unknown
    (newer) columns go just before `extra`, so `extra` is always last."""
    known = [name for name, _, _ in LAYOUT if name in columns and name != "extra"]
    others = [name for name in columns if name not in _KNOWN and not is_internal(name)]
    return known + others + (["extra"] if "extra" in columns else [])


def header_for(column: str) -> str:
    return _KNOWN.get(column, (column.replace("_", " ").capitalize(), 0))[0]


def width_for(column: str) -> int:
    return _KNOWN.get(column, ("", 16))[1]


def _as_date(value, date_unknown) -> dt.date | None | str:
    if date_unknown or not value:
        return None          # the 1970-01-01 placeholder would sort as a real date; the flag column says why
    try:
        return dt.date.fromisoformat(value)
    except (TypeError, ValueError):
        return value


def _as_timestamp(value) -> dt.datetime | None | str:
    if not value:
        return None
    try:
        stamp = dt.datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return value
    if stamp.tzinfo is not None:  # Excel has no time zones: store UTC wall time, the header says UTC
        stamp = stamp.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return stamp


def _hyperlink_formula(url) -> str | None:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    if len(url) > XLSX_MAX_FORMULA_STRING:
        return None
    quoted = url.replace('"', '""')
    return f'=HYPERLINK("{quoted}","{quoted}")'


def write_xlsx(columns: list[str], rows: Iterable[tuple], binary) -> int:
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
    from openpyxl.styles import Alignment, Font, PatternFill
    from openpyxl.utils import get_column_letter

    order = column_order(columns)
    index = [columns.index(name) for name in order]
    unknown_at = columns.index("date_unknown") if "date_unknown" in columns else None
    kinds = ["date" if c in DATE_COLUMNS else "stamp" if c in TIMESTAMP_COLUMNS else "link" if c in LINK_COLUMNS
             else "text" for c in order]
    last_column = get_column_letter(len(order))

    workbook = Workbook(write_only=True)
    header_font = Font(bold=True)
    header_fill = PatternFill("solid", fgColor="DDEBF7")
    header_alignment = Alignment(vertical="top", wrap_text=True)
    link_font = Font(color="0563C1", underline="single")
    sheets: list = []
    state = {"rows": 0, "truncated": 0}

    def close_sheet():
        if sheets:  # the autofilter covers the header and every row written to this sheet
            sheets[-1].auto_filter.ref = f"A1:{last_column}{state['rows']}"

    def new_sheet():
        close_sheet()
        sheet = workbook.create_sheet("recalls" if not sheets else f"recalls {len(sheets) + 1}")
        # In write-only mode these must be set before the first row is written.
        sheet.freeze_panes = "A2"
        for number, name in enumerate(order, start=1):
            sheet.column_dimensions[get_column_letter(number)].width = width_for(name)
        header = []
        for name in order:
            cell = WriteOnlyCell(sheet, value=header_for(name))
            cell.font, cell.fill, cell.alignment = header_font, header_fill, header_alignment
            header.append(cell)
        sheet.append(header)
        sheets.append(sheet)
        state["rows"] = 1

    def text(sheet, value):
        if not isinstance(value, str):
            return value      # numbers stay numbers (a negative count is not a formula)
        value = ILLEGAL_CHARACTERS_RE.sub("", value)   # control characters make Excel reject the file
        # Neutralised after stripping: "\x0b=cmd" must not become a bare "=cmd".
        value = neutralise_cell(value)
        if len(value) > XLSX_MAX_CELL_CHARS:
            state["truncated"] += 1
            value = value[:XLSX_MAX_CELL_CHARS - 1] + "…"
        out = WriteOnlyCell(sheet, value=value)
        # openpyxl turns any string starting with "=" into a formula and "#N/A" into an error
        # cell; publisher text is always a string cell.
        out.data_type = "s"
        return out

    def cell(sheet, kind, value, date_unknown):
        if kind == "date":
            value = _as_date(value, date_unknown)
            if isinstance(value, dt.date):
                out = WriteOnlyCell(sheet, value=value)
                out.number_format = DATE_FORMAT
                return out
        elif kind == "stamp":
            value = _as_timestamp(value)
            if isinstance(value, dt.datetime):
                out = WriteOnlyCell(sheet, value=value)
                out.number_format = TIMESTAMP_FORMAT
                return out
        elif kind == "link":
            formula = _hyperlink_formula(value)
            if formula:
                out = WriteOnlyCell(sheet, value=formula)
                out.font = link_font
                return out
        return text(sheet, value)

    new_sheet()
    n = 0
    for values in rows:
        if state["rows"] >= XLSX_MAX_ROWS:
            new_sheet()
        sheet = sheets[-1]
        date_unknown = values[unknown_at] if unknown_at is not None else 0
        sheet.append([cell(sheet, kind, values[i], date_unknown) for kind, i in zip(kinds, index)])
        state["rows"] += 1
        n += 1
    close_sheet()
    if state["truncated"]:
        log.warning("xlsx: %d cells longer than Excel's %d characters were cut (csv/jsonl keep them whole)",
                    state["truncated"], XLSX_MAX_CELL_CHARS)
    workbook.save(binary)
    return n


__all__ = ["write_xlsx", "column_order", "header_for", "is_internal", "LAYOUT", "XLSX_MAX_CELL_CHARS", "XLSX_MAX_ROWS"]
