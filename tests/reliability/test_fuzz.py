"""Property-based fuzzing of every source (#22.8): Hypothesis mutates one recorded exchange of a
source's replay set (bytes flipped, truncated, re-encoded, a slice duplicated or removed, a huge
field, hostile characters), the real source code runs over real HTTP against it, and the run's
invariants must hold whatever the publisher sent:

- no exception escapes `run()`; the status is one of succeeded / suspect / failed;
- the run line adds up (parsed = out of range + new + updated + unchanged + merged + store
  failed; skipped + unparseable ≤ fetched);
- every stored record was counted as new, and every unparseable item or refused record is a
  dead letter — nothing is silently lost.

A bounded number of examples per source in CI (`BASECRAWLER_FUZZ_EXAMPLES`, default 6); set it
higher to fuzz for longer on demand. Sources are found by the registry: a new source with a
replay set is fuzzed without editing this file.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from basecrawler import Store
from basecrawler.pipeline.registry import discover
from basecrawler.testing import LoopbackServer, Reply, fast_settings

from .universe import REPLAY_DIR, ReplayHandler, point_source_at

EXAMPLES = int(os.environ.get("BASECRAWLER_FUZZ_EXAMPLES", "6"))
HUGE_FIELD = 300_000


def exchanges_of(crawler_class) -> list[Path]:
    """The recorded bodies served for this source's endpoint hosts (the list documents first)."""
    hosts = {urlsplit(url).hostname for url in crawler_class.endpoints.values()}
    bodies = sorted(p for host in hosts if host for p in (REPLAY_DIR / host).glob("*.body"))
    return bodies


FUZZED_SOURCES = [source for source, cls in discover().items() if exchanges_of(cls)]


def mutate(body: bytes, kind: str, position: float, size: int, byte: int) -> bytes:
    at = int(position * len(body)) if body else 0
    if kind == "flip":
        data = bytearray(body)
        for offset in range(min(size, 64)):
            if at + offset < len(data):
                data[at + offset] ^= byte or 0xFF
        return bytes(data)
    if kind == "truncate":
        return body[:at]
    if kind == "reencode":
        codec = ("latin-1", "shift_jis", "utf-16", "cp1252")[byte % 4]
        return body.decode("utf-8", "replace").encode(codec, "replace")
    if kind == "duplicate":
        return body[:at] + body[at:at + size * 50] * 2 + body[at + size * 50:]
    if kind == "remove":
        return body[:at] + body[at + size * 50:]
    if kind == "huge":
        return body[:at] + b"A" * HUGE_FIELD + body[at:]
    if kind == "hostile":
        payload = (b"\x00", b"&", b"<", b"\x1b[31m", b"=cmd|' /C calc'!A0", b"\xef\xbb\xbf", b"]]>", b"\xff\xfe")[byte % 8]
        return body[:at] + payload * max(1, size) + body[at:]
    raise AssertionError(kind)


MUTATIONS = st.tuples(
    st.sampled_from(["flip", "truncate", "reencode", "duplicate", "remove", "huge", "hostile"]),
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
    st.integers(min_value=1, max_value=40),
    st.integers(min_value=0, max_value=255),
)


class OneMutated:
    """The replay set, except one recorded body, which is served mutated."""

    def __init__(self, target: Path, body: bytes):
        self.replay = ReplayHandler()
        self.target_stem = target.stem
        self.body = body

    def __call__(self, request):
        reply = self.replay(request)
        from basecrawler.fetch.replay import exchange_key
        _, stem = exchange_key(request.method, "http://x" + request.path)
        if stem == self.target_stem:
            return Reply(reply.status, body=self.body, headers=reply.headers)
        return reply


def assert_invariants(store: Store, result, source_id: str) -> None:
    assert result.status in ("succeeded", "suspect", "failed"), result.status
    c = result.counts
    assert c.parsed == c.out_of_range + c.new + c.updated + c.unchanged + c.merged + c.store_failed, c
    assert c.saved == c.new + c.updated + c.unchanged, c
    assert c.skipped + c.unparseable <= c.fetched, c
    assert sum(c.skip_reasons.values()) == c.skipped, c
    # A fresh store: every stored record of the source, of every type, was counted new in this one run.
    from basecrawler.recordtypes import record_types

    assert sum(store.lookup.count(name, source_id) for name in record_types()) == c.new
    letters = store.dead_letters.open_dead_letters(source_id)
    assert len(letters) >= c.unparseable + c.store_failed, (len(letters), c)


@pytest.mark.slow
@pytest.mark.parametrize("source_id", FUZZED_SOURCES)
def test_mutated_publisher_output_never_escapes_run_and_the_counts_add_up(source_id, monkeypatch):
    crawler_class = discover()[source_id]
    bodies = exchanges_of(crawler_class)

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(target=st.sampled_from(bodies), mutation=MUTATIONS)
    def run_one(target, mutation):
        mutated = mutate(target.read_bytes(), *mutation)
        with tempfile.TemporaryDirectory() as folder:
            db = str(Path(folder) / "fuzz.db")
            store = Store(db)
            try:
                with LoopbackServer(OneMutated(target, mutated)) as server:
                    point_source_at(monkeypatch, crawler_class, server.url)
                    result = crawler_class(store, settings=fast_settings(db, max_retries=1), mode="full").run()
                assert_invariants(store, result, source_id)
            finally:
                store.close()

    run_one()


def test_the_fuzzer_reaches_every_source_with_a_replay_set():
    # A source with recorded exchanges that the fuzzer skipped would be a silent gap.
    with_replay = {s for s, cls in discover().items() if exchanges_of(cls)}
    assert with_replay and set(FUZZED_SOURCES) == with_replay


def test_the_invariants_catch_a_lost_record(tmp_path):
    # The property is only worth something if it can fail: a run whose counts claim a record
    # that was never stored must be refused.
    from basecrawler.pipeline.results import RunCounts, RunResult
    store = Store(str(tmp_path / "x.db"))
    lying = RunResult("us", None, "succeeded", counts=RunCounts(fetched=1, parsed=1, new=1, saved=1))
    with pytest.raises(AssertionError):
        assert_invariants(store, lying, "us")
