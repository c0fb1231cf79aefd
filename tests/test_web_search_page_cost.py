"""What a new search page costs the lane it is admitted to (issue #34.6 last line,
plugins/basecrawler_web.py): its count of every other type's matches reads a 1–2 character
term from the padded index's vocabulary (a new rare 2-character search counted each type with
a LIKE over every row, to its limit), and a Korean search's "translated so far" line is read
once per data version, not once per search. A small generated store, in-process Datasette."""
import asyncio
import sqlite3
import sys
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

from basecrawler.reading import search  # noqa: E402
from basecrawler.reading.browse import WEB_DIR, build_metadata, types_by_table  # noqa: E402
from basecrawler.reading.web import admission  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import read_data  # noqa: E402
import web_attack_data  # noqa: E402


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("pages") / "pages.db")
    read_data.generate_sqlite(path, 2_000)
    web_attack_data.generate_alerts(path, 500)
    return path


def _plugin():
    sys.path.insert(0, str(WEB_DIR / "plugins"))
    try:
        import basecrawler_web
    finally:
        sys.path.remove(str(WEB_DIR / "plugins"))
    return basecrawler_web


@pytest.mark.parametrize("term", ["燃料", "유아", "아자", "Q7"])
def test_a_short_terms_count_per_type_reads_the_vocabulary_and_finds_the_same(store_path, term):
    web = _plugin()
    conn = sqlite3.connect(store_path)
    for record_type in (types_by_table()["recalls"], types_by_table()["product_alerts"]):
        assert search.short_index(conn, record_type)
        counts = []
        for grams in (False, True):
            sql, params = web._type_matches_sql(record_type, term, grams=grams)
            names = {k: v for k, v in params.items()}
            counts.append(conn.execute(f"SELECT count(*) FROM ({sql})", names).fetchone()[0])
            steps = []
            conn.set_progress_handler(lambda: steps.append(1) and 0, 1_000)
            conn.execute(f"SELECT count(*) FROM ({sql})", names).fetchone()
            conn.set_progress_handler(None, 1_000)
            if grams:
                read_by_vocabulary = len(steps)
            else:
                read_by_pass = len(steps)
        assert counts[0] == counts[1]
        if counts[0] < 100:   # a rare term: a seek, not a pass over every row
            assert read_by_vocabulary * 10 < read_by_pass, (record_type.table, term, read_by_vocabulary, read_by_pass)


def _registered_plugin():
    """The web plugin module whose hooks Datasette calls: the first one registered in this
    process (a later Datasette executes the file again but keeps the registered hooks)."""
    from datasette.app import Datasette
    from datasette.plugins import pm

    Datasette([], plugins_dir=str(WEB_DIR / "plugins"))
    return pm.get_plugin("basecrawler_web.py")


def _visit(store_path, paths):
    from datasette.app import Datasette

    async def visit():
        ds = Datasette([store_path], metadata=build_metadata(store_path), plugins_dir=str(WEB_DIR / "plugins"),
                       template_dir=str(WEB_DIR / "templates"))
        return [await ds.client.get(path) for path in paths]
    return asyncio.run(visit())


def test_a_search_page_counts_other_types_through_the_vocabulary(store_path, monkeypatch):
    """The page's count of each type (search_groups) reads a 2-character term from the
    vocabulary: every id query it builds for a type's count asks for `grams`."""
    web = _registered_plugin()
    asked = []
    original = web.build_query

    def recording(*args, **kwargs):
        if "hide_copies" in kwargs:   # (the per-type counts; the page's own rows are built apart)
            asked.append(kwargs.get("grams", False))
        return original(*args, **kwargs)
    monkeypatch.setattr(web, "build_query", recording)
    (page,) = _visit(store_path, ["/pages/recalls.json?_search=" + urllib.parse.quote("아자")])
    assert page.status_code == 200
    assert asked and all(asked), asked


def test_a_korean_searchs_translation_line_is_read_once_per_data_version(store_path, monkeypatch):
    web = _registered_plugin()
    calls = []
    original = web.translation_progress

    def counting(conn, filters):
        calls.append(filters)
        return original(conn, filters)
    monkeypatch.setattr(web, "translation_progress", counting)
    admission.served.clear()
    pages = _visit(store_path, ["/pages/product_alerts.json?_search=" + urllib.parse.quote(text)
                                for text in ("유아", "가나", "질식 다라")])
    assert [p.status_code for p in pages] == [200, 200, 200]
    assert len(calls) == 1, calls
