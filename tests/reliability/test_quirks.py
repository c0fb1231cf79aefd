"""Runs the quirks corpus (tests/reliability/quirks.py) black-box: each entry's payloads are
served by a loopback server, `python -m basecrawler run --source X --mode full` runs in a
subprocess with the source's endpoints overridden to it, and the outcome is checked against
values written by hand from the payloads: exit code, every good record with its values,
every lost item a dead letter with its reason and raw input, warnings in the run line (and
per-record WARNINGs in the log), and no traceback in the log."""
from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from basecrawler.pipeline.registry import discover
from basecrawler.testing import LoopbackServer, Reply

from .quirks import CORPUS, Quirk
from .universe import env_for_source

REPO = Path(__file__).resolve().parents[2]


class Routes:
    def __init__(self, routes: dict[str, Reply]):
        self.routes = [(re.compile(pattern), reply) for pattern, reply in routes.items()]

    def __call__(self, request):
        for pattern, reply in self.routes:
            if pattern.search(request.path):
                return reply
        return Reply(404, body=b"not here", headers={"Content-Type": "text/plain"})


def run_cli(quirk: Quirk, tmp_path) -> tuple[subprocess.CompletedProcess, Path]:
    db = tmp_path / f"{quirk.source}.db"
    crawler_class = discover()[quirk.source]
    with LoopbackServer(Routes(quirk.routes)) as server:
        env = {k: v for k, v in env_for_source(crawler_class, server.url).items()
               if not k.startswith("BASECRAWLER_") or k.startswith(f"BASECRAWLER_{quirk.source.upper()}_")}
        env.update({"OMP_THREAD_LIMIT": "1", **quirk.env})
        proc = subprocess.run(
            [sys.executable, "-m", "basecrawler", "--db", str(db), "run", "--source", quirk.source,
             "--mode", quirk.mode, *quirk.args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return proc, db


def stored_value(row: dict, column: str):
    if column.startswith("extra."):
        value = json.loads(row["extra"] or "{}")
        for part in column.split(".")[1:]:
            value = value.get(part) if isinstance(value, dict) else None
        return value
    return row[column]


@pytest.mark.parametrize("quirk", CORPUS, ids=[q.name for q in CORPUS])
def test_quirk(quirk: Quirk, tmp_path):
    proc, db = run_cli(quirk, tmp_path)
    log = proc.stdout + proc.stderr
    assert proc.returncode == quirk.exit_code, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = {r["recall_number"]: dict(r) for r in conn.execute("SELECT * FROM recalls WHERE source = ?", [quirk.source])}
    assert sorted(rows) == sorted(quirk.records), log[-3000:]
    for number, expected in quirk.records.items():
        for column, value in expected.items():
            assert value == stored_value(rows[number], column), f"{number}.{column}"
    letters = [dict(r) for r in conn.execute(
        "SELECT kind, error, raw, raw_bytes FROM dead_letters WHERE source = ? AND resolved_at IS NULL", [quirk.source])]
    assert len(letters) == len(quirk.dead_letters), letters
    for kind, phrase in quirk.dead_letters:
        # The phrase names the reason or the item (its raw text is kept with the letter).
        match = [l for l in letters if l["kind"] == kind and phrase in l["error"] + str(l["raw"] or "")]
        assert match, f"no dead letter {kind!r} with {phrase!r}: {[(l['kind'], l['error']) for l in letters]}"
        assert match[0]["raw"] or match[0]["raw_bytes"], "a dead letter without its raw input"
    summary = conn.execute("SELECT summary FROM crawl_runs WHERE source = ? ORDER BY id DESC", [quirk.source]).fetchone()[0]
    # The run line counts the warnings; the log says each one at WARNING level.
    warned = [line for line in log.splitlines() if " WARNING " in line]
    for phrase in quirk.warnings:
        assert any(phrase in line for line in warned), f"no WARNING with {phrase!r}: {warned}"
    assert ("— warnings " in summary) == bool(quirk.warnings), summary
    for phrase in quirk.logged:
        assert any(phrase in line for line in warned), f"no WARNING with {phrase!r}: {warned}"
    conn.close()
