"""PostgreSQL's windows index (recordtypes/tables.py `pg_windows_document`, the opt-in
BASECRAWLER_PG_SEARCH_INDEX=windows in place of the pg_trgm index): every term, 1–2 characters
included, is read through it and finds exactly the rows of a plain ILIKE pass — over
punctuation, tags, hosts, numbers, case, Japanese and Korean, the ends of the text, a text
longer than the indexed part — after updates and deletes; a store switches index when asked
and keeps it when not."""
import datetime as dt

import pytest

from pgcluster import pg_cluster, pg_url  # noqa: F401  (fixtures)

from basecrawler import Recall, Store
from basecrawler.errors import ConfigError
from basecrawler.recordtypes.tables import PG_WINDOWS_CAP
from basecrawler.reading import search as search_module
from basecrawler.reading.search import (RecallFilter, build_query, count, count_upto, iter_recalls, pg_windows_query,
                                        search)
from basecrawler.store.engines.dialect import dialect_of

ENV = "BASECRAWLER_PG_SEARCH_INDEX"
LONG = "燃" * PG_WINDOWS_CAP + " beyond-the-cap Zq"   # its end is past the indexed part
TEXTS = ["ブレーキホースが損傷し、火災に至るおそれ", "燃料ポンプのインペラが変形する。", "The rear BRAKE hose may rupture.",
         "Audi Q7 and q5 wiring", "x-ray of the axle", "브레이크 호스 손상", "ÄRGER mit der Bremse", None,
         "Z9 ends with z", "50% _under_ \\ back", "末尾は災", "<b>bold</b> <a href='x'>link</a>", "see a.b and 1.5 v2.0.1",
         "mail ops@example.com or https://ex.org/p?q=1", "it's O'Brien's \\\\ path\\to", "self-driving co-op",
         "tab\there\nnew line", "İstanbul ıi", "(#123456) & | ! : *", "ｘ全角ＡＢ", LONG]
TERMS = ["Q7", "q7", "火災", "災", "x", "X", "燃料", "ブレ", "브레", "z", "Z9", "9", "7", "ab", "zz", "e", "Ä", "ä", "ärger",
         "%", "_", "\\", "50", "50%", "ホ", "Q7 hose", "火災 x", "ＡＢ", "ab", "全角", "<b>", "b>", "<a", "href='x'", "a.b",
         "1.5", "2.0", ".0.", "ops@example.com", "@ex", "ex.org/p?q", "'", "O'B", "o'brien's", "\\\\", "h\\t", "-d",
         "f-dr", "co-op", "tab", "ere", "İ", "ı", "istanbul", "#123456", "&", "| !", ":", "*", "Zq", "beyond-the", "燃燃",
         "The", "rupture.", "る。", "おそれ", "w"]


def _recalls(n: int) -> list[Recall]:
    return [Recall(country=("JP", "US", "KR")[i % 3], recall_number=f"S{i:04d}",
                   recall_date=dt.date(2020, 1, 1) + dt.timedelta(days=(i * 13) % 700),
                   summary_original=TEXTS[i % len(TEXTS)], component_original=TEXTS[(i * 7) % len(TEXTS)],
                   manufacturer_original=("Ford", "トヨタ", "현대")[i % 3]) for i in range(n)]


def _text_filter(text: str) -> RecallFilter:
    return RecallFilter(text=text)


def _plain(conn, filters):
    """Every term read with the plain ILIKE (a pass), newest first."""
    sql, params = build_query(filters, columns="r.id", dialect="postgresql")
    assert "tsquery" not in sql
    return [row[0] for row in conn.execute(sql, params).fetchall()]


@pytest.fixture
def windows_store(pg_url, monkeypatch):  # noqa: F811
    monkeypatch.setenv(ENV, "windows")
    store = Store(pg_url)
    store.upsert("vehicle_recall", _recalls(200), source="test")
    yield store
    store.close()


def test_every_term_through_the_windows_index_finds_the_rows_of_a_pass(windows_store):
    conn = windows_store.db.conn
    assert search_module.short_index(conn, RecallFilter().declaration())
    # After updates and deletes: the index follows the rows.
    d = dialect_of(conn)
    conn.execute(d.write("UPDATE recalls SET summary_original = 'now Q7 here' WHERE recall_number = 'S0001'"))
    conn.execute(d.write(f"UPDATE recalls SET summary_original = 'no longer' WHERE summary_original {d.ilike} "
                         f"'{d.percent}火災{d.percent}' AND recall_number < 'S0100'"))
    conn.execute(dialect_of(conn).write("DELETE FROM recalls WHERE recall_number IN ('S0003', 'S0014')"))
    checked = 0
    others = (RecallFilter(text="e", countries=("JP",)), RecallFilter(text="Q7"), RecallFilter(text="災 e"))
    # The reference, read once as planned (the rows do not change between the passes; forced
    # off its plan, the plain ILIKE took most of this test's time).
    reference = {filters: _plain(conn, filters) for filters in (*map(_text_filter, TERMS), *others)}
    for forced in (False, True):   # as planned; then only the GIN index can read the rows
        if forced:
            conn.execute(dialect_of(conn).write("SET enable_seqscan = off"))
            conn.execute(dialect_of(conn).write("SET enable_indexscan = off"))
        for text in TERMS:
            filters = _text_filter(text)
            expected = reference[filters]
            assert [r["id"] for r in search(conn, filters, limit=1000)] == expected, text
            assert count(conn, filters) == len(expected) == count_upto(conn, filters), text
            checked += bool(expected)
        for filters in others:
            expected = reference[filters]   # with another filter; an export (its own reading)
            assert [r["id"] for r in search(conn, filters, limit=1000)] == expected, filters
            names, rows = iter_recalls(conn, filters)
            assert [dict(zip(names, row))["id"] for row in rows] == expected, filters
    assert checked > 100   # most terms are in some record: the comparison is not of empty lists


def test_terms_are_read_from_the_windows_index(windows_store):
    conn = windows_store.db.conn
    conn.execute(dialect_of(conn).write("SET enable_seqscan = off"))
    conn.execute(dialect_of(conn).write("SET enable_indexscan = off"))
    for text in ("Q7", "火", "#123456", "ops@example.com"):
        sql, params = build_query(RecallFilter(text=text), columns="r.id", dialect="postgresql", grams=True)
        plan = "\n".join(r[0] for r in conn.execute(sql.dialect.query("EXPLAIN " + sql), params).fetchall())
        assert "recalls_search_windows" in plan, text


def test_a_text_past_the_indexed_length_is_found_and_a_huge_one_is_stored(windows_store):
    conn = windows_store.db.conn
    conn.execute(dialect_of(conn).write("SET enable_seqscan = off"))
    conn.execute(dialect_of(conn).write("SET enable_indexscan = off"))
    assert len([r for r in search(conn, RecallFilter(text="beyond-the-cap"), limit=1000)]) == \
        len(_plain(conn, RecallFilter(text="beyond-the-cap"))) > 0
    # Distinct windows of 3 MB and more: uncapped, the tsvector would be refused (over 1 MB of
    # lexemes) and with it the row.
    huge = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(99_990))
    windows_store.upsert("vehicle_recall", [Recall(country="JP", recall_number="HUGE", recall_date=dt.date(2024, 1, 1),
                                         summary_original=huge, defect_cause_original=huge[::-1],
                                         consequence_original=huge[1::2] + huge[::2], remedy_original="末端Q8")],
                                 source="test")
    d = dialect_of(conn)
    conn.execute(d.write(f"UPDATE recalls SET summary_ko = {d.p} WHERE recall_number = 'HUGE'"), [huge * 5])
    assert [r["recall_number"] for r in search(conn, RecallFilter(text="Q8"), limit=10)] == ["HUGE"]
    assert [r["recall_number"] for r in search(conn, RecallFilter(text="末端Q8"), limit=10)] == ["HUGE"]


def _indexes(store) -> set[str]:
    d = dialect_of(store)
    return {r["indexname"] for r in store.query(d.query("SELECT indexname FROM pg_indexes WHERE tablename = 'recalls' "
                                                        f"AND indexname {d.ilike} 'recalls_search_{d.percent}'"))}


def test_a_store_switches_its_search_index_when_asked_and_keeps_it_otherwise(pg_url, monkeypatch):  # noqa: F811
    monkeypatch.delenv(ENV, raising=False)
    store = Store(pg_url)   # a new store: the windows index
    store.upsert("vehicle_recall", _recalls(30), source="test")
    assert _indexes(store) == {"recalls_search_windows"}
    assert search_module.short_index(store.db.conn, RecallFilter().declaration())
    store.close()
    monkeypatch.setenv(ENV, "trgm")
    store = Store(pg_url)
    assert _indexes(store) == {"recalls_search_trgm"}
    assert not search_module.short_index(store.db.conn, RecallFilter().declaration())
    assert [r["id"] for r in search(store.db.conn, RecallFilter(text="Q7"), limit=100)] == \
        _plain(store.db.conn, RecallFilter(text="Q7")) != []
    store.close()
    monkeypatch.delenv(ENV)
    store = Store(pg_url)   # a process that does not ask keeps what the store has (a store made with pg_trgm too)
    assert _indexes(store) == {"recalls_search_trgm"}
    store.close()
    monkeypatch.setenv(ENV, "windows")
    store = Store(pg_url)
    assert _indexes(store) == {"recalls_search_windows"}
    assert [r["id"] for r in search(store.db.conn, RecallFilter(text="Q7"), limit=100)] == \
        _plain(store.db.conn, RecallFilter(text="Q7")) != []
    store.close()
    monkeypatch.setenv(ENV, "bigm")
    with pytest.raises(ConfigError, match=ENV):
        Store(pg_url)


def test_the_windows_query_of_a_term():
    assert pg_windows_query("Q7") == "'Q7':* | ' >cap'"
    assert pg_windows_query("o'b\\c") == "('o?b' & '?b?' & 'b?c') | ' >cap'"
    assert pg_windows_query("aaaa") == "('aaa') | ' >cap'"
    assert pg_windows_query("İx") is None and pg_windows_query("") is None and pg_windows_query("ΟΔΟΣ") is None


def test_a_term_in_many_records_walks_the_dates_and_a_rare_one_is_read_from_the_index(windows_store):
    conn = windows_store.db.conn
    assert search_module.pg_walk(conn, RecallFilter(text="e"), search_module.WALK_SHARE) == {"e"}
    assert search_module.pg_walk(conn, RecallFilter(text="qqq 火災z"), search_module.WALK_SHARE) == set()
    assert search_module.pg_walk(conn, RecallFilter(text="e", countries=("JP",)), search_module.WALK_SHARE) == set()
    walked, _ = build_query(RecallFilter(text="e"), dialect="postgresql", grams=True, walk=frozenset({"e"}))
    assert "tsquery" not in walked and "COALESCE((" in walked
    rare, _ = build_query(RecallFilter(text="qqq"), dialect="postgresql", grams=True)
    assert "@@ lower(%s)::tsquery" in rare and rare.dialect.name == "postgresql"   # spelled for it, as run
