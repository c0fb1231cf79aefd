"""What the whole-run benchmarks share: serving one file from disk on loopback, running a measured
step in a fresh child process of the same script (so its peak RSS and CPU time are its own), and
printing the two-column table."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child(script: str, *args: str, env: dict | None = None, show_stderr: bool = False) -> dict:
    """Run `script` again with `args` in the checkout; its last stdout line is JSON."""
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        sys.exit(f"child {args[0]} failed:\n{proc.stderr[-3000:]}")
    if show_stderr:
        print(proc.stderr[-20000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_table(table: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in table)
    print(f"{'measure':<{width}} | value\n{'-' * width}-+-{'-' * 60}")
    for key, value in table:
        print(f"{key:<{width}} | {value}")


def file_handler(path: Path, content_type: str) -> type[BaseHTTPRequestHandler]:
    """A request handler that answers every GET with `path`, streamed in 64 KB chunks (never
    whole in memory)."""

    class FileHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(path.stat().st_size))
            self.end_headers()
            with open(path, "rb") as src:
                shutil.copyfileobj(src, self.wfile, 1 << 16)

    return FileHandler
