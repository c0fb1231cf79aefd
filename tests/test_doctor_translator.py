"""`doctor`'s translation line for LibreTranslate (issue 32): reachable, the time of one short
text, and which languages it translates into Korean (GET /languages), a missing model a failure
with scripts/translator as the fix. Against loopback servers, no network."""
import json
from http.server import BaseHTTPRequestHandler

from basecrawler.commands import doctor
from basecrawler.testing import ThreadedServer
from translate.fakeserver import pseudo_korean


class Libre(ThreadedServer):
    """A LibreTranslate that lists `codes` as translating into Korean."""

    def __init__(self, codes):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send([{"code": c, "name": c, "targets": ["ko", "en"]} for c in outer.codes]
                           + [{"code": "ko", "name": "Korean", "targets": ["en"]}])

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._send({"translatedText": [pseudo_korean(t) for t in payload["q"]]})
        self.codes = codes
        self._listen(Handler, 0)


def _check(url):
    return doctor.check_translation_backend({"BASECRAWLER_TRANSLATE_BACKEND": "libretranslate",
                                             "BASECRAWLER_LIBRETRANSLATE_URL": url})


def test_a_server_with_every_model_is_one_line_with_its_speed_and_languages():
    with Libre(["en", "ja", "fr", "de"]) as server:
        check = _check(server.url)
    assert check.ok and not check.note
    assert check.detail.startswith(f"libretranslate at {server.url} translated a test text in ")
    assert " ms " in check.detail and check.detail.endswith("; into Korean from de, en, fr, ja")


def test_a_missing_model_fails_with_the_translator_script_as_fix():
    with Libre(["en"]) as server:
        check = _check(server.url)
    assert not check.ok and check.detail.endswith("; missing ja, fr, de")
    assert check.fix.startswith("scripts/translator")


def test_a_server_that_lists_no_languages_still_passes_saying_so():
    from translate.fakeserver import FakeLibreTranslate
    with FakeLibreTranslate() as server:
        check = _check(server.url)
    assert check.ok and check.detail.endswith("; its languages are not listed")
