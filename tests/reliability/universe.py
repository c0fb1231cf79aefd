"""The fixture universe: every source's replay set (fixtures/replay) served by a loopback
server, so the real source code runs over real HTTP with faults in between, and a clean
replay run gives the reference every faulty run must end up matching. The clean run is itself
checked against expected_universe (written by hand from the payloads), so "the same as the
clean run" also means "what the payloads say" for the fields stated there."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from basecrawler.fetch.replay import exchange_key
from basecrawler.testing import Reply, Request

from .expected_universe import differences

REPLAY_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "replay"

# Columns that describe the recall itself (not bookkeeping) — what "the same record" means.
RECORD_COLUMNS = (
    "source", "country", "recall_number", "recall_date", "date_unknown", "manufacturer_original", "model_original",
    "component_original", "summary_original", "defect_cause_original", "consequence_original", "remedy_original",
    "model_year", "affected_units", "source_lang", "source_url", "extra",
)


class ReplayHandler:
    """Answers a request with the recorded exchange of the same method + path + query."""

    def __init__(self, directory: Path = REPLAY_DIR):
        self.index = {}
        for meta_path in directory.glob("*/*.json"):
            self.index[meta_path.stem] = meta_path

    def __call__(self, request: Request) -> Reply:
        _, stem = exchange_key(request.method, "http://x" + request.path)
        meta_path = self.index.get(stem)
        if meta_path is None:
            return Reply(404, body=b"no such exchange")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        body = meta_path.with_suffix(".body").read_bytes()
        return Reply(meta.get("status", 200), body=body, headers=meta.get("headers") or {})


def point_source_at(monkeypatch, crawler_class, base_url: str) -> None:
    """Route every endpoint of a source to the loopback server (env override) at full speed."""
    for endpoint in crawler_class.endpoints:
        monkeypatch.setenv(f"BASECRAWLER_{crawler_class.source.upper()}_{endpoint.upper()}_URL", base_url)
    monkeypatch.setenv(f"BASECRAWLER_{crawler_class.source.upper()}_RATE", "1000")


def env_for_source(crawler_class, base_url: str) -> dict:
    env = dict(os.environ)
    for endpoint in crawler_class.endpoints:
        env[f"BASECRAWLER_{crawler_class.source.upper()}_{endpoint.upper()}_URL"] = base_url
    env[f"BASECRAWLER_{crawler_class.source.upper()}_RATE"] = "1000"
    return env


def without_hosts(row: dict) -> dict:
    """A row with scheme+host removed from URLs: a source stores links on the host it fetched
    from (the loopback server here, the real site in production)."""
    return {k: re.sub(r"https?://[^/\"\s]+", "", v) if isinstance(v, str) else v for k, v in row.items()}


def records(store, source: str) -> dict:
    cols = ", ".join(RECORD_COLUMNS)
    return {(r["country"], r["recall_number"]): r
            for r in store.query(f"SELECT {cols} FROM recalls WHERE source = ?", [source])}


_REFERENCES: dict[str, dict] = {}


def clean_reference(tmp_path, source_id) -> dict:
    """The records a clean offline run of the replay set stores (enough runs for the
    enrichment ladder to settle with zero backoffs). Computed once per test session, and
    refused (AssertionError) where it departs from the hand-written payload expectations."""
    if source_id not in _REFERENCES:
        reference = _clean_run(tmp_path, source_id)
        problems = differences(source_id, reference)
        assert not problems, "the clean run departs from the payloads:\n" + "\n".join(problems)
        _REFERENCES[source_id] = reference
    return {key: dict(row) for key, row in _REFERENCES[source_id].items()}


def _clean_run(tmp_path, source_id) -> dict:
    from basecrawler import Store
    from basecrawler.pipeline.registry import discover
    from basecrawler.testing import fast_settings

    db = str(tmp_path / f"reference-{source_id}.db")
    store = Store(db)
    settle(discover()[source_id], store, fast_settings(db, replay_dir=str(REPLAY_DIR)))
    reference = records(store, source_id)
    store.close()
    return reference


def settle(crawler_class, store, settings, most: int = 6) -> None:
    """Full offline runs until the source's records stop changing. A source with a detail
    phase runs `most` times: its enrichment ladder moves on each run (retry → gone) while the
    records may not. Any other source stops after the first run that writes nothing, one run
    after the one that stored the rest (a jp run re-reads its PDFs: ~2 s each)."""
    detail = crawler_class.has_detail_phase()
    for _ in range(most):
        counts = crawler_class(store, settings=settings, mode="full").run().counts
        if not detail and counts.new == counts.updated == 0:
            return
