"""A re-run of unchanged input is recognised by the stored `input_hash` (issue #23.3): no
merge, no column-by-column comparison, no write, exact counts; anything else still goes the
whole way."""
from basecrawler import Recall, Store
from basecrawler.recordtypes.upsert import UpsertPlan


def recall(**fields):
    base = dict(country="US", recall_number="24V001", recall_date="2024-01-01", summary_original="Brake hose",
                extra={"vehicles": [{"make": "Ford"}]})
    return Recall(**{**base, **fields})


def test_same_input_again_is_unchanged_without_a_merge(tmp_path, monkeypatch):
    store = Store(tmp_path / "s.db")
    assert store.upsert_recalls([recall(), recall(recall_number="24V002")], source="us").new == 2
    merges = []
    original = UpsertPlan.merge
    monkeypatch.setattr(UpsertPlan, "merge", lambda self, old, new: merges.append(1) or original(self, old, new))
    before = store.db.conn.total_changes
    again = store.upsert_recalls([recall(), recall(recall_number="24V002")], source="us")
    assert (again.new, again.updated, again.unchanged) == (0, 0, 2)
    assert store.db.conn.total_changes == before   # 0 rows written
    assert merges == []                              # decided by the hash alone


def test_other_input_that_changes_nothing_is_compared_and_unchanged(tmp_path, monkeypatch):
    store = Store(tmp_path / "s.db")
    store.upsert_recalls([recall()], source="us")
    stored = store.get_recall("US", "24V001")
    before = store.db.conn.total_changes
    # A blank never erases: fewer fields is another hash, and still no change.
    result = store.upsert_recalls([recall(summary_original=None, extra={})], source="us")
    assert (result.updated, result.unchanged) == (0, 1)
    # Only the bookkeeping moved: the row now stands for this input too (its hash), the data
    # and updated_at did not.
    assert store.db.conn.total_changes == before + 1
    now = store.get_recall("US", "24V001")
    assert now["input_hash"] != stored["input_hash"]
    assert {k: v for k, v in now.items() if k != "input_hash"} == {k: v for k, v in stored.items() if k != "input_hash"}
    # So the same input again is recognised by its hash alone: no merge, no write.
    merges = []
    original = UpsertPlan.merge
    monkeypatch.setattr(UpsertPlan, "merge", lambda self, old, new: merges.append(1) or original(self, old, new))
    before = store.db.conn.total_changes
    assert store.upsert_recalls([recall(summary_original=None, extra={})], source="us").unchanged == 1
    assert store.db.conn.total_changes == before and merges == []


def test_changed_input_is_written_and_then_recognised(tmp_path):
    store = Store(tmp_path / "s.db")
    store.upsert_recalls([recall()], source="us")
    assert store.upsert_recalls([recall(summary_original="Brake hose chafes")], source="us").updated == 1
    assert store.get_recall("US", "24V001")["summary_original"] == "Brake hose chafes"
    before = store.db.conn.total_changes
    assert store.upsert_recalls([recall(summary_original="Brake hose chafes")], source="us").unchanged == 1
    assert store.db.conn.total_changes == before
    # Back to the first input: its hash is no longer the stored one, so it is written again.
    assert store.upsert_recalls([recall()], source="us").updated == 1
