"""basecrawler.formats.pdf: tables from the text layer, the pypdfium2 fallback, and OCR for scans."""
import os
import re
import shutil
import subprocess
import unicodedata
from functools import lru_cache
from pathlib import Path

import pytest

from basecrawler.formats import pdf, pdfocr
from basecrawler.formats.pdf import OcrUnavailable, PdfError, read_pdf, tidy_ocr_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "jp"


def _ocr_missing_reason() -> str | None:
    if shutil.which("tesseract") is None:
        return "the tesseract binary is not installed (Debian: tesseract-ocr)"
    langs = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True).stdout.split()
    if "jpn" not in langs:
        return "tesseract has no Japanese data (Debian: tesseract-ocr-jpn)"
    return None


needs_ocr = pytest.mark.skipif(_ocr_missing_reason() is not None, reason=_ocr_missing_reason() or "")


@lru_cache(maxsize=None)
def pages_of(name: str):
    return read_pdf((FIXTURES / name).read_bytes())


def squash(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text or ""))


def test_text_layer_tables_are_read_cell_by_cell():
    page = pages_of("list_small_batch.pdf")[0]
    assert page.method == "text"
    table = page.tables[0]
    assert table[0] == ["届出者", "届出日", "届出番号", "車名・型式・通称名", "対象台数", "製作期間", "不具合の部位等"]
    assert table[1][:5] == ["株式会社ホワイトハウス", "令和6年8月2日", "外-3471", "フィアット\n3BA-31214\nフィアット500", "12"]
    assert len(table) == 6


def test_page_where_pdfminer_reads_no_characters_uses_pypdfium2_text(monkeypatch):
    monkeypatch.setattr(pdf, "_plumber_chars", lambda page: [])
    page = read_pdf((FIXTURES / "list_ducati_single.pdf").read_bytes())[0]
    assert page.method == "text-fallback"
    expected = pages_of("list_ducati_single.pdf")[0].tables
    assert [[[squash(c) for c in row] for row in t] for t in page.tables] == \
        [[[squash(c) for c in row] for row in t] for t in expected]


def test_not_a_pdf_is_a_pdf_error():
    with pytest.raises(PdfError, match="not a PDF"):
        read_pdf(b"<!DOCTYPE html><html>503 Service Unavailable</html>")


def test_cut_off_pdf_is_a_pdf_error():
    body = (FIXTURES / "list_honda_single.pdf").read_bytes()
    with pytest.raises(PdfError):
        read_pdf(body[: len(body) // 4])


def test_missing_tesseract_binary_names_the_debian_packages(monkeypatch):
    import pytesseract

    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "/nonexistent/tesseract")
    with pytest.raises(OcrUnavailable, match="tesseract-ocr and tesseract-ocr-jpn"):
        pdf.check_ocr("jpn")


def test_missing_japanese_data_names_its_debian_package(monkeypatch):
    import pytesseract

    monkeypatch.setattr(pdfocr.shutil, "which", lambda cmd: "/usr/bin/tesseract")
    monkeypatch.setattr(pytesseract, "get_languages", lambda config="": ["eng", "osd"])
    with pytest.raises(OcrUnavailable, match="tesseract-ocr-jpn"):
        pdf.check_ocr("jpn")


def test_scanned_page_without_tesseract_raises_instead_of_returning_nothing(monkeypatch):
    import pytesseract

    monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", "/nonexistent/tesseract")
    with pytest.raises(OcrUnavailable):
        read_pdf((FIXTURES / "list_small_batch_scanned.pdf").read_bytes())


def test_grid_lines_are_found_and_erased():
    from PIL import Image, ImageDraw

    image = Image.new("L", (1200, 600), 255)
    draw = ImageDraw.Draw(image)
    for y in (100, 200, 300):
        draw.rectangle([100, y, 1100, y + 3], fill=0)
    for x in (100, 600, 1100):
        draw.rectangle([x, 100, x + 3, 303], fill=0)
    draw.text((150, 140), "4526", fill=0)
    horizontal, vertical = pdf.find_grid_lines(image, dpi=300)
    assert len(horizontal) == 3 and len(vertical) == 3
    cells = pdf.grid_cells(horizontal, vertical, dpi=300)
    assert [len(row) for row in cells[0]] == [2, 2]
    pdf.erase_lines(image, horizontal, vertical)
    assert pdf.find_grid_lines(image, dpi=300) == ([], [])
    assert image.crop((150, 140, 200, 160)).getextrema()[0] < 128   # the text is still there


def test_tidy_ocr_text_restores_range_dash_and_vin_zeros_only():
    assert tidy_ocr_text("令和5年3月1日一令和5年3月31日") == "令和5年3月1日〜令和5年3月31日"
    assert tidy_ocr_text("JB64W-300012てJB64W-312345") == "JB64W-300012てJB64W-312345"  # not a plain code range
    assert tidy_ocr_text("ZDMAA00AAPB000101ーZDMAA00AAPB001234") == "ZDMAA00AAPB000101〜ZDMAA00AAPB001234"
    assert tidy_ocr_text("ZDMAAOOAAPB000101") == "ZDMAA00AAPB000101"
    assert tidy_ocr_text("一部の車両でオイルが漏れる") == "一部の車両でオイルが漏れる"


@needs_ocr
def test_ocr_runs_tesseract_single_threaded(monkeypatch):
    import pytesseract

    seen = []
    real = pytesseract.image_to_data

    def spy(*args, **kwargs):
        seen.append(os.environ.get("OMP_THREAD_LIMIT"))
        return real(*args, **kwargs)

    monkeypatch.delenv("OMP_THREAD_LIMIT", raising=False)
    monkeypatch.setattr(pytesseract, "image_to_data", spy)
    read_pdf((FIXTURES / "list_small_batch_scanned.pdf").read_bytes())
    assert seen and set(seen) == {"1"}


@needs_ocr
@pytest.mark.slow
def test_ocr_recovers_at_least_90_percent_of_table_cells_exactly():
    total = exact = 0
    for name in ("list_ducati_single", "list_small_batch"):
        truth, scanned = pages_of(f"{name}.pdf"), pages_of(f"{name}_scanned.pdf")
        assert [p.method for p in scanned] == ["ocr"] * len(truth)
        for true_page, ocr_page in zip(truth, scanned):
            assert len(ocr_page.tables) == len(true_page.tables)
            for true_table, ocr_table in zip(true_page.tables, ocr_page.tables):
                assert [len(r) for r in ocr_table] == [len(r) for r in true_table]
                for true_row, ocr_row in zip(true_table, ocr_table):
                    for true_cell, ocr_cell in zip(true_row, ocr_row):
                        total += 1
                        exact += squash(true_cell) == squash(ocr_cell)
    assert total >= 80
    assert exact / total >= 0.90, f"{exact}/{total} cells exact"


@needs_ocr
def test_tesseract_is_given_pages_without_ruled_lines(monkeypatch):
    import pytesseract

    given = []
    real = pytesseract.image_to_data

    def spy(image, *args, **kwargs):
        given.append(image.copy())
        return real(image, *args, **kwargs)

    monkeypatch.setattr(pytesseract, "image_to_data", spy)
    read_pdf((FIXTURES / "list_small_batch_scanned.pdf").read_bytes())
    assert given
    for image in given:
        ink = image.point(lambda v: 0 if v < 160 else 255)
        assert pdf.find_grid_lines(ink, dpi=300) == ([], [])


@needs_ocr
def test_scan_with_a_few_stamped_characters_is_still_read_by_ocr(tmp_path):
    import io

    import pypdfium2 as pdfium
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    scan = pdfium.PdfDocument((FIXTURES / "list_small_batch_scanned.pdf").read_bytes())[0]
    width, height = scan.get_width(), scan.get_height()
    image = scan.render(scale=300 / 72, grayscale=True).to_pil()
    buffer = io.BytesIO()
    page = canvas.Canvas(buffer, pagesize=(width, height))
    page.drawImage(ImageReader(image), 0, 0, width, height)
    page.drawString(width - 60, 20, "- 1 -")      # a page number in the text layer
    page.save()
    (content,) = read_pdf(buffer.getvalue())
    assert content.method == "ocr"
    assert content.tables and content.tables[0][0][2] == "届出番号"
