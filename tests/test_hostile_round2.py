"""Hostile input, second round (issue #34 items 1-5): structural limits on parsed documents,
the item's error boundary between parse() and the store, byte-order marks, types as declared,
path segments built from publisher data. Each reproduction that could exhaust memory runs in
a child process capped at 300 MB of address space (tests/hostile_round2_child.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import subprocess_env

REPO = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).resolve().parent / "hostile_round2_child.py"
CAP_MB = 300


def good(nid: str) -> dict:
    return {"NID": nid, "Title": f"Alert {nid}", "URL": f"https://recalls-rappels.canada.ca/en/alert-recall/{nid}",
            "Organization": "CFIA", "Product": "Cheese", "Issue": "Microbiology - Listeria", "What you should do": "Do not eat.",
            "Category": "Food", "Recall class": "Class 1", "Last updated": "2024-05-01", "Archived": "0"}


def run_capped(tmp_path, body: bytes) -> dict:
    path = tmp_path / "hostile.json"
    path.write_bytes(body)
    done = subprocess.run([sys.executable, str(CHILD), str(path), str(tmp_path / "child.db"), str(CAP_MB)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=subprocess_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def adds_up(counts: dict) -> bool:
    stored = counts["out_of_range"] + counts["new"] + counts["updated"] + counts["unchanged"] + counts["merged"]
    return (counts["parsed"] == stored + counts["store_failed"]
            and counts["fetched"] == counts["parsed"] + counts["skipped"] + counts["unparseable"])


# ---- 1. structural limits (the three reproductions of the issue) ---------------------------
def test_a_200kb_file_of_100000_nested_arrays_ends_bounded_as_one_dead_letter(tmp_path):
    body = b"[" * 100_000 + b"]" * 100_000   # the top-level array holds one item, 99,999 levels deep
    outcome = run_capped(tmp_path, body)
    # Its only item unparseable: a suspect run (not a failed source), its line adding up.
    assert outcome["status"] == "suspect" and outcome["error"] is None, outcome["line"]
    assert outcome["letters"] == ["too_deep"] and outcome["stored"] == []
    assert adds_up(outcome["counts"]), outcome["line"]


def test_20000_levels_between_two_good_alerts_keep_both(tmp_path):
    deep = b"[" * 20_000 + b"]" * 20_000
    body = b"[" + json.dumps(good("1")).encode() + b"," + deep + b"," + json.dumps(good("2")).encode() + b"]"
    outcome = run_capped(tmp_path, body)
    assert outcome["stored"] == ["1", "2"] and outcome["letters"] == ["too_deep"]
    assert adds_up(outcome["counts"]) and outcome["counts"]["unparseable"] == 1, outcome["line"]


def test_one_value_nested_1200_deep_among_two_good_alerts_is_that_alerts_dead_letter(tmp_path):
    body = json.dumps([good("1"), good("2"), good("3")]).encode()
    value = b"[" * 1200 + b'"x"' + b"]" * 1200
    marker = b'"NID": "2",'
    body = body.replace(marker, marker + b' "Extra": ' + value + b",", 1)
    outcome = run_capped(tmp_path, body)
    assert outcome["status"] == "succeeded", outcome["line"]
    assert outcome["stored"] == ["1", "3"] and outcome["letters"] == ["too_deep"]
    assert outcome["counts"]["fetched"] == 3 and outcome["counts"]["unparseable"] == 1
    assert adds_up(outcome["counts"]), outcome["line"]
