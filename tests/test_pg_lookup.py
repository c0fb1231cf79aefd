"""Stored rows by key on PostgreSQL (basecrawler/store/engines/pg_lookup.py, issue #23): the
same rows the generic keyed read finds, for keys of several sources and countries at once, and
a plan of index probes on every key column even on a table just filled (no statistics yet).
"""
import json

import pytest

from basecrawler import Recall, Store
from basecrawler.recordtypes import get_record_type
from basecrawler.store.engines import pg_lookup
from pgcluster import pg_cluster, pg_url  # noqa: F401  (fixtures)
from basecrawler.store.engines.dialect import dialect_of

TYPE = "vehicle_recall"
RT = get_record_type(TYPE)


def recall(country: str, n: int) -> Recall:
    return Recall(country=country, recall_number=f"{n}", recall_date="2024-05-01", source_lang="en",
                  summary_original=f"Summary {country} {n}")


@pytest.fixture
def store(pg_url):  # noqa: F811
    store = Store(pg_url)
    store.upsert(TYPE, [recall(c, n) for c in ("US", "CA") for n in range(1200)], source="us")
    store.upsert(TYPE, [recall("US", n) for n in range(5)], source="eu")
    yield store
    store.close()


def lookup(store, keys, columns=None):
    with store.lock:
        return pg_lookup.rows_by_key(store.db.conn, RT, keys, columns)


def test_rows_of_several_sources_and_countries_in_chunks_missing_keys_left_out(store):
    keys = [("us", c, str(n)) for c in ("US", "CA") for n in range(0, 1300, 2)] + \
           [("eu", "US", "1"), ("eu", "US", "9"), ("xx", "US", "1"), ("us", "US", "1")]   # a repeated key too
    found = lookup(store, keys, ["input_hash", "recall_date"])
    expected = {k for k in keys if k[0] == "us" and int(k[2]) < 1200} | {("eu", "US", "1")}
    assert set(found) == expected and len(set(keys)) > pg_lookup.CHUNK   # more keys than one query takes
    row = found[("eu", "US", "1")]
    assert set(row) == {"source", "country", "recall_number", "input_hash", "recall_date"}
    assert row["recall_date"] == "2024-05-01" and row["input_hash"]


def test_every_column_without_a_list_and_the_same_rows_as_the_store_reads(store):
    keys = [("us", "US", "7"), ("us", "CA", "8")]
    found = lookup(store, keys)
    for key in keys:
        source, country, number = key
        d = dialect_of(store)
        assert found[key] == store.query(d.query(f"SELECT * FROM recalls WHERE source = {d.p} AND country = {d.p} "
                                                 f"AND recall_number = {d.p}"),
                                         [source, country, number])[0]


def test_a_number_given_for_a_text_key_finds_its_digits_as_sqlite_does(store):
    found = lookup(store, [("us", "US", "7"), ("us", "US", 42)], ["input_hash"])
    assert set(found) == {("us", "US", "7"), ("us", "US", "42")}


@pytest.mark.parametrize("one_prefix", [False, True])
def test_the_plan_probes_the_key_index_with_every_key_column_on_a_young_table(store, one_prefix):
    sql = pg_lookup.lookup_sql(RT.table, tuple(RT.key_columns), (str, str, str), ("input_hash",), one_prefix)
    numbers = [str(n) for n in range(500)]
    params = [json.dumps(numbers), "us", "US"] if one_prefix else [json.dumps([["us", "US", n] for n in numbers])]
    plan = "\n".join(r[0] for r in store.db.conn.raw.execute("EXPLAIN " + sql, params))
    assert "Nested Loop" in plan and "Index Cond:" in plan and "Seq Scan" not in plan and "Hash" not in plan
    cond = plan.split("Index Cond:")[1].split("\n")[0]
    assert all(column in cond for column in ("source", "country", "recall_number")) and "Filter" not in plan


def test_the_keys_of_one_source_and_country_go_as_one_list_of_numbers(store, monkeypatch):
    sent = []
    real = store.db.conn.run_statement
    monkeypatch.setattr(store.db.conn, "run_statement", lambda sql, run, read_only=None: sent.append(sql) or real(sql, run, read_only))
    found = lookup(store, [("us", "CA", str(n)) for n in range(10)], ["input_hash"])
    assert len(found) == 10 and len(sent) == 1 and "json_array_elements_text(%s::json)" in sent[0]


def test_a_key_postgresql_text_cannot_hold_is_simply_not_found(store):
    keys = [("us", "US", "1"), ("us", "US", "a\x00b"), ("us", "US", "bad \udcff"), ("us", "CA", "2")]
    assert set(lookup(store, keys, ["input_hash"])) == {("us", "US", "1"), ("us", "CA", "2")}
    assert lookup(store, [("us", "US", "a\x00b")]) == {}


def test_a_stored_key_with_a_backslash_before_u0000_is_found_with_its_chunk(store):
    """Its JSON text holds what looks like an escaped NUL; the key itself holds none."""
    store.upsert(TYPE, [recall("US", 0).model_copy(update={"recall_number": "C:\\u0000"})], source="us")
    keys = [("us", "US", "1"), ("us", "US", "C:\\u0000"), ("us", "CA", "2")]
    assert set(lookup(store, keys, ["input_hash"])) == set(keys)


def test_values_by_key_are_the_rows_columns_as_tuples_under_the_same_stored_keys(store):
    mixed = [("us", "US", "7"), ("us", "US", 42), ("us", "CA", "8"), ("eu", "US", "1"), ("us", "US", "5000")]
    one_prefix = [("us", "US", "7"), ("us", "US", 42), ("us", "US", "5000")]
    for keys in (mixed, one_prefix):   # the whole key read back, or only its last column
        with store.lock:
            values = pg_lookup.values_by_key(store.db.conn, RT, keys, ("input_hash", "recall_date"))
        rows = lookup(store, keys, ["input_hash", "recall_date"])
        assert values == {key: (row["input_hash"], row["recall_date"]) for key, row in rows.items()}
        assert ("us", "US", "42") in values and ("us", "US", "5000") not in values


def test_known_inputs_on_postgresql_gives_the_hash_and_the_date_only_when_asked(store):
    [row] = store.query(dialect_of(store).query("SELECT input_hash FROM recalls WHERE source = 'us' AND country = 'US' AND recall_number = '7'"))
    assert store.lookup.known_inputs(TYPE, [("us", "US", "7"), ("us", "US", "x")]) == {("us", "US", "7"): (row["input_hash"], "2024-05-01")}
    assert store.lookup.known_inputs(TYPE, [("us", "US", "7")], dates=False) == {("us", "US", "7"): (row["input_hash"], None)}
