"""Matching many watches at once selects, for each watch, exactly the records its search
selects (issue #33): the watches' terms and their other filters are looked up apart for all
watches together (`watch/selection.py`; terms Python cannot answer alone through
`watch/pg_terms.py` on PostgreSQL). Both engines, against the reading side's own search
(`iter_recalls`); randomised in test_watch_equivalence.py."""
from __future__ import annotations

import random

import pytest

from basecrawler.reading.search import iter_recalls
from basecrawler.recordtypes import get_record_type
from basecrawler.store.core import Store
from basecrawler.watch import matching, pg_terms, repository
from basecrawler.watch.model import Watch
from pgcluster import any_db, pg_cluster, pg_url  # noqa: F401  (fixtures)
from record_types.product_alert import ProductAlert
from basecrawler.store.engines.dialect import dialect_of

EARLY = "2000-01-01T00:00:00+00:00"
CATEGORIES = ["Food", "Toys", "Cosmetics"]
# Words with the characters a LIKE pattern treats specially, a 1–2 character term, letters whose
# lower case PostgreSQL's windows cannot stand for (İ, Σ: read with the ILIKE alone), Korean.
WORDS = ["Listeria", "listeria", "50%", "a_b", "ab", "Q7", "İzmir", "ΣΟΦΙΑ", "화재", "salmonella", "x\\y", "lead"]
TEXTS = ["Listeria", "listeria Food", "50%", "a_b", "ab", "Q7", "İzmir", "ΣΟΦΙΑ", "화재", "salmonella lead",
         "x\\y", "nothing-matches-this", "Li", "lead"]


def _records(rng: random.Random, source: str, count: int) -> list[ProductAlert]:
    out = []
    for i in range(count):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        out.append(ProductAlert(country=rng.choice(["CA", "FR"]), alert_id=f"{source}-{i}", alert_date="2025-01-01",
                                title_original=f"{words} in product {i}", category=[rng.choice(CATEGORIES)],
                                hazard_original=rng.choice(["", "risk of 50% burns", "a-b risk", "ab"])))
    return out


def _watches(rng: random.Random) -> list[Watch]:
    watches = []
    for n, text in enumerate(TEXTS * 3):
        kind = n % 4
        watches.append(Watch(
            name=f"w{n}", channel="feed", record_type="product_alert", text=text,
            facets=(("category", rng.choice(CATEGORIES)),) if kind in (0, 2) else (),
            sources=(("hc",) if kind == 3 else ("hc", "eu") if kind == 1 else ()),
            countries=("FR",) if n % 5 == 0 else (), options={"as_soon_as_seen": True}))
    watches.append(Watch(name="facet-only", channel="feed", record_type="product_alert",
                         facets=(("category", "Toys"),), options={"as_soon_as_seen": True}))
    return watches


@pytest.fixture(params=["table index", "own index"])
def texts(request, monkeypatch):
    """PostgreSQL reads the terms from the type's index or, when the candidates are few beside
    the table, from an index of the candidates' texts (`pg_terms._own_index`): each is run."""
    monkeypatch.setattr(pg_terms, "_own_index", lambda *args: request.param == "own index")
    return request.param


def test_every_watch_gets_exactly_what_its_search_selects(any_db, texts):  # noqa: F811
    if texts == "own index" and not any_db.startswith("postgresql"):
        pytest.skip("SQLite has one way to read a term")
    rng = random.Random(33)
    store = Store(any_db)
    try:
        watches = [repository.add(store, w, now=EARLY) for w in _watches(rng)]
        for source in ("hc", "eu"):
            store.upsert("product_alert", _records(rng, source, 150), source=source)
        record_type = get_record_type("product_alert")
        expected = {}
        for watch in watches:
            names, rows = iter_recalls(store.db.conn, matching.filter_for(watch, record_type))
            rows = [dict(zip(names, values)) for values in rows]
            expected[watch.name] = sorted(r["id"] for r in rows if not watch.sources or r["source"] in watch.sources)
        assert sum(map(len, expected.values())) > 100 and sum(1 for ids in expected.values() if not ids) < 10
        report = matching.match(store)
        got = {w.name: [] for w in watches}
        for row in store.query(dialect_of(store).query("SELECT w.name AS name, o.record_id AS record_id FROM watch_outbox o "
                               "JOIN watches w ON w.id = o.watch_id ORDER BY o.record_id")):
            got[row["name"]].append(row["record_id"])
        assert got == expected
        assert report.queued == sum(map(len, expected.values()))
        assert matching.match(store).queued == 0   # nothing changed: nothing queued again
    finally:
        store.close()
