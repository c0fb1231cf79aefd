"""A filtered table page in the default order reads along the order's index when many records
hold the value (basecrawler/reading/web/pageplan.py), and keeps SQLite's plan otherwise."""
import sqlite3

from basecrawler.reading.web import limits, pageplan

PAGE = ('select id, recall_date, country from recalls where "country" = :p0 '
        'order by recall_date desc limit 51')
NEXT = ('select id, recall_date, country from recalls where "country" = :p0 and (recall_date < :p1 or '
        'recall_date is null or (recall_date = :p1 and ((id > :p2)))) order by recall_date desc, id limit 51')


def _store(tmp_path, rows=20_000):
    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("CREATE TABLE recalls (id INTEGER PRIMARY KEY, recall_date TEXT, country TEXT, summary TEXT)")
    conn.executemany("INSERT INTO recalls VALUES (?, ?, ?, ?)",
                     [(n, f"20{n % 25:02d}-01-{n % 28 + 1:02d}", "JP" if n % 5 else ("KR" if n % 1000 else "US"), "x")
                      for n in range(1, rows + 1)])
    conn.execute("CREATE INDEX idx_recalls_recall_date ON recalls (recall_date)")
    conn.execute("CREATE INDEX idx_recalls_country ON recalls (country)")
    conn.execute("CREATE INDEX idx_recalls_part ON recalls (recall_date) WHERE country = 'US'")
    conn.execute("ANALYZE")
    return conn


def _plan(conn, sql, params):
    return " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))


def test_a_common_value_walks_the_date_index_and_gives_the_same_rows(tmp_path):
    conn = _store(tmp_path)
    sorts = pageplan.sort_indexes(conn, {"recalls": "recall_date"})
    assert sorts == {"recalls": ("recall_date", "idx_recalls_recall_date")}   # not the partial one
    plan = pageplan.filtered_page(PAGE, sorts, limits.indexed_columns(conn))
    assert plan["equalities"] == ['"country" = :p0'] and plan["limit"] == 51
    enough = pageplan.walk_limit(20_000, 51)
    assert enough == 1_009   # isqrt(51 * 20,000)
    assert conn.execute(pageplan.decision_sql(plan, enough), {"p0": "JP"}).fetchone()[0] == enough
    walked = pageplan.walked(PAGE, plan)
    assert "INDEXED BY [idx_recalls_recall_date]" in walked
    assert _plan(conn, walked, {"p0": "JP"}) == "SCAN recalls USING INDEX idx_recalls_recall_date"
    assert conn.execute(walked, {"p0": "JP"}).fetchall() == conn.execute(PAGE, {"p0": "JP"}).fetchall()


def test_a_rare_value_is_counted_below_the_limit(tmp_path):
    conn = _store(tmp_path)
    plan = pageplan.filtered_page(PAGE, pageplan.sort_indexes(conn, {"recalls": "recall_date"}),
                                  limits.indexed_columns(conn))
    assert conn.execute(pageplan.decision_sql(plan, 1_000), {"p0": "US"}).fetchone()[0] == 20


def test_the_next_page_is_planned_too_and_other_conditions_are_left_alone(tmp_path):
    conn = _store(tmp_path)
    sorts = pageplan.sort_indexes(conn, {"recalls": "recall_date"})
    indexed = limits.indexed_columns(conn)
    plan = pageplan.filtered_page(NEXT, sorts, indexed)
    assert plan is not None and plan["equalities"] == ['"country" = :p0']
    params = {"p0": "JP", "p1": "2010-01-05", "p2": "7"}
    assert conn.execute(pageplan.walked(NEXT, plan), params).fetchall() == conn.execute(NEXT, params).fetchall()
    # a search, an unindexed column, no filter, another order: Datasette's SQL as it is
    assert pageplan.filtered_page(PAGE.replace('"country" = :p0', '"country" = :p0 and "summary" like :p1'),
                                  sorts, indexed) is None   # an operator filter
    assert pageplan.filtered_page(PAGE.replace('"country" = :p0', '"country" = :p0 and ([recalls].id IN '
                                               '(SELECT rowid FROM f WHERE f MATCH :w))'), sorts, indexed) is None
    assert pageplan.filtered_page(PAGE.replace('"country"', '"summary"'), sorts, indexed) is None
    assert pageplan.filtered_page(PAGE.replace('where "country" = :p0 ', ''), sorts, indexed) is None
    assert pageplan.filtered_page(PAGE.replace("recall_date desc", "country desc"), sorts, indexed) is None


def test_split_and_keeps_parenthesised_terms_whole():
    assert pageplan.split_and('"a" = :p0 and (b < :p1 or (b = :p1 and id > :p2))') == \
        ['"a" = :p0', '(b < :p1 or (b = :p1 and id > :p2))']


def test_a_search_tested_per_row_with_a_filter_walks_too(tmp_path):
    conn = _store(tmp_path)
    sql = PAGE.replace('"country" = :p0', '"country" = :p0 and ([recalls].[summary] LIKE :w ESCAPE \'\\\')')
    plan = pageplan.filtered_page(sql, pageplan.sort_indexes(conn, {"recalls": "recall_date"}),
                                  limits.indexed_columns(conn))
    assert plan is not None and plan["equalities"] == ['"country" = :p0']
    params = {"p0": "JP", "w": "%x%"}
    assert conn.execute(pageplan.walked(sql, plan), params).fetchall() == conn.execute(sql, params).fetchall()


def test_a_full_text_test_of_the_row_itself_is_a_per_row_test():
    sorts = {"recalls": ("recall_date", "idx_recalls_recall_date")}
    indexed = {"recalls": frozenset({"country", "recall_date"})}
    per_row = ("([recalls].[summary] LIKE :bc_search_0 ESCAPE '\\' OR EXISTS (SELECT 1 FROM [recalls_fts] "
               "WHERE [recalls_fts] MATCH :bc_search_1 AND rowid = [recalls].id))")
    assert pageplan.filtered_page(PAGE.replace('"country" = :p0', f'"country" = :p0 and {per_row}'),
                                  sorts, indexed) is not None
    other = per_row.replace("rowid = [recalls].id", "rowid > 0")
    assert pageplan.filtered_page(PAGE.replace('"country" = :p0', f'"country" = :p0 and {other}'),
                                  sorts, indexed) is None
