"""A record made from the very input (and code) its stored row was last written from is counted
unchanged without being validated, prepared or compared (issue #23.3), and every count and
stored value is the one the whole way gives (pipeline/intake.py, records.py)."""
from __future__ import annotations

import datetime as dt
import random

import pytest

from basecrawler import BaseCrawler, Store
from basecrawler.pipeline import inputhash, records
from basecrawler.pipeline.intake import LOOKUP_EVERY
from basecrawler.recordtypes import Record
from basecrawler.recordtypes.registry import get_record_type
from basecrawler.store.lookup import Lookup
from basecrawler.store.engines.dialect import dialect_of

VEHICLE = get_record_type("vehicle_recall")


def recall(number: str, **fields) -> dict:
    return {"recall_number": number, "recall_date": "2024-03-01", "summary_original": f"Brake hose {number}",
            "affected_units": "1,200", "model_year": "2019-2021", "extra": {"kind": "vehicle"}, **fields}


class ListCrawler(BaseCrawler):
    source = "tst"
    country = "US"

    def __init__(self, store, items, **kwargs):
        super().__init__(store, **kwargs)
        self.items = items

    def fetch(self):
        yield from self.items

    def parse(self, raw):
        return raw


def run(store, items, **kwargs):
    return ListCrawler(store, items, **kwargs).run()


@pytest.fixture
def validations(monkeypatch):
    """How many entries the pipeline validated."""
    seen = []
    original = records.validate
    monkeypatch.setattr("basecrawler.pipeline.intake.validate", lambda entry: seen.append(entry) or original(entry))
    return seen


def stored(store: Store) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in ("input_hash",)}
            for row in store.query(dialect_of(store).query("SELECT * FROM recalls ORDER BY id"))]


def counts(result) -> dict:
    c = result.counts
    return {name: getattr(c, name) for name in ("parsed", "saved", "new", "updated", "unchanged", "merged",
                                                   "out_of_range", "unparseable", "dead_lettered")}


def test_a_rerun_of_unchanged_input_validates_nothing_writes_nothing_and_counts_exactly(tmp_path, validations):
    store = Store(tmp_path / "s.db")
    items = [recall(f"24V{n:04d}") for n in range(1200)]
    first = run(store, items, mode="full")
    assert first.counts.new == 1200 and len(validations) == 1200
    rows, changes = stored(store), store.db.conn.total_changes
    validations.clear()
    again = run(store, items, mode="full")
    assert validations == []
    assert counts(again) == {**counts(first), "new": 0, "unchanged": 1200}
    assert stored(store) == rows
    run_rows = 2   # the run's own row: started, then finished
    assert store.db.conn.total_changes - changes <= run_rows + 2


def test_only_the_changed_records_of_a_rerun_are_validated_and_written(store, validations):
    items = [recall(f"24V{n:04d}") for n in range(50)]
    run(store, items, mode="full")
    validations.clear()
    items[7] = recall("24V0007", summary_original="Brake hose chafes on the frame")
    again = run(store, items, mode="full")
    assert [entry.fields["recall_number"] for entry in validations] == ["24V0007"]
    assert (again.counts.updated, again.counts.unchanged) == (1, 49)
    assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V0007"})["summary_original"] == "Brake hose chafes on the frame"


def test_a_change_to_the_code_that_makes_records_sends_everything_the_whole_way_once(store, validations, monkeypatch):
    items = [recall(f"24V{n:04d}") for n in range(20)]
    run(store, items, mode="full")
    before = stored(store)
    monkeypatch.setattr(inputhash, "code_fingerprint", lambda record_type: "a fixed model")
    validations.clear()
    assert run(store, items, mode="full").counts.unchanged == 20
    assert len(validations) == 20               # the new code judged every record …
    assert stored(store) == before              # … found nothing to change, wrote no data …
    validations.clear()
    assert run(store, items, mode="full").counts.unchanged == 20
    assert validations == []                    # … and pointed the rows at this code's hashes


def test_a_recognised_record_is_windowed_by_its_own_date(store, validations):
    old, new, undated = recall("OLD", recall_date="2020-01-01"), recall("NEW", recall_date="2024-06-01"), \
        recall("NODATE", recall_date="soon")
    run(store, [old, new, undated], mode="full")
    assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "NODATE"})["date_unknown"] == 1
    validations.clear()
    windowed = run(store, [old, new, undated], mode="full", since=dt.date(2024, 1, 1))
    assert validations == []
    # OLD is out of the window by its own date; NODATE has none, so it is inside (as the whole way says).
    assert (windowed.counts.out_of_range, windowed.counts.unchanged) == (1, 2)


def test_a_recognised_record_with_a_changed_one_of_its_key_waiting_goes_the_whole_way(store, validations):
    """The batch folds the two as it always did: the later input wins where it has a value."""
    first = recall("24V1", summary_original="Original summary", remedy_original=None)
    run(store, [first], mode="full")
    changed = recall("24V1", summary_original="A changed summary", remedy_original="Replace the hose")
    validations.clear()
    result = run(store, [changed, first], mode="full")
    assert len(validations) == 2
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V1"})
    assert (row["summary_original"], row["remedy_original"]) == ("Original summary", "Replace the hose")
    assert (result.counts.updated, result.counts.merged) == (1, 1)


def test_a_round_of_recognised_records_one_of_whose_keys_waits_in_a_batch_sends_that_one_the_whole_way(
        store, validations, monkeypatch):
    """As above, the two in different lookup rounds: the later round recognises everything,
    yet its record's key waits in the batch the earlier round filled."""
    first = recall("24V1", summary_original="Original summary", remedy_original=None)
    run(store, [first, recall("24V2")], mode="full")
    monkeypatch.setattr("basecrawler.pipeline.intake.LOOKUP_EVERY", 1)   # a lookup round per record
    validations.clear()
    changed = recall("24V1", summary_original="A changed summary", remedy_original="Replace the hose")
    result = run(store, [changed, first, recall("24V2")], mode="full")
    assert [entry.fields["summary_original"] for entry in validations] == ["A changed summary", "Original summary"]
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V1"})
    assert (row["summary_original"], row["remedy_original"]) == ("Original summary", "Replace the hose")
    assert (result.counts.updated, result.counts.unchanged, result.counts.merged) == (1, 1, 1)


def test_a_recognised_record_a_later_batch_changes_counts_as_updated(tmp_path, monkeypatch):
    store = Store(tmp_path / "s.db")
    first = recall("24V1", summary_original="Original summary")
    run(store, [first], mode="full")
    monkeypatch.setenv("BASECRAWLER_BATCH_SIZE", "1")   # a batch (and a lookup round) per record
    monkeypatch.setattr("basecrawler.pipeline.intake.LOOKUP_EVERY", 1)
    result = run(store, [first, recall("24V1", summary_original="A changed summary")], mode="full")
    assert (result.counts.saved, result.counts.updated, result.counts.unchanged, result.counts.merged) == (1, 1, 0, 1)


def test_a_key_the_model_normalises_is_not_found_by_its_raw_form_and_goes_the_whole_way(store, validations):
    items = [recall("24V1", country="us"), recall(" 24V2 ")]   # the model upper-cases; whitespace is stripped
    run(store, items, mode="full")
    validations.clear()
    again = run(store, items, mode="full")
    assert [entry.fields["country"] for entry in validations] == ["us"]   # " 24V2 " was found as "24V2"
    assert (again.counts.unchanged, again.counts.updated, again.counts.new) == (2, 0, 0)


def test_an_item_whose_record_fails_validation_is_still_one_whole_dead_letter(tmp_path):
    store = Store(tmp_path / "s.db")
    good, bad = recall("24V1"), recall("24V2", affected_units="many")
    result = run(store, [[good], [recall("24V3"), bad]], mode="full")
    assert (result.counts.saved, result.counts.unparseable, result.counts.dead_lettered) == (1, 1, 1)
    [letter] = store.dead_letters.open_dead_letters("tst")
    assert letter["kind"] == "validation" and "affected_units" in letter["error"]
    assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V3"}) is None   # the item is kept whole, not half stored


def test_an_implausible_date_is_judged_again_on_every_run(tmp_path, validations):
    """"After tomorrow" moves with today's date, so such a record is never recognised unvalidated."""
    store = Store(tmp_path / "s.db")
    items = [recall("FUTURE", recall_date="9999-12-31"), recall("NOW")]
    run(store, items, mode="full")
    assert "implausible_recall_date" in store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "FUTURE"})["extra"]
    validations.clear()
    run(store, items, mode="full")
    assert [entry.fields["recall_number"] for entry in validations] == ["FUTURE"]


def test_records_of_a_type_without_a_date_and_of_two_types_from_one_item(store, validations):
    alert = Record("product_alert", {"country": "CA", "alert_id": "RA-1", "title_original": "Kettle recalled",
                                     "category": ["Electrical"]})
    items = [[recall("24V1"), alert]]
    first = run(store, items, mode="full")
    assert first.counts.new == 2
    validations.clear()
    again = run(store, items, mode="full")
    assert validations == [] and again.counts.unchanged == 2 and again.counts.saved == 2


class Unpicklable:
    """A value a source might leave in extra that pickle cannot write (a parser node…)."""

    def __reduce__(self):
        raise TypeError("not picklable")

    def __str__(self):
        return "a node"


def test_a_record_whose_input_cannot_be_hashed_goes_the_whole_way_every_time(tmp_path, validations):
    store = Store(tmp_path / "s.db")
    items = [recall("24V1", extra={"node": Unpicklable()}), recall("24V2")]
    run(store, items, mode="full")
    validations.clear()
    again = run(store, items, mode="full")
    assert [entry.fields["recall_number"] for entry in validations] == ["24V1"]
    assert (again.counts.unchanged, again.counts.updated) == (2, 0)


def test_recognising_changes_no_count_and_no_stored_value_against_the_whole_way(tmp_path, monkeypatch):
    """Random runs over a few keys (repeats inside a run, changed and unchanged values, records
    spread over lookup rounds and batches): with recognition and without it (every stored hash
    looked up in vain), the same counts and the same stored rows after every run."""
    rng = random.Random(23)
    variants = [dict(summary_original=s, remedy_original=r, recall_date=d)
                for s in ("A", "B", None) for r in ("R1", None) for d in ("2024-01-02", "unknown")]

    def runs():
        for _ in range(8):
            yield [recall(f"K{rng.randrange(6)}", **rng.choice(variants)) for _ in range(rng.randrange(1, 30))]

    with_store, without_store = Store(tmp_path / "with.db"), Store(tmp_path / "without.db")
    for items in runs():
        # A lookup round and a batch every few records, so repeats land in different ones.
        monkeypatch.setattr("basecrawler.pipeline.intake.LOOKUP_EVERY", rng.choice([1, 3, LOOKUP_EVERY]))
        monkeypatch.setenv("BASECRAWLER_BATCH_SIZE", str(rng.choice([2, 5, 5000])))
        since = rng.choice([None, dt.date(2024, 1, 1), dt.date(2025, 1, 1)])   # the last drops every known date
        recognised = run(with_store, items, mode="full", since=since)
        with monkeypatch.context() as patch:
            patch.setattr(Lookup, "known_inputs", lambda self, record_type, hashes, *args, **kwargs: {})
            whole_way = run(without_store, items, mode="full", since=since)
        assert counts(recognised) == counts(whole_way)
        strip = lambda rows: [{k: v for k, v in r.items() if k not in ("first_seen_at", "updated_at")} for r in rows]
        assert strip(stored(with_store)) == strip(stored(without_store))


# ---- the input hash: its bytes, its fallbacks, a store hashed the old way ----------------------
def maker(source: str = "tst", defaults=(("country", "US"), ("source_lang", "en"))) -> inputhash.EntryMaker:
    return inputhash.EntryMaker(source, defaults, lambda record_type: f"context of {record_type.name}|")


def test_the_run_s_entry_maker_gives_input_hash_of_its_fields_and_a_changed_value_another(tmp_path):
    made, context = maker(), "context of vehicle_recall|"
    base = recall("24V1")
    variants = [recall("24V1", affected_units=1200), recall("24V1", affected_units="1,201"), recall("24V1", extra={}),
                recall("24V1", extra={"kind": ["vehicle"]}), recall("24V1", extra={"kind": ("vehicle",)}),
                recall("24V1", model_year=None), recall("24V1", country="CA"), recall("24V1", flag=True),
                recall("24V1", flag=1), recall("24V1", flag=1.0)]
    hashes = set()
    for fields in [base, *variants]:
        entry = made.entry(VEHICLE, fields)
        assert entry.input_hash == inputhash.input_hash_of(entry.fields, context) and len(entry.input_hash) == 32
        hashes.add(entry.input_hash)
    assert len(hashes) == 1 + len(variants)                                   # every change tells
    assert made.entry(VEHICLE, recall("24V1")).input_hash == made.entry(VEHICLE, base).input_hash   # equal input, equal hash
    other = inputhash.EntryMaker("tst", (("country", "US"), ("source_lang", "en")), lambda rt: "another context|")
    assert other.entry(VEHICLE, base).input_hash != made.entry(VEHICLE, base).input_hash


def test_the_input_hash_does_not_depend_on_which_values_are_shared_objects():
    shared = {"make": "HONDA", "model": "CIVIC"}
    one = recall("24V1", extra={"vehicles": [shared, shared]})
    two = recall("24V1", extra={"vehicles": [{"make": "HONDA", "model": "CIVIC"}, {"make": "HONDA", "model": "CIVIC"}]})
    made = maker()
    assert made.entry(VEHICLE, one).input_hash == made.entry(VEHICLE, two).input_hash
    assert inputhash.input_hash_of(one, "c") == inputhash.input_hash_of(two, "c")


def test_a_value_fast_pickling_refuses_falls_back_to_a_plain_pickle_and_the_next_record_is_hashed_as_ever():
    cyclic: list = ["a"]
    cyclic.append(cyclic)
    made, context = maker(), "context of vehicle_recall|"
    entry = made.entry(VEHICLE, recall("24V1", extra={"loop": cyclic}))
    assert entry.input_hash is not None and entry.input_hash == inputhash.input_hash_of(entry.fields, context)
    after = made.entry(VEHICLE, recall("24V2"))
    assert after.input_hash == inputhash.input_hash_of(after.fields, context)
    assert made.entry(VEHICLE, recall("24V3", extra={"node": Unpicklable()})).input_hash is None
    assert made.entry(VEHICLE, recall("24V2")).input_hash == after.input_hash


def test_an_entry_is_a_copy_with_the_defaults_under_its_own_values_and_its_raw_key():
    made = maker()
    given = recall(" 24V1 ")
    entry = made.entry(VEHICLE, given)
    given["summary_original"] = "changed after parse() returned it"
    assert entry.fields["summary_original"] == "Brake hose  24V1 " and "country" not in given
    assert (entry.fields["country"], entry.fields["source_lang"], entry.raw_key) == ("US", "en", ("tst", "US", "24V1"))
    assert made.entry(VEHICLE, recall("24V1", country="CA", source_lang="fr")).raw_key == ("tst", "CA", "24V1")
    assert made.entry(VEHICLE, recall(7)).raw_key == ("tst", "US", 7)             # a number as it is
    assert made.entry(VEHICLE, recall(None)).raw_key is None                       # no key: not looked up
    assert made.entry(VEHICLE, recall(dt.date(2024, 1, 1))).raw_key is None
    assert made.entry(VEHICLE, {"summary_original": "no number"}).raw_key is None
    assert records.entries(recall("24V1"), default_type=VEHICLE, defaults={"country": "US"})[0].fields["country"] == "US"


def test_a_store_whose_hashes_an_earlier_version_made_goes_the_whole_way_once_writes_no_data_then_is_recognised(
        tmp_path, validations, monkeypatch):
    """Stores written before the hash took its present bytes (blake2b over a plain pickle)."""
    import hashlib
    import pickle

    store = Store(tmp_path / "s.db")
    items = [recall(f"24V{n:04d}") for n in range(30)] + [recall("UNDATED", recall_date="soon")]
    real = inputhash.EntryMaker.entry

    def earlier_version(self, record_type, given):
        entry = real(self, record_type, given)
        data = pickle.dumps(entry.fields, protocol=5)
        entry.input_hash = hashlib.blake2b(self._context_of(record_type).encode() + data, digest_size=16).hexdigest()
        return entry

    with monkeypatch.context() as patch:
        patch.setattr(inputhash.EntryMaker, "entry", earlier_version)
        run(store, items, mode="full")
    old_hashes = {row["recall_number"]: row["input_hash"] for row in store.query("SELECT * FROM recalls")}
    before, changes = stored(store), store.db.conn.total_changes
    validations.clear()
    upgraded = run(store, items, mode="full")
    assert (upgraded.counts.unchanged, upgraded.counts.updated, upgraded.counts.new) == (31, 0, 0)
    assert len(validations) == 31                      # the whole way, once …
    assert stored(store) == before                     # … no data column written, updated_at kept …
    now = {row["recall_number"]: row["input_hash"] for row in store.query("SELECT * FROM recalls")}
    assert all(now[number] != old and now[number][-1] == old[-1] for number, old in old_hashes.items())
    assert store.db.conn.total_changes - changes <= 31 + 4   # the hashes (and the run's own rows)
    validations.clear()
    again = run(store, items, mode="full")
    assert validations == [] and again.counts.unchanged == 31   # … and recognised from then on


def test_a_python_without_fast_pickling_still_hashes_every_record_alike(monkeypatch):
    """`Pickler.fast` is documented as deprecated: without it each record is pickled with a
    fresh memo, equal input still gives equal hashes and a changed value another."""
    import pickle

    class NoFastMode(pickle.Pickler):
        @property
        def fast(self):
            raise AttributeError("fast")

        @fast.setter
        def fast(self, value):
            raise AttributeError("fast")
    monkeypatch.setattr(inputhash.pickle, "Pickler", NoFastMode)
    made = maker()
    shared = {"make": "HONDA"}
    first = made.entry(VEHICLE, recall("24V1", extra={"vehicles": [shared, shared]})).input_hash
    assert made.entry(VEHICLE, recall("24V2")).input_hash != first
    assert made.entry(VEHICLE, recall("24V1", extra={"vehicles": [shared, shared]})).input_hash == first
    assert made.entry(VEHICLE, recall("24V1", affected_units="7")).input_hash not in (first, None)


def test_a_first_import_of_a_source_looks_nothing_up_and_counts_its_repeats_as_ever(tmp_path, monkeypatch):
    """No stored row of the source when the run first meets the type: nothing the lookup could
    find but this run's own rows, so it is not asked; a repeated input (a later round, a later
    batch) still counts merged, and the next run looks up and recognises everything."""
    asked = []
    real = Lookup.known_inputs
    monkeypatch.setattr(Lookup, "known_inputs", lambda self, record_type, keys, *args, **kw: asked.append(len(keys))
                        or real(self, record_type, keys, *args, **kw))
    monkeypatch.setenv("BASECRAWLER_BATCH_SIZE", "2")
    monkeypatch.setattr("basecrawler.pipeline.intake.LOOKUP_EVERY", 1)
    store = Store(tmp_path / "s.db")
    other = ListCrawler(store, [recall("24V9")])
    other.source = "another"   # a row of another source does not count as this one's
    assert other.run().counts.new == 1 and asked == []
    items = [recall("24V1"), recall("24V2"), recall("24V3"), recall("24V1")]
    first = run(store, items, mode="full")
    assert asked == []
    assert (first.counts.new, first.counts.merged, first.counts.saved, first.counts.unchanged) == (3, 1, 3, 0)
    again = run(store, items, mode="full")
    assert sum(asked) == 4 and (again.counts.unchanged, again.counts.merged, again.counts.saved) == (3, 1, 3)


def test_a_first_import_has_the_store_look_up_only_keys_it_already_wrote(tmp_path, monkeypatch):
    """Nor does the store look a first import's batches up (`Store.upsert` `unstored`): their
    keys cannot be stored, unless this run wrote them already. The batch repeating one is
    looked up and merged as ever."""
    looked = []
    real = Lookup.rows_by_key

    def rows_by_key(self, record_type, keys, *args, **kwargs):
        keys = list(keys)
        looked.append(sorted(key[-1] for key in keys))
        return real(self, record_type, keys, *args, **kwargs)
    monkeypatch.setattr(Lookup, "rows_by_key", rows_by_key)
    monkeypatch.setenv("BASECRAWLER_BATCH_SIZE", "2")
    store = Store(tmp_path / "s.db")
    other = ListCrawler(store, [recall("24V9")])
    other.source = "another"   # the table is not empty: without the hint every batch looks up
    assert other.run().counts.new == 1
    items = [recall("24V1"), recall("24V2"), recall("24V3"), recall("24V4"), recall("24V1", summary_original="Later")]
    first = run(store, items, mode="full")
    assert looked and all(keys == ["24V1"] for keys in looked), looked   # (its hash, then its stored row)
    assert (first.counts.new, first.counts.merged, first.counts.saved, first.counts.updated) == (4, 1, 4, 0)
    assert store.db.conn.execute("SELECT summary_original FROM recalls WHERE recall_number = '24V1'").fetchone()[0] \
        == "Later"
