"""Every source against a fault-injecting loopback server (429 + Retry-After, 5xx bursts,
resets, slow and truncated bodies, details that appear late). After enough runs every
record of the fixture universe is stored with the values the payloads state (written by hand
in expected_universe.py) and exactly the values a clean run stores, and the counts add up: announced = stored + dead-lettered + explicitly gone."""

import pytest

from basecrawler import Store
from basecrawler.pipeline.registry import discover
from basecrawler.testing import LoopbackServer, Reply, fast_settings

from .faults import FaultInjector, FaultPlan
from .expected_universe import differences
from .universe import without_hosts, ReplayHandler, clean_reference, point_source_at, records

# The fault universe (universe.records, expected_universe) is keyed by a vehicle recall's
# (country, recall_number): sources whose records are of another type (hc, pypi) join it when it
# reads their declarations; until then their own tests cover truncated and failing downloads.
SOURCES = sorted(source for source, cls in discover().items() if cls.record_type == "vehicle_recall")
MAX_RUNS = 10


class LateDetails:
    """Detail lookups (US) answer 404 twice before the recorded answer: feed ahead of meta."""

    def __init__(self, inner, misses=2):
        self.inner = inner
        self.misses = misses
        self.seen = {}

    def __call__(self, request):
        if "campaignNumber=" in request.path:
            count = self.seen.get(request.path, 0)
            self.seen[request.path] = count + 1
            if count < self.misses:
                return Reply(404, body=b'{"Count": 0, "results": []}')
        return self.inner(request)


@pytest.mark.parametrize("source_id", SOURCES)
def test_faulty_server_every_record_stored_exactly_once_with_clean_values(tmp_path, monkeypatch, source_id):
    reference = clean_reference(tmp_path, source_id)
    assert reference, f"{source_id}: the replay set yields no records"
    crawler_class = discover()[source_id]
    db = str(tmp_path / "faulty.db")
    injector = FaultInjector(LateDetails(ReplayHandler()), FaultPlan(seed=sum(map(ord, source_id))))
    store = Store(db)
    with LoopbackServer(injector) as server:
        point_source_at(monkeypatch, crawler_class, server.url)
        settings = fast_settings(db, max_retries=3)
        statuses = []
        for _ in range(MAX_RUNS):
            result = crawler_class(store, settings=settings, mode="full").run()
            statuses.append(result.status)
            stored = records(store, source_id)
            pending = store.scalar(
                "SELECT COUNT(*) FROM enrichment WHERE source = ? AND state NOT IN ('done', 'empty', 'gone')", [source_id])
            if result.status == "succeeded" and set(stored) == set(reference) and not pending:
                break
    assert sum(injector.injected.values()) > 0, "the server injected no fault"
    stored = records(store, source_id)
    dead = {(r["recall_number"]) for r in store.query(
        "SELECT record_key FROM dead_letters WHERE source = ? AND resolved_at IS NULL AND record_key IS NOT NULL",
        [source_id])}
    gone = {r["record_key"] for r in store.query(
        "SELECT record_key FROM enrichment WHERE source = ? AND state = 'gone'", [source_id])}
    announced = {number for _, number in reference}
    # announced = stored + dead-lettered + explicitly gone (gone records keep their list data)
    assert announced == {number for _, number in stored} | dead | gone, statuses
    assert store.scalar("SELECT COUNT(*) FROM recalls WHERE source = ?", [source_id]) == len(reference)
    # Independent of the parser: the stored records are the ones the payloads state.
    assert differences(source_id, stored) == []
    for key, row in reference.items():
        # URLs a source stores point at the host it fetched from (here the loopback server).
        assert without_hosts(stored[key]) == without_hosts(row), f"{source_id} {key}: a value differs from the clean run"
    stuck = store.scalar("SELECT COUNT(*) FROM enrichment WHERE source = ? AND state = 'processing'", [source_id])
    assert stuck == 0
    store.close()
