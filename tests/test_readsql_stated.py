"""The watches, the status counts, the artifacts manifest and the translation worker state
their statements with the store's dialect (engines/dialect.py, issue #35 item 3): on
PostgreSQL none of them sends anything else (PostgreSQL refuses plain SQL, engines/pg.py), and the modules the web view runs on SQLite hold no statement in
SQLite's spelling only (tests/test_sql_dialect.py's census)."""
from __future__ import annotations

import sys

import pytest

from basecrawler.store.core import Store
from basecrawler.store.engines.dialect import POSTGRES, SQLITE, Statement
from test_sql_dialect import ROOT, unstated_sites
from watchkit import alert, food_listeria_set, store_alerts

# Modules converted with the watches (w11-readsql): every statement site stated.
STATED = [
    "basecrawler/watch/outbox.py", "basecrawler/watch/matching.py", "basecrawler/watch/pg_terms.py",
    "basecrawler/watch/selection.py", "basecrawler/watch/repository.py", "basecrawler/watch/delivery.py",
    "basecrawler/reading/summary.py", "basecrawler/reading/facetcounts.py", "basecrawler/reading/counts.py",
    "basecrawler/reading/webmeta.py", "basecrawler/reading/browse.py", "basecrawler/reading/web/groups.py",
    "basecrawler/reading/web/card.py", "basecrawler/reading/web/plugins/basecrawler_cards.py",
    "basecrawler/reading/web/plugins/basecrawler_groups.py", "basecrawler/reading/web/plugins/basecrawler_watch.py",
    "translate/worker.py", "basecrawler/fetch/artifacts.py",
]
MODULES = {name.removesuffix(".py").replace("/", ".") for name in STATED}
EARLY = "2000-01-01T00:00:00+00:00"
_PASSING = {("basecrawler.store.core", name) for name in ("query", "scalar", "write_returning")}


def _from_converted() -> bool:
    """Whether the statement being run came from one of MODULES: the first frame outside
    this test, the PostgreSQL adapter and the store's methods that pass a caller's SQL on."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_globals["__name__"] in (__name__, "basecrawler.store.engines.pg")
                                 or (frame.f_globals["__name__"], frame.f_code.co_name) in _PASSING):
        frame = frame.f_back
    return frame is not None and frame.f_globals["__name__"] in MODULES


def test_the_modules_state_every_statement_they_write():
    assert {name: lines for name in STATED if (lines := unstated_sites(ROOT / name))} == {}


def test_sqlite_only_helpers_hand_sqlite_a_statement_spelled_for_it(tmp_path):
    """What the web view and the snapshots run is SQLITE's, read-only where it only reads."""
    from basecrawler.reading import facetcounts, summary
    from basecrawler.reading.search import RecallFilter
    from record_types.product_alert import ProductAlert   # noqa: F401  (the type the alerts are)

    store = Store(str(tmp_path / "s.db"))
    try:
        store_alerts(store, food_listeria_set())
        seen = []

        class Spy:
            """The connection, keeping what the converted modules hand it."""

            def __init__(self, conn):
                self.conn = conn

            def execute(self, sql, *params):
                if _from_converted():
                    seen.append(sql)
                return self.conn.execute(sql, *params)

        conn = Spy(store.db.conn)
        found = summary.summarise(conn, RecallFilter(text="Listeria", record_type="product_alert"))
        assert found.count == 4
        facetcounts.data_marker(conn, "product_alerts")
        assert seen and all(isinstance(s, Statement) and s.dialect is SQLITE for s in seen)
        assert any(s.read_only for s in seen) and any(not s.read_only for s in seen)   # (its temporary table)
    finally:
        store.close()


# ---- on PostgreSQL ----------------------------------------------------------------------
pytest.importorskip("psycopg")
from pgcluster import pg_cluster, pg_url  # noqa: E402,F401  (fixtures)


@pytest.mark.parametrize("own_index", [False, True])
def test_matching_and_delivering_watches_never_reach_the_fallback_on_postgres(pg_url, tmp_path, monkeypatch,  # noqa: F811
                                                                            own_index):
    from basecrawler.watch import matching, outbox, pg_terms, repository
    from basecrawler.watch.delivery import deliver
    from basecrawler.watch.model import Watch

    monkeypatch.setenv("BASECRAWLER_WATCH_FEED_DIR", str(tmp_path / "feeds"))
    # The candidates' own index (every table is "large" beside them), or the table's.
    monkeypatch.setattr(pg_terms, "OWN_INDEX_RATIO", -1 if own_index else 10 ** 9)
    store = Store(pg_url)
    try:
        repository.add(store, Watch(name="food", channel="feed", record_type="product_alert",
                                    facets=(("category", "Food"),), text="Listeria", options={}), now=EARLY)
        # "Ölige": a letter outside ASCII with a case, asked of the store (pg_terms), not textscan.
        repository.add(store, Watch(name="oil", channel="feed", record_type="product_alert", text="Ölige",
                                    sources=("eu",), options={"as_soon_as_seen": True}), now=EARLY)
        store_alerts(store, [*food_listeria_set(), alert("eu", 3, title="Ölige Creme", category="Cosmetics",
                                                         country="DE")])
        report = matching.match(store)
        assert (report.matched, report.held) == (4, 3)   # the food matches wait for their Korean
        assert matching.release_held(store, now="2100-01-01T00:00:00+00:00") == 3
        assert deliver(store).sent == 4
        assert {name: c["sent"] for name, c in outbox.counts(store).items()} == {"food": 3, "oil": 1}
        assert len(outbox.recent(store, None)) == 4
        store_alerts(store, [alert("hc", 1, title="Listeria in cheese", category="Food", what_to_do_original="Return")])
        matching.match(store)
        matching.release_held(store, now="2100-01-01T00:00:00+00:00")
        food = repository.find(store, "food")
        rows = outbox.claim(store, food.id, now="2100-01-01T00:00:00+00:00")
        assert [r["change"] for r in rows] == ["changed"]
        assert outbox.failed(store, rows[0], "boom", now="2100-01-01T00:00:00+00:00") == "pending"
        outbox.release(store, [rows[0]["id"]])
        assert repository.remove(store, "oil") == 1 and [w.name for w in repository.all_watches(store)] == ["food"]
    finally:
        store.close()
    # (build_query states its statement for the store's engine: selection composes it as such)


def test_status_counts_artifacts_and_the_translation_worker_never_reach_the_fallback_on_postgres(pg_url, tmp_path):  # noqa: F811
    from basecrawler.fetch.artifacts import Artifacts
    from basecrawler.reading.counts import copies_by_type_and_source, translation_by_source
    from translate.backends import Backend
    from translate.fakeserver import pseudo_korean
    from translate.testing import seed, statuses
    from translate.worker import pending_by_type, requeue, translate_pending

    class Korean(Backend):
        name = "korean"

        def translate(self, texts, source_lang, target_lang="ko"):
            self.count_call()
            return [pseudo_korean(t) for t in texts]

    store = Store(pg_url)
    try:
        seed(store, 3)
        assert pending_by_type(store)["vehicle_recall"] == 3
        assert translate_pending(store, Korean(), batch_rows=2).translated == 3
        assert statuses(store) == {"translated": 3}
        assert requeue(store, "failed") == 0
        assert translation_by_source(store.db.conn) == {"us": {"translated": 3}}
        assert copies_by_type_and_source(store.db.conn) == {}
        artifacts = Artifacts(None, store, source="us", root=tmp_path / "artifacts")
        assert artifacts.manifest("a") is None
        artifacts.save("a", state="pending")
        assert artifacts.save("a", state="failed")["state"] == "failed"
        assert artifacts.manifest("a")["state"] == "failed"
    finally:
        store.close()


def test_the_postgres_term_lookups_state_what_they_mean(pg_url):  # noqa: F811
    """pg_terms reads with `query` and takes its session setting with `write`, both spelled
    for PostgreSQL (a `?` there would be a syntax error)."""
    from basecrawler.recordtypes import record_types
    from basecrawler.watch import pg_terms

    store = Store(pg_url)
    try:
        store_alerts(store, food_listeria_set())
        seen = []
        raw_execute = store.db.conn.execute

        def execute(sql, *args, **kwargs):
            if _from_converted():
                seen.append(sql)
            return raw_execute(sql, *args, **kwargs)
        store.write(lambda db: db.conn.execute(POSTGRES.write(
            "CREATE TEMP TABLE watch_some AS SELECT id FROM product_alerts")))   # the candidates: every record
        store.db.conn.execute = execute
        record_type = record_types()["product_alert"]
        found = pg_terms.term_ids(store, record_type, ["Listeria", "salad"], "watch_some")
        assert {t: len(ids) for t, ids in found.items()} == {"Listeria": 4, "salad": 1}
        assert seen and all(isinstance(s, Statement) and s.dialect is POSTGRES for s in seen)
        assert any(s.read_only for s in seen) and any(not s.read_only for s in seen)
    finally:
        store.close()
