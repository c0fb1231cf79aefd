"""`basecrawler doctor` (issue #14.5). Every endpoint is overridden to a loopback server, the
tesseract on PATH is a fake script, the font is a temporary file: nothing here depends on the
machine's packages or reaches a real host."""
import json
import os
import socket

import pytest

from basecrawler.cli import main
from basecrawler.commands import doctor
from basecrawler.registry import discover
from basecrawler.scheduler import daemon_lock
from basecrawler.testing import LoopbackServer, Reply

# The endpoints the five sources declare, written out: each one must be probed once.
ENDPOINT_CHECKS = ["source au site", "source ca data", "source eu site", "source jp site",
                   "source us bulk", "source us detail"]


def _fake_tesseract(folder, languages):
    folder.mkdir(exist_ok=True)
    script = folder / "tesseract"
    listing = "\\n".join(languages)
    script.write_text(f'#!/bin/sh\nprintf \'List of available languages in "/x/" ({len(languages)}):\\n{listing}\\n\'\n')
    script.chmod(0o755)
    return folder


@pytest.fixture
def server():
    status = {"code": 200}
    with LoopbackServer(lambda request: Reply(status["code"], b"ok")) as srv:
        srv.status = status
        yield srv


@pytest.fixture
def ready(monkeypatch, tmp_path, server, db_path):
    """A machine where every check holds."""
    monkeypatch.setenv("PATH", str(_fake_tesseract(tmp_path / "bin", ["eng", "jpn", "osd"])))
    font = tmp_path / "ipag.ttf"
    font.write_bytes(b"font")
    monkeypatch.setattr(doctor, "FONT_GLOBS", (str(tmp_path / "ipag*.ttf"),))
    monkeypatch.setattr(doctor, "MIN_FREE_BYTES", 0)
    monkeypatch.delenv("BASECRAWLER_TRANSLATE_BACKEND", raising=False)
    for source_id, cls in discover().items():
        for name in cls.endpoints:
            monkeypatch.setenv(f"BASECRAWLER_{source_id.upper()}_{name.upper()}_URL", server.url)
    lock = daemon_lock(db_path)          # a scheduler "running" in this process
    assert lock.try_acquire()
    yield lock
    lock.release()


def _doctor(db_path, capsys, *extra):
    code = main(["--db", db_path, "doctor", "--timeout", "2", *extra])
    return code, capsys.readouterr().out


def test_all_checks_hold_exit_0_every_endpoint_probed_once(ready, server, db_path, capsys):
    code, out = _doctor(db_path, capsys)
    lines = out.splitlines()
    assert code == 0, out
    assert all(line.startswith("✓ ") for line in lines)
    assert [line.split(":")[0][2:] for line in lines] == [
        "tesseract", "tesseract Japanese data", "OCR font", "database writable", "free disk", "archive size",
        "translation backend", *ENDPOINT_CHECKS, "scheduler"]
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/")] * 6
    assert f"✓ source us detail: {server.url}/ answered HTTP 200 in " in out
    assert f"✓ scheduler: running (pid {os.getpid()}" in out


def test_missing_tesseract_on_path_fails_with_the_fix(ready, monkeypatch, tmp_path, db_path, capsys):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, out = _doctor(db_path, capsys)
    assert code == 1
    assert ("✗ tesseract: not found on PATH — fix: sudo apt-get install tesseract-ocr tesseract-ocr-jpn "
            "(scripts/setup does)") in out.splitlines()


def test_tesseract_without_japanese_data(ready, monkeypatch, tmp_path, db_path, capsys):
    monkeypatch.setenv("PATH", str(_fake_tesseract(tmp_path / "bin2", ["eng", "osd"])))
    code, out = _doctor(db_path, capsys)
    assert code == 1
    assert "✗ tesseract Japanese data: no jpn (has: eng, osd) — fix: sudo apt-get install tesseract-ocr-jpn" in out


def test_missing_font_and_full_disk_each_fail(ready, monkeypatch, tmp_path, db_path, capsys):
    monkeypatch.setattr(doctor, "FONT_GLOBS", (str(tmp_path / "nowhere" / "*.ttf"),))
    monkeypatch.setattr(doctor, "MIN_FREE_BYTES", 1 << 60)
    code, out = _doctor(db_path, capsys)
    failed = [line.split(":")[0] for line in out.splitlines() if line.startswith("✗")]
    assert code == 1 and failed == ["✗ OCR font", "✗ free disk"]


def test_a_lock_file_nobody_holds_means_no_scheduler(ready, db_path, capsys):
    ready.release()                       # the scheduler stopped; its lock file stays behind
    assert daemon_lock(db_path).path.exists()
    code, out = _doctor(db_path, capsys)
    assert code == 1
    assert ("✗ scheduler: not running (test.db.scheduler.lock is free) — fix: start it: basecrawler schedule "
            "(README, Daily use)") in out.splitlines()


def test_unreachable_endpoint_and_server_error(ready, monkeypatch, server, db_path, capsys):
    with socket.socket() as sock:          # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("BASECRAWLER_JP_SITE_URL", closed)
    server.status["code"] = 503
    code, out = _doctor(db_path, capsys, "--json")
    report = json.loads(out)
    by_name = {c["name"]: c for c in report["checks"]}
    assert code == 1 and report["ok"] is False
    assert by_name["source jp site"]["ok"] is False and "unreachable" in by_name["source jp site"]["detail"]
    assert by_name["source jp site"]["fix"] == "check the network or proxy; offline, crawl with --replay fixtures/replay"
    assert by_name["source au site"]["ok"] is False and "HTTP 503" in by_name["source au site"]["detail"]


def test_json_shape(ready, db_path, capsys):
    code, out = _doctor(db_path, capsys, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True and len(report["checks"]) == 14
    assert all(set(c) == {"name", "ok", "detail", "fix", "seconds"} for c in report["checks"])
    endpoint = next(c for c in report["checks"] if c["name"] == "source eu site")
    assert endpoint["ok"] is True and endpoint["fix"] is None and 0 <= endpoint["seconds"] < 2
    assert next(c for c in report["checks"] if c["name"] == "tesseract")["seconds"] is None


def test_configured_backend_is_probed_and_a_broken_choice_named(ready, monkeypatch, server, db_path, capsys):
    monkeypatch.setenv("BASECRAWLER_TRANSLATE_BACKEND", "libretranslate")
    monkeypatch.setenv("BASECRAWLER_LIBRETRANSLATE_URL", server.url)
    code, out = _doctor(db_path, capsys)
    assert code == 0 and f"✓ translation backend libretranslate: {server.url}/ answered HTTP 200" in out
    monkeypatch.delenv("BASECRAWLER_LIBRETRANSLATE_URL")
    code, out = _doctor(db_path, capsys)
    assert code == 1
    assert ("✗ translation backend: BASECRAWLER_TRANSLATE_BACKEND=libretranslate needs BASECRAWLER_LIBRETRANSLATE_URL"
            " — fix: see `basecrawler translate --help`") in out


def test_doctor_creates_no_database_folder_or_lock(ready, tmp_path, capsys):
    target = tmp_path / "not" / "yet" / "recalls.db"
    code, out = _doctor(str(target), capsys)
    assert f"✓ database writable: {target} (new, under {tmp_path})" in out
    assert "✗ scheduler: not running (no lock file)" in out and code == 1
    assert not (tmp_path / "not").exists()
