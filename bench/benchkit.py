"""What the whole-run benchmarks share: serving one file from disk on loopback, running a measured
step in a fresh child process of the same script (so its peak RSS and CPU time are its own), and
printing the two-column table."""
from __future__ import annotations

import atexit
import contextlib
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator

REPO = Path(__file__).resolve().parents[1]


def scratch_folder(prefix: str) -> str:
    """A temporary folder removed when the bench exits: its stores are hundreds of MB, and a bench
    run again and again must not fill the disk."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, True)
    return folder


def child(script: str, *args: str, env: dict | None = None, show_stderr: bool = False) -> dict:
    """Run `script` again with `args` in the checkout; its last stdout line is JSON."""
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        sys.exit(f"child {args[0]} failed:\n{proc.stderr[-3000:]}")
    if show_stderr:
        print(proc.stderr[-20000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cpu_s() -> float:
    """CPU seconds of this process (user + system): what the run costs, whatever the load."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM), in MB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024


@contextlib.contextmanager
def measured(profile_top: int = 0, *, cumulative: bool = False) -> Iterator[dict]:
    """Time the block: the yielded dict gets "seconds" (wall) and "cpu_s" when it ends. With
    `profile_top`, the block also runs under cProfile and its costliest functions (by own time;
    with `cumulative` also by cumulative time) and the layer split (profile_layers.py) go to stderr."""
    timing: dict = {}
    profiler = cProfile.Profile() if profile_top else None
    if profiler:
        profiler.enable()
    started, cpu_started = time.monotonic(), cpu_s()
    try:
        yield timing
    finally:
        timing["seconds"], timing["cpu_s"] = time.monotonic() - started, cpu_s() - cpu_started
        if profiler:
            from profile_layers import report

            profiler.disable()
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out)
            stats.sort_stats("tottime").print_stats(profile_top)
            if cumulative:
                stats.sort_stats("cumulative").print_stats(profile_top)
            print(out.getvalue() + "\n" + report(stats), file=sys.stderr)


def whole_run_arguments(parser, *, keep: str = "work in this directory and keep it",
                        profile: str = "profile the full run: its N costliest functions and the layer split") -> None:
    """The options every whole-run bench has: --keep DIR, --profile N, --records-to JSONL."""
    parser.add_argument("--keep", help=keep)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help=profile)
    parser.add_argument("--records-to", metavar="JSONL", help="also write every record the source makes (to compare versions)")


def print_table(table: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in table)
    print(f"{'measure':<{width}} | value\n{'-' * width}-+-{'-' * 60}")
    for key, value in table:
        print(f"{key:<{width}} | {value}")


def file_handler(files: Path | Callable[[str], Path | None], content_type: str) -> type[BaseHTTPRequestHandler]:
    """A request handler that answers a GET with a file from disk: `files` is the one file every
    path gets, or a function from the request path (query left off) to a file (None: 404).

    The body goes out with `sendfile` (the kernel copies it; no Python loop, never whole in
    memory) and Nagle is off: with a header write and a body write per response, Nagle held
    each response's last segment until the client's delayed ACK (~40 ms), which made a run of
    763 small reports wait ~10 s on this server instead of measuring the crawler."""
    resolve = files if callable(files) else (lambda _path: files)

    class FileHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def do_GET(self):
            source = resolve(self.path.split("?", 1)[0])
            if source is None or not source.is_file():
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with open(source, "rb") as body:
                size = os.fstat(body.fileno()).st_size
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(size))
                self.end_headers()
                self.wfile.flush()
                self.connection.sendfile(body)

    return FileHandler


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """`handler` on a loopback port, one thread a connection, until `.shutdown()`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
