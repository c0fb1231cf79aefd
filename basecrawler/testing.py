"""Test helpers for basecrawler and for source authors: a loopback HTTP server you start
inside a test, and settings tuned for fast offline tests. Nothing here touches the internet.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from basecrawler.config import Settings


@dataclass
class Reply:
    status: int = 200
    body: bytes | str = b""
    headers: dict | None = None
    delay_s: float = 0.0
    drop_connection: bool = False      # close the socket without an answer (a reset)
    truncate_to: int | None = None     # send only the first N bytes of the body


Handler = Callable[["Request"], Reply]


@dataclass
class Request:
    method: str
    path: str            # path with query string
    headers: dict
    time: float


class ThreadedServer:
    """A threaded HTTP server on 127.0.0.1 run in the background: `start()`/`stop()` or `with`.
    Subclasses build their request handler class and call `_listen(handler_class, port)`."""

    def _listen(self, handler_class, port: int = 0) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler_class)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class LoopbackServer(ThreadedServer):
    """A threaded HTTP server on 127.0.0.1 answering with `handler(request) -> Reply`.

        with LoopbackServer(handler) as server:
            url = server.url + "/path"
    Every request is kept in `server.requests` (method, path, headers, time) for assertions.
    """

    def __init__(self, handler: Handler):
        import time

        self.handler = handler
        self.requests: list[Request] = []
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def _serve(self):
                req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, time.monotonic())
                outer.requests.append(req)
                reply = outer.handler(req)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.drop_connection:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                body = reply.body.encode("utf-8") if isinstance(reply.body, str) else reply.body
                self.send_response(reply.status)
                headers = dict(reply.headers or {})
                if not any(key.lower() == "content-type" for key in headers):
                    headers["Content-Type"] = "application/octet-stream"
                headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body if reply.truncate_to is None else body[:reply.truncate_to])
                if reply.truncate_to is not None:
                    self.close_connection = True

            do_GET = do_POST = do_HEAD = _serve

        self._listen(_Handler)


def fast_settings(db_path: str, **overrides) -> Settings:
    """Settings for tests: no real waiting, generous rates, zero ladder backoffs."""
    values = dict(
        db_path=db_path, backoff_base_s=0.01, backoff_cap_s=0.05, rate_per_s=1000.0, concurrency=8,
        ladder_backoffs_s=(0.0, 0.0, 0.0, 0.0), transient_retry_delay_s=0.0, max_retries=3,
    )
    values.update(overrides)
    return Settings(**values)


def record_replay(source_id: str, host: str, handler, replay_dir, *, root) -> int:
    """Record a source's replay set: a full run through the real command line with `--record`,
    its endpoint pointed at a loopback server answering with `handler`. The old set of `host`
    is replaced; returns how many exchanges were recorded (fixtures/<id>/make_replay.py)."""
    import os
    import shutil
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from basecrawler.pipeline.registry import get_source

    replay_dir, root = Path(replay_dir), Path(root)
    endpoint = next(iter(get_source(source_id).endpoints))
    shutil.rmtree(replay_dir / host, ignore_errors=True)
    with LoopbackServer(handler) as server, tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, f"BASECRAWLER_{source_id.upper()}_{endpoint.upper()}_URL": server.url,
               "BASECRAWLER_RATE": "1000", "PYTHONPATH": str(root)}
        proc = subprocess.run([sys.executable, "-m", "basecrawler", "--db", str(Path(tmp) / "rec.db"), "run",
                               "--source", source_id, "--mode", "full", "--record", str(replay_dir)],
                              cwd=root, env=env, capture_output=True, text=True)
        print(proc.stdout[-2000:], proc.stderr[-2000:])
        if proc.returncode != 0:
            raise SystemExit(proc.returncode)
    return len(list((replay_dir / host).glob("*.json")))
