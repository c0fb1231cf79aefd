"""The XLSX export a person opens in Excel or LibreOffice, laid out from the record type's
declaration: the key and date first, then the text the record is shown by (the display rule),
each translated field as Korean beside the original, the other fields, the source, and `extra`
(raw JSON) last; headers are the declared labels. Real date cells, a frozen header row with an
autofilter, sized columns, clickable source links. The store's bookkeeping (row id,
translation status, note and claims) is left out: it means nothing to a reader.

Nothing in it executes: every text cell is written as a text cell (never a formula, whatever
it starts with) and neutralised like the CSV (basecrawler/reading/cellsafe.py); the only formulas are
the project's own `=HYPERLINK()` to an http(s) source link.

Memory stays flat whatever the row count: openpyxl's write-only mode streams rows to a
temporary file (inline strings, no shared-string table), column widths come from the kind of
column rather than from measuring every value, and links are `=HYPERLINK()` formulas, not
hyperlink objects (openpyxl keeps those in a list until the sheet is closed, and Excel refuses
more than 65,530 of them per sheet).
"""
from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass
from typing import Iterable

from basecrawler.reading.cellsafe import neutralise_cell
from basecrawler.recordtypes import RecordType

log = logging.getLogger(__name__)

# Excel refuses longer cell text and more rows per sheet; a formula's string literal is capped too.
XLSX_MAX_CELL_CHARS = 32_767
XLSX_MAX_ROWS = 1_048_576
XLSX_MAX_FORMULA_STRING = 255

BEST_TEXT_COLUMN = "best_text"
# The framework's own columns, the same for every type.
TIMESTAMPS = {"translated_at": "Translated (UTC)", "first_seen_at": "First seen (UTC)", "updated_at": "Updated (UTC)"}
FRAMEWORK_LABELS = {BEST_TEXT_COLUMN: "Text shown (Korean when translated)", **TIMESTAMPS}
TRAILING = ("source", "source_lang", "date_unknown")
DATE_FORMAT = "yyyy-mm-dd"
TIMESTAMP_FORMAT = "yyyy-mm-dd hh:mm"


@dataclass(frozen=True)
class Column:
    name: str
    header: str
    width: int
    kind: str   # text, date, stamp, link, list (a JSON list shown as "a, b"), json


def is_internal(column: str) -> bool:
    """The store's bookkeeping: the row id, the translator's status, note and claims, the hash
    of the input that last wrote the row (`translated_at`, when a row was translated, is kept:
    readers ask that)."""
    return column in ("id", "input_hash") or column.startswith("translation_") or "claim" in column


def framework_labels(lang: str) -> dict[str, str]:
    """FRAMEWORK_LABELS in `lang` through the catalogue (basecrawler/i18n)."""
    from basecrawler.i18n import gettext as _

    return {BEST_TEXT_COLUMN: _("Text shown (Korean when translated)", lang),
            "translated_at": _("Translated (UTC)", lang), "first_seen_at": _("First seen (UTC)", lang),
            "updated_at": _("Updated (UTC)", lang),
            "is_copy": _("Another publisher's copy", lang),   # 1 on a group's copies (store/groups.py)
            # The store's bookkeeping: never in the sheet (is_internal), named in a CSV with labels.
            "translation_status": _("Translation status", lang), "translation_claimed_at": _("Translation claimed at", lang),
            "translation_claimed_by": _("Translation claimed by", lang), "input_hash": _("Input hash", lang)}


def header_of(record_type: RecordType, column: str, lang: str = "en", labels: dict | None = None) -> str:
    """A column's header: its declared label (or the framework's), capitalised, in `lang`."""
    from basecrawler.i18n import gettext

    header = (labels if labels is not None else framework_labels(lang)).get(column) or record_type.label(column)
    return gettext(header[:1].upper() + header[1:], lang)


def layout(record_type: RecordType, columns: list[str], lang: str = "en") -> list[Column]:
    """The columns of the sheet, in reading order, for the columns the query returned;
    unknown (newer) columns go just before `extra`, so `extra` is always last. Headers are the
    declared labels in `lang` (English: as declared; Korean through the catalogue)."""
    labels = framework_labels(lang)
    available = [c for c in columns if not is_internal(c)]
    translated = [c for base in record_type.translated for c in (f"{base}_ko", f"{base}_original")]
    multi = {f.field for f in record_type.facets if f.multi}
    dates = {record_type.date_field, *getattr(record_type, "date_columns", ())} - {None}
    leading = [*record_type.key, *([record_type.date_field] if record_type.date_field else []), BEST_TEXT_COLUMN,
               *record_type.derived_columns]
    placed = [*leading, *translated, *record_type.url_fields, *TRAILING, *TIMESTAMPS, "extra"]
    others = [c for c in available if c not in placed]
    order = [*leading, *translated, *others, *record_type.url_fields, *TRAILING, *TIMESTAMPS, "extra"]
    out, seen = [], set()
    for name in order:
        if name in seen or name not in available:
            continue
        seen.add(name)
        if name in dates:
            kind, width = "date", 12
        elif name in TIMESTAMPS:
            kind, width = "stamp", 17
        elif name in record_type.url_fields:
            kind, width = "link", 40
        elif name in multi:
            kind, width = "list", 24
        elif name == "extra":
            kind, width = "json", 40
        elif name == BEST_TEXT_COLUMN:
            kind, width = "text", 60
        elif name in translated:
            kind, width = "text", 40
        else:
            kind, width = "text", 16
        out.append(Column(name, header_of(record_type, name, lang, labels), width, kind))
    return out


def _as_date(value, date_unknown) -> dt.date | None | str:
    if date_unknown or not value:
        return None          # a placeholder (1970-01-01) would sort as a real date; the flag column says why
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


def _as_list(value):
    """A multi-valued field (JSON list) as "Food, Drugs"; anything else unchanged."""
    if isinstance(value, str) and value.startswith("["):
        try:
            items = json.loads(value)
        except ValueError:
            return value
        if isinstance(items, list):
            return ", ".join(str(item) for item in items)
    return value


def _hyperlink_formula(url) -> str | None:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    if len(url) > XLSX_MAX_FORMULA_STRING:
        return None
    quoted = url.replace('"', '""')
    return f'=HYPERLINK("{quoted}","{quoted}")'


def write_xlsx(columns: list[str], rows: Iterable[tuple], binary, record_type: RecordType | None = None,
               lang: str = "en") -> int:
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.cell.cell import ERROR_CODES, ILLEGAL_CHARACTERS_RE
    from openpyxl.styles import Alignment, Font, PatternFill
    from openpyxl.utils import get_column_letter

    if record_type is None:
        from basecrawler.recordtypes import get_record_type
        from basecrawler.reading.search import DEFAULT_TYPE
        record_type = get_record_type(DEFAULT_TYPE)
    sheet_columns = layout(record_type, columns, lang)
    index = [columns.index(c.name) for c in sheet_columns]
    unknown_at = columns.index("date_unknown") if "date_unknown" in columns else None
    kinds = [c.kind for c in sheet_columns]
    last_column = get_column_letter(len(sheet_columns))
    title = record_type.table[:25]

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
        sheet = workbook.create_sheet(title if not sheets else f"{title} {len(sheets) + 1}")
        # In write-only mode these must be set before the first row is written.
        sheet.freeze_panes = "A2"
        for number, column in enumerate(sheet_columns, start=1):
            sheet.column_dimensions[get_column_letter(number)].width = column.width
        header = []
        for column in sheet_columns:
            cell = WriteOnlyCell(sheet, value=column.header)
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
        # openpyxl turns a string starting with "=" into a formula (neutralised above, so
        # none is left) and an error code such as "#N/A" into an error cell: only those need
        # an explicit string cell; a plain str is bound as one, and is much cheaper.
        if value not in ERROR_CODES:
            return value
        out = WriteOnlyCell(sheet, value=value)
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
        elif kind == "list":
            value = _as_list(value)
        if value is None:
            return None
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


__all__ = ["write_xlsx", "layout", "header_of", "framework_labels", "Column", "is_internal", "XLSX_MAX_CELL_CHARS", "XLSX_MAX_ROWS"]
