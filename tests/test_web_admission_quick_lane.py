"""Cost-based admission (issue #34.6 last line, basecrawler/reading/web/admission.py): an
ordinary search whose terms are rare in every table (a number lookup `#123`, a term no record
holds) or whose very page was answered quickly before takes the quick lane, so it answers
while expensive searches (a common term's new page) hold every slot of the search lane.
A small generated store, Datasette's test client in-process."""
import asyncio
import sqlite3
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

from basecrawler.reading.browse import WEB_DIR, build_metadata, types_by_table  # noqa: E402
from basecrawler.reading.web import admission, limits  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import read_data  # noqa: E402
import web_attack_data  # noqa: E402

RECALLS = 3_000   # `brake` is in every one: more than admission.RARE_ROWS
ALERTS = 300


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("admission") / "costs.db")
    read_data.generate_sqlite(path, RECALLS)
    web_attack_data.generate_alerts(path, ALERTS)
    return path


@pytest.fixture(autouse=True)
def _fresh():
    admission.estimates.clear()
    admission.served.clear()
    yield
    admission.estimates.clear()
    admission.served.clear()


def _pages(db_path: str, paths: list[str]) -> list:
    """(status, seconds, response) of `paths` from one in-process Datasette with the web
    view's plugins, one after the other."""
    from datasette.app import Datasette

    async def fetch():
        ds = Datasette([db_path], metadata=build_metadata(db_path), plugins_dir=str(WEB_DIR / "plugins"),
                       template_dir=str(WEB_DIR / "templates"))
        out = []
        for path in paths:
            started = time.perf_counter()
            response = await ds.client.get(path)
            out.append((response.status_code, time.perf_counter() - started, response))
        return out
    return asyncio.run(fetch())


def q(text: str) -> str:
    return urllib.parse.quote(text)


def test_the_estimate_counts_each_term_in_every_table_and_is_bounded(store_path):
    conn = sqlite3.connect(store_path)
    types = list(types_by_table().values())
    assert admission.search_rows(conn, types, "#123") <= admission.RARE_ROWS   # a number: rare
    assert admission.search_rows(conn, types, "Q7") == 0                       # 2 characters, none
    assert admission.search_rows(conn, types, "brake") > admission.RARE_ROWS   # every recall
    assert admission.search_rows(conn, types, "#123 brake") > admission.RARE_ROWS   # any common term
    assert admission.search_rows(conn, types, "choking") > 0   # counted in the alerts' table too
    started = time.perf_counter()
    for n in range(50):
        admission.search_rows(conn, types, f"x{n}y 가{n}")
    assert (time.perf_counter() - started) / 50 < admission.ESTIMATE_LIMIT_S


def test_rare_searches_answer_while_the_search_lane_is_full(store_path, monkeypatch):
    """The search lane with no free slot (as when four clients fill it with a common term's new
    pages): a number lookup and a term nobody holds are answered, a common term is "busy"."""
    monkeypatch.setitem(limits.SLOTS, "search", 0)
    db = Path(store_path).stem
    (one, _, _), (none, _, _), (common, took, busy) = _pages(store_path, [
        f"/{db}/recalls.json?_search={q('#123')}", f"/{db}/recalls.json?_search=Q7",
        f"/{db}/recalls.json?_search=brake"])
    assert (one, none) == (200, 200)
    assert common == 503 and took < 2 * limits.HEAVY_WAIT_S + 0.5, busy.text


def test_a_common_terms_page_answered_quickly_before_is_quick(store_path, monkeypatch):
    """Its counts are kept: asked again, it costs what a rare term does and is not starved by
    the new expensive searches that fill the search lane."""
    db = Path(store_path).stem
    path = f"/{db}/recalls.json?_search=brake"
    monkeypatch.setattr(admission, "QUICK_SERVED_S", 60.0)   # (what "quickly" is does not matter here)
    ((status, _, _),) = _pages(store_path, [path])
    assert status == 200 and admission.served
    monkeypatch.setitem(limits.SLOTS, "search", 0)   # (a new server: its lanes' slots from SLOTS)
    ((again, _, page),) = _pages(store_path, [path])
    assert again == 200, page.text


def test_no_answer_tells_its_lane_unless_the_operator_asks(store_path, monkeypatch):
    """How admission sorts requests is not a client's business: no Server-Timing by default."""
    monkeypatch.delenv("BASECRAWLER_WEB_SERVER_TIMING", raising=False)
    db = Path(store_path).stem
    pages = _pages(store_path, [f"/{db}/recalls", f"/{db}/recalls.json?_search=brake"])
    assert [page.headers.get("server-timing") for _, _, page in pages] == [None, None]


def test_each_answer_names_its_lane_and_waits_in_server_timing(store_path, monkeypatch):
    """With BASECRAWLER_WEB_SERVER_TIMING=1, the standard Server-Timing header says which lane
    served a page and how long its admission and its wait for a slot took (what an operator,
    or bench_web_attack.py, reads to tell a page's own work from its waiting)."""
    monkeypatch.setenv("BASECRAWLER_WEB_SERVER_TIMING", "1")
    db = Path(store_path).stem
    (_, _, table), (_, _, rare), (_, _, common), (_, _, csv) = _pages(store_path, [
        f"/{db}/recalls", f"/{db}/recalls.json?_search={q('#123')}", f"/{db}/recalls.json?_search=brake",
        f"/{db}/recalls.csv?_size=max"])
    assert table.headers["server-timing"] == 'lane;desc="light"'
    for page, lane in ((rare, admission.QUICK), (common, "search")):
        timing = page.headers["server-timing"]
        assert timing.startswith(f'lane;desc="{lane}", admission;dur=') and ", slot;dur=" in timing, timing
    assert csv.headers["server-timing"].startswith('lane;desc="heavy", slot;dur='), csv.headers["server-timing"]


def test_a_page_keeps_its_fastest_answer_as_its_cost(monkeypatch):
    """A reader's page answered quickly, then slowly under load (the same page, its counts
    kept): the next visit is still quick. Kept as its cost, the slow answer sent the page to
    the search lane, where its query is demoted and ran slow again, for as long as the attack
    lasted. A page never answered quickly is not made quick by being answered again."""
    path, query = "/store/recalls", b"_search=brake&country=JP"
    args = limits.arguments(query)
    lane = lambda: asyncio.run(admission.search_lane(None, path, args, query, {}))   # noqa: E731
    admission.note_served(path, query, admission.QUICK_SERVED_S / 3, 200)
    admission.note_served(path, query, admission.QUICK_SERVED_S * 4, 200)
    assert lane() == admission.QUICK
    admission.note_served(path, query, admission.QUICK_SERVED_S / 6, 200)   # a faster one counts
    assert admission.served[admission.page_key(path, query)] == admission.QUICK_SERVED_S / 6
    slow = b"_search=brake"
    admission.note_served(path, slow, admission.QUICK_SERVED_S * 2, 200)
    admission.note_served(path, slow, admission.QUICK_SERVED_S * 3, 200)
    assert asyncio.run(admission.search_lane(None, path, limits.arguments(slow), slow, {})) == "search"
