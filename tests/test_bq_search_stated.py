"""build_query and text_conditions (reading/search_query.py) spell their SQL with the engine's
dialect and hand back its `Statement` (issue #35 item 3): SQLite gets its own spelling (`?`,
`[column]`, LIKE), PostgreSQL its own (`%s`, `"column"`, ILIKE), and on PostgreSQL no search,
count, export or watch selection sends anything else (PostgreSQL refuses plain SQL,
engines/pg.py), while finding the same records as SQLite."""
from __future__ import annotations

import datetime as dt

import pytest

from basecrawler import Recall, Store
from basecrawler.reading import search as search_module
from basecrawler.reading.export import export_recalls
from basecrawler.reading.search import RecallFilter, build_query, text_conditions
from basecrawler.store.engines.dialect import POSTGRES, SQLITE, Statement
from watchkit import food_listeria_set, store_alerts

# Every kind of condition build_query writes: terms of 1, 2 and 3+ characters, the options,
# a ranged facet, a facet with also_text, a multi-valued facet, a plain one.
FILTERS = [
    RecallFilter(),
    RecallFilter(text="brake"),
    RecallFilter(text="ブレーキ 火"),
    RecallFilter(text="Br fire"),
    RecallFilter(text="fire"),
    RecallFilter(text="50%_\\'"),
    RecallFilter(countries=("jp", "us")),
    RecallFilter(manufacturer="Ford"),
    RecallFilter(model="F-1"),
    RecallFilter(year=2019),
    RecallFilter(since=dt.date(2020, 2, 1), until=dt.date(2020, 6, 1)),
    RecallFilter(source="test", text="fire", facets=(("country", "us"),)),
    RecallFilter(facets=(("model_year", "2020"),)),
    RecallFilter(facets=(("manufacturer_key", "ford"),)),
    RecallFilter(record_type="product_alert", text="Listeria", facets=(("category", "food"),)),
    RecallFilter(record_type="product_alert", facets=(("country", "ca"),), all_copies=True),
]


def _recalls(n: int = 40) -> list[Recall]:
    texts = ["Brake hose may crack", "ブレーキが効かない火災", "fire risk 50%_\\' off", "Steering", "火花"]
    return [Recall(country=("JP", "US", "KR")[i % 3], recall_number=f"B{i:03d}",
                   recall_date=dt.date(2020, 1, 1) + dt.timedelta(days=(i * 11) % 300),
                   summary_original=texts[i % len(texts)], component_original=texts[(i * 3) % len(texts)],
                   manufacturer_original=("Ford", "トヨタ", "현대")[i % 3], model_original=("F-150", "Corolla")[i % 2],
                   model_year=("2019", "2018-2020", "2021")[i % 3]) for i in range(n)]


def _fill(store: Store) -> None:
    store.upsert("vehicle_recall", _recalls(), source="test")
    store_alerts(store, food_listeria_set())


def _keys(store: Store, table: str) -> dict[int, str]:
    """id → the record's own key: the two stores need not number their records alike."""
    key = "recall_number" if table == "recalls" else "alert_id"
    d = SQLITE if store.engine == "sqlite" else POSTGRES
    return {row["id"]: row[key] for row in store.query(d.query(f"SELECT id, {key} FROM {table}"))}


def _answers(store: Store) -> list:
    """What every reading of every filter gives, by record key: a page, a count, a capped
    count, an export, the translation progress, the watches' selection of candidates."""
    from basecrawler.watch import selection

    conn = store.db.conn
    d = SQLITE if store.engine == "sqlite" else POSTGRES
    out = []
    for filters in FILTERS:
        table = filters.declaration().table
        keys = _keys(store, table)
        page = [keys[row["id"]] for row in search_module.search(conn, filters, limit=7, offset=1)]
        names, rows = search_module.iter_recalls(conn, filters)
        exported = sorted(keys[row[names.index("id")]] for row in rows)
        store.write(lambda db: db.conn.execute(d.write(f"CREATE TEMP TABLE bq_candidates AS SELECT id FROM {table}")))
        selected = sorted((keys[i], source) for i, source in selection.filter_ids(store, filters, "bq_candidates").items())
        store.write(lambda db: db.conn.execute(d.write("DROP TABLE bq_candidates")))
        out.append((filters, page, search_module.count(conn, filters), search_module.count_upto(conn, filters, cap=5),
                    exported, search_module.translation_progress(conn, filters), selected))
    return out


def test_sqlite_gets_a_read_only_statement_in_its_own_spelling():
    sql, params = build_query(RecallFilter(text="AC", model="x", since=dt.date(2020, 1, 1)), limit=5)
    assert isinstance(sql, Statement) and sql.dialect is SQLITE and sql.read_only
    # Brackets, so a column a type lacks is an error there (a double-quoted one would be a string).
    assert "r.[recall_date] >= ?" in sql and "r.[model_original] LIKE ? ESCAPE" in sql and "%s" not in sql
    assert sql.endswith("LIMIT ? OFFSET ?") and params[-2:] == [5, 0]
    condition, _ = text_conditions(RecallFilter(text="AC"), walk=frozenset({"AC"}), alias="t")
    assert "t.[summary_original] LIKE ?" in condition


def test_postgresql_gets_its_own_spelling():
    sql, params = build_query(RecallFilter(text="AC brake", model="x", countries=("us", "jp"), year=2019,
                                           since=dt.date(2020, 1, 1), facets=(("model_year", "2020"),)),
                              limit=5, dialect="postgresql")
    assert isinstance(sql, Statement) and sql.dialect is POSTGRES and sql.read_only
    assert 'r."recall_date" >= %s' in sql and 'r."model_original" ILIKE %s ESCAPE' in sql
    assert "r.country IN (%s,%s)" in sql and sql.endswith("LIMIT %s OFFSET %s")
    assert "?" not in sql and "[recall_date]" not in sql and sql.count("%s") == len(params)
    condition, more = text_conditions(RecallFilter(text="AC"), walk=frozenset(), alias="t", dialect=POSTGRES)
    assert "%s" in condition and "?" not in condition and more


def test_a_capped_count_hands_sqlite_a_statement_spelled_for_it(tmp_path):
    store = Store(str(tmp_path / "s.db"))
    try:
        _fill(store)
        seen = []

        class Spy:
            def __init__(self, conn):
                self.conn = conn

            def execute(self, sql, *params):
                seen.append(sql)
                return self.conn.execute(sql, *params)

        assert search_module.count_upto(Spy(store.db.conn), RecallFilter(text="brake"), cap=3) == 4
        assert seen and all(isinstance(s, Statement) and s.dialect is SQLITE for s in seen)
    finally:
        store.close()


# ---- on PostgreSQL ----------------------------------------------------------------------
pytest.importorskip("psycopg")
from pgcluster import pg_cluster, pg_url  # noqa: E402,F401  (fixtures)


def test_postgresql_reads_every_filter_without_the_fallback_and_finds_what_sqlite_finds(pg_url, tmp_path):  # noqa: F811

    lite = Store(str(tmp_path / "s.db"))
    pg = Store(pg_url)
    try:
        _fill(lite)
        _fill(pg)
        expected = _answers(lite)
        found = _answers(pg)
        export_recalls(pg.db.conn, RecallFilter(text="fire"), "jsonl", tmp_path / "out.jsonl")
    finally:
        lite.close()
        pg.close()
    assert found == expected
    assert all(a[2] for a in expected[1:3]) and any(not a[2] for a in expected)   # (not only empty answers)
    fire = next(a for a in expected if a[0] == RecallFilter(text="fire"))
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8").count("\n") == fire[2]
