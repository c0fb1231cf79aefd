"""OCR of a scanned page: rendered, its ruled grid lines found and erased (Tesseract can
silently drop a whole ruled table otherwise), read once by Tesseract, and table cells rebuilt
from its word boxes and the grid; each cell keeps its lowest word confidence."""
from __future__ import annotations

import os
import re
import shutil
import time

from basecrawler.formats.pdfgrid import Box, erase_lines, fill_grids, find_grid_lines, grid_cells, group_lines, lines_text
from basecrawler.formats.pdfpage import DEFAULT_DPI, DEFAULT_LANG, OcrTimedOut, OcrUnavailable, PageContent

OCR_PACKAGES = "tesseract-ocr and tesseract-ocr-jpn"
_INK = 160                 # grey level below which a rendered pixel counts as ink


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
    tables, confidence = fill_grids(grids, boxes, with_confidence=True)
    tables = [[[tidy_ocr_text(cell) for cell in row] for row in table] for table in tables]
    text = tidy_ocr_text("\n".join(lines_text(group_lines(boxes))))
    return PageContent(number, "ocr", text, tables, confidence)


def _ocr_boxes(image, *, lang, dpi, psm, deadline: float | None = None) -> list[Box]:
    import pytesseract

    # pytesseract kills tesseract after `timeout` seconds; 0 means never, hence the floor.
    timeout = 0.0
    if deadline is not None:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise OcrTimedOut("no OCR time left")
    try:
        data = pytesseract.image_to_data(image, lang=lang, config=f"--psm {psm} --dpi {dpi}",
                                         output_type=pytesseract.Output.DICT,
                                         timeout=max(timeout, 0.001) if deadline is not None else 0)
    except RuntimeError as exc:
        if "timeout" not in str(exc).lower():
            raise
        raise OcrTimedOut(str(exc)) from None
    boxes = []
    for i, word in enumerate(data["text"]):
        word = (word or "").strip()
        conf = float(data["conf"][i])
        if not word or conf < 0:
            continue
        left, top = data["left"][i], data["top"][i]
        boxes.append(Box(word, left, top, left + data["width"][i], top + data["height"][i], conf))
    return boxes


def _ocr_cells_as_strip(page, ink, grids, *, dpi, lang, deadline: float | None = None) -> list[Box]:
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
                boxes.append(Box(box.text, box.left + dx, box.top + dy, box.right + dx, box.bottom + dy, box.conf))
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
