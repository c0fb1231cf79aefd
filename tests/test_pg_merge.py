"""The PostgreSQL batch write (basecrawler/store/engines/pg_upsert.py, issues #23, 35): COPY into a
staging table, one INSERT … ON CONFLICT DO NOTHING per batch, the keys already held merged by the
one rule of recordtypes/upsert.py; keeps every rule of the row-by-row path, counts each key
exactly, and leaves refused rows to the row-by-row path.

`merge_path` records every batch that went row by row (`Records.write_bisecting`), so each test
also shows which path did the work.
"""
import json
import logging
import threading

import pytest

from basecrawler import Store
from support import numbered_recall
from basecrawler.recordtypes import get_record_type
from basecrawler.recordtypes.upsert import plan_for
from pgcluster import pg_cluster, pg_store, pg_url  # noqa: F401  (fixtures)
from basecrawler.store.engines.dialect import dialect_of

TYPE = "vehicle_recall"


recall = numbered_recall


@pytest.fixture
def store(pg_store):  # noqa: F811
    return pg_store


def stored(store, number: str) -> dict:
    return store.lookup.get(TYPE, {"source": "us", "country": "US", "recall_number": number})


def counts(result) -> tuple:
    return result.new, result.updated, result.unchanged, len(result.failed)


def test_counts_are_exact_over_insert_identical_rerun_and_partial_change(store, row_by_row):
    first = store.upsert(TYPE, [recall(n) for n in range(6)], source="us")
    assert counts(first) == (6, 0, 0, 0) and set(first.by_key.values()) == {"new"}
    before = {r["recall_number"]: r for r in store.query(dialect_of(store).query("SELECT * FROM recalls"))}

    again = store.upsert(TYPE, [recall(n) for n in range(6)], source="us")
    assert counts(again) == (0, 0, 6, 0) and set(again.by_key.values()) == {"unchanged"}

    # R0000 changes a value; R0001 sends a blank (another input, the same merged row); R0006 is new.
    changed = store.upsert(TYPE, [recall(0, model_original="M2"), recall(1, summary_original=None),
                                  recall(2), recall(6)], source="us")
    assert counts(changed) == (1, 1, 2, 0)
    assert changed.by_key == {("us", "US", "R0000"): "updated", ("us", "US", "R0001"): "unchanged",
                              ("us", "US", "R0002"): "unchanged", ("us", "US", "R0006"): "new"}
    after = {r["recall_number"]: r for r in store.query(dialect_of(store).query("SELECT * FROM recalls"))}
    assert after["R0000"]["model_original"] == "M2" and after["R0000"]["input_hash"] != before["R0000"]["input_hash"]
    for number in ("R0001", "R0002", "R0003"):   # not written: neither hash nor updated_at moved
        assert after[number] == before[number]
    assert after["R0000"]["first_seen_at"] == before["R0000"]["first_seen_at"]
    assert row_by_row == []


def test_a_blank_never_erases_a_stored_value_nor_one_inside_extra(store, row_by_row):
    store.upsert(TYPE, [recall(1, model_original="M1", extra={"plant": "Ulsan", "units_note": "about 40", "n": 3})],
                 source="us")
    result = store.upsert(TYPE, [recall(1, model_original=None, extra={"plant": "", "units_note": None, "n": [],
                                                                       "added": "yes"})], source="us")
    row = stored(store, "R0001")
    assert result.by_key[("us", "US", "R0001")] == "updated"
    assert row["model_original"] == "M1"
    assert row["extra"] == {"added": "yes", "n": 3, "plant": "Ulsan", "units_note": "about 40"}

    # The text is what the row-by-row merge writes (sorted keys, Python's JSON spelling), so
    # both engines and both paths store the same bytes.
    old = {"extra": json.dumps({"plant": "Ulsan", "units_note": "about 40", "n": 3}, ensure_ascii=False, sort_keys=True)}
    expected = plan_for(get_record_type(TYPE)).merge(old, {"extra": {"added": "yes", "plant": ""}})["extra"]
    assert store.scalar(dialect_of(store).query("SELECT extra FROM recalls WHERE recall_number = 'R0001'")) == expected

    blanks_only = store.upsert(TYPE, [recall(1, extra={"plant": "", "n": None})], source="us")
    assert blanks_only.by_key[("us", "US", "R0001")] == "unchanged"
    assert row_by_row == []


def test_extra_keeps_each_values_json_text_and_sorts_keys_by_code_point(store, row_by_row):
    store.upsert(TYPE, [recall(1, extra={"é": "ü\n", "b": {"z": 1, "aa": [1.5, None]}, "B": 1e-05})], source="us")
    store.upsert(TYPE, [recall(1, extra={"a\"q": "x\ty", "b": {"z": 1, "aa": [1.5, None]}})], source="us")
    old = {"extra": json.dumps({"é": "ü\n", "b": {"z": 1, "aa": [1.5, None]}, "B": 1e-05}, ensure_ascii=False,
                               sort_keys=True)}
    expected = plan_for(get_record_type(TYPE)).merge(old, {"extra": {"a\"q": "x\ty", "b": {"z": 1, "aa": [1.5, None]}}})
    assert store.scalar(dialect_of(store).query("SELECT extra FROM recalls WHERE recall_number = 'R0001'")) == expected["extra"]
    assert row_by_row == []


def test_an_unknown_date_never_replaces_a_known_one_and_a_known_one_replaces_an_unknown(store, row_by_row):
    store.upsert(TYPE, [recall(1, recall_date="2024-05-01"), recall(2, recall_date=None)], source="us")
    result = store.upsert(TYPE, [recall(1, recall_date=None, model_original="M"),
                                 recall(2, recall_date="2023-02-03")], source="us")
    assert counts(result) == (0, 2, 0, 0)
    known, learned = stored(store, "R0001"), stored(store, "R0002")
    assert (known["recall_date"], known["date_unknown"], known["model_original"]) == ("2024-05-01", 0, "M")
    assert (learned["recall_date"], learned["date_unknown"]) == ("2023-02-03", 0)
    assert counts(store.upsert(TYPE, [recall(1, recall_date=None)], source="us")) == (0, 0, 1, 0)
    assert row_by_row == []


def test_a_changed_original_clears_its_korean_and_the_translation_state(store, row_by_row):
    store.upsert(TYPE, [recall(1, model_original="Sedan"), recall(2)], source="us")
    store.write(lambda db: db.conn.execute(
        dialect_of(db.conn).write("UPDATE recalls SET summary_ko = '요약', model_ko = '세단', translated_at = '2024-06-01', "
        "translation_status = 'translated'")))
    result = store.upsert(TYPE, [recall(1, model_original="Sedan", summary_original="New summary"),
                                 recall(2, summary_original=None)], source="us")
    assert counts(result) == (0, 1, 1, 0)
    changed, kept = stored(store, "R0001"), stored(store, "R0002")
    assert (changed["summary_ko"], changed["model_ko"], changed["translated_at"], changed["translation_status"]) \
        == (None, "세단", None, None)
    assert (kept["summary_ko"], kept["translated_at"]) == ("요약", "2024-06-01")
    assert row_by_row == []


def test_one_refused_row_in_a_batch_of_500_is_the_only_failure(store, row_by_row):
    store.write(lambda db: db.conn.execute(dialect_of(db.conn).write("ALTER TABLE recalls ADD CONSTRAINT no_r0250 CHECK (recall_number <> 'R0250')")))
    result = store.upsert(TYPE, [recall(n) for n in range(500)], source="us")
    assert counts(result) == (499, 0, 0, 1)
    (row, error), = result.failed
    assert row["recall_number"] == "R0250" and "no_r0250" in error
    assert store.lookup.count(TYPE) == 499 and stored(store, "R0250") is None
    assert row_by_row and row_by_row[0][0] == ("us", "US", "R0000")   # the batch went row by row


def test_a_value_that_cannot_be_encoded_fails_its_row_only(store, row_by_row):
    # A lone surrogate (text decoded with surrogateescape) has no UTF-8: psycopg refuses it mid-COPY.
    result = store.upsert(TYPE, [recall(n, extra={"note": "bad \udcff" if n == 7 else "ok"}) for n in range(20)],
                          source="us")
    assert counts(result) == (19, 0, 0, 1)
    (row, error), = result.failed
    assert row["recall_number"] == "R0007" and "UnicodeEncodeError" in error
    assert store.lookup.count(TYPE) == 19 and len(row_by_row[0]) == 20   # the batch went row by row


def test_extra_that_jsonb_cannot_hold_is_merged_and_kept_without_going_row_by_row(store, row_by_row):
    # jsonb has no \u0000; the merge is Python's (recordtypes/upsert.py), so the server never reads it as jsonb.
    store.upsert(TYPE, [recall(1, extra={"plant": "Ulsan"})], source="us")
    result = store.upsert(TYPE, [recall(1, extra={"code": "a\x00b"}), recall(2)], source="us")
    assert counts(result) == (1, 1, 0, 0)
    assert stored(store, "R0001")["extra"] == {"code": "a\x00b", "plant": "Ulsan"}
    assert row_by_row == []


def test_a_deadlock_in_the_merge_retries_the_transaction_instead_of_going_row_by_row(store, row_by_row, caplog):
    # The first merge meets a deadlock (raised once by a trigger; a sequence is not rolled back).
    store.db.executescript(
        "CREATE SEQUENCE merge_attempts;"
        "CREATE FUNCTION deadlock_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF nextval('merge_attempts') = 1 THEN RAISE EXCEPTION 'fake deadlock' USING ERRCODE = '40P01'; END IF; "
        "RETURN NEW; END $$;"
        "CREATE TRIGGER deadlock_once BEFORE INSERT ON recalls FOR EACH ROW EXECUTE FUNCTION deadlock_once();")
    with caplog.at_level(logging.WARNING):
        result = store.upsert(TYPE, [recall(n) for n in range(3)], source="us")
    assert counts(result) == (3, 0, 0, 0)
    assert any("fake deadlock" in r.getMessage() and "retry" in r.getMessage() for r in caplog.records)
    assert row_by_row == []


def test_two_writers_on_overlapping_keys_both_finish_with_the_right_rows(pg_url, caplog):  # noqa: F811
    # A writes summaries of keys 0-999, B models of keys 500-1499 (in descending order), four
    # rounds each, batches of 500: every overlapping batch locks the same rows.
    rounds, results = 4, {"A": [], "B": []}
    start = threading.Barrier(2)

    def write(name, numbers, field):
        store = Store(pg_url)
        start.wait()
        try:
            for round_ in range(rounds):
                records = [recall(n, **{"summary_original": None, field: f"{name}{round_} {n}"}) for n in numbers]
                for at in range(0, len(records), 500):
                    results[name].append(store.upsert(TYPE, records[at:at + 500], source="us"))
        finally:
            store.close()
    writers = [threading.Thread(target=write, args=("A", range(1000), "summary_original")),
               threading.Thread(target=write, args=("B", range(1499, 499, -1), "model_original"))]
    with caplog.at_level(logging.WARNING):
        for w in writers:
            w.start()
        for w in writers:
            w.join()
    assert not [r.getMessage() for r in caplog.records if "deadlock" in r.getMessage()]
    new = sum(r.new for rs in results.values() for r in rs)
    assert new == 1500
    for name in results:   # every row a writer sent changed its own field: new or updated, never lost
        assert sum(r.new + r.updated for r in results[name]) == 1000 * rounds
        assert sum(r.unchanged + len(r.failed) for r in results[name]) == 0
    check = Store(pg_url)
    rows = {r["recall_number"]: r for r in check.query(dialect_of(check).query("SELECT recall_number, summary_original, model_original FROM recalls"))}
    check.close()
    assert len(rows) == 1500
    for n in range(1500):
        row = rows[f"R{n:04d}"]
        assert row["summary_original"] == (f"A{rounds - 1} {n}" if n < 1000 else None)
        assert row["model_original"] == (f"B{rounds - 1} {n}" if n >= 500 else None)


def test_a_second_type_with_a_list_column_a_boolean_and_no_date_sentinel(store, row_by_row):
    from record_types.product_alert import ProductAlert

    def alert(n, **fields):
        return ProductAlert(**{"country": "CA", "alert_id": f"A{n}", "alert_date": "2024-03-01",
                               "title_original": f"Alert {n}", **fields})
    first = store.upsert("product_alert", [alert(1, category=["toys", "food"], archived=True),
                                           alert(2, alert_date=None)], source="hc")
    assert counts(first) == (2, 0, 0, 0)
    again = store.upsert("product_alert", [alert(1, category=[], archived=None, alert_date=None),
                                           alert(2, alert_date="2024-04-02")], source="hc")
    assert again.by_key == {("hc", "CA", "A1"): "unchanged", ("hc", "CA", "A2"): "updated"}
    one = store.lookup.get("product_alert", {"source": "hc", "country": "CA", "alert_id": "A1"})
    two = store.lookup.get("product_alert", {"source": "hc", "country": "CA", "alert_id": "A2"})
    assert (one["category"], one["archived"], one["alert_date"], one["date_unknown"]) == \
        (["toys", "food"], 1, "2024-03-01", 0)
    assert (two["alert_date"], two["date_unknown"]) == ("2024-04-02", 0)
    assert row_by_row == []
