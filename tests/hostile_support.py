"""Hostile loopback servers for tests/test_hostile_*.py and bench/bench_hostile.py: each writes
its raw response itself, lazily, so a 1.2 GB bomb or a 2 GB body costs the server nothing
beyond what the client really reads."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import zlib
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from basecrawler.testing import ThreadedServer

MB = 1 << 20


class RawServer(ThreadedServer):
    """`handler(h)` answers each GET by writing to `h.wfile` (h: the BaseHTTPRequestHandler).
    Requested paths are kept in `requests`."""

    def __init__(self, handler):
        self.requests: list[str] = []
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                outer.requests.append(self.path)
                self.close_connection = True
                try:
                    handler(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass   # the client gave up on us: what it should do

        self._listen(_Handler)


def _head(h, headers: dict) -> None:
    h.send_response(200)
    for name, value in headers.items():
        h.send_header(name, value)
    h.send_header("Connection", "close")
    h.end_headers()


def gzip_bomb(inflated_mb: int = 1200, content_type: str = "application/json"):
    """A gzip body of `inflated_mb` MB of zeros (about 1 KB on the wire per MB), compressed
    while it is sent; no Content-Length."""
    def handler(h):
        _head(h, {"Content-Type": content_type, "Content-Encoding": "gzip"})
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
        zeros = bytes(MB)
        for _ in range(inflated_mb):
            h.wfile.write(compressor.compress(zeros))
        h.wfile.write(compressor.flush())
    return handler


def endless_body(total_mb: int = 2048, content_type: str = "application/json"):
    """`total_mb` MB of body without Content-Length (ends when the connection closes)."""
    def handler(h):
        _head(h, {"Content-Type": content_type})
        chunk = b"[" + b"0," * (MB // 2 - 1) + b"0"
        for _ in range(total_mb):
            h.wfile.write(chunk)
    return handler


def slowloris(seconds: float = 30.0, byte_every_s: float = 1.0):
    """Headers at once, then one byte a second (for `seconds` at most)."""
    def handler(h):
        _head(h, {"Content-Type": "application/json", "Content-Length": "100000"})
        h.wfile.flush()
        ends = time.monotonic() + seconds
        while time.monotonic() < ends:
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(byte_every_s)
    return handler


def slow_headers(seconds: float = 30.0, byte_every_s: float = 0.5):
    """The status line, then the headers one byte at a time: the body never starts."""
    def handler(h):
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        h.wfile.flush()
        ends = time.monotonic() + seconds
        while time.monotonic() < ends:
            h.wfile.write(b"X")
            h.wfile.flush()
            time.sleep(byte_every_s)
    return handler


# ---- one fetch in a child process, its peak memory measured ---------------------------------
CHILD = r'''
import json, sys, time
from pathlib import Path
from basecrawler.config import Settings
from basecrawler.errors import FetchError
from basecrawler.fetch.http import HttpClient

url, how, directory, overrides = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
client = HttpClient(settings=Settings(max_retries=0, **overrides))
started = time.monotonic()
try:
    if how == "download":
        with client.download_to_file(url, directory=Path(directory)) as download:
            outcome = f"stored {download.size} bytes"
    else:
        outcome = f"read {len(getattr(client, how)(url))} bytes"
except FetchError as exc:
    outcome = f"{exc.kind}: {exc}"
print(json.dumps({"outcome": outcome, "seconds": time.monotonic() - started,
                  "left": sorted(p.name for p in Path(directory).iterdir()),
                  "peak_mb": int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM"))) / 1024}))   # VmHWM: ru_maxrss survives exec
'''


def fetch_in_child(url: str, how: str, directory: Path, env: dict, **overrides) -> dict:
    """Run `HttpClient().<how>(url)` ("get_bytes", "get_json", … or "download") in a fresh
    interpreter; returns its outcome line, seconds, files left in `directory`, and peak RSS (MB)."""
    done = subprocess.run([sys.executable, "-c", CHILD, url, how, str(directory), json.dumps(overrides)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
