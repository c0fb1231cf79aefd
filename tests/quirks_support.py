"""Helpers for the issue #13 quirk tests: run the real CLI in a subprocess with a clean
environment, serve a host's replay folder from a loopback server, read stored rows."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from basecrawler.pipeline.registry import discover
from basecrawler.fetch.replay import exchange_key
from basecrawler.testing import LoopbackServer, Reply

REPO = Path(__file__).resolve().parents[1]
REPLAY_DIR = REPO / "fixtures" / "replay"
# Every discovered source at full speed (a source's own politer rate is a per-source setting).
FAST = {"BASECRAWLER_RATE": "1000", "BASECRAWLER_HTTP_RETRIES": "1", "BASECRAWLER_HTTP_BACKOFF": "0.01",
        **{f"BASECRAWLER_{source_id.upper()}_RATE": "1000" for source_id in discover()}}


def cli(db, *args, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """`python -m basecrawler --db DB ARGS…` with only the BASECRAWLER_* variables given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
    clean.update(FAST)
    clean.update(env or {})
    # In the database's folder (under tmp), never the checkout.
    return subprocess.run([sys.executable, "-m", "basecrawler", "--db", str(db), *args], cwd=Path(db).parent, env=clean,
                          capture_output=True, text=True, timeout=timeout)


def rows(db, sql: str, params=()) -> list[dict]:
    conn = sqlite3.connect(str(db))
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def recall(db, country: str, number: str) -> dict | None:
    found = rows(db, "SELECT * FROM recalls WHERE country = ? AND recall_number = ?", (country, number))
    if not found:
        return None
    row = found[0]
    row["extra"] = json.loads(row["extra"]) if row["extra"] else {}
    return row


def replay_server(host: str, directory: Path = REPLAY_DIR) -> LoopbackServer:
    """A loopback server answering every request from `directory/<host>/` (404 when absent), as
    the real host would: the request path and query pick the exchange, the port is ignored."""
    def handler(request) -> Reply:
        folder, stem = exchange_key(request.method, f"https://{host}{request.path}")
        meta_path = directory / folder / f"{stem}.json"
        if not meta_path.exists():
            return Reply(404, b"not recorded", {"Content-Type": "text/plain"})
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        return Reply(meta.get("status", 200), (directory / folder / f"{stem}.body").read_bytes(),
                     dict(meta.get("headers") or {}))
    return LoopbackServer(handler)
