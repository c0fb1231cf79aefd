"""A capped count of a common 1–2 character term without case (reading/search.py
`_count_from_trigrams`): read from the padded index's trigrams that start with the term, as a
3+ character term's count is, with no LIKE and no walk of the table — and the same number the
LIKE finds, with copies hidden or shown, whatever the cap, however many trigrams the term has."""
import pytest

from basecrawler.reading import search as search_module
from basecrawler.reading.search import RecallFilter, count, count_upto, search, short_index
from basecrawler.reading.search_text import gram_drivable, gram_trigrams
from basecrawler.recordtypes import get_record_type

from test_groups import Original, Republisher, crawl

ALERTS = get_record_type("product_alert")


def grouped_japanese(db_path):
    """20 originals holding ブレーキ (every 4th only at the end of its text: ブレ, a padded
    trigram), 8 republished as copies; and 4 alerts without the term."""
    crawl(Original, db_path, [{"nid": str(2000 + n), "title": f"部品 {n} ブレーキ" if n % 4 else f"部品 {n} ブレ",
                               "text": "燃料ポンプ 12"} for n in range(20)]
          + [{"nid": str(3000 + n), "title": f"Kettle {n}", "text": "蓋"} for n in range(4)])
    crawl(Republisher, db_path, [{"country": "CA", "nid": str(2000 + n), "title": f"部品 {n} ブレーキ (OECD)"}
                                 for n in range(0, 16, 2)])


@pytest.fixture
def common(monkeypatch):
    """Every short term counts as common (a small store's share is judged as a large one's)."""
    monkeypatch.setattr(search_module, "WALK_MIN", 1)
    monkeypatch.setattr(search_module, "WALK_SHARE", 0.0)


def statements(conn):
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    return seen


def like_count(conn, options) -> int:
    """Every record holding the text, by a LIKE on each (the plain path: no index read)."""
    return len(search(conn, RecallFilter(record_type="product_alert", **options), limit=10_000))


@pytest.mark.parametrize("term", ["ブレ", "ブ", "12", "1", "部品"])
def test_a_common_short_term_counts_from_its_trigrams_without_a_like(db_path, store, common, term):
    grouped_japanese(db_path)
    conn = store.db.conn
    seen = statements(conn)
    count_upto(conn, RecallFilter(record_type="product_alert", text=term))
    counted = [s for s in seen if s.lstrip().upper().startswith("SELECT COUNT(*) FROM (SELECT 1")]
    assert counted and all("MATCH" in s and "LIKE" not in s for s in counted), counted


@pytest.mark.parametrize("options", [{"text": "ブレ"}, {"text": "ブ"}, {"text": "12"}, {"text": "1"},
                                     {"text": "部品"}, {"text": "蓋"}, {"text": "ブレ 12"},
                                     {"text": "ブレ", "countries": ("CA",)}, {"text": "ブレ", "source": "repubdemo"}],
                         ids=lambda o: repr(o))
@pytest.mark.parametrize("all_copies", [False, True], ids=["copies hidden", "every copy"])
def test_the_count_is_the_like_count_at_every_cap(db_path, store, common, options, all_copies):
    grouped_japanese(db_path)
    conn = store.db.conn
    filters = RecallFilter(record_type="product_alert", all_copies=all_copies, **options)
    exact = count(conn, filters)
    assert exact == like_count(conn, {**options, "all_copies": all_copies})
    for cap in range(exact + 2):
        assert count_upto(conn, filters, cap=cap) == min(cap + 1, exact), (options, cap)


def test_a_term_only_at_the_end_of_a_value_is_counted(db_path, store, common):
    """ブレ then the padding is its own trigram: the walk over the vocabulary must reach it."""
    grouped_japanese(db_path)
    conn = store.db.conn
    assert short_index(conn, ALERTS)
    trigrams = list(gram_trigrams(conn, ALERTS, "ブレ"))
    assert len(trigrams) == 2 and any("\x01" in t for t in trigrams), trigrams
    filters = RecallFilter(record_type="product_alert", text="ブレ")
    assert count_upto(conn, filters) == count(conn, filters) == 20   # the republished 8 hidden
    every = RecallFilter(record_type="product_alert", text="ブレ", all_copies=True)
    assert count_upto(conn, every) == count(conn, every) == 28


def test_a_term_the_index_folds_or_past_the_trigram_limit_walks_as_before(db_path, store, common, monkeypatch):
    grouped_japanese(db_path)
    conn = store.db.conn
    assert not gram_drivable("Ke") and gram_drivable("ブレ")
    seen = statements(conn)
    assert count_upto(conn, RecallFilter(record_type="product_alert", text="Ke")) == 4
    assert any("LIKE" in s for s in seen) and not any("MATCH" in s for s in seen)
    monkeypatch.setattr(search_module, "GRAM_DRIVE_TERMS", 1)   # ブ starts more than one trigram
    seen.clear()
    filters = RecallFilter(record_type="product_alert", text="ブ")
    assert count_upto(conn, filters) == count(conn, filters) == 20
    assert any("LIKE" in s and s.lstrip().upper().startswith("SELECT COUNT(*) FROM (SELECT 1") for s in seen)
