"""A table page decides what it shows from its arguments, never from the SQL Datasette built
for it (#35: no regular expression over SQL text): whether its facets are the whole table's
(reading/web/pageargs.py), and which rows' extras its cells read at once (plugins/basecrawler_cards.py)."""
from __future__ import annotations

import ast
import asyncio
import sqlite3
from pathlib import Path

import pytest

from basecrawler.reading.web.pageargs import narrows, search_only, whole_table

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

from test_web_groups import _copy_db, grouped  # noqa: E402,F401 — the module's store fixture
from test_web_grouped_table_counts import _counts, _datasette  # noqa: E402
from test_web_cells_one_trip import _Datasette, _Db, _Results, _page, cards  # noqa: E402

PACKAGE = Path(__file__).resolve().parents[1] / "basecrawler"
PATTERN_CALLS = {"search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}
SQL_WORDS = ("sql", "statement", "query")


def _regex_over_sql(tree: ast.AST) -> list[str]:
    """Calls of a regular expression (`re.search(p, text)`, `compiled.findall(text)`) whose
    subject is named like SQL text."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in PATTERN_CALLS):
            continue
        module_call = isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
        subject = node.args[1] if module_call and len(node.args) > 1 else (node.args[0] if node.args else None)
        if subject is not None and any(w in ast.unparse(subject).lower() for w in SQL_WORDS):
            found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_no_module_reads_sql_text_with_a_regular_expression():
    offenders = {str(path.relative_to(PACKAGE)): hits for path in sorted(PACKAGE.rglob("*.py"))
                 if (hits := _regex_over_sql(ast.parse(path.read_text(encoding="utf-8"))))}
    assert offenders == {}
    # The check sees what it names: the facets' old test of the page's SQL, and a compiled one.
    assert _regex_over_sql(ast.parse('re.search(r"where", sql.rsplit(" from ", 1)[-1])'))
    assert _regex_over_sql(ast.parse("_FROM.findall(statement)"))
    assert not _regex_over_sql(ast.parse('re.search(r"timeout=(\\d+)", str(params.get("options")))'))


@pytest.mark.parametrize("keys", [["_sort", "_size"], ["_col", "_nocol", "_next"], ["_facet", "_facet_size"],
                                  ["_bc_copies", "_bc_all", "_lang", "_shape", "_extra", "_nocount"], []])
def test_arguments_that_only_choose_how_rows_show_keep_the_whole_table(keys):
    assert not narrows(keys)
    assert whole_table({k: "1" for k in keys})


@pytest.mark.parametrize("key", ["country", "country__exact", "_search", "_where", "_through", "_filter_column",
                                 "_bcf_model_year", "_search_title", "_searchmode", "_not_an_argument_we_know"])
def test_a_filter_a_search_or_an_unknown_argument_narrows_the_rows(key):
    assert narrows(["_size", key])


def test_a_search_only_page_searches_and_narrows_nothing_else():
    assert search_only({"_search": "brake", "_sort": "id", "_next": "5"})
    assert not search_only({"_search": "  "})
    assert not search_only({"_search": "brake", "country": "JP"})
    assert not search_only({"_search": "brake", "_where": "1"})


def test_a_later_page_of_the_grouped_table_shows_the_whole_tables_facets(grouped, tmp_path):
    """Page 2 (`_next`) is still the whole table: its facets are page 1's, not the counts of the
    rows after page 1 (which is what a page's WHERE clause, read as text, said)."""
    db_path = _copy_db(grouped[0], tmp_path / "later.db")
    ds = _datasette(db_path)

    async def pages():
        first = await ds.client.get("/later/product_alerts.json?_col=source&_extra=facet_results&_extra=next&_size=1")
        token = first.json()["next"]
        assert token
        later = await ds.client.get(f"/later/product_alerts.json?_col=source&_extra=facet_results&_size=1&_next={token}")
        return first, later
    first, later = asyncio.run(pages())
    assert _counts(first, "source") == {"origdemo": 2, "repubdemo": 1}
    assert _counts(later, "source") == _counts(first, "source")
    assert _counts(later, "country") == _counts(first, "country") == {"CA": 2, "DE": 1}


def test_a_page_read_by_any_statement_has_its_rows_extras_read_at_once(tmp_path):
    """The table a result came from is not parsed out of its SQL: a quoted table name, or a
    statement whose FROM names another table first, still has its rows read in one trip."""
    conn = _page(tmp_path)
    for statement in ('select id, summary_ko from "recalls" order by id limit 5',
                      "select r.id from (select 1 as x) as t, [recalls] as r order by r.id limit 5"):
        db = _Db(conn)

        async def draw():
            token = cards._extras_seen.set({})
            try:
                results = _Results(conn.execute(statement))
                cards._remember_page("w", statement, results)
                drawn = [await cards._row_extras(_Datasette(db), "w", "recalls", row) for row in results.rows]
                return results.rows, drawn
            finally:
                cards._extras_seen.reset(token)
        rows, drawn = asyncio.run(draw())
        assert len(rows) == 5 and db.trips == 1, statement
        own = conn.execute("SELECT summary_original FROM recalls WHERE id = ?", [rows[-1]["id"]]).fetchone()
        assert drawn[-1]["summary_original"] == own["summary_original"]
