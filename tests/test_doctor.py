"""`basecrawler doctor` (issue #14.5). Every endpoint is overridden to a loopback server, the
tesseract on PATH is a fake script, the font is a temporary file: nothing here depends on the
machine's packages or reaches a real host."""
import json
import os
import re
import socket

import pytest

from basecrawler.cli import main
from basecrawler.commands import doctor
from basecrawler.pipeline.registry import discover
from basecrawler.operations.scheduler import daemon_lock
from basecrawler.testing import LoopbackServer, Reply
from translate.fakeserver import FakeLibreTranslate, FakeOpenAIChat



def endpoint_checks() -> list[str]:
    """One check per endpoint every discovered source declares (a new source adds its own)."""
    return [f"source {sid} {name}" for sid, cls in sorted(discover().items()) for name in sorted(cls.endpoints)]


def coverage_checks() -> list[str]:
    """One coverage check per rolling-window source (`window_days`, operations/coverage.py)."""
    from basecrawler.operations.coverage import window_days
    return [f"source {sid} coverage" for sid, cls in sorted(discover().items()) if window_days(cls)]


def some_endpoint() -> tuple[str, str]:
    """(source id, endpoint name) of the first declared endpoint, for tests that need one."""
    return next((sid, name) for sid, cls in sorted(discover().items()) for name in sorted(cls.endpoints))


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
    """Exit code and output; the table read back as one `mark name: result` line per check."""
    code = main(["--db", db_path, "doctor", "--timeout", "2", *extra])
    out = capsys.readouterr().out
    return code, out if "--json" in extra else "\n".join(_rows(out)) + "\n"


def _rows(table: str) -> list[str]:
    lines = table.splitlines()
    assert lines[0].split() == ["check", "result"] and set(lines[1]) == {"-", " "}
    spans = [m.span() for m in re.finditer(r"-+", lines[1])]
    assert len(spans) == 3
    return [f"{line[:spans[0][1]].strip()} {line[spans[1][0]:spans[1][1]].strip()}: {line[spans[2][0]:]}"
            for line in lines[2:]]


def test_the_checklist_is_a_table_with_every_result_in_one_column(ready, tmp_path, capsys):
    db = tmp_path / "ブレーキ" / "recalls.db"     # a Japanese folder name in the result column
    main(["--db", str(db), "doctor", "--timeout", "2"])
    lines = capsys.readouterr().out.splitlines()
    column = [m.start() for m in re.finditer(r"-+", lines[1])][2]
    assert lines[0][column:] == "result"
    assert all(line[column - 2:column] == "  " and line[column] != " " for line in lines[2:])
    assert any("ブレーキ" in line[column:] for line in lines)


def test_all_checks_hold_exit_0_every_endpoint_probed_once(ready, server, db_path, capsys):
    code, out = _doctor(db_path, capsys)
    lines = out.splitlines()
    assert code == 0, out
    assert all(line.startswith("✓ ") for line in lines if "translation backend" not in line and " coverage:" not in line)
    assert "– translation backend: none configured: rows stay pending — to set up: README, Translate" in out
    assert [line.split(":")[0][2:] for line in lines] == [
        "tesseract", "tesseract Japanese data", "OCR font", "database writable", "free disk", "archive size",
        "translation backend", *endpoint_checks(), "scheduler", *coverage_checks()]
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/")] * len(endpoint_checks())
    source_id, endpoint = some_endpoint()
    assert f"✓ source {source_id} {endpoint}: {server.url}/ answered HTTP 200 in " in out
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


def test_a_lock_file_nobody_holds_means_no_scheduler_a_note_unless_one_is_expected(ready, db_path, capsys):
    ready.release()                       # the scheduler stopped; its lock file stays behind
    assert daemon_lock(db_path).path.exists()
    code, out = _doctor(db_path, capsys)
    assert code == 0                      # crawls run by hand need no scheduler: not a failure
    assert ("– scheduler: not running (test.db.scheduler.lock is free) — to set up: basecrawler schedule "
            "(README, Daily use), or run crawls from cron/systemd; doctor --expect-scheduler makes this a failure"
            ) in out.splitlines()
    code, out = _doctor(db_path, capsys, "--expect-scheduler")
    assert code == 1
    assert ("✗ scheduler: not running (test.db.scheduler.lock is free) — fix: start it: basecrawler schedule "
            "(README, Daily use)") in out.splitlines()


def test_expect_scheduler_holds_when_one_runs(ready, db_path, capsys):
    code, out = _doctor(db_path, capsys, "--expect-scheduler")
    assert code == 0 and f"✓ scheduler: running (pid {os.getpid()}" in out


def _closed_url() -> str:
    with socket.socket() as sock:          # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_unreachable_endpoint_and_server_error(ready, monkeypatch, server, db_path, capsys):
    checks = endpoint_checks()
    assert len(checks) >= 2, "needs two endpoints: one unreachable, one answering 503"
    unreachable, failing = checks[0], checks[1]
    source_id, endpoint = unreachable.split()[1:]
    monkeypatch.setenv(f"BASECRAWLER_{source_id.upper()}_{endpoint.upper()}_URL", _closed_url())
    server.status["code"] = 503
    code, out = _doctor(db_path, capsys, "--json")
    report = json.loads(out)
    by_name = {c["name"]: c for c in report["checks"]}
    assert code == 1 and report["ok"] is False
    assert by_name[unreachable]["ok"] is False and "unreachable" in by_name[unreachable]["detail"]
    assert by_name[unreachable]["fix"] == doctor.OFFLINE_HINT and "scripts/run --replay" in doctor.OFFLINE_HINT
    assert by_name[failing]["ok"] is False and "HTTP 503" in by_name[failing]["detail"]


def test_json_shape(ready, db_path, capsys):
    code, out = _doctor(db_path, capsys, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True and len(report["checks"]) == 8 + len(endpoint_checks()) + len(coverage_checks())
    assert all(set(c) == {"name", "ok", "detail", "fix", "seconds", "note"} for c in report["checks"])
    # A rolling-window source never run on this store is a note too (operations/coverage.py).
    assert [c["name"] for c in report["checks"] if c["note"]] == ["translation backend", *coverage_checks()]
    endpoint = next(c for c in report["checks"] if c["name"] == endpoint_checks()[0])
    assert endpoint["ok"] is True and endpoint["fix"] is None and 0 <= endpoint["seconds"] < 2
    assert next(c for c in report["checks"] if c["name"] == "tesseract")["seconds"] is None


def test_a_backend_that_translates_is_checked_by_translating(ready, monkeypatch, db_path, capsys):
    """The fake LibreTranslate answers GET / with HTTP 501 (like servers that only take POST
    /translate): a probe of the base URL called it broken right after `translate` used it."""
    with FakeLibreTranslate() as backend_server:
        monkeypatch.setenv("BASECRAWLER_TRANSLATE_BACKEND", "libretranslate")
        monkeypatch.setenv("BASECRAWLER_LIBRETRANSLATE_URL", backend_server.url)
        code, out = _doctor(db_path, capsys)
        assert code == 0, out
        assert f"✓ translation backend libretranslate: libretranslate at {backend_server.url} translated a test text" in out
        assert backend_server.texts == ["Brake hose"]          # the same POST /translate the worker sends


def test_a_broken_backend_choice_is_named(ready, monkeypatch, db_path, capsys):
    monkeypatch.setenv("BASECRAWLER_TRANSLATE_BACKEND", "libretranslate")
    code, out = _doctor(db_path, capsys)
    assert code == 1
    assert ("✗ translation backend: BASECRAWLER_TRANSLATE_BACKEND=libretranslate needs BASECRAWLER_LIBRETRANSLATE_URL"
            " — fix: see `basecrawler translate --help`") in out


@pytest.mark.parametrize("backend, variable, expected_fix", [
    ("libretranslate", "BASECRAWLER_LIBRETRANSLATE_URL", "start LibreTranslate at {url} (README, Translate: docker run"),
    ("openai", "BASECRAWLER_OPENAI_BASE_URL", "start the OpenAI-compatible server at {url} (README, Translate: "
                                               "ollama serve, then ollama pull qwen2.5:7b-instruct)"),
])
def test_an_unreachable_backend_gets_a_fix_naming_the_backend(ready, monkeypatch, db_path, capsys, backend, variable,
                                                              expected_fix):
    url = _closed_url()
    monkeypatch.setenv("BASECRAWLER_TRANSLATE_BACKEND", backend)
    monkeypatch.setenv(variable, url)
    monkeypatch.setenv("BASECRAWLER_OPENAI_MODEL", "qwen2.5:7b-instruct")
    code, out = _doctor(db_path, capsys, "--json")
    check = next(c for c in json.loads(out)["checks"] if c["name"] == f"translation backend {backend}")
    assert code == 1 and check["ok"] is False and "unreachable" in check["detail"]
    assert check["fix"].startswith(expected_fix.format(url=url)) and "--replay" not in check["fix"]


def test_a_local_openai_compatible_server_checks_and_a_missing_model_says_pull_it(ready, monkeypatch, db_path,
                                                                                  capsys):
    with FakeOpenAIChat(models=["qwen2.5:7b-instruct"]) as llm:
        monkeypatch.setenv("BASECRAWLER_TRANSLATE_BACKEND", "openai")
        monkeypatch.setenv("BASECRAWLER_OPENAI_BASE_URL", llm.base_url)
        monkeypatch.setenv("BASECRAWLER_OPENAI_MODEL", "qwen2.5:7b-instruct")
        code, out = _doctor(db_path, capsys)
        assert code == 0 and "✓ translation backend openai: openai at " in out
        monkeypatch.setenv("BASECRAWLER_OPENAI_MODEL", "llama3.1:8b")
        code, out = _doctor(db_path, capsys)
    assert code == 1
    assert f"— fix: the server at {llm.base_url} has no model llama3.1:8b: ollama pull llama3.1:8b" in out


def test_doctor_creates_no_database_folder_or_lock(ready, tmp_path, capsys):
    target = tmp_path / "not" / "yet" / "recalls.db"
    code, out = _doctor(str(target), capsys)
    assert f"✓ database writable: {target} (new, under {tmp_path})" in out
    assert "– scheduler: not running (no lock file)" in out and code == 0
    assert not (tmp_path / "not").exists()
