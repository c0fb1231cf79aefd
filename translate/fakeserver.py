"""LibreTranslate- and OpenAI-compatible fake servers on 127.0.0.1, for tests and the benchmark.

It answers `POST /translate` like LibreTranslate (`q` a string or a list; `translatedText`
the same shape) with a deterministic pseudo-Korean: every word becomes Hangul syllables,
numbers, punctuation and ⟦n⟧ markers stay. `overrides` maps an input text to a fixed answer
(to inject bad translations), `delay_s` adds latency, `api_key` makes it demand a key, and
`stop()` kills it mid-run. Every request payload is kept in `requests`.

    python -m translate.fakeserver --port 5000 --delay 0.02     # try the worker by hand

`FakeOpenAIChat` answers `POST /v1/chat/completions` the way a local Ollama or llama.cpp server
does (the same pseudo-Korean, one text per request), and like Ollama answers 404 "model … not
found, try pulling it first" for a model it does not have.

    python -m translate.fakeserver --openai --port 11434         # stands in for `ollama serve`
"""
from __future__ import annotations

import argparse
import json
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler

from basecrawler.testing import ThreadedServer

_WORD = re.compile(r"[^\W\d_]+")


def pseudo_korean(text: str) -> str:
    """Each word → Hangul syllables (one per two letters), the rest untouched."""
    def word(match: re.Match) -> str:
        letters = match.group(0)
        if all(0xAC00 <= ord(ch) <= 0xD7A3 for ch in letters):
            return letters
        seed = zlib.crc32(letters.lower().encode("utf-8"))
        count = max(1, (len(letters) + 1) // 2)
        return "".join(chr(0xAC00 + (seed + 7919 * i) % 11172) for i in range(count))
    return _WORD.sub(word, text)


class FakeLibreTranslate(ThreadedServer):
    def __init__(self, *, translator=pseudo_korean, overrides: dict | None = None, delay_s: float = 0.0,
                 api_key: str | None = None, port: int = 0):
        self.translator = translator
        self.overrides = dict(overrides or {})
        self.delay_s = delay_s
        self.api_key = api_key
        self.requests: list[dict] = []
        self.rejected_keys: list = []     # api_key values of refused requests
        self.dead = False
        self.in_flight = 0
        self.max_in_flight = 0            # most requests being answered at the same time
        self._lock = threading.Lock()
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; with Nagle on, the body waits for the
            # client's delayed ACK (~40 ms) and the fake would measure TCP, not the worker.
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_POST(self):
                if outer.dead:   # a dead server also drops the connections it kept alive
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer = outer._answer(self.path, body)
                with outer._lock:
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                with outer._lock:
                    outer.in_flight -= 1
                data = json.dumps(answer, ensure_ascii=False).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._listen(_Handler, port)

    @property
    def texts(self) -> list[str]:
        """Every text received, in order, duplicates included."""
        with self._lock:
            return [text for payload in self.requests for text in payload["q"]]

    def _answer(self, path: str, body: bytes) -> tuple[int, dict]:
        if path.split("?")[0] != "/translate":
            return 404, {"error": "Not Found"}
        try:
            payload = json.loads(body)
        except ValueError:
            return 400, {"error": "Invalid request: body is not JSON"}
        if self.api_key and payload.get("api_key") != self.api_key:
            # Real servers may echo what they got; the worker must never repeat it.
            with self._lock:
                self.rejected_keys.append(payload.get("api_key"))
            return 403, {"error": f"Invalid API key: {payload.get('api_key')}"}
        q = payload.get("q")
        texts = q if isinstance(q, list) else [q]
        if not all(isinstance(t, str) for t in texts):
            return 400, {"error": "Invalid request: q"}
        with self._lock:
            self.requests.append({**payload, "q": texts})
        out = [self.overrides[t] if t in self.overrides else self.translator(t) for t in texts]
        return 200, {"translatedText": out if isinstance(q, list) else out[0]}

    def stop(self) -> None:
        self.dead = True
        super().stop()


class FakeOpenAIChat(ThreadedServer):
    def __init__(self, *, models=("qwen2.5:7b-instruct",), translator=pseudo_korean, port: int = 0):
        self.models = set(models)
        self.translator = translator
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer = outer._answer(self.path, body)
                data = json.dumps(answer, ensure_ascii=False).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._listen(_Handler, port)

    @property
    def base_url(self) -> str:
        """What BASECRAWLER_OPENAI_BASE_URL is set to (Ollama: http://127.0.0.1:11434/v1)."""
        return self.url + "/v1"

    def _answer(self, path: str, body: bytes) -> tuple[int, dict]:
        if path.split("?")[0] != "/v1/chat/completions":
            return 404, {"error": "404 page not found"}
        try:
            payload = json.loads(body)
            text = next(m["content"] for m in payload["messages"] if m.get("role") == "user")
        except (ValueError, KeyError, TypeError, StopIteration):
            return 400, {"error": "invalid request"}
        if payload.get("model") not in self.models:
            return 404, {"error": f"model \"{payload.get('model')}\" not found, try pulling it first"}
        with self._lock:
            self.requests.append(payload)
        return 200, {"object": "chat.completion", "model": payload["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": self.translator(text)}}]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m translate.fakeserver", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds of latency per request")
    parser.add_argument("--openai", action="store_true", help="an OpenAI-compatible server (like Ollama) instead")
    args = parser.parse_args(argv)
    if args.openai:
        server = FakeOpenAIChat(port=args.port)
        print(f"fake OpenAI-compatible server on {server.base_url}, model qwen2.5:7b-instruct (Ctrl-C stops)", flush=True)
    else:
        server = FakeLibreTranslate(delay_s=args.delay, port=args.port)
        print(f"fake LibreTranslate on {server.url} (Ctrl-C stops)", flush=True)
    try:
        server._server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
