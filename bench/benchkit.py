"""What the whole-run benchmarks share: running a measured step in a fresh child process of the
same script (so its peak RSS and CPU time are its own), and printing the two-column table."""
from __future__ import annotations

import json
import os
import subprocess
import sys
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
