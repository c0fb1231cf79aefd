"""The merge rule exists once (issue 35): `UpsertPlan.merge` decides what a stored row becomes,
and every engine and path writes the row it returns and counts its verdict. Altering that one
method is shown to change the stored rows and the counts alike, on SQLite, on PostgreSQL's batch
write and on its row-by-row path: were the rule also written in SQL, the SQL would undo the
change (as it once put back a `None` guard taken out of the Python merge) and only the counts
would follow.
"""
import pytest

from basecrawler import Recall, Store
from basecrawler.recordtypes.upsert import RETRANSLATE, UpsertPlan
from pgcluster import any_db, pg_cluster, pg_url  # noqa: F401  (fixtures)
from basecrawler.store.engines.dialect import dialect_of

TYPE = "vehicle_recall"
KEY = ("us", "US", "R1")


def recall(**fields) -> Recall:
    values = {"country": "US", "recall_number": "R1", "recall_date": "2024-05-01", "source_lang": "en",
              "manufacturer_original": "Acme", "model_original": "M1", "summary_original": "Air bag"}
    values.update(fields)
    return Recall(**values)


@pytest.fixture(params=["at once", "row by row"])
def store(request, any_db, monkeypatch):  # noqa: F811
    """Each engine, and on PostgreSQL also with its batch write refused (the row-by-row path)."""
    if request.param == "row by row":
        if not any_db.startswith("postgresql"):
            pytest.skip("SQLite has one path")
        from basecrawler.store.engines import pg_upsert
        monkeypatch.setattr(pg_upsert, "merge_batch", lambda *args, **kwargs: False)
    store = Store(any_db)
    yield store
    store.close()


def stored(store) -> dict:
    return store.lookup.get(TYPE, dict(zip(("source", "country", "recall_number"), KEY)))


def counts(result) -> tuple:
    return result.new, result.updated, result.unchanged, len(result.failed)


def test_under_the_real_rule_a_blank_keeps_the_stored_value_and_changes_nothing(store):
    store.upsert(TYPE, [recall()], source="us")
    result = store.upsert(TYPE, [recall(model_original=None)], source="us")
    assert counts(result) == (0, 0, 1, 0)
    assert stored(store)["model_original"] == "M1"


def test_a_rule_that_lets_a_blank_erase_is_what_both_engines_store_and_count(store, monkeypatch):
    store.upsert(TYPE, [recall()], source="us")
    real = UpsertPlan.merge

    def blank_erases_the_model(self, old, new):
        merged = real(self, old, new)
        if "model_original" in self.written:
            merged["model_original"] = new.get("model_original")
        return merged
    monkeypatch.setattr(UpsertPlan, "merge", blank_erases_the_model)
    result = store.upsert(TYPE, [recall(model_original=None)], source="us")
    assert counts(result) == (0, 1, 0, 0) and result.by_key == {KEY: "updated"}
    row = stored(store)
    assert row["model_original"] is None and row["summary_original"] == "Air bag"


def test_a_rule_that_keeps_every_stored_value_leaves_a_change_unwritten_and_counted_unchanged(store, monkeypatch):
    store.upsert(TYPE, [recall()], source="us")
    before = stored(store)
    monkeypatch.setattr(UpsertPlan, "merge", lambda self, old, new: dict(old))
    result = store.upsert(TYPE, [recall(summary_original="Seat belt", model_original="M2")], source="us")
    assert counts(result) == (0, 0, 1, 0)
    assert stored(store) == before   # not a column moved, updated_at and input_hash included


def test_what_the_rule_says_of_the_translation_is_what_is_cleared(store, monkeypatch):
    store.upsert(TYPE, [recall()], source="us")
    store.write(lambda db: db.conn.execute(dialect_of(db.conn).write("UPDATE recalls SET model_ko = '모델', summary_ko = '에어백', "
                                           "translated_at = '2024-06-01'")))
    real = UpsertPlan.merge

    def only_the_model_is_retranslated(self, old, new):
        merged = real(self, old, new)
        merged[RETRANSLATE] = tuple(o == "model_original" for o in self.originals) + (False,)
        return merged
    monkeypatch.setattr(UpsertPlan, "merge", only_the_model_is_retranslated)
    result = store.upsert(TYPE, [recall(summary_original="Seat belt")], source="us")
    assert counts(result) == (0, 1, 0, 0)
    row = stored(store)
    # The summary changed, yet only the model's Korean is cleared, and the state is kept: as the rule said.
    assert (row["summary_original"], row["summary_ko"], row["model_ko"], row["translated_at"]) == \
        ("Seat belt", "에어백", None, "2024-06-01")


def test_a_key_another_writer_inserted_after_the_lookup_is_merged_not_failed(pg_url, monkeypatch):  # noqa: F811
    # PostgreSQL's row-by-row path: the lookup misses the row another writer inserted meanwhile
    # (simulated: the first lookup answers nothing), so the insert meets the key's unique index.
    from basecrawler.store.engines import pg_upsert
    from basecrawler.store.lookup import Lookup
    store = Store(pg_url)
    try:
        store.upsert(TYPE, [recall(), recall(recall_number="R2")], source="us")
        monkeypatch.setattr(pg_upsert, "merge_batch", lambda *args, **kwargs: False)
        real, calls = Lookup.rows_by_key, []

        def first_lookup_misses(self, *args, **kwargs):
            calls.append(args)
            return {} if len(calls) == 1 else real(self, *args, **kwargs)
        monkeypatch.setattr(Lookup, "rows_by_key", first_lookup_misses)
        result = store.upsert(TYPE, [recall(summary_original="Seat belt"), recall(recall_number="R2")], source="us")
        assert counts(result) == (0, 1, 1, 0) and result.by_key[KEY] == "updated"
        assert stored(store)["summary_original"] == "Seat belt" and store.lookup.count(TYPE) == 2
    finally:
        store.close()
