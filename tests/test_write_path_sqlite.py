"""The SQLite batch write's shortcut for an empty table (basecrawler/store/records.py, issue #35
item 8): a batch into a table without a row looks up no stored row (there is none: the write
holds the database's lock), and its counts are still those of the write; a batch into a table
with rows looks its keys up and merges by the one rule."""
from basecrawler import Store
from support import numbered_recall, refuse_recall_number
from basecrawler.store.lookup import Lookup

TYPE = "vehicle_recall"


recall = numbered_recall


def test_a_batch_into_an_empty_table_asks_no_stored_row_and_later_ones_do(tmp_path, monkeypatch):
    asked = []
    real = Lookup.rows_by_key

    def spy(self, record_type, keys, *args, **kwargs):
        keys = list(keys)
        asked.append(len(keys))
        return real(self, record_type, keys, *args, **kwargs)
    monkeypatch.setattr(Lookup, "rows_by_key", spy)
    store = Store(str(tmp_path / "s.db"))
    try:
        first = store.upsert(TYPE, [recall(n) for n in range(5)], source="us")
        assert (first.new, first.updated, first.unchanged) == (5, 0, 0) and asked == []
        # The same key twice in one batch is still folded into one row.
        folded = store.upsert(TYPE, [recall(5), recall(5, model_original="M")], source="us2")
        assert (folded.new, folded.merged) == (1, 1)
        second = store.upsert(TYPE, [recall(0, model_original="M"), recall(1, manufacturer_original=None), recall(6)],
                              source="us")
        assert (second.new, second.updated, second.unchanged) == (1, 1, 1) and asked
        assert store.lookup.get(TYPE, {"source": "us", "country": "US", "recall_number": "R0001"})["manufacturer_original"] == "Acme"
        assert store.lookup.count(TYPE) == 7
    finally:
        store.close()


def test_a_batch_into_an_empty_table_with_a_refused_row_fails_that_row_only(tmp_path):
    store = Store(str(tmp_path / "s.db"))
    try:
        refuse_recall_number(store, "R0002")
        result = store.upsert(TYPE, [recall(n) for n in range(4)], source="us")
        assert (result.new, len(result.failed)) == (3, 1) and store.lookup.count(TYPE) == 3
    finally:
        store.close()


def test_flat_extras_told_in_c_still_refuse_a_text_over_the_limit(tmp_path, monkeypatch):
    """The limits check that trusts a flat dict of texts (or a list of them) without a walk
    (pipeline/recordlimits.py `_flat`) still makes an over-long text one `too_long` dead letter."""
    from basecrawler import BaseCrawler
    from basecrawler.config import Settings
    from basecrawler.formats.jsonlimits import DEFAULT_LIMITS

    long = "x" * (DEFAULT_LIMITS.string + 1)
    items = [{"extra": {"note": "fine", "other": None}}, {"extra": {"note": long}},
             {"extra": {"vehicles": [{"make": "A"}, {"make": long}]}}, {"extra": {"vehicles": [{"make": "B"}]}},
             {"extra": {long: "key"}}]

    class Items(BaseCrawler):
        source, country = "us", "US"

        def fetch(self):
            for n, extra in enumerate(items):
                yield {"recall_number": f"R{n}", "recall_date": "2024-05-01", "summary_original": "s", **extra}

        def parse(self, raw):
            return raw

    store = Store(str(tmp_path / "s.db"))
    try:
        result = Items(store, mode="full", settings=Settings.from_env()).run()
        assert (result.counts.new, result.counts.unparseable) == (2, 3)
        kinds = [row["kind"] for row in store.query("SELECT kind FROM dead_letters ORDER BY id")]
        assert kinds == ["too_long"] * 3
    finally:
        store.close()


def test_a_key_twice_in_a_batch_written_behind_stores_the_folded_row(tmp_path):
    """Rows written behind get their INSERT parameters while they are made (`rows_of`); two
    rows of one key fold into one, whose parameters are its own, not the first row's."""
    store = Store(str(tmp_path / "s.db"))
    try:
        batch = [recall(0), recall(1), recall(0, model_original="M", manufacturer_original=None)]
        result = store.upsert(TYPE, batch, source="us", input_hashes=["a" * 33, "b" * 33, "c" * 33], behind=True)
        result.finishing.result()
        assert (result.new, result.merged) == (2, 1)
        row = store.lookup.get(TYPE, {"source": "us", "country": "US", "recall_number": "R0000"})
        assert (row["model_original"], row["manufacturer_original"]) == ("M", "Acme")
        assert row["input_hash"] != "a" * 33   # made of two inputs: the hash of its own values
    finally:
        store.close()
