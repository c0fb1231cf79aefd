"""Transport Canada Motor Vehicle Safety Recalls Database: the open-data CSV, one recall per
group of rows.

Where the data comes from: `/vrdb_60days_daily.csv` (incremental, ~1.4 MB) and
`/vrdb_full_monthly.csv` (full, ~207 MB) on opendatatc.tc.canada.ca. The body is streamed
to a temp file by the HTTP client and read through a text wrapper with `csv.reader`, so quoted
fields that span lines are parsed correctly and the body is never held in memory (the two
passes over the file: sources/ca_csv.py; this module turns a recall's rows into its record).

Rules decided from the published data (see also fixtures/ca/README.md):

- Grouping. The file has one row per make / model / model year; a recall is all rows with one
  RECALL_NUMBER_NUM. Those rows are normally adjacent, but nothing in the publication promises
  it, so the file is read twice: pass one counts the rows of every recall number (a dict of
  recall numbers, a few MB for the full file), pass two collects rows and yields a recall as
  soon as its last row has been read. For an adjacent file at most one recall is open at a
  time; a recall whose rows are scattered stays open until its last row (and is logged), so it
  is never emitted twice with half of its models each. Rows are kept whole as `csv` reads them
  and a complete recall is handed on as columns (one C transposition; a column of equal cells
  as that one cell); once an open recall has many rows or turns out to be scattered, its cells
  equal to the first row's become the first row's objects, so a recall with thousands of rows
  repeating the same long comment costs little memory.
- Affected units. UNIT_AFFECTED_NBR is the recall's count repeated on every row (the published
  rows of a recall carry the same "2,700.00"), not a per-model count: it is taken once, never
  summed over rows. When rows disagree (a revised count), the largest value is used and every
  distinct value is kept in `extra["units_reported"]`.
- Text. English originals come from the *_ETXT columns, French from *_FTXT into `extra["fr"]`.
  "Translation not available" (old rows) is treated as absent. COMMENT_ETXT is kept whole as
  the summary and split into defect_cause / consequence / remedy on its "Issue:",
  "Safety Risk:" and "Corrective Action(s):" headings when they are present.
- Encoding. The file is UTF-8, but a few rows carry mojibake ("SiÃ¨ges"). ftfy's
  `fix_encoding` repairs the reliably detectable cases; a cell that still looks wrong is kept
  as it is with a warning. Bytes that are not UTF-8 at all are read as Windows-1252 (the only
  other encoding Canadian French text plausibly comes in), also with a warning.
- Dates. RECALL_DATE_DTE is ISO (`1997-06-16`); a row whose date cannot be read still makes a
  record, with the date_unknown sentinel (the model does that).
"""
from __future__ import annotations

import functools
import logging
import re
from typing import Iterator

from basecrawler import BaseCrawler
from basecrawler.formats.dates import parse_date
from basecrawler.formats import text as text_rules
from basecrawler.formats.text import distinct_joined
from basecrawler.formats.textcodec import looks_bad
from basecrawler.model import parse_units, year_range

from sources.ca_csv import (MAX_FIELD_BYTES, NUMBER, SHARE_AFTER_ROWS, SHARED, SHARED_MAX, bound_shared,  # noqa: F401
                            count_rows, group_rows, open_csv, shared)

log = logging.getLogger(__name__)

INCREMENTAL_PATH = "/vrdb_60days_daily.csv"
FULL_PATH = "/vrdb_full_monthly.csv"
DETAIL_PAGE = "https://wwwapps.tc.gc.ca/Saf-Sec-Sur/7/VRDB-BDRV/search-recherche/detail.aspx?lang=eng&rn={}"

COLUMNS = (
    "RECALL_NUMBER_NUM", "YEAR", "MANUFACTURER_RECALL_NO_TXT", "CATEGORY_ETXT", "CATEGORY_FTXT",
    "MAKE_NAME_NM", "MODEL_NAME_NM", "UNIT_AFFECTED_NBR", "SYSTEM_TYPE_ETXT", "SYSTEM_TYPE_FTXT",
    "NOTIFICATION_TYPE_ETXT", "NOTIFICATION_TYPE_FTXT", "COMMENT_ETXT", "COMMENT_FTXT", "RECALL_DATE_DTE",
)
NOT_TRANSLATED = "translation not available"
FRENCH_COLUMNS = {"category": "CATEGORY_FTXT", "system_type": "SYSTEM_TYPE_FTXT",
                  "notification_type": "NOTIFICATION_TYPE_FTXT", "comment": "COMMENT_FTXT"}

# A heading starts the comment or follows white space. That condition is checked on each match
# rather than written as a look-behind: a pattern that opens with a look-behind is tried at
# every position of the comment, one that opens with the heading's letters is not. The letters
# are spelled as classes instead of re.IGNORECASE, which folds the case of every character the
# search meets; each class holds what IGNORECASE matches for its letter, the Unicode ones
# included (İ and ı for i, ſ for s, the Kelvin sign for k).
_I, _S, _K = "[Ii\u0130\u0131]", "[Ss\u017f]", "[Kk\u212a]"
_SECTION = re.compile(
    rf"({_I}{_S}{_S}[Uu][Ee]|{_S}[Aa][Ff][Ee][Tt][Yy]\s+[Rr]{_I}{_S}{_K}"
    rf"|[Cc][Oo][Rr][Rr][Ee][Cc][Tt]{_I}[Vv][Ee]\s+[Aa][Cc][Tt]{_I}[Oo][Nn]{_S}?)\s*:\s*")
# A heading is told by its first letter: the pattern's three headings begin with three letters,
# in any case. (Its lowered text named it before, and "İssue", "ıssue", "Actionſ", which the
# pattern matches, lowered to no name: the recall was lost as a parse error.)
_SECTION_FIELD = {**dict.fromkeys("Ii\u0130\u0131", "defect_cause_original"),
                  **dict.fromkeys("Ss\u017f", "consequence_original"),
                  **dict.fromkeys("Cc", "remedy_original")}


class CanadaCrawler(BaseCrawler):
    """Transport Canada vehicle recalls (open-data CSV, grouped by recall number)."""

    source = "ca"
    country = "CA"
    source_lang = "en"
    endpoints = {"data": "https://opendatatc.tc.canada.ca"}

    def fetch(self, ctx) -> Iterator[dict]:
        url = ctx.url("data", FULL_PATH if ctx.mode == "full" else INCREMENTAL_PATH)
        with ctx.http.download_to_file(url) as download:   # the temp file goes when the block ends
            rows_per_recall = count_rows(download.path)
            for group in group_rows(download.path, rows_per_recall):
                yield group  # the pipeline notes the download it came from

    def parse(self, ctx, raw: dict) -> dict:
        number = raw["recall_number"]
        if number is None:
            raise ValueError(f"CSV row {raw.get('line')} has no {NUMBER}: it cannot be stored without a key")
        bound_shared()   # between recalls, never while one is made
        # Each column's values over the recall's rows (group_rows): ~3 rows a recall in the
        # published file. A column whose cells are all equal comes as that one cell.
        columns = dict(zip(raw["header"], raw["columns"]))
        rows = raw["rows"]
        absent = (None,)
        get = columns.get

        # Cells repeat across a recall's rows: clean each distinct make / model / year once.
        makes, models, years = get("MAKE_NAME_NM", absent), get("MODEL_NAME_NM", absent), get("YEAR", absent)
        clean_make = {value: shared(clean_text(value, number, "MAKE_NAME_NM")) for value in dict.fromkeys(makes)}
        clean_model = {value: shared(clean_text(value, number, "MODEL_NAME_NM")) for value in dict.fromkeys(models)}
        clean_year = {value: shared((value or "").strip() or None) for value in dict.fromkeys(years)}
        vehicles = _vehicles(map(clean_make.__getitem__, _per_row(makes, rows)),
                             map(clean_model.__getitem__, _per_row(models, rows)),
                             map(clean_year.__getitem__, _per_row(years, rows)))
        comment = first_text(get("COMMENT_ETXT", absent), number, "COMMENT_ETXT")
        record = {
            "recall_number": number,
            "recall_date": _first_date(get("RECALL_DATE_DTE", absent)),
            "manufacturer_original": distinct_joined(clean_make.values()),
            "model_original": distinct_joined(clean_model.values()),
            "model_year": _model_years(frozenset(clean_year.values())),
            "component_original": first_text(get("SYSTEM_TYPE_ETXT", absent), number, "SYSTEM_TYPE_ETXT"),
            "summary_original": comment,
            "source_url": DETAIL_PAGE.format(number),
            **split_comment(comment),
        }
        units, reported = affected_units(get("UNIT_AFFECTED_NBR", absent))
        record["affected_units"] = units
        french = {}
        for key, column in FRENCH_COLUMNS.items():
            value = first_text(get(column, absent), number, column)
            if value:
                french[key] = value
        extra = {
            "manufacturer_recall_number": first_text(get("MANUFACTURER_RECALL_NO_TXT", absent), number,
                                                     "MANUFACTURER_RECALL_NO_TXT"),
            "category": first_text(get("CATEGORY_ETXT", absent), number, "CATEGORY_ETXT"),
            "notification_type": first_text(get("NOTIFICATION_TYPE_ETXT", absent), number, "NOTIFICATION_TYPE_ETXT"),
            "fr": french,
            "vehicles": vehicles,
        }
        if len(reported) > 1:
            extra["units_reported"] = reported
        record["extra"] = {key: value for key, value in extra.items() if value}
        return record


def _per_row(values: tuple, rows: int) -> tuple:
    """A column with a cell for each row (one cell: the same on every row)."""
    return values if len(values) == rows else values * rows


def first_text(values: tuple, recall_number: str, column: str) -> str | None:
    """A column's text: the first row's cell, else the first later cell that cleans to
    something (each distinct value once, in row order)."""
    value = values[0]
    if value is not None and value.isascii():   # most cells: clean_text's first branch, inline
        fixed = value.strip()
        if fixed and fixed.lower() != NOT_TRANSLATED:
            return fixed
    else:
        fixed = clean_text(value, recall_number, column)
        if fixed:
            return fixed
    if len(values) > 1:
        for value in dict.fromkeys(values[1:]):
            fixed = clean_text(value, recall_number, column)
            if fixed:
                return fixed
    return None


@functools.lru_cache(maxsize=4096)
def _model_years(years: frozenset) -> str | None:
    """`year_range` of a recall's distinct model years (cached: the same few years come back
    recall after recall, and each is read by a regex)."""
    return year_range(years)


def _vehicles(makes, models, years) -> list[dict]:
    get = SHARED.get
    vehicles, listed = [], set()
    for key in zip(makes, models, years):
        if key in listed:
            vehicle = {"make": key[0], "model": key[1], "year": key[2]}
        else:
            listed.add(key)
            vehicle = get(key)
            if vehicle is None:
                vehicle = SHARED[key] = {"make": key[0], "model": key[1], "year": key[2]}
        vehicles.append(vehicle)
    return vehicles


# ---- turning rows into fields ----------------------------------------------------------
def clean_text(value: str | None, recall_number: str = "", column: str = "") -> str | None:
    """The framework's cleaning (strip, repair mojibake where it is reliable) plus this file's
    quirks: "Translation not available" is absent, and bytes that are not UTF-8 are Windows-1252."""
    if value is None:
        return None
    if value.isascii():   # most cells: nothing to repair, nothing to warn about
        fixed = value.strip()
        return None if not fixed or fixed.lower() == NOT_TRANSLATED else fixed
    fixed, not_utf8, repaired, garbled = _clean_non_ascii(value)
    if not_utf8:
        log.warning("ca: recall %s %s is not UTF-8; read as Windows-1252", recall_number, column)
    if repaired:
        log.info("ca: recall %s %s: repaired mojibake", recall_number, column)
    if garbled:
        log.warning("ca: recall %s %s looks garbled and cannot be repaired reliably; stored as read: %.60r",
                    recall_number, column, fixed)
    return fixed


@functools.lru_cache(maxsize=8192)
def _clean_non_ascii(value: str) -> tuple[str | None, bool, bool, bool]:
    """(cleaned text, was not UTF-8, mojibake repaired, still looks garbled) of a non-ASCII
    cell. Cached: French categories, systems and notification types repeat on every recall,
    and ftfy's checks are the costliest per-cell work of the file. The caller logs per cell."""
    not_utf8 = not _is_utf8(value)
    if not_utf8:
        value = value.encode("utf-8", "surrogateescape").decode("cp1252", errors="replace")
    fixed = text_rules.clean_text(value, absent={NOT_TRANSLATED})
    if fixed is None or fixed.isascii():
        return fixed, not_utf8, False, False
    return fixed, not_utf8, fixed != value.strip(), looks_bad(fixed)


def _is_utf8(value: str) -> bool:
    """False when the text carries bytes that were not UTF-8 (kept as lone surrogates by
    surrogateescape): strict encoding refuses exactly those, in C, faster than a regex."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_date(values: list[str | None]) -> str | None:
    raw_values = list(dict.fromkeys((value or "").strip() for value in values))
    for value in raw_values:
        if value and parse_date(value) is not None:
            return value
    # Nothing readable: hand the model the raw text so it keeps it and marks date_unknown.
    return next((value for value in raw_values if value), None)


def affected_units(values: list[str | None]) -> tuple[int | str | None, list[int]]:
    """The recall's count (repeated on every row, so taken once) and the distinct values seen,
    from the UNIT_AFFECTED_NBR of every row. When no row's value is a readable count, the raw
    text goes to the model, which keeps it in extra and warns (a silent None hid "-5" and "1e400")."""
    distinct = set(values)
    reported = sorted({units for units in map(parse_units, distinct) if units is not None})
    if not reported:
        raw = sorted(value.strip() for value in distinct if value and value.strip())
        return (raw[0] if raw else None), reported
    return reported[-1], reported


def split_comment(comment: str | None) -> dict[str, str]:
    """Issue → defect_cause, Safety Risk → consequence, Corrective Action(s) → remedy."""
    if not comment or ":" not in comment:   # (a heading ends in a colon)
        return {}
    matches = []
    search = _SECTION.search
    match = search(comment)
    while match is not None:
        start = match.start()
        if start == 0 or comment[start - 1].isspace():   # str.isspace is what `\s` matches
            matches.append(match)
            match = search(comment, match.end())
        else:   # not a heading: go on from the next character, as a look-behind would
            match = search(comment, start + 1)
    fields: dict[str, str] = {}
    for position, match in enumerate(matches):
        end = matches[position + 1].start() if position + 1 < len(matches) else len(comment)
        body = comment[match.end():end].strip()
        name = _SECTION_FIELD[match.group(1)[0]]
        if body and name not in fields:
            fields[name] = body
    return fields
