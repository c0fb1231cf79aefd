"""What reading a PDF gives and how it fails: `PageContent` per page, and the `PdfError` family
(basecrawler.formats.pdf reads; this module is what its callers and the OCR code share)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from basecrawler.errors import CrawlerError

DEFAULT_DPI = 300
DEFAULT_LANG = "jpn"


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



class OcrTimedOut(PdfTooBig):
    """Internal: tesseract ran out of the OCR time left (read_pdf turns it into the document's
    PdfTooBig)."""

    kind = "ocr_timeout"


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

