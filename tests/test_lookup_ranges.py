"""The input hashes of a round of keys read as one range of the covering index where the keys lie
together in key order (basecrawler/store/lookup.py `_in_key_range`), and key by key where they
are scattered: either way exactly the stored rows of the keys asked."""
import pytest

from basecrawler import Recall, Store

TYPE = "vehicle_recall"


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "t.db")
    # Stored: R0000 … R0399 of source "us"; every tenth of them also from "ca".
    store.upsert(TYPE, [Recall(country="US", recall_number=f"R{n:04d}", recall_date="2024-01-02") for n in range(400)],
                 source="us")
    store.upsert(TYPE, [Recall(country="US", recall_number=f"R{n:04d}", recall_date="2024-01-02")
                        for n in range(0, 400, 10)], source="ca")
    yield store
    store.close()


def _statements(store) -> list[str]:
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    return seen


def _hashes(store, source: str) -> dict[tuple, str]:
    return {(source, "US", row["recall_number"]): row["input_hash"]
            for row in store.query("SELECT recall_number, input_hash FROM recalls WHERE source = ?", [source])}


def test_keys_together_in_key_order_are_read_as_one_range_and_only_they_come_back(store):
    stored = _hashes(store, "us")
    # R0100 … R0199 less every seventh (stored but not asked), and two keys nobody stored, inside the range.
    asked = [("us", "US", f"R{n:04d}") for n in range(100, 200) if n % 7] + [("us", "US", "R0150x"), ("us", "US", "R0199z")]
    seen = _statements(store)
    found = store.lookup.known_inputs(TYPE, asked, dates=False)
    assert found == {key: (stored[key], None) for key in asked if key in stored}
    reads = [sql for sql in seen if "input_hash" in sql]
    assert len(reads) == 1 and "BETWEEN" in reads[0] and " IN (" not in reads[0]


def test_scattered_keys_are_probed_each_and_the_range_rests_a_while(store):
    stored = _hashes(store, "us")
    # 40 keys spread over all 400 stored: their range holds ten times as many.
    scattered = [("us", "US", f"R{n:04d}") for n in range(0, 400, 10)]
    seen = _statements(store)
    assert store.lookup.known_inputs(TYPE, scattered, dates=False) == {key: (stored[key], None) for key in scattered}
    reads = [sql for sql in seen if "input_hash" in sql]
    assert len(reads) == 2 and "BETWEEN" in reads[0] and " IN (" in reads[1]   # tried, then each key
    # The next rounds of that table and source probe at once, however close their keys …
    together = [("us", "US", f"R{n:04d}") for n in range(200, 240)]
    seen.clear()
    assert store.lookup.known_inputs(TYPE, together, dates=False) == {key: (stored[key], None) for key in together}
    assert [sql for sql in seen if "BETWEEN" in sql] == []
    # … while another source's keys are read by range as ever.
    others = [("ca", "US", f"R{n:04d}") for n in range(0, 400, 10)]
    seen.clear()
    assert store.lookup.known_inputs(TYPE, others, dates=False) == {key: (value, None) for key, value in
                                                                      _hashes(store, "ca").items()}
    assert any("BETWEEN" in sql for sql in seen if "input_hash" in sql)


def test_a_key_asked_as_a_number_is_found_by_probing_as_before(store):
    stored = _hashes(store, "us")
    asked = [("us", "US", f"R{n:04d}") for n in range(40)] + [("us", "US", 7)]
    found = store.lookup.known_inputs(TYPE, asked, dates=False)
    assert found == {key: (stored[key], None) for key in asked if key in stored}


def test_the_memory_of_scattered_keys_is_the_stores_own(store, tmp_path):
    scattered = [("us", "US", f"R{n:04d}") for n in range(0, 400, 10)]
    store.lookup.known_inputs(TYPE, scattered, dates=False)   # that prefix pauses in this store …
    other = Store(tmp_path / "other.db")
    try:
        other.upsert(TYPE, [Recall(country="US", recall_number=f"R{n:04d}", recall_date="2024-01-02")
                            for n in range(100)], source="us")
        seen = _statements(other)
        together = [("us", "US", f"R{n:04d}") for n in range(40)]
        assert len(other.lookup.known_inputs(TYPE, together, dates=False)) == 40
        assert any("BETWEEN" in sql for sql in seen)   # … not in another store
    finally:
        other.close()
