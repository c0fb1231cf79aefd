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

This module decides how each page is read; the OCR is in `pdfocr`, the page geometry (ruled
lines, boxes into cells and lines) in `pdfgrid`, the result and error classes in `pdfpage`.
"""
from __future__ import annotations

import io
import logging
import re
import time
from pathlib import Path

from basecrawler.formats.pdfgrid import (Box, erase_lines, fill_grids, find_grid_lines, grid_cells, group_lines,
                                         lines_text)
from basecrawler.formats.pdfocr import OCR_PACKAGES, check_ocr, ocr_image, ocr_page, render_page, tidy_ocr_text
from basecrawler.formats.pdfpage import (DEFAULT_DPI, DEFAULT_LANG, OcrTimedOut, OcrUnavailable, PageContent,
                                         PdfEncrypted, PdfError, PdfTooBig)

log = logging.getLogger(__name__)


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
            except OcrTimedOut:
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

def _pdfium_chars(pdfium_page) -> list[Box]:
    textpage = pdfium_page.get_textpage()
    height = pdfium_page.get_height()
    boxes = []
    try:
        for index in range(textpage.count_chars()):
            text = textpage.get_text_range(index, 1)
            if not text or text in "\r\n":
                continue
            left, bottom, right, top = textpage.get_charbox(index)
            boxes.append(Box(text, left, height - top, right, height - bottom))
    finally:
        textpage.close()
    return boxes


def _fallback_page(number, page, boxes: list[Box]) -> PageContent:
    grids = []
    for table in page.find_tables():
        grids.append([[cell for cell in row.cells] for row in table.rows])
    tables, _ = fill_grids(grids, boxes)
    text = "\n".join(lines_text(group_lines([b for b in boxes if b.text.strip()])))
    return PageContent(number, "text-fallback", text, tables)


# The reading entry point, and (for existing imports) what its pieces in pdfpage / pdfocr /
# pdfgrid offer.
__all__ = ["read_pdf", "tidy_ocr_text", "PageContent", "PdfError", "OcrUnavailable", "PdfEncrypted", "PdfTooBig",
           "check_ocr", "ocr_page", "ocr_image", "render_page", "find_grid_lines", "erase_lines", "grid_cells",
           "DEFAULT_DPI", "DEFAULT_LANG", "OCR_PACKAGES"]
