"""The translation worker end to end against a LibreTranslate-compatible server on 127.0.0.1."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from basecrawler import Store
from basecrawler.cli import main as cli_main
from translate.fakeserver import FakeLibreTranslate, pseudo_korean
from translate.memory import normalize_text
from translate.protect import mask
from translate.testing import count_writes, libre, seed, statuses, writes_per_row
from translate.worker import translate_pending

REPO = Path(__file__).resolve().parents[1]


def test_200_rows_send_each_distinct_string_once_and_a_second_run_sends_nothing(store):
    seed(store, 200, summary="The airbag inflator may rupture in vehicle group {i}.",
         model_original="Model {i}", remedy_original="Dealers will replace the inflator, free of charge.")
    with FakeLibreTranslate() as server:
        report = translate_pending(store, libre(server), batch_rows=30)
        sent = server.texts
        assert report.translated + report.from_memory == 200 and report.pending == 0
        assert statuses(store) == {"translated": 200}
        assert len(sent) == len(set(sent))
        # 200 summaries + 200 models + manufacturer + component + remedy
        assert len(sent) == 403
        again = translate_pending(store, libre(server), batch_rows=30)
        assert len(server.texts) == len(sent)
    assert again.processed == 0 and again.backend_calls == 0


def test_translated_row_holds_korean_for_every_original_field(store):
    seed(store, 1, summary="The airbag inflator may rupture.")
    with FakeLibreTranslate() as server:
        translate_pending(store, libre(server))
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})
    assert row["summary_ko"] == pseudo_korean("The airbag inflator may rupture.")
    assert row["manufacturer_ko"] == pseudo_korean("Acme Motor Company")
    assert row["translation_status"] == "translated" and row["translated_at"]


BAD_OUTPUTS = {
    "dropped number": ("The fuel pump may fail on 2,700 vehicles built in 2021.",
                       "연료 펌프가 고장 날 수 있습니다.", "number missing: 2021, 2700"),
    "english echoed": ("The brake hose may leak fluid over time.",
                       "The brake hose may leak fluid over time.", "echo of the source"),
    "repeated phrase": ("The seat belt buckle may not latch properly.",
                        "안전벨트 버클이 안전벨트 버클이 안전벨트 버클이 안전벨트 버클이 안전벨트 버클이", "runaway repetition"),
    "wrong script": ("The rear camera image may not display.",
                     "リアカメラの画像が表示されない場合があります。", "not Korean"),
}


@pytest.mark.parametrize("case", list(BAD_OUTPUTS))
def test_bad_translation_is_blocked_with_its_reason_and_good_rows_are_stored(store, case):
    source, bad_output, reason = BAD_OUTPUTS[case]
    seed(store, 3, summary="The door latch may open while driving, vehicle {i}.")
    seed(store, 1, country="CA", source="ca", summary=source)
    with FakeLibreTranslate(overrides={mask(source, None, "en").text: bad_output}) as server:
        report = translate_pending(store, libre(server))
    bad = store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "CA-0000"})
    assert bad["translation_status"] == "blocked" and bad["summary_ko"] is None
    assert bad["translation_note"].startswith("summary: " + reason)
    assert bad["manufacturer_ko"] == pseudo_korean("Acme Motor Company")   # its good fields are kept
    good = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0001"})
    assert good["translation_status"] == "translated"
    assert good["summary_ko"] == pseudo_korean("The door latch may open while driving, vehicle 1.")
    assert (report.blocked, report.translated) == (1, 3)


def test_server_dying_mid_run_leaves_the_rest_pending_and_the_next_run_finishes_them_once(store):
    seed(store, 60)
    count_writes(store)
    first_server = FakeLibreTranslate().start()
    backend = libre(first_server)
    original_translate = backend.translate

    def translate_then_die(texts, source_lang, target_lang="ko"):
        result = original_translate(texts, source_lang, target_lang)
        if len(first_server.requests) == 3:
            first_server.stop()
        return result
    backend.translate = translate_then_die
    report = translate_pending(store, backend, batch_rows=10)
    assert report.backend_down and "unreachable" in report.error
    done_first = {r["id"] for r in store.query("SELECT id FROM recalls WHERE translated_at IS NOT NULL")}
    assert len(done_first) == 30 and report.pending == 30
    assert store.db.execute("SELECT COUNT(*) FROM recalls WHERE translated_at IS NULL AND translation_status IS NOT NULL").fetchone()[0] == 0

    with FakeLibreTranslate() as second_server:
        second = translate_pending(store, libre(second_server), batch_rows=10)
        resent = set(second_server.texts)
    assert second.pending == 0 and second.translated == 30
    assert statuses(store) == {"translated": 60}
    assert set(writes_per_row(store).values()) == {1} and len(writes_per_row(store)) == 60
    done_summaries = {normalize_text(r["summary_original"]) for r in store.query(
        f"SELECT summary_original FROM recalls WHERE id IN ({','.join(map(str, done_first))})")}
    assert not resent & done_summaries


def test_worker_killed_with_sigkill_mid_batch_restarts_and_translates_every_row_exactly_once(db_path, tmp_path):
    store = Store(db_path)
    seed(store, 40)
    count_writes(store)
    store.close()
    with FakeLibreTranslate(delay_s=0.4) as server:
        env = {**os.environ, "BASECRAWLER_TRANSLATE_BACKEND": "libretranslate",
               "BASECRAWLER_LIBRETRANSLATE_URL": server.url, "PYTHONPATH": str(REPO)}
        command = [sys.executable, "-m", "translate", "--db", db_path, "--batch-size", "5", "--no-progress"]
        worker = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while len(server.requests) < 3 and time.monotonic() < deadline:   # third batch in flight
                time.sleep(0.02)
            assert len(server.requests) >= 3, "worker never reached its third batch"
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.wait(10)
        store = Store(db_path)
        killed_at = statuses(store)
        assert 0 < killed_at.get("translated", 0) < 40 and killed_at["pending"] > 0
        server.delay_s = 0
        finished = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert statuses(store) == {"translated": 40}
    writes = writes_per_row(store)
    store.close()
    assert len(writes) == 40 and set(writes.values()) == {1}


def test_no_backend_configured_exits_2_with_instructions_and_rows_stay_pending(store, db_path, capsys):
    seed(store, 3)
    code = cli_main(["--db", db_path, "translate", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert "BASECRAWLER_TRANSLATE_BACKEND" in err and "BASECRAWLER_LIBRETRANSLATE_URL" in err
    assert "3 rows pending" in err
    assert statuses(store) == {"pending": 3}


def test_rejected_api_key_stops_the_run_and_never_appears_in_the_error_or_logs(store, db_path, monkeypatch, capsys):
    secret = "sk-live-very-secret-123"
    seed(store, 3)
    with FakeLibreTranslate(api_key="the-right-key") as server:
        monkeypatch.setenv("BASECRAWLER_TRANSLATE_BACKEND", "libretranslate")
        monkeypatch.setenv("BASECRAWLER_LIBRETRANSLATE_URL", server.url)
        monkeypatch.setenv("BASECRAWLER_LIBRETRANSLATE_API_KEY", secret)
        code = cli_main(["--db", db_path, "-v", "translate", "--no-progress"])
        assert server.rejected_keys == [secret]
    out, err = capsys.readouterr()   # the CLI logs to stderr, so `err` holds the log lines too
    assert code == 1
    assert "translation stopped" in err   # the log line is there …
    assert "rejected the credentials" in err and "***" in err   # … the echoed key was redacted
    assert secret not in out + err
    assert statuses(store) == {"pending": 3}
