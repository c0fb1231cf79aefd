"""Benchmark of the HTTP client against hostile loopback servers (issue 22): peak RSS of one
fetch in a fresh process (gzip bomb, 2 GB without Content-Length), and seconds from SIGTERM to
the exit of a `basecrawler run` stuck on a slow server. Run on demand (not part of the tests):

    python bench/bench_hostile.py [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hostile_support import RawServer, endless_body, fetch_in_child, gzip_bomb, slow_headers, slowloris  # noqa: E402

LAUNCHER = textwrap.dedent('''
    import sys
    from basecrawler import BaseCrawler
    import basecrawler.pipeline.registry
    URL, HOW = sys.argv.pop(1), sys.argv.pop(1)
    class Slow(BaseCrawler):
        source, country, endpoints = "slow", "SL", {"site": URL}
        def fetch(self):
            if HOW == "download":
                with self.http.download_to_file(self.url("site", "/big.csv")) as download:
                    yield {"n": download.size}
            else:
                yield self.http.get_json(self.url("site", "/list.json"))
        def parse(self, raw):
            return {"recall_number": "S-1", "recall_date": "2024-05-01"}
    basecrawler.pipeline.registry.discover = lambda *a, **k: {"slow": Slow}
    from basecrawler.cli import main
    raise SystemExit(main(sys.argv[1:]))
''')


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def memory(repeats: int) -> None:
    cases = [
        ("gzip bomb 1.2 GB, get_bytes, defaults", gzip_bomb(1200), "get_bytes", {}),
        ("gzip bomb 1.2 GB, get_bytes, ratio limit off", gzip_bomb(1200), "get_bytes", {"max_decompression_ratio": 1e9}),
        ("gzip bomb 1.2 GB, download_to_file, defaults", gzip_bomb(1200), "download", {}),
        ("2 GB without Content-Length, get_json, defaults", endless_body(2048), "get_json", {}),
        ("2 GB without Content-Length, download_to_file, 256 MiB limit", endless_body(2048), "download",
         {"max_download_bytes": 256 << 20}),
    ]
    print("| case | outcome | seconds | peak RSS MB (min–max) |\n|---|---|---|---|")
    for label, handler, how, overrides in cases:
        runs = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as folder, RawServer(handler) as server:
                runs.append(fetch_in_child(server.url + "/x", how, Path(folder), _env(), **overrides))
        peaks = [r["peak_mb"] for r in runs]
        print(f"| {label} | {runs[0]['outcome'][:60]}… | {statistics.median(r['seconds'] for r in runs):.2f} | "
              f"{statistics.median(peaks):.0f} ({min(peaks):.0f}–{max(peaks):.0f}) |")


def stop_latency(repeats: int) -> None:
    print("\n| phase | SIGTERM → exit, s: median (max) | exit codes |\n|---|---|---|")
    for label, handler, how in [("body at 1 byte/s (get_json)", slowloris(120), "json"),
                                ("body at 1 byte/s (download_to_file)", slowloris(120), "download"),
                                ("headers at 2 bytes/s", slow_headers(120), "json")]:
        took, codes = [], []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as folder, RawServer(handler) as server:
                launcher = Path(folder) / "launcher.py"
                launcher.write_text(LAUNCHER)
                process = subprocess.Popen([sys.executable, str(launcher), server.url, how, "--db",
                                            str(Path(folder) / "b.db"), "run", "--source", "slow"],
                                           cwd=folder, env={**_env(), "BASECRAWLER_RATE": "1000"},
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                while not server.requests:
                    time.sleep(0.02)
                time.sleep(2)
                process.send_signal(signal.SIGTERM)
                sent = time.monotonic()
                codes.append(process.wait(timeout=60))
                took.append(time.monotonic() - sent)
        print(f"| {label} | {statistics.median(took):.2f} ({max(took):.2f}) | {sorted(set(codes))} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    memory(args.repeats)
    stop_latency(args.repeats)


if __name__ == "__main__":
    main()
