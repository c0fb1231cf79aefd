"""Tables and text out of PDF documents, whatever kind of PDF the agency published.

Each page is read the best way it allows, and says which (`PageContent.method`):
- `text`: the text layer through pdfplumber (ruled tables via its line finder);
- `text-fallback`: pdfminer reads no characters from some CID-keyed fonts that PDFium reads
  fine, so the characters come from pypdfium2 and are placed into pdfplumber's table cells;
- `ocr`: no text layer at all (a scan): the page is rendered (300 dpi by default), the ruled
  grid lines are found and erased (Tesseract can silently drop a whole ruled table otherwise),
  Tesseract (`jpn`) reads the page once, and table cells are rebuilt from its word boxes and
  the grid. Each OCR cell keeps its lowest word confidence so callers can refuse doubtful
  numbers and dates instead of storing a misread.
"""
from __future__ import annotations

import io
import logging
import os
import re
import shutil
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from basecrawler.errors import CrawlerError

log = logging.getLogger(__name__)

DEFAULT_DPI = 300
DEFAULT_LANG = "jpn"
OCR_PACKAGES = "tesseract-ocr and tesseract-ocr-jpn"
_INK = 160                 # grey level below which a rendered pixel counts as ink


class PdfError(CrawlerError):
    """The document cannot be read as a PDF at all."""

    kind = "pdf_unreadable"


class OcrUnavailable(PdfError):
    """A page needs OCR but Tesseract or its Japanese data is not installed."""

    kind = "ocr_unavailable"


class PdfEncrypted(PdfError):
    """The document needs a password to be opened."""

    kind = "encrypted"


class PdfTooBig(PdfError):
    """More pages, or more OCR time, than one document may take (BASECRAWLER_PDF_MAX_PAGES,
    BASECRAWLER_OCR_MAX_SECONDS): a 2,000-page scan must not hold a crawl for hours."""

    kind = "too_big"


@dataclass
class PageContent:
    """What one page says: its tables (rows of cell strings, lines inside a cell joined by
    "\\n"), its text, and how it was read."""

    number: int
    method: str                                     # text / text-fallback / ocr
    text: str = ""
    tables: list[list[list[str]]] = field(default_factory=list)
    # OCR only: the lowest Tesseract word confidence (0-100) of every cell, None when empty.
    confidence: list[list[list[float | None]]] | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Box:
    """A piece of text with its position (pixels or points, top-left origin)."""

    text: str
    left: float
    top: float
    right: float
    bottom: float
    conf: float | None = None

    @property
    def cx(self) -> float:
        return (self.left + self.right) / 2

    @property
    def cy(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def height(self) -> float:
        return self.bottom - self.top


# ---- entry point ------------------------------------------------------------------------------

def read_pdf(source: bytes | str | Path, *, dpi: int = DEFAULT_DPI, ocr: bool = True,
             lang: str = DEFAULT_LANG, max_pages: int | None = None, max_ocr_seconds: float | None = None,
             clock=time.monotonic) -> list[PageContent]:
    """Every page's tables and text. Raises PdfError for a document that is not a readable
    PDF, PdfEncrypted when it needs a password, PdfTooBig beyond `max_pages` pages (checked
    before any page is read) or once OCR has taken more than `max_ocr_seconds` (checked after
    each OCR'd page, and inside a page too: tesseract is given what is left of the cap as its
    own timeout, so one huge page cannot overrun it),
    OcrUnavailable when a page needs OCR that is not installed."""
    import pdfplumber
    import pypdfium2 as pdfium
    from pdfminer.pdfparser import PDFSyntaxError
    from pdfplumber.utils.exceptions import PdfminerException

    data = Path(source).read_bytes() if isinstance(source, (str, Path)) else source
    if not data.lstrip()[:4] == b"%PDF":
        raise PdfError(f"not a PDF (starts with {data[:8]!r})")
    try:
        # PDFium first: it counts pages without parsing them, and names a password error.
        document = pdfium.PdfDocument(data)
    except (pdfium.PdfiumError, ValueError, TypeError) as exc:
        if "password" in str(exc).lower():
            raise PdfEncrypted("encrypted PDF: it needs a password to be opened") from None
        raise PdfError(f"unreadable PDF: {type(exc).__name__}: {exc}") from None
    total = len(document)
    if max_pages and total > max_pages:
        document.close()
        raise PdfTooBig(f"too big: {total} pages, more than the {max_pages}-page limit per document "
                        "(BASECRAWLER_PDF_MAX_PAGES)")
    try:
        plumber = pdfplumber.open(io.BytesIO(data))
    except (PdfminerException, PDFSyntaxError, ValueError, TypeError) as exc:
        document.close()
        if _is_password_error(exc):
            raise PdfEncrypted("encrypted PDF: it needs a password to be opened") from None
        raise PdfError(f"unreadable PDF: {type(exc).__name__}: {exc}") from None
    pages = []
    ocr_seconds = 0.0
    try:
        for number, (page, pdfium_page) in enumerate(zip(plumber.pages, document), start=1):
            started = clock()
            budget = max_ocr_seconds - ocr_seconds if max_ocr_seconds else None
            try:
                content = _read_page(number, page, pdfium_page, dpi=dpi, ocr=ocr, lang=lang, ocr_budget=budget)
            except _OcrTimedOut:
                ocr_seconds += clock() - started
                raise PdfTooBig(f"too big: OCR took {ocr_seconds:.1f}s for {number} of {total} pages, more than "
                                f"the {max_ocr_seconds:g}s limit per document (BASECRAWLER_OCR_MAX_SECONDS); "
                                f"tesseract stopped inside page {number}") from None
            pages.append(content)
            if content.method == "ocr":
                ocr_seconds += clock() - started
                if max_ocr_seconds and ocr_seconds > max_ocr_seconds and number < total:
                    raise PdfTooBig(f"too big: OCR took {ocr_seconds:.1f}s for {number} of {total} pages, more than "
                                    f"the {max_ocr_seconds:g}s limit per document (BASECRAWLER_OCR_MAX_SECONDS)")
    except (PdfminerException, PDFSyntaxError, pdfium.PdfiumError, KeyError, ValueError, TypeError,
            AssertionError) as exc:
        raise PdfError(f"unreadable PDF page: {type(exc).__name__}: {exc}") from None
    finally:
        plumber.close()
        document.close()
    if not pages:
        raise PdfError("PDF has no pages")
    return pages


def _is_password_error(exc: BaseException) -> bool:
    """pdfminer's PDFPasswordIncorrect / PDFEncryptionError arrive wrapped, with no message."""
    causes = [exc, *getattr(exc, "args", ())]
    return any("password" in type(c).__name__.lower() or "encrypt" in type(c).__name__.lower() for c in causes)


def _read_page(number, page, pdfium_page, *, dpi, ocr, lang, ocr_budget: float | None = None) -> PageContent:
    chars = _plumber_chars(page)
    boxes = [] if chars else [b for b in _pdfium_chars(pdfium_page) if b.text.strip()]
    if not _scan_with_stamp(page, max(len(chars), len(boxes))):
        if chars:
            tables = [[[_clean_cell(cell) for cell in row] for row in table] for table in page.extract_tables()]
            return PageContent(number, "text", page.extract_text() or "", tables)
        if boxes:
            log.info("page %d: pdfminer read no characters; using the pypdfium2 text", number)
            return _fallback_page(number, page, boxes)
    if not ocr:
        return PageContent(number, "ocr", "", [], [])
    return ocr_page(number, pdfium_page, dpi=dpi, lang=lang, budget_s=ocr_budget)


def _plumber_chars(page) -> list:
    """Characters pdfminer reads from the page (empty for scans and some CID fonts)."""
    return [c for c in page.chars if c.get("text", "").strip()]


def _scan_with_stamp(page, characters: int) -> bool:
    """A scanned page can carry a few real characters (a page number, a received-stamp) on top
    of the image; its table is still only in the image."""
    if characters > 40:
        return False
    page_area = float(page.width * page.height) or 1.0
    covered = sum(abs((img["x1"] - img["x0"]) * (img["bottom"] - img["top"])) for img in page.images)
    return covered / page_area >= 0.5


def _clean_cell(text: str | None) -> str:
    if not text:
        return ""
    lines = [re.sub(r"[ \t\u3000]+", " ", line).strip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line)


# ---- text fallback (pypdfium2) ------------------------------------------------------------------

def _pdfium_chars(pdfium_page) -> list[_Box]:
    textpage = pdfium_page.get_textpage()
    height = pdfium_page.get_height()
    boxes = []
    try:
        for index in range(textpage.count_chars()):
            text = textpage.get_text_range(index, 1)
            if not text or text in "\r\n":
                continue
            left, bottom, right, top = textpage.get_charbox(index)
            boxes.append(_Box(text, left, height - top, right, height - bottom))
    finally:
        textpage.close()
    return boxes


def _fallback_page(number, page, boxes: list[_Box]) -> PageContent:
    grids = []
    for table in page.find_tables():
        grids.append([[cell for cell in row.cells] for row in table.rows])
    tables, _ = _fill_grids(grids, boxes)
    text = "\n".join(_lines_text(_group_lines([b for b in boxes if b.text.strip()])))
    return PageContent(number, "text-fallback", text, tables)


# ---- OCR ----------------------------------------------------------------------------------------

def check_ocr(lang: str = DEFAULT_LANG) -> None:
    """Raise OcrUnavailable naming the Debian packages when Tesseract or `lang` is missing."""
    import pytesseract

    command = pytesseract.pytesseract.tesseract_cmd
    if shutil.which(command) is None:
        raise OcrUnavailable(f"this PDF page is a scan and needs OCR, but the tesseract binary ({command!r}) is not "
                             f"installed: install the Debian packages {OCR_PACKAGES} (scripts/setup does)")
    try:
        languages = pytesseract.get_languages(config="")
    except (pytesseract.TesseractError, OSError) as exc:
        raise OcrUnavailable(f"tesseract does not run ({exc}); reinstall the Debian packages {OCR_PACKAGES}") from None
    for wanted in lang.split("+"):
        if wanted not in languages:
            raise OcrUnavailable(f"tesseract has no {wanted!r} language data (has: {', '.join(languages)}): "
                                 f"install the Debian package tesseract-ocr-{wanted}")


def render_page(pdfium_page, dpi: int = DEFAULT_DPI):
    """The page as a greyscale PIL image at `dpi`."""
    return pdfium_page.render(scale=dpi / 72, grayscale=True).to_pil().convert("L")


class _OcrTimedOut(PdfTooBig):
    """tesseract ran out of the OCR time left (read_pdf turns it into the document's PdfTooBig)."""

    kind = "ocr_timeout"


def ocr_page(number: int, pdfium_page, *, dpi: int = DEFAULT_DPI, lang: str = DEFAULT_LANG,
             budget_s: float | None = None) -> PageContent:
    """One scanned page read by OCR; `budget_s`: seconds it may take at most (None: no cap)."""
    deadline = time.monotonic() + budget_s if budget_s is not None else None
    check_ocr(lang)
    image = render_page(pdfium_page, dpi)
    return ocr_image(number, image, dpi=dpi, lang=lang, deadline=deadline)


def ocr_image(number: int, image, *, dpi: int = DEFAULT_DPI, lang: str = DEFAULT_LANG,
              deadline: float | None = None) -> PageContent:
    ink = image.point(lambda v: 0 if v < _INK else 255)
    horizontal, vertical = find_grid_lines(ink, dpi)
    page = image.copy()
    erase_lines(page, horizontal, vertical)
    erase_lines(ink, horizontal, vertical)
    # Tesseract's OpenMP threads fight each other on small machines: one thread is 3-4x faster.
    os.environ["OMP_THREAD_LIMIT"] = "1"
    grids = grid_cells(horizontal, vertical, dpi)
    if grids:
        boxes = _ocr_cells_as_strip(page, ink, grids, dpi=dpi, lang=lang, deadline=deadline)
    else:  # no ruled table: plain page text with Tesseract's own layout analysis
        boxes = _ocr_boxes(page, lang=lang, dpi=dpi, psm=3, deadline=deadline)
    tables, confidence = _fill_grids(grids, boxes, with_confidence=True)
    tables = [[[tidy_ocr_text(cell) for cell in row] for row in table] for table in tables]
    text = tidy_ocr_text("\n".join(_lines_text(_group_lines(boxes))))
    return PageContent(number, "ocr", text, tables, confidence)


def _ocr_boxes(image, *, lang, dpi, psm, deadline: float | None = None) -> list[_Box]:
    import pytesseract

    # pytesseract kills tesseract after `timeout` seconds; 0 means never, hence the floor.
    timeout = 0.0
    if deadline is not None:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise _OcrTimedOut("no OCR time left")
    try:
        data = pytesseract.image_to_data(image, lang=lang, config=f"--psm {psm} --dpi {dpi}",
                                         output_type=pytesseract.Output.DICT,
                                         timeout=max(timeout, 0.001) if deadline is not None else 0)
    except RuntimeError as exc:
        if "timeout" not in str(exc).lower():
            raise
        raise _OcrTimedOut(str(exc)) from None
    boxes = []
    for i, word in enumerate(data["text"]):
        word = (word or "").strip()
        conf = float(data["conf"][i])
        if not word or conf < 0:
            continue
        left, top = data["left"][i], data["top"][i]
        boxes.append(_Box(word, left, top, left + data["width"][i], top + data["height"][i], conf))
    return boxes


def _ocr_cells_as_strip(page, ink, grids, *, dpi, lang, deadline: float | None = None) -> list[_Box]:
    """Every non-empty cell pasted one under the other into one image, read by one Tesseract
    call as a plain column of lines, and the words mapped back to page coordinates."""
    from PIL import Image

    inset = 1   # the ruled lines are already erased; a wider inset would clip text touching them
    gap = int(dpi * 0.12)
    pieces = []
    for grid in grids:
        for row in grid:
            for left, top, right, bottom in row:
                box = (int(left) + inset, int(top) + inset, int(right) - inset, int(bottom) - inset)
                if box[2] <= box[0] or box[3] <= box[1]:
                    continue
                bbox = Image.eval(ink.crop(box), lambda v: 255 - v).getbbox()
                if bbox is None:
                    continue
                crop = page.crop(box).crop(bbox)
                pieces.append((crop, box[0] + bbox[0], box[1] + bbox[1]))
    if not pieces:
        return []
    width = max(p[0].width for p in pieces) + 2 * gap
    height = sum(p[0].height + gap for p in pieces) + gap
    strip = Image.new("L", (width, height), 255)
    placements = []
    y = gap
    for crop, page_x, page_y in pieces:
        strip.paste(crop, (gap, y))
        placements.append((y, y + crop.height, page_x - gap, page_y - y))
        y += crop.height + gap
    boxes = []
    # psm 6 (one uniform block): every piece is a short run of lines, which is what it reads best.
    for box in _ocr_boxes(strip, lang=lang, dpi=dpi, psm=6, deadline=deadline):
        for start, end, dx, dy in placements:
            if start - gap / 2 <= box.cy <= end + gap / 2:
                boxes.append(_Box(box.text, box.left + dx, box.top + dy, box.right + dx, box.bottom + dy, box.conf))
                break
    return boxes


# Marks Tesseract's jpn model reads in place of the wave dash 〜 that joins the two ends of a
# range (dates, chassis numbers); between those ends no other reading is possible.
_RANGE_DASH_MISREADS = re.escape("一ーて~～−―‐-")
_DATE_RANGE_RE = re.compile(rf"(日)\s*[{_RANGE_DASH_MISREADS}]\s*(令和|平成|昭和|\d{{4}}年)")
_CODE_RANGE_RE = re.compile(rf"([A-Z0-9]{{6,}})\s*[{_RANGE_DASH_MISREADS}〜]\s*([A-Z0-9]{{6,}})")
_VIN_RE = re.compile(r"\b[A-Z0-9]{17}\b")


def tidy_ocr_text(text: str) -> str:
    """Undo OCR confusions that only one reading can explain, nothing more:
    a misread 〜 between the two ends of a date or chassis-number range, and O/I/Q inside a
    17-character VIN (ISO 3779 excludes those letters, so they can only be 0/1/0)."""
    text = _DATE_RANGE_RE.sub(r"\1〜\2", text)
    text = _VIN_RE.sub(lambda m: m.group(0).translate(str.maketrans("OIQ", "010")), text)
    text = _CODE_RANGE_RE.sub(r"\1〜\2", text)
    return text


@dataclass
class _Line:
    """A ruled line found in a page image: position across, extent along, in pixels."""

    at: float
    start: int
    end: int
    thickness: int = 1


def _runs(image, min_length: int) -> list[tuple[int, int, int]]:
    """(row, start, end) of every run of ink at least `min_length` pixels long."""
    width = image.width
    data = image.tobytes()
    pattern = re.compile(rb"\x00{%d,}" % min_length)
    found = []
    for row in range(image.height):
        for match in pattern.finditer(data, row * width, (row + 1) * width):
            found.append((row, match.start() - row * width, match.end() - row * width))
    return found


def _merge_runs(runs) -> list[_Line]:
    """Adjacent rows' overlapping runs are one thick line."""
    lines: list[dict] = []
    open_lines: list[dict] = []
    for row, start, end in runs:
        target = None
        for line in open_lines:
            if row - line["last"] <= 2 and start < line["end"] and end > line["start"]:
                target = line
                break
        if target is None:
            target = {"first": row, "last": row, "start": start, "end": end}
            lines.append(target)
            open_lines.append(target)
        target["last"] = row
        target["start"], target["end"] = min(target["start"], start), max(target["end"], end)
        open_lines = [line for line in open_lines if row - line["last"] <= 2]
    return [_Line((l["first"] + l["last"]) / 2, l["start"], l["end"], l["last"] - l["first"] + 1) for l in lines]


def find_grid_lines(ink, dpi: int = DEFAULT_DPI) -> tuple[list[_Line], list[_Line]]:
    """Horizontal and vertical ruled lines: runs of ink longer than any stroke of 10-16 pt text."""
    from PIL import Image

    horizontal = _merge_runs(_runs(ink, max(20, int(dpi * 0.4))))
    vertical = _merge_runs(_runs(ink.transpose(Image.Transpose.TRANSPOSE), max(15, int(dpi * 0.25))))
    return horizontal, vertical


def erase_lines(ink, horizontal: list[_Line], vertical: list[_Line]) -> None:
    from PIL import ImageDraw

    draw = ImageDraw.Draw(ink)
    for line in horizontal:
        half = line.thickness / 2 + 1
        draw.rectangle([line.start - 1, line.at - half, line.end + 1, line.at + half], fill=255)
    for line in vertical:
        half = line.thickness / 2 + 1
        draw.rectangle([line.at - half, line.start - 1, line.at + half, line.end + 1], fill=255)


def grid_cells(horizontal: list[_Line], vertical: list[_Line], dpi: int = DEFAULT_DPI) -> list[list[list[tuple]]]:
    """Tables as rows of cell boxes (left, top, right, bottom) from the ruled lines: each band
    between two horizontal lines is a row, split by the vertical lines crossing it; a band no
    vertical line crosses is the gap between two tables."""
    tolerance = dpi * 0.03
    rules = sorted(horizontal, key=lambda l: l.at)
    tables: list[list[list[tuple]]] = []
    current: list[list[tuple]] = []
    for upper, lower in zip(rules, rules[1:]):
        left, right = max(upper.start, lower.start), min(upper.end, lower.end)
        if right - left < dpi * 0.2 or lower.at - upper.at < dpi * 0.08:
            continue
        middle = (upper.at + lower.at) / 2
        crossing = sorted(v.at for v in vertical
                          if v.start - tolerance <= upper.at + 2 and v.end + tolerance >= lower.at - 2
                          and left - tolerance <= v.at <= right + tolerance and v.start <= middle <= v.end)
        crossing = [x for i, x in enumerate(crossing) if i == 0 or x - crossing[i - 1] > tolerance]
        if len(crossing) < 2:
            if current:
                tables.append(current)
                current = []
            continue
        current.append([(a, upper.at, b, lower.at) for a, b in zip(crossing, crossing[1:])])
    if current:
        tables.append(current)
    return tables


# ---- cells from boxes -------------------------------------------------------------------------------

def _fill_grids(grids, boxes: list[_Box], with_confidence: bool = False):
    """Put every box into the grid cell holding its centre; return the tables (and the lowest
    confidence per cell)."""
    tables, confidences = [], []
    placed: dict[tuple, list[_Box]] = {}
    for t, grid in enumerate(grids):
        for r, row in enumerate(grid):
            for c, cell in enumerate(row):
                placed[(t, r, c)] = []
    for box in boxes:
        for t, grid in enumerate(grids):
            hit = _locate(grid, box)
            if hit is not None:
                placed[(t, *hit)].append(box)
                break
    for t, grid in enumerate(grids):
        table, table_conf = [], []
        for r, row in enumerate(grid):
            cells, confs = [], []
            for c, cell in enumerate(row):
                inside = placed[(t, r, c)]
                cells.append("\n".join(_lines_text(_group_lines(inside))) if cell is not None else "")
                known = [b.conf for b in inside if b.conf is not None]
                confs.append(min(known) if known else None)
            table.append(cells)
            table_conf.append(confs)
        tables.append(table)
        confidences.append(table_conf)
    return (tables, confidences) if with_confidence else (tables, None)


def _locate(grid, box: _Box) -> tuple[int, int] | None:
    for r, row in enumerate(grid):
        for c, cell in enumerate(row):
            if cell is None:
                continue
            left, top, right, bottom = cell
            if left <= box.cx <= right and top <= box.cy <= bottom:
                return r, c
    return None


def _group_lines(boxes: list[_Box]) -> list[list[_Box]]:
    """Boxes into text lines, top to bottom, each left to right."""
    if not boxes:
        return []
    typical = statistics.median(b.height for b in boxes) or 1
    lines: list[list[_Box]] = []
    for box in sorted(boxes, key=lambda b: b.cy):
        if lines and abs(box.cy - statistics.fmean(b.cy for b in lines[-1])) <= typical * 0.5:
            lines[-1].append(box)
        else:
            lines.append([box])
    return [sorted(line, key=lambda b: b.left) for line in lines]


def _lines_text(lines: list[list[_Box]]) -> list[str]:
    out = []
    for line in lines:
        text = ""
        previous = None
        for box in line:
            if previous is not None and _needs_space(previous, box):
                text += " "
            text += box.text
            previous = box
        text = re.sub(r"\s+", " ", text).strip()
        if text:
            out.append(text)
    return out


def _needs_space(previous: _Box, box: _Box) -> bool:
    """Japanese has no spaces between words; Latin words and numbers do."""
    gap = box.left - previous.right
    height = max(previous.height, box.height, 1)
    latin = previous.text[-1:].isascii() and box.text[:1].isascii()
    return latin and gap > height * 0.3


__all__ = ["read_pdf", "tidy_ocr_text", "PageContent", "PdfError", "OcrUnavailable", "PdfEncrypted", "PdfTooBig", "check_ocr", "ocr_page", "ocr_image",
           "render_page", "find_grid_lines", "erase_lines", "grid_cells", "DEFAULT_DPI"]
