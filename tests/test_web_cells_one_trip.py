"""A table page's cells read their rows' extras (the Korean of the translated columns, the
display chain, the other publishers) in one trip to an SQL thread for the whole page, not
one per cell (plugins/basecrawler_cards.py `_row_extras`)."""
import asyncio
import sqlite3
import sys
from pathlib import Path

import pytest

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "basecrawler" / "reading" / "web" / "plugins"))
import basecrawler_cards as cards   # noqa: E402  (Datasette loads it from the plugins folder)
from web_fixture import fill   # noqa: E402


class _Db:
    def __init__(self, conn):
        self.conn, self.trips = conn, 0

    async def execute_fn(self, fn):
        self.trips += 1
        return fn(self.conn)


class _Datasette:
    def __init__(self, db):
        self.db = db

    def get_database(self, name):
        return self.db


class _Results:
    def __init__(self, cursor):
        self.columns = [d[0] for d in cursor.description]
        self.rows = cursor.fetchall()


PAGE = "select id, manufacturer_original, model_original, summary_ko from recalls order by recall_date desc limit 51"


def _page(tmp_path):
    conn = sqlite3.connect(fill(tmp_path / "w.db", extra=True))
    conn.row_factory = sqlite3.Row
    return conn


def _draw(conn, remember: bool):
    db = _Db(conn)
    datasette = _Datasette(db)

    async def page():
        token = cards._extras_seen.set({})
        try:
            results = _Results(conn.execute(PAGE))
            if remember:
                cards._remember_page("w", PAGE, results)
            drawn = []
            for row in results.rows:
                drawn.append(await cards._row_extras(datasette, "w", "recalls", row))   # the maker's cell …
                drawn.append(await cards._row_extras(datasette, "w", "recalls", row))   # … the best-text cell
            return results.rows, drawn
        finally:
            cards._extras_seen.reset(token)
    rows, drawn = asyncio.run(page())
    return db.trips, rows, drawn


def test_every_row_of_the_page_is_read_in_one_trip(tmp_path):
    conn = _page(tmp_path)
    trips, rows, drawn = _draw(conn, remember=True)
    assert len(rows) > 3 and trips == 1
    one_by_one, _, alone = _draw(conn, remember=False)
    assert one_by_one == len(rows)   # without the page's ids: a trip per row (kept for the request)
    assert drawn == alone


def test_the_extras_are_each_rows_own(tmp_path):
    conn = _page(tmp_path)
    _, rows, drawn = _draw(conn, remember=True)
    for row, extras in zip(rows, drawn[::2]):
        own = conn.execute("SELECT manufacturer_ko, summary_original, source_lang FROM recalls WHERE id = ?",
                           [row["id"]]).fetchone()
        assert extras["manufacturer_ko"] == own["manufacturer_ko"]
        assert extras["summary_original"] == own["summary_original"]
        assert extras["source_lang"] == own["source_lang"]
        assert extras[cards.OTHERS] == 0
    assert any(extras.get("component_ko") == "전조등" for extras in drawn)
