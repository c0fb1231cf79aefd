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
    assert store.upsert("vehicle_recall", [recall(), recall(recall_number="24V002")], source="us").new == 2
    merges = []
    original = UpsertPlan.merge
    monkeypatch.setattr(UpsertPlan, "merge", lambda self, old, new: merges.append(1) or original(self, old, new))
    before = store.db.conn.total_changes
    again = store.upsert("vehicle_recall", [recall(), recall(recall_number="24V002")], source="us")
    assert (again.new, again.updated, again.unchanged) == (0, 0, 2)
    assert store.db.conn.total_changes == before   # 0 rows written
    assert merges == []                              # decided by the hash alone


def test_other_input_that_changes_nothing_is_compared_and_unchanged(tmp_path):
    store = Store(tmp_path / "s.db")
    store.upsert("vehicle_recall", [recall()], source="us")
    before = store.db.conn.total_changes
    # A blank never erases: fewer fields is another input, and still no change.
    result = store.upsert("vehicle_recall", [recall(summary_original=None, extra={})], source="us")
    assert (result.updated, result.unchanged) == (0, 1)
    assert store.db.conn.total_changes == before


def test_an_unchanged_row_is_pointed_at_the_pipelines_input_it_was_seen_with(tmp_path, monkeypatch):
    """With the input hash the pipeline gives (pipeline/intake.py), an unchanged row is pointed
    at that input (the bookkeeping column alone), so the next run recognises it unvalidated."""
    store = Store(tmp_path / "s.db")
    store.upsert("vehicle_recall", [recall()], source="us")
    stored = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V001"})
    before = store.db.conn.total_changes
    result = store.upsert("vehicle_recall", [recall(summary_original=None, extra={})], source="us",
                          input_hashes=["an input k"])
    assert (result.updated, result.unchanged) == (0, 1)
    assert store.db.conn.total_changes == before + 1
    now = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V001"})
    assert now["input_hash"] == "an input k"
    assert {k: v for k, v in now.items() if k != "input_hash"} == {k: v for k, v in stored.items() if k != "input_hash"}
    merges = []
    original = UpsertPlan.merge
    monkeypatch.setattr(UpsertPlan, "merge", lambda self, old, new: merges.append(1) or original(self, old, new))
    before = store.db.conn.total_changes
    again = store.upsert("vehicle_recall", [recall(summary_original=None, extra={})], source="us",
                         input_hashes=["an input k"])
    assert again.unchanged == 1 and store.db.conn.total_changes == before and merges == []


def test_changed_input_is_written_and_then_recognised(tmp_path):
    store = Store(tmp_path / "s.db")
    store.upsert("vehicle_recall", [recall()], source="us")
    assert store.upsert("vehicle_recall", [recall(summary_original="Brake hose chafes")], source="us").updated == 1
    assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V001"})["summary_original"] == "Brake hose chafes"
    before = store.db.conn.total_changes
    assert store.upsert("vehicle_recall", [recall(summary_original="Brake hose chafes")], source="us").unchanged == 1
    assert store.db.conn.total_changes == before
    # Back to the first input: its hash is no longer the stored one, so it is written again.
    assert store.upsert("vehicle_recall", [recall()], source="us").updated == 1
