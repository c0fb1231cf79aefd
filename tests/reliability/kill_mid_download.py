"""Child process for test_crashed_runs: `python -m basecrawler run --source ca` in-process,
SIGKILLed after the first 64 KiB chunk of the CSV body is on disk. The kill point is patched in
here, so production code carries no test hook.

    python kill_mid_download.py DB          (BASECRAWLER_CA_DATA_URL names the loopback server)
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx  # noqa: E402

from basecrawler.cli import main  # noqa: E402

original = httpx.Response.iter_bytes


def iter_bytes(self, chunk_size=None):
    for index, chunk in enumerate(original(self, chunk_size)):
        if index == 1 and str(self.request.url).endswith(".csv"):
            os.kill(os.getpid(), signal.SIGKILL)   # the first chunk is already written
        yield chunk


httpx.Response.iter_bytes = iter_bytes
sys.exit(main(["--db", sys.argv[1], "run", "--source", "ca", "--mode", "full"]))
