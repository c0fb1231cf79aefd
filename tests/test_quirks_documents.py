"""Issue #13 points 7 and 8: documents from elsewhere, documents too big to process.

Driven through `python -m basecrawler run --source jp` against loopback servers: the MLIT
press page links its recall list PDF, and that PDF is the payload of each class — on another
host, 2,000 blank pages, pages that take OCR time, encrypted. Expected values are read off
the payloads (the Honda list PDF's numbers are in fixtures/jp/expected.json).
"""
import io
import sys
import time
from pathlib import Path

import pytest

from basecrawler.errors import ForeignHost
from basecrawler.fetch.http import HttpClient, host_allowed
from basecrawler.formats.pdf import PdfTooBig, read_pdf
from basecrawler.testing import LoopbackServer, Reply, fast_settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_ledger import REPO, cli, dead_letters, jp_feed, jp_press_page, ledger_rows, recall  # noqa: E402
from test_pdf import needs_ocr  # noqa: E402
from support import encrypted_pdf  # noqa: E402

HONDA_PDF = (REPO / "fixtures" / "jp" / "list_honda_single.pdf").read_bytes()
TITLE = "リコールの届出について（ホンダ　GB350　他）"


def blank_pdf(pages: int) -> bytes:
    """`pages` empty A4 pages: no text layer, no image, so every page goes to OCR."""
    from reportlab.pdfgen import canvas
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer)
    for _ in range(pages):
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


class MlitSite:
    """Feed with one recall press release whose list PDF is at `pdf_href`."""

    def __init__(self, pdf_href: str, pdf: bytes = b""):
        self.pdf_href = pdf_href
        self.pdf = pdf
        self.paths: list[str] = []

    def __call__(self, request):
        self.paths.append(request.path)
        if request.path == "/pressrelease.rdf":
            return Reply(200, jp_feed(("r_honda", "2024-09-06", TITLE)), {"Content-Type": "application/rss+xml"})
        if request.path == "/report/press/r_honda.html":
            return Reply(200, jp_press_page(TITLE, "令和6年9月6日", self.pdf_href), {"Content-Type": "text/html; charset=UTF-8"})
        if request.path.endswith(".pdf"):
            return Reply(200, self.pdf, {"Content-Type": "application/pdf"})
        return Reply(404, b"not found", {"Content-Type": "text/plain"})


def run_jp(tmp_path, site, env=None):
    db = tmp_path / "jp.db"
    with LoopbackServer(site) as server:
        done = cli(db, "run", "--source", "jp", env={"BASECRAWLER_JP_SITE_URL": server.url, **(env or {})})
    return db, done


# ---- 7. documents from elsewhere ----------------------------------------------------------------
def test_pdf_linked_on_another_host_is_a_foreign_host_letter_and_never_requested(tmp_path):
    elsewhere = LoopbackServer(lambda request: Reply(200, HONDA_PDF, {"Content-Type": "application/pdf"})).start()
    try:
        foreign_url = f"{elsewhere.url}/files/list.pdf"     # same machine, another port: another server
        site = MlitSite(foreign_url)
        db = tmp_path / "jp.db"
        with LoopbackServer(site) as server:
            env = {"BASECRAWLER_JP_SITE_URL": server.url}
            first = cli(db, "run", "--source", "jp", env=env)
            assert first.returncode == 0, first.stderr
            assert elsewhere.requests == []
            letters = dead_letters(db, "jp")
            assert [(d["kind"], d["stage"], d["url"]) for d in letters] == [("foreign_host", "fetch", foreign_url)]
            assert "not one of the source's hosts" in letters[0]["error"]
            assert recall(db, "JP", "4526") is None
            assert ledger_rows(db, "jp")["/report/press/r_honda.html"]["state"] == "failing"

            # A source (here through the environment) may declare more hosts: then the
            # document is fetched, and the ledger brings the failed press release back.
            port = elsewhere.url.rsplit(":", 1)[1]
            second = cli(db, "run", "--source", "jp", env={**env, "BASECRAWLER_JP_ALLOWED_HOSTS": f"127.0.0.1:{port}"})
            assert second.returncode == 0, second.stderr
            assert [r.path for r in elsewhere.requests] == ["/files/list.pdf"]
            honda = recall(db, "JP", "4526")
            assert honda["affected_units"] == 12313
            assert honda["extra"]["pdf_url"] == foreign_url
    finally:
        elsewhere.stop()


def test_redirect_to_another_host_is_refused_before_it_is_followed(tmp_path):
    elsewhere = LoopbackServer(lambda request: Reply(200, b"%PDF-1.4 secret", {"Content-Type": "application/pdf"})).start()
    try:
        with LoopbackServer(lambda request: Reply(302, b"", {"Location": f"{elsewhere.url}/x.pdf"})) as site:
            from basecrawler import Store
            store = Store(str(tmp_path / "h.db"))
            client = HttpClient(settings=fast_settings(str(tmp_path / "h.db")), store=store,
                                allowed_hosts={site.url.split("//")[1]})
            with pytest.raises(ForeignHost) as caught:
                client.get(f"{site.url}/list.pdf")
            assert caught.value.kind == "foreign_host" and caught.value.url == f"{elsewhere.url}/x.pdf"
            assert elsewhere.requests == []
            client.close()
            store.close()
    finally:
        elsewhere.stop()


def test_host_rules():
    allowed = {"www.mlit.go.jp", "127.0.0.1:8080"}
    assert host_allowed("https://www.mlit.go.jp/a.pdf", allowed)
    assert host_allowed("http://WWW.MLIT.GO.JP:80/a.pdf", allowed)
    assert not host_allowed("https://www.mlit.go.jp:8443/a.pdf", allowed)   # another port, another server
    assert not host_allowed("https://evil.example/www.mlit.go.jp", allowed)
    assert not host_allowed("file:///etc/passwd", allowed)
    assert host_allowed("http://127.0.0.1:8080/x", allowed)
    assert not host_allowed("http://127.0.0.1:8081/x", allowed)
    assert host_allowed("http://anything/x", None)


# ---- 8. documents too big to process ------------------------------------------------------------
def test_two_thousand_blank_pages_are_refused_before_any_page_is_read(tmp_path):
    big = blank_pdf(2000)
    assert 700_000 < len(big) < 900_000          # the "800 KB PDF of 2,000 blank pages"
    started = time.monotonic()
    db, done = run_jp(tmp_path, MlitSite("/report/press/content/big.pdf", big))
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    letters = dead_letters(db, "jp")
    assert [(d["kind"], d["stage"]) for d in letters] == [("too_big", "parse")]
    assert "2000 pages, more than the 50-page limit" in letters[0]["error"]
    # Nothing to fetch again: the same document would be refused again (the letter keeps it).
    assert ledger_rows(db, "jp")["/report/press/r_honda.html"]["state"] == "done"
    assert elapsed < 30, f"rejecting the 2,000-page PDF took {elapsed:.1f}s"


def test_page_cap_is_settable(tmp_path):
    db, done = run_jp(tmp_path, MlitSite("/report/press/content/list.pdf", HONDA_PDF),
                      env={"BASECRAWLER_PDF_MAX_PAGES": "0"})   # 0: no page cap
    assert recall(db, "JP", "4526") is not None
    db2, done = run_jp(tmp_path / "b", MlitSite("/report/press/content/list.pdf", blank_pdf(3)),
                       env={"BASECRAWLER_PDF_MAX_PAGES": "2"})
    assert "3 pages, more than the 2-page limit" in dead_letters(db2, "jp")[0]["error"]


@needs_ocr
def test_ocr_time_cap_stops_a_document_through_the_cli(tmp_path):
    db, done = run_jp(tmp_path, MlitSite("/report/press/content/slow.pdf", blank_pdf(3)),
                      env={"BASECRAWLER_OCR_MAX_SECONDS": "0.001"})
    assert done.returncode == 0, done.stderr
    letters = dead_letters(db, "jp")
    assert [(d["kind"], d["stage"]) for d in letters] == [("too_big", "parse")]
    assert "for 1 of 3 pages, more than the 0.001s limit" in letters[0]["error"]


def test_ocr_time_cap_with_an_injected_clock():
    ticks = iter(range(0, 10_000, 100))          # every page "takes" 100 s
    with pytest.raises(PdfTooBig, match=r"OCR took 200\.0s for 2 of 4 pages, more than the 120s limit"):
        read_pdf(blank_pdf(4), ocr=False, max_ocr_seconds=120, clock=lambda: next(ticks))
    # Under the cap, every page is read.
    ticks = iter(range(0, 10_000, 10))
    assert len(read_pdf(blank_pdf(4), ocr=False, max_ocr_seconds=120, clock=lambda: next(ticks))) == 4


def test_encrypted_pdf_letter_says_encrypted(tmp_path):
    db, done = run_jp(tmp_path, MlitSite("/report/press/content/locked.pdf", encrypted_pdf()))
    assert done.returncode == 0, done.stderr
    letters = dead_letters(db, "jp")
    assert [(d["kind"], d["stage"]) for d in letters] == [("encrypted", "parse")]
    assert "encrypted PDF" in letters[0]["error"]
