"""The read side's faster paths (#23.5) give the same answers as the plain ones: a term read
row by row while walking the newest-first index finds the same rows in the same order as the
set the full-text index returns; a bounded count is exact below its cap; a search's one-pass
summary equals the facet queries; the web view's summary follows new data."""
import asyncio
import datetime as dt

import pytest

from basecrawler import Recall
from basecrawler.cli import main
from basecrawler.reading import search as search_module
from basecrawler.reading.search import (RecallFilter, build_query, count, count_upto, plan_terms, search,
                                        short_terms)
from basecrawler.reading.summary import summarise
from basecrawler.reading.summary_cache import cached_summary

TEXTS = ["ブレーキホースが損傷し、制動力が低下するおそれがある。", "燃料ポンプのインペラが変形する。",
         "The rear BRAKE hose may rupture.", "ÄRGER mit der Bremse: Öl tritt aus.", "ärger klein geschrieben",
         "Kelvin sign: 5 \u212aM range", "AC compressor clutch may seize", "x-ray of the axle", None,
         "AC", "q", "末尾は火災", "Ｚ9 ends with Z9"]
QUERIES = ["brake", "BRAKE", "ärger", "ÄRGER", "km", "燃料", "制動", "ブレーキ", "AC", "x", "ö", "Ö", "5",
           "燃料 ポンプ", "brake hose", "axle", "ｘ", "zz", "%", "_", "\\",
           "le", "e", "Q", "z9", "Z9", "火災", "災", "ac", "ｚ9", "\x01", "AC le"]


def _recalls(n: int) -> list[Recall]:
    out = []
    for i in range(n):
        out.append(Recall(country=("JP", "US", "DE")[i % 3], recall_number=f"N{i:05d}",
                          recall_date=dt.date(2020, 1, 1) + dt.timedelta(days=(i * 37) % 900),
                          summary_original=TEXTS[i % len(TEXTS)], component_original=TEXTS[(i * 5) % len(TEXTS)],
                          manufacturer_original=("Ford", "トヨタ", "ÄCME")[i % 3], model_year=str(2010 + i % 9)))
    return out


@pytest.fixture
def filled(store):
    store.upsert("vehicle_recall", _recalls(800), source="test")
    return store


def _ids(conn, filters, walk):
    sql, params = build_query(filters, columns="r.id", walk=walk)
    return [row[0] for row in conn.execute(sql, params)]


@pytest.mark.parametrize("text", QUERIES)
def test_walking_a_term_finds_the_same_rows_in_the_same_order_as_its_index(filled, text):
    conn = filled.db.conn
    filters = RecallFilter(text=text)
    read_as_set = _ids(conn, filters, frozenset())
    assert _ids(conn, filters, frozenset(filters.terms())) == read_as_set
    # and the way the page reads them (its plan, with a threshold low enough to walk here)
    assert [r["id"] for r in search(conn, filters, limit=1000)] == read_as_set


def test_a_common_term_is_walked_and_a_rare_one_read_from_the_index(filled, monkeypatch):
    monkeypatch.setattr(search_module, "WALK_MIN", 10)
    conn = filled.db.conn
    assert plan_terms(conn, RecallFilter(text="brake ärger zz")) == {"brake", "ärger"}
    assert plan_terms(conn, RecallFilter(text="brake", countries=("JP",))) == frozenset()   # another filter: a set


@pytest.mark.parametrize("text", QUERIES)
def test_walked_pages_match_when_every_term_counts_as_common(filled, monkeypatch, text):
    monkeypatch.setattr(search_module, "WALK_MIN", 1)
    monkeypatch.setattr(search_module, "WALK_SHARE", 0.0)
    conn = filled.db.conn
    filters = RecallFilter(text=text)
    expected = _ids(conn, filters, frozenset())
    for offset in (0, 7):
        assert [r["id"] for r in search(conn, filters, limit=20, offset=offset)] == expected[offset:offset + 20]


@pytest.mark.parametrize("text", ["brake", "燃料", "x", "zz", "brake hose", None])
def test_count_upto_is_exact_below_its_cap_and_cap_plus_one_above(filled, text):
    conn = filled.db.conn
    filters = RecallFilter(text=text)
    exact = count(conn, filters)
    assert count_upto(conn, filters, cap=10_000) == exact
    if exact > 3:
        assert count_upto(conn, filters, cap=3) == 4


def test_search_says_more_than_when_the_count_passes_the_cap(filled, db_path, capsys, monkeypatch):
    monkeypatch.setattr(search_module, "COUNT_CAP", 50)
    import basecrawler.commands.search as command
    monkeypatch.setattr(command, "COUNT_CAP", 50)
    assert main(["--db", db_path, "search", "--lang", "en", "brake", "--limit", "5"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == \
        "5 of more than 50 matching vehicle recalls (newest first; --limit for more)"


@pytest.mark.parametrize("text", ["brake", "燃料", "x", "zz", "ärger"])
def test_summary_counts_what_the_facet_queries_count(filled, text):
    conn = filled.db.conn
    filters = RecallFilter(text=text)
    summary = summarise(conn, filters)
    sql, params = build_query(filters, ordered=False)
    assert summary.count == count(conn, filters)
    for column in ("country", "source", "manufacturer_key", "model_year"):
        expected = dict(conn.execute(f"SELECT [{column}], count(*) FROM ({sql}) GROUP BY 1", params).fetchall())
        assert summary.values[column] == expected
    months = dict(conn.execute(f"SELECT substr(recall_date, 1, 7), count(*) FROM ({sql}) WHERE recall_date > "
                               "'1970-01-01' AND COALESCE(date_unknown, 0) = 0 GROUP BY 1", params).fetchall())
    assert summary.months == months and sum(months.values()) > 0 if summary.count else True


def test_short_terms_are_the_ones_the_trigram_index_cannot_answer():
    assert short_terms(RecallFilter(text="AC 燃料 brake x")) == {"AC", "燃料", "x"}


def test_a_search_summary_is_counted_again_after_a_run_adds_records(filled, db_path):
    from datasette.app import Datasette

    async def scenario():
        ds = Datasette([db_path])
        await ds.invoke_startup()
        name = next(n for n in ds.databases if n != "_internal")
        filters = RecallFilter(text="brake")
        first = await cached_summary(ds, name, "recalls", filters, wait_s=30)
        again = await cached_summary(ds, name, "recalls", filters, wait_s=30)
        assert again is first   # the same data: kept
        run = filled.runs.start_run("test", "incremental", "running", 1)
        filled.upsert("vehicle_recall", [Recall(country="US", recall_number="NEW-1", recall_date="2024-01-01",
                                      summary_original="new brake defect")], source="test")
        filled.runs.update_run(run, status="succeeded", finished_at="2024-01-02T00:00:00+00:00")
        after = await cached_summary(ds, name, "recalls", filters, wait_s=30)
        return first, after

    first, after = asyncio.run(scenario())
    assert after.count == first.count + 1
    assert after.values["source"]["test"] == first.values["source"]["test"] + 1


def test_a_summary_keeps_the_ids_of_a_small_result_and_not_of_a_large_one(filled, monkeypatch):
    import basecrawler.reading.summary as summary_module

    conn = filled.db.conn
    small = RecallFilter(text="zz x")
    assert sorted(summarise(conn, RecallFilter(text="x")).ids) == sorted(_ids(conn, RecallFilter(text="x"), frozenset()))
    assert summarise(conn, small).ids == []
    monkeypatch.setattr(summary_module, "IDS_MAX", 3)
    assert summarise(conn, RecallFilter(text="brake")).ids is None


def test_keyset_pages_of_a_walked_search_hold_every_match_once_in_order(filled, db_path, monkeypatch):
    """The web view's `_next` pages over a term it walks, in pages of 50."""
    from datasette.app import Datasette

    from basecrawler.reading.browse import WEB_DIR, build_metadata

    monkeypatch.setattr(search_module, "WALK_MIN", 50)   # Datasette runs in this process
    filters = RecallFilter(text="brake")
    assert plan_terms(filled.db.conn, filters) == {"brake"}
    expected = _ids(filled.db.conn, filters, frozenset())
    assert len(expected) > 100

    async def pages():
        ds = Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"))
        await ds.invoke_startup()
        name = next(n for n in ds.databases if n != "_internal")
        seen, next_token = [], None
        while True:
            path = f"/{name}/recalls.json?_search=brake&_size=50&_shape=objects&_col=recall_number"
            response = await ds.client.get(path + (f"&_next={next_token}" if next_token else ""))
            body = response.json()
            seen += [row["id"] for row in body["rows"]]
            next_token = body.get("next")
            if not next_token:
                return seen

    assert asyncio.run(pages()) == expected


def test_status_counts_from_partial_indexes_equal_the_stores_counts(filled):
    from basecrawler.reading.counts import translation_by_source
    from basecrawler.reading.search import date_unknown_by_source
    from basecrawler.recordtypes import get_record_type

    conn = filled.db.conn
    filled.upsert("vehicle_recall", [Recall(country="US", recall_number="U-1", recall_date="unknown", date_unknown=True),
                           Recall(country="US", recall_number="U-2", recall_date="2024-01-01")], source="other")
    filled.write(lambda db: db.conn.execute(
        "UPDATE recalls SET translated_at = '2024-01-02', translation_status = CASE WHEN id % 3 = 0 THEN 'failed' "
        "WHEN id % 3 = 1 THEN NULL ELSE 'translated' END WHERE id % 2 = 0"))
    found = translation_by_source(conn)
    assert found == {source: filled.lookup.translation_counts(source) for source in ("test", "other")}
    assert set(found["test"]) == {"pending", "failed", "translated"}
    recalls = get_record_type("vehicle_recall")
    assert date_unknown_by_source(conn, recalls) == {"other": 1}
    present = {row[1] for row in conn.execute("PRAGMA index_list(recalls)")}
    assert {"idx_recalls_undated_source", "idx_recalls_pending_source", "idx_recalls_translated_source"} <= present


def test_a_rare_short_term_on_a_large_table_reads_the_ids_its_summary_found(filled, db_path, monkeypatch):
    """Over a large table (the threshold lowered here) a 1–2 character term few records hold
    is found by the summary's pass; the page shows those records, newest first, with the
    count, and no Datasette count."""
    from datasette.app import Datasette

    from basecrawler.reading.browse import WEB_DIR, build_metadata

    filled.upsert("vehicle_recall", [Recall(country="US", recall_number=f"Q-{n}", recall_date=f"2024-0{n}-01",
                                  summary_original=f"only here: Q7 variant {n}") for n in (1, 2)], source="test")
    expected = [r["recall_number"] for r in search(filled.db.conn, RecallFilter(text="Q7"), limit=50)]
    assert expected == ["Q-2", "Q-1"]

    async def page():
        ds = Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"))
        from datasette.plugins import pm
        for plugin in pm.get_plugins():
            if hasattr(plugin, "SUMMARY_COUNT_ROWS"):
                monkeypatch.setattr(plugin, "SUMMARY_COUNT_ROWS", 0)
        await ds.invoke_startup()
        name = next(n for n in ds.databases if n != "_internal")
        html = (await ds.client.get(f"/{name}/recalls?_search=Q7&_col=recall_number")).text
        data = (await ds.client.get(f"/{name}/recalls.json?_search=Q7&_shape=objects&_col=recall_number")).json()
        return html, data

    html, data = asyncio.run(page())
    assert [row["recall_number"] for row in data["rows"]] == expected
    assert "(2건)" in html and "아직 검색 중" not in html        # the Korean default
    assert html.index("Q-2") < html.index("Q-1")


def _gram_ids(conn, filters, grams):
    # As every caller does: asking whether the index is padded gives the connection its vocabulary.
    grams = grams and search_module.short_index(conn, filters.declaration())
    sql, params = build_query(filters, columns="r.id", grams=grams)
    return [row[0] for row in conn.execute(sql, params)]


@pytest.mark.parametrize("text", QUERIES)
def test_a_short_term_read_from_the_index_vocabulary_finds_the_rows_of_a_pass(filled, text):
    """The padded index's vocabulary lists every row holding a 1–2 character term, at the
    end of a value and in a value of one or two characters too: the same rows as LIKE on
    every row, however the query is read."""
    conn = filled.db.conn
    assert search_module.short_index(conn, RecallFilter().declaration())
    filters = RecallFilter(text=text)
    assert _gram_ids(conn, filters, True) == _gram_ids(conn, filters, False)
    assert count(conn, filters) == len(_gram_ids(conn, filters, False))
    assert count_upto(conn, filters) == len(_gram_ids(conn, filters, False))


def test_rare_short_terms_are_found_through_the_vocabulary(filled):
    conn = filled.db.conn
    assert short_terms(RecallFilter(text="Z9 火災 ö ｚ9 brake"), grams=True) == {"ö", "ｚ9"}
    assert search_module.short_index(conn, RecallFilter().declaration())
    sql, _ = build_query(RecallFilter(text="火災"), columns="r.id", grams=True)
    assert "recalls_fts_vocab" in sql
    found = [r["recall_number"] for r in search(conn, RecallFilter(text="火災"))]
    assert found and all("火災" in (r["summary_original"] or "") + (r["component_original"] or "")
                         for r in search(conn, RecallFilter(text="火災")))


def test_the_index_follows_updates_and_deletes(filled):
    conn = filled.db.conn
    filters = RecallFilter(text="Z9")
    before = _gram_ids(conn, filters, True)
    assert before
    conn.execute("UPDATE recalls SET summary_original = 'now zq', component_original = NULL WHERE id = ?", [before[0]])
    conn.execute("DELETE FROM recalls WHERE id = ?", [before[1]])
    conn.commit()
    after = _gram_ids(conn, filters, True)
    assert after == _gram_ids(conn, filters, False) and before[0] not in after and before[1] not in after
    assert before[0] in _gram_ids(conn, RecallFilter(text="zq"), True)
    conn.execute("INSERT INTO recalls_fts(recalls_fts) VALUES ('integrity-check')")


def test_a_store_with_the_plain_index_gets_the_padded_one_when_opened(filled, db_path):
    """A store from before #23.5 (its index over the bare text, no vocabulary) is rebuilt
    padded when a store opens it, and finds the same rows."""
    from basecrawler import Store

    conn = filled.db.conn
    expected = {text: _gram_ids(conn, RecallFilter(text=text), False) for text in QUERIES}
    cols = ", ".join(RecallFilter().declaration().text_index_columns)
    for statement in ["DROP TRIGGER recalls_fts_ad", "DROP TRIGGER recalls_fts_au",
                      "DROP TABLE recalls_fts", "DROP VIEW recalls_fts_padded",
                      f"CREATE VIRTUAL TABLE recalls_fts USING fts5({cols}, content='recalls', content_rowid='id', "
                      "tokenize='trigram')", "INSERT INTO recalls_fts(recalls_fts) VALUES ('rebuild')"]:
        conn.execute(statement)
    conn.commit()
    assert not search_module.short_index(conn, RecallFilter().declaration())
    assert [r["id"] for r in search(conn, RecallFilter(text="Z9"), limit=1000)] == expected["Z9"]   # a pass, still right
    filled.close()
    reopened = Store(db_path)
    try:
        conn = reopened.db.conn
        assert search_module.short_index(conn, RecallFilter().declaration())
        for text, ids in expected.items():
            assert _gram_ids(conn, RecallFilter(text=text), True) == ids, text
        conn.execute("INSERT INTO recalls_fts(recalls_fts) VALUES ('integrity-check')")
    finally:
        reopened.close()
