"""The PostgreSQL batch write's direct way (basecrawler/store/engines/pg_upsert.py, issue #35
item 8): the keys no stored row holds are COPYed straight into the table, the held ones merged
by the one rule; a key another writer inserted after the lookup sends the batch the staged way
(INSERT … ON CONFLICT DO NOTHING RETURNING), so every key is still counted by the write that
made it, and never row by row."""
import pytest

from support import numbered_recall
from basecrawler.store.engines import pg_lookup
from pgcluster import pg_cluster, pg_store, pg_url, spy_statements  # noqa: F401  (fixtures)

TYPE = "vehicle_recall"


recall = numbered_recall


@pytest.fixture
def store(pg_store):  # noqa: F811
    return pg_store


@pytest.fixture
def statements(store, monkeypatch):
    return spy_statements(store, monkeypatch, keep=lambda sql: sql.split(" ")[0])


def taken_meanwhile(monkeypatch) -> None:
    """The batch's first lookup finds nothing, as if another writer inserted its keys just after."""
    real, calls = pg_lookup.values_by_key, []

    def first_finds_nothing(*args, **kwargs):
        calls.append(1)
        return {} if len(calls) == 1 else real(*args, **kwargs)
    monkeypatch.setattr(pg_lookup, "values_by_key", first_finds_nothing)


def counts(result) -> tuple:
    return result.new, result.updated, result.unchanged, len(result.failed)


def test_a_batch_of_stored_and_new_keys_copies_the_new_and_merges_the_stored(store, statements, row_by_row):
    store.upsert(TYPE, [recall(n) for n in range(4)], source="us")
    statements.clear()
    # R0000 changed, R0001 a blank (erases nothing), R0002 the same, R0004-5 new.
    result = store.upsert(TYPE, [recall(0, model_original="M"), recall(1, manufacturer_original=None), recall(2),
                                 recall(4), recall(5)], source="us")
    assert counts(result) == (2, 1, 2, 0)
    assert result.by_key[("us", "US", "R0004")] == "new" and result.by_key[("us", "US", "R0000")] == "updated"
    assert "INSERT" not in statements and "CREATE" not in statements and statements.count("COPY") == 1
    row = store.lookup.get(TYPE, {"source": "us", "country": "US", "recall_number": "R0001"})
    assert row["manufacturer_original"] == "Acme"
    assert store.lookup.count(TYPE) == 6 and row_by_row == []


def test_a_key_taken_after_the_lookup_sends_the_batch_the_staged_way_with_exact_counts(
        store, statements, row_by_row, monkeypatch):
    store.upsert(TYPE, [recall(n) for n in range(3)], source="us")
    statements.clear()
    taken_meanwhile(monkeypatch)
    result = store.upsert(TYPE, [recall(0, model_original="M"), recall(1), recall(3)], source="us")
    assert counts(result) == (1, 1, 1, 0)   # not 3 new, and no duplicate row
    assert "INSERT" in statements   # the staged insert said which key it inserted
    assert store.lookup.get(TYPE, {"source": "us", "country": "US", "recall_number": "R0000"})["model_original"] == "M"
    assert store.lookup.count(TYPE) == 4 and row_by_row == []
