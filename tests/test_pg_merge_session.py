"""The PostgreSQL batch merge's round trips (basecrawler/store/engines/pg_upsert.py, issue #23):
the staging table is made once per connection, a batch that opens its transaction needs no
savepoint, and the cases those shortcuts must not break — a staging table lost with a
rolled-back transaction, several batches in one transaction, a refused batch after others.
"""
import pytest

from basecrawler import Recall, Store
from basecrawler.recordtypes import get_record_type
from basecrawler.recordtypes.upsert import GIVEN_HASH, INPUT_HASH, plan_for
from basecrawler.store.core import UpsertResult
from basecrawler.store.engines import pg_upsert
from pgcluster import pg_cluster, pg_store, pg_url, spy_statements  # noqa: F401  (fixtures)
from basecrawler.store.engines.dialect import dialect_of

TYPE = "vehicle_recall"
PLAN = plan_for(get_record_type(TYPE))


def recall(n: int, **fields) -> Recall:
    values = {"country": "US", "recall_number": f"R{n:04d}", "recall_date": "2024-05-01", "source_lang": "en",
              "manufacturer_original": "Acme", "summary_original": f"Summary {n}"}
    values.update(fields)
    return Recall(**values)


def rows(numbers, **fields) -> list[dict]:
    """Rows as Store.upsert hands them to the merge (folded, hashed)."""
    out = []
    for n in numbers:
        row = PLAN.row_of(recall(n, **fields), "us")
        row["_raw"] = row
        row[INPUT_HASH] = PLAN.input_hash(row)
        row[GIVEN_HASH] = False
        out.append(row)
    return out


@pytest.fixture
def store(pg_store):  # noqa: F811
    return pg_store


@pytest.fixture
def statements(store, monkeypatch):
    """Every statement the store's connection sends (its first 40 characters)."""
    return spy_statements(store, monkeypatch)


def test_a_batch_of_new_keys_costs_begin_lookup_copy_commit(store, statements, row_by_row):
    # (new keys go straight into the table; the staging table only when a key was taken
    # meanwhile: tests/test_write_path_pg.py)
    for start in (0, 10, 20):
        assert store.upsert(TYPE, [recall(n) for n in range(start, start + 10)], source="us").new == 10
    heads = [s.split(" ")[0] for s in statements]
    assert heads == ["BEGIN", "SELECT", "COPY", "COMMIT"] * 3
    assert row_by_row == [] and store.lookup.count(TYPE) == 30


def taken_meanwhile(monkeypatch):
    """The batch's lookup finds nothing, as if another writer inserted its keys just after:
    the direct COPY then meets them and the batch goes the staged way."""
    from basecrawler.store.engines import pg_lookup
    real, calls = pg_lookup.values_by_key, []

    def first_finds_nothing(*args, **kwargs):
        calls.append(1)
        return {} if len(calls) == 1 else real(*args, **kwargs)
    monkeypatch.setattr(pg_lookup, "values_by_key", first_finds_nothing)
    return calls


def test_a_staging_table_lost_with_its_transaction_is_made_again_and_the_batch_merged(store, row_by_row, monkeypatch):
    store.upsert(TYPE, [recall(n) for n in range(3)], source="us")
    taken_meanwhile(monkeypatch)
    store.upsert(TYPE, [recall(n) for n in range(3)], source="us")   # the staged way: the table made
    stage = pg_upsert.merge_sql(PLAN).stage
    # What a rolled-back first transaction leaves: the connection remembers a table that is gone.
    store.db.conn.execute(dialect_of(store.db.conn).write(f"DROP TABLE {stage}"))
    taken_meanwhile(monkeypatch)
    result = store.upsert(TYPE, [recall(n, model_original="M") for n in range(2, 5)], source="us")
    assert (result.new, result.updated, result.unchanged) == (2, 1, 0)
    assert row_by_row == []   # merged, not sent row by row
    assert store.lookup.get(TYPE, {"source": "us", "country": "US", "recall_number": "R0002"})["model_original"] == "M"


def test_several_batches_in_one_transaction_each_merge_only_their_own_rows(store, row_by_row):
    results = [UpsertResult() for _ in range(8)]

    def batches(db):
        db.execute(dialect_of(db).query("SELECT 1"))   # the merges run after another statement: with their savepoint
        for index, result in enumerate(results):
            # Batch i: keys 5i..5i+9 with model Mi, so half of each changes the batch before it.
            assert pg_upsert.merge_batch(db, PLAN, rows(range(5 * index, 5 * index + 10), model_original=f"M{index}"),
                                         result)
    store.write(batches)
    assert (results[0].new, results[0].updated) == (10, 0)
    for result in results[1:]:   # rows an earlier batch left staged would be merged again
        assert (result.new, result.updated, result.unchanged) == (5, 5, 0)
    models = {r["recall_number"]: r["model_original"] for r in store.query(dialect_of(store).query("SELECT recall_number, model_original FROM recalls"))}
    assert models == {f"R{n:04d}": f"M{min(n // 5, 7)}" for n in range(45)}
    assert row_by_row == []


def test_a_refused_batch_after_another_in_its_transaction_keeps_the_first(store, row_by_row):
    store.write(lambda db: db.conn.execute(dialect_of(db.conn).write("ALTER TABLE recalls ADD CONSTRAINT no_r0007 CHECK (recall_number <> 'R0007')")))
    first, second = UpsertResult(), UpsertResult()

    def batches(db):
        assert pg_upsert.merge_batch(db, PLAN, rows(range(5)), first)
        assert not pg_upsert.merge_batch(db, PLAN, rows(range(5, 10)), second)   # R0007: refused
    store.write(batches)
    assert first.new == 5 and second.new == 0
    assert store.lookup.count(TYPE) == 5   # the first batch stayed, the refused one left nothing


def test_a_refused_batch_that_opened_its_transaction_leaves_it_open_and_empty(store, row_by_row):
    store.write(lambda db: db.conn.execute(dialect_of(db.conn).write("ALTER TABLE recalls ADD CONSTRAINT no_r0003 CHECK (recall_number <> 'R0003')")))
    result = store.upsert(TYPE, [recall(n) for n in range(6)], source="us")
    assert (result.new, len(result.failed)) == (5, 1)
    assert row_by_row   # the row-by-row path ran in the transaction begun again
    assert store.upsert(TYPE, [recall(n) for n in range(6, 9)], source="us").new == 3
    assert store.lookup.count(TYPE) == 8
