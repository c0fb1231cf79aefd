"""What wave 2 left out (issue 22.7, the parts of the HTTP layer): a partial download of a
process killed with SIGKILL resumes with Range instead of starting over; the raw archive's temp
files of a killed process are swept; the OCR time cap holds inside one page too."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from basecrawler import Store
from basecrawler.fetch.archive import Archive, sweep_temp_files
from basecrawler.config import Settings
from basecrawler.formats.pdf import PdfTooBig
from basecrawler.fetch.http import HttpClient
from basecrawler.fetch.partials import partial_prefix, sweep_partial_downloads, url_key
from basecrawler.pipeline.upkeep import recover_after_crash
from conftest import subprocess_env
from hostile_support import RawServer

DOCUMENT = bytes(range(256)) * 4096          # 1 MiB, every offset distinguishable
ETAG = '"v1"'
DEAD_PID = 2 ** 22 + 12345                   # above the default pid_max: no such process
STALL_S = 60                                 # a stalled server outlives the wait for the child's bytes
WAIT_S = 15


def _wait_for(condition, child) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert child.poll() is None and time.monotonic() < deadline, "the child never wrote its first bytes"
        time.sleep(0.05)


def _range_server(*, honour_range=True, etag=ETAG, stall_after: int | None = None):
    """Serves DOCUMENT with an ETag; answers `Range` + a matching `If-Range` with a 206.
    `stall_after`: a request without Range gets that many bytes, then nothing (a child is
    killed meanwhile). Every request's headers are kept in `server.seen`."""
    seen = []

    def handler(h):
        seen.append({k.lower(): v for k, v in h.headers.items()})
        wanted = h.headers.get("Range")
        if wanted and honour_range and h.headers.get("If-Range") == etag:
            start = int(wanted.split("=")[1].rstrip("-"))
            h.send_response(206)
            h.send_header("Content-Range", f"bytes {start}-{len(DOCUMENT) - 1}/{len(DOCUMENT)}")
            body = DOCUMENT[start:]
        else:
            h.send_response(200)
            body = DOCUMENT
        h.send_header("ETag", etag)
        h.send_header("Content-Type", "text/csv")
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Connection", "close")
        h.end_headers()
        if stall_after is not None and not wanted:
            h.wfile.write(body[:stall_after])
            h.wfile.flush()
            time.sleep(STALL_S)
            return
        h.wfile.write(body)

    server = RawServer(handler)
    server.seen = seen
    return server


def _park_by_hand(tmp: Path, url: str, have: int, etag=ETAG) -> None:
    """What a process killed after `have` bytes leaves behind: its .part and the sidecar."""
    tmp.mkdir(exist_ok=True)
    part = tmp / f"dl-{DEAD_PID}-{url_key(url)}-x1y2.part"
    part.write_bytes(DOCUMENT[:have])
    part.with_suffix(".json").write_text(json.dumps({"url": url, "etag": etag, "last_modified": None,
                                                     "length": len(DOCUMENT)}))


CHILD = textwrap.dedent('''
    import sys
    from pathlib import Path
    from basecrawler.config import Settings
    from basecrawler.fetch.http import HttpClient
    HttpClient(settings=Settings(max_retries=0)).download_to_file(sys.argv[1], directory=Path(sys.argv[2]))
''')


def test_a_download_killed_mid_body_resumes_with_range_in_the_next_process(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with _range_server(stall_after=300_000) as server:
        url = server.url + "/data.csv"
        child = subprocess.Popen([sys.executable, "-c", CHILD, url, str(tmp)], env=subprocess_env())
        _wait_for(lambda: [p for p in tmp.glob("dl-*.part") if p.stat().st_size >= 300_000], child)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert len(list(tmp.glob("dl-*.json"))) == 1      # the sidecar was written with the headers

        assert sweep_partial_downloads(tmp) == []          # kept, not removed: it can be resumed
        assert [p.name for p in tmp.glob("*.part")] == [f"resume-{url_key(url)}.part"]
        with HttpClient(settings=Settings(max_retries=0)).download_to_file(url, directory=tmp) as download:
            assert download.path.read_bytes() == DOCUMENT
            assert download.sha256 == hashlib.sha256(DOCUMENT).hexdigest() and download.size == len(DOCUMENT)
        resumed = server.seen[-1]
    assert resumed["range"] == "bytes=300000-" and resumed["if-range"] == ETAG
    assert list(tmp.iterdir()) == []


def test_a_server_that_ignores_range_gets_the_whole_body_once(tmp_path):
    with _range_server(honour_range=False) as server:
        url = server.url + "/data.csv"
        _park_by_hand(tmp_path, url, 500_000)
        sweep_partial_downloads(tmp_path)
        with HttpClient(settings=Settings(max_retries=0)).download_to_file(url, directory=tmp_path) as download:
            assert download.path.read_bytes() == DOCUMENT      # the old bytes were not prepended
        assert server.seen[-1]["range"] == "bytes=500000-"


def test_a_changed_document_is_downloaded_whole_not_spliced(tmp_path):
    with _range_server(etag='"v2"') as server:     # the server's copy changed since the partial one
        url = server.url + "/data.csv"
        _park_by_hand(tmp_path, url, 500_000, etag=ETAG)
        sweep_partial_downloads(tmp_path)
        with HttpClient(settings=Settings(max_retries=0)).download_to_file(url, directory=tmp_path) as download:
            assert download.path.read_bytes() == DOCUMENT
        assert server.seen[-1]["if-range"] == ETAG


def test_a_download_cut_by_a_stop_is_kept_and_resumed_next_time(tmp_path):
    import threading

    from basecrawler.errors import Interrupted
    from basecrawler.stopping import StopEvent

    stop = StopEvent()
    with _range_server(stall_after=300_000) as server:
        url = server.url + "/data.csv"

        def stop_once_bytes_came():
            deadline = time.monotonic() + WAIT_S
            while not [p for p in tmp_path.glob("dl-*.part") if p.stat().st_size >= 290_000]:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            stop.set()   # what SIGTERM does (runner.stop_on_signals)

        threading.Thread(target=stop_once_bytes_came, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(Interrupted):
            HttpClient(settings=Settings(max_retries=0), stop=stop).download_to_file(url, directory=tmp_path)
        assert time.monotonic() - started < WAIT_S
        assert [p.name for p in tmp_path.glob("*.part")] == [f"resume-{url_key(url)}.part"]
        kept = (tmp_path / f"resume-{url_key(url)}.part").stat().st_size
        with HttpClient(settings=Settings(max_retries=0)).download_to_file(url, directory=tmp_path) as download:
            assert download.path.read_bytes() == DOCUMENT
        assert kept >= 290_000 and server.seen[-1]["range"] == f"bytes={kept}-"


def test_partials_without_validators_or_of_live_processes_are_not_parked(tmp_path):
    url = "http://x.test/a.csv"
    plain = tmp_path / f"dl-{DEAD_PID}-{url_key(url)}-aaaa.part"      # no sidecar: no validator
    plain.write_bytes(b"x" * 10)
    mine = tmp_path / f"{partial_prefix(url)}bbbb.part"
    mine.write_bytes(b"y" * 10)
    mine.with_suffix(".json").write_text("{}")
    stale = tmp_path / f"resume-{url_key('http://x.test/b.csv')}.part"
    stale.write_bytes(b"z")
    os.utime(stale, (time.time() - 2 * 86400,) * 2)
    removed = [p.name for p, _ in sweep_partial_downloads(tmp_path)]
    assert sorted(removed) == sorted([plain.name, stale.name])
    assert mine.exists() and not plain.exists() and not stale.exists()


# ---- the raw archive's temp files ---------------------------------------------------------------
ARCHIVE_CHILD = textwrap.dedent('''
    import gzip, sys, time
    from basecrawler import Store
    from basecrawler.fetch.archive import Archive
    original = gzip.GzipFile.write
    def write(self, data):
        written = original(self, data)
        self.fileobj.flush()
        print("writing", flush=True)
        time.sleep(60)   # killed here, mid-write
        return written
    gzip.GzipFile.write = write
    Archive(Store(sys.argv[1])).put_bytes(b"a body" * 100000)
''')


def test_archive_temp_files_of_a_killed_writer_are_swept_by_the_next_run(tmp_path):
    db = str(tmp_path / "a.db")
    Store(db).close()
    child = subprocess.Popen([sys.executable, "-c", ARCHIVE_CHILD, db], env=subprocess_env(),
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    child.send_signal(signal.SIGKILL)
    child.wait()
    left = list((tmp_path / "archive").glob("*/tmp*.tmp"))
    assert len(left) == 1 and left[0].name.startswith(f"tmp{child.pid}-")

    store = Store(db)
    try:
        body_sha = Archive(store).put_bytes(b"another body")    # this process's own writes are unaffected
        recover_after_crash(store, "demo", None)
        assert list((tmp_path / "archive").glob("*/tmp*.tmp")) == []
        assert Archive(store).get_bytes(body_sha) == b"another body"
    finally:
        store.close()


def test_archive_sweep_spares_live_writers_and_young_legacy_files(tmp_path):
    folder = tmp_path / "ab"
    folder.mkdir()
    live = folder / f"tmp{os.getpid()}-abcd.tmp"
    dead = folder / f"tmp{DEAD_PID}-abcd.tmp"
    young_legacy, old_legacy = folder / "tmpk2j3h4.tmp", folder / "tmpq9w8e7.tmp"
    for path in (live, dead, young_legacy, old_legacy):
        path.write_bytes(b"x")
    os.utime(old_legacy, (time.time() - 7200,) * 2)
    assert sorted(p.name for p, _ in sweep_temp_files(tmp_path)) == sorted([dead.name, old_legacy.name])
    assert live.exists() and young_legacy.exists()


# ---- OCR: the cap holds inside a page -----------------------------------------------------------
def _ocr_missing() -> bool:
    import shutil
    return shutil.which("tesseract") is None


@pytest.mark.skipif(_ocr_missing(), reason="tesseract not installed")
def test_the_ocr_cap_stops_tesseract_inside_a_single_page(monkeypatch):
    import pytesseract
    from PIL import Image

    from basecrawler.formats.pdf import read_pdf

    real, given = pytesseract.image_to_data, []

    def nine_pages_in_one(image, *args, **kwargs):
        # One page nine times over: OCR takes ~15 s, far past the cap wherever the page starts.
        big = Image.new(image.mode, (image.width * 3, image.height * 3), 255)
        for x in range(3):
            for y in range(3):
                big.paste(image, (x * image.width, y * image.height))
        given.append(kwargs.get("timeout"))
        return real(big, *args, **kwargs)

    monkeypatch.setattr(pytesseract, "image_to_data", nine_pages_in_one)
    scanned = (Path(__file__).resolve().parents[1] / "fixtures" / "jp" / "list_small_batch_scanned.pdf").read_bytes()
    started = time.monotonic()
    with pytest.raises(PdfTooBig, match=r"for 1 of 1 pages, more than the 3s limit.*inside page 1"):
        read_pdf(scanned, max_ocr_seconds=3)   # a one-page scan: no page boundary to check at
    took = time.monotonic() - started
    print(f"OCR stopped {took:.1f}s into a page with a 3s cap")
    assert given and 0 < given[0] <= 3            # tesseract itself got what was left as its timeout
    assert took < 6


# ---- documents (the artifact manifest): the same, through artifacts.py ---------------------------
PDF = b"%PDF-1.4\n" + bytes(range(256)) * 4096 + b"\n%%EOF\n"

ARTIFACT_CHILD = textwrap.dedent('''
    import sys
    from basecrawler import Store
    from basecrawler.fetch.artifacts import Artifacts
    from basecrawler.config import Settings
    from basecrawler.fetch.http import HttpClient
    store = Store(sys.argv[2])
    Artifacts(HttpClient(settings=Settings(max_retries=0), store=store), store, source="demo").ensure("doc", sys.argv[1])
''')


def _pdf_server(stall_after: int):
    seen = []

    def handler(h):
        seen.append({k.lower(): v for k, v in h.headers.items()})
        wanted = h.headers.get("Range")
        start = int(wanted.split("=")[1].rstrip("-")) if wanted and h.headers.get("If-Range") == ETAG else 0
        h.send_response(206 if start else 200)
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(PDF) - 1}/{len(PDF)}")
        h.send_header("ETag", ETAG)
        h.send_header("Content-Type", "application/pdf")
        h.send_header("Content-Length", str(len(PDF) - start))
        h.send_header("Connection", "close")
        h.end_headers()
        if not start:
            h.wfile.write(PDF[:stall_after])
            h.wfile.flush()
            time.sleep(STALL_S)
            return
        h.wfile.write(PDF[start:])

    server = RawServer(handler)
    server.seen = seen
    return server


def test_a_document_download_killed_mid_body_resumes_in_the_next_run(tmp_path):
    from basecrawler.fetch.artifacts import Artifacts

    db = str(tmp_path / "docs.db")
    Store(db).close()
    with _pdf_server(stall_after=300_000) as server:
        url = server.url + "/list.pdf"
        child = subprocess.Popen([sys.executable, "-c", ARTIFACT_CHILD, url, db], env=subprocess_env())
        # The bytes received so far are in the partial copy while the body is still coming.
        _wait_for(lambda: [p for p in (tmp_path / "artifacts" / "partial").glob("*.part") if p.stat().st_size >= 300_000],
                  child)
        child.send_signal(signal.SIGKILL)
        child.wait()

        store = Store(db)
        try:
            recover_after_crash(store, "demo", None)
            artifact = Artifacts(HttpClient(settings=Settings(max_retries=0), store=store), store,
                                 source="demo").ensure("doc", url)
            assert artifact.path.read_bytes() == PDF and artifact.sha256 == hashlib.sha256(PDF).hexdigest()
            assert store.query("SELECT state FROM artifacts")[0]["state"] == "complete"
        finally:
            store.close()
    assert server.seen[-1]["range"] == "bytes=300000-" and server.seen[-1]["if-range"] == ETAG
    assert list((tmp_path / "artifacts" / "partial").iterdir()) == []    # no segment, no partial left
