"""MLIT (Japan): one cell of a recall list's tables read into a value (a count, a date, a
届出番号, joined text lines) that is trusted or flagged: an OCR'd number or date below the
confidence floor, or a date too far from the press release, is left empty with the cell's
text in `flags`, never guessed (sources/jp_list.py walks the tables)."""
from __future__ import annotations

import datetime as dt
import difflib
import re
import unicodedata
from dataclasses import dataclass

from basecrawler.formats.dates import parse_date

# OCR'd numbers and dates below this Tesseract confidence are not trusted (left empty, flagged).
MIN_OCR_CONFIDENCE = 50.0
# An OCR'd recall date this far from the press release is a misread digit, not a date.
OCR_DATE_WINDOW = (dt.timedelta(days=-400), dt.timedelta(days=45))


@dataclass
class Cell:
    text: str
    conf: float | None
    method: str

    @property
    def ocr(self) -> bool:
        return self.method == "ocr"


def squash(text: str | None) -> str:
    """Text without white space, NFKC-normalised: how labels and headers are compared."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text or ""))


def similar(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, squash(a), squash(b)).ratio()


def cell_at(cells: list[Cell], columns: dict, key: str) -> Cell:
    index = columns.get(key)
    if index is None or index >= len(cells):
        return Cell("", None, cells[0].method if cells else "text")
    return cells[index]


def split_range(text: str) -> tuple[str | None, str | None]:
    """車台番号の範囲及び製作期間: chassis-number range line(s), then the production period."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    dated = [i for i, line in enumerate(lines) if re.search(r"(令和|平成|昭和|\d{4}年)", line)]
    if not dated:
        return join_lines("\n".join(lines)) or None, None
    first = dated[0]
    return join_lines("\n".join(lines[:first])) or None, join_lines("\n".join(lines[first:])) or None


def join_lines(text: str) -> str:
    """A cell's wrapped lines as one string: Japanese wraps without a space, Latin words with one."""
    out = ""
    for line in (l.strip() for l in (text or "").split("\n")):
        if not line:
            continue
        if out and out[-1].isascii() and out[-1].isalnum() and line[0].isascii() and line[0].isalnum():
            out += " "
        out += line
    return out


_COUNT_RE = re.compile(r"^(\d{1,3}(?:,\d{3})+|\d+)台?$")


def count_of(cell: Cell, flags: dict, name: str) -> int | None:
    """A vehicle count, or None with a flag: never a guess from an unreadable cell."""
    text = squash(cell.text)
    if not text:
        return None
    match = _COUNT_RE.match(text)
    if match and not (cell.ocr and cell.conf is not None and cell.conf < MIN_OCR_CONFIDENCE):
        return int(match[1].replace(",", ""))
    flags[name] = cell.text
    return None


def date_of(cell: Cell | None, flags: dict, name: str, press_date: dt.date | None) -> dt.date | None:
    if cell is None or not cell.text.strip():
        return None
    value = parse_date(squash(cell.text))
    doubtful = cell.ocr and (
        (cell.conf is not None and cell.conf < MIN_OCR_CONFIDENCE)
        or (value and press_date and not (press_date + OCR_DATE_WINDOW[0] <= value <= press_date + OCR_DATE_WINDOW[1])))
    if value is None or doubtful:
        flags[name] = cell.text
        return None
    return value


_NUMBER_RE = re.compile(r"^(外-)?\d{1,5}$")


def recall_number_of(cell: Cell | None) -> str | None:
    if cell is None:
        return None
    # Only a hyphen fits between 外 (imported vehicle) and the digits; OCR gives ー or 一.
    text = re.sub(r"^外[‐-―−ー一~～]", "外-", squash(cell.text))
    if _NUMBER_RE.match(text) and not (cell.ocr and cell.conf is not None and cell.conf < MIN_OCR_CONFIDENCE):
        return text
    if not cell.ocr and text:
        return text   # a text layer says what it says, even in an unusual format
    return None
