"""Child process for test_crashed_runs: `python -m basecrawler run --source ca` in-process,
SIGKILLed once well over 64 KiB of the CSV body is on disk. The kill point is patched in
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

original = httpx.Response.iter_raw   # what the HTTP client reads bodies with (bounded.iter_decoded)


def iter_raw(self, chunk_size=None):
    given = 0
    for chunk in original(self, chunk_size):
        if given >= 3 * 65536 and str(self.request.url).endswith(".csv"):
            os.kill(os.getpid(), signal.SIGKILL)   # well over 64 KiB is written by now
        given += len(chunk)
        yield chunk


httpx.Response.iter_raw = iter_raw
sys.exit(main(["--db", sys.argv[1], "run", "--source", "ca", "--mode", "full"]))
