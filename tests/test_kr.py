"""sources/kr.py: Seoul's mirror of the KATS domestic recall list (paged HTML, Korean) →
product alerts keyed by the KATS uid (fixtures in fixtures/kr/, made by make_fixtures.py)."""
import datetime as dt
import json
from pathlib import Path

import httpx
import pytest

from basecrawler.testing import fast_settings
from sources.kr import KoreaRecallsCrawler, list_date, read_page, split_product

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "kr"
SHARED = next((p for p in (REPO.parent / "shared", REPO.parents[1] / "shared")
               if (p / "real-samples").is_dir()), REPO.parent / "shared")
REAL = SHARED / "real-samples"
LIST_PATH = "/fe/si/recallDmstc/NR_list.do"


def serve(pages: dict[str, bytes], asked: list | None = None) -> httpx.MockTransport:
    def handler(request):
        if request.url.path != LIST_PATH:
            return httpx.Response(404)
        index = request.url.params.get("pageIndex")
        if asked is not None:
            asked.append(index)
        body = pages.get(index)
        if body is None:
            return httpx.Response(404)
        return httpx.Response(200, content=body, headers={"content-type": "text/html;charset=UTF-8"})
    return httpx.MockTransport(handler)


def fixture_pages() -> dict[str, bytes]:
    return {str(n): (FIXTURES / f"list_page{n}.html").read_bytes() for n in (1, 2, 3)}


def run(db_path, pages, asked=None, **kw):
    crawler = KoreaRecallsCrawler(db_path, settings=fast_settings(db_path), transport=serve(pages, asked), **kw)
    return crawler, crawler.run()


def alerts(crawler) -> dict:
    rows = crawler.store.query("SELECT * FROM product_alerts WHERE source = 'kr' ORDER BY id")
    return {row["alert_id"]: {**row, "extra": json.loads(row["extra"] or "{}"),
                              "category": json.loads(row["category"] or "[]")} for row in rows}


@pytest.mark.parametrize("name, category", [
    ("수영보조용품(착용형)(물놀이기구)", ["물놀이기구"]),
    ("휴대용 레이저용품(휴대용 레이저용품)", ["휴대용 레이저용품"]),
    ("저속전동이륜차", []),
    ("Manual Motor starter", []),
])
def test_the_trailing_parentheses_of_the_product_name_are_the_kats_class(name, category):
    assert split_product(name) == (name, category)


def test_the_list_date_is_year_month_day_with_dots():
    assert list_date("2026.08.11") == dt.date(2026, 8, 11)
    assert list_date("2026.13.01") is None and list_date("") is None


def test_the_authored_pages_are_read_to_the_empty_page_and_keyed_by_the_uid(db_path):
    asked = []
    crawler, result = run(db_path, fixture_pages(), asked, mode="full")
    c = result.counts
    assert result.status == "succeeded"
    assert asked == ["1", "2", "3"]   # stopped at the empty page past the end
    assert (c.fetched, c.new, c.unparseable, c.dead_lettered) == (5, 4, 1, 1)
    stored = alerts(crawler)
    assert sorted(stored) == ["10022667", "10022772", "10022783", "10022792"]   # uids, not 번호
    first = stored["10022783"]
    assert first["product_original"] == "수영보조용품(착용형)(물놀이기구)"
    assert first["category"] == ["물놀이기구"]
    assert first["title_original"] == "수영보조용품(착용형)(물놀이기구) · HERC 8자형 튜브"
    assert first["brand"] == "주식회사 고은생활" and first["risk_class"] == "명령에따른리콜"
    assert first["extra"]["recall_kind"] == "ordered" and first["extra"]["kats_uid"] == "10022783"
    assert first["source_lang"] == "ko" and first["country"] == "KR" and first["alert_date"] == "2026-07-23"
    assert first["source_url"] == "https://sftc.seoul.go.kr/fe/si/recallDmstc/NR_view.do?recallUid=10022783"
    assert stored["10022792"]["extra"]["recall_kind"] == "voluntary"
    assert stored["10022667"]["extra"]["model"] == "SWIM & PLAYING 4"   # entity decoded
    letters = crawler.store.dead_letters.open_dead_letters("kr")
    assert len(letters) == 1 and "without a recall uid" in letters[0]["error"]


def test_the_korean_originals_are_never_in_need_of_a_translation_language(db_path):
    crawler, _ = run(db_path, fixture_pages(), mode="full")
    langs = {row["source_lang"] for row in crawler.store.query("SELECT source_lang FROM product_alerts")}
    assert langs == {"ko"}


def test_an_incremental_run_stops_at_the_first_page_older_than_its_window(db_path):
    asked = []
    crawler, result = run(db_path, fixture_pages(), asked, mode="incremental", since="2026-08-01")
    assert asked == ["1"]   # page 1 still has a row in the window; its older rows end the walk
    assert result.counts.new == 1 and result.counts.out_of_range == 2


def test_an_error_page_is_not_the_end_of_the_list(db_path):
    pages = fixture_pages()
    pages["2"] = (FIXTURES / "error_page.html").read_bytes()
    crawler, result = run(db_path, pages, mode="full")
    assert result.status == "failed" and "no recall list table" in result.error
    assert result.counts.new == 3   # page 1 stored; the error page kept as a dead letter
    assert any(letter["kind"] == "unexpected" for letter in crawler.store.dead_letters.open_dead_letters("kr"))


def test_a_page_with_a_changed_header_is_refused():
    html = (FIXTURES / "list_page1.html").read_text(encoding="utf-8").replace("<th>공표일</th>", "<th>등록일</th>")
    with pytest.raises(Exception, match="columns changed"):
        read_page(html, "https://sftc.seoul.go.kr/x")


@pytest.mark.skipif(not (REAL / "kr_seoul_recall_list_p1.html").exists(), reason="real samples folder absent")
def test_the_real_first_page_and_the_page_past_the_window(db_path):
    pages = {"1": (REAL / "kr_seoul_recall_list_p1.html").read_bytes(),
             "2": (REAL / "kr_seoul_recall_list_past_window.html").read_bytes()}
    asked = []
    crawler, result = run(db_path, pages, asked, mode="full")
    assert asked == ["1", "2"]
    assert (result.counts.fetched, result.counts.new, result.counts.dead_lettered) == (10, 10, 0)
    stored = alerts(crawler)
    assert "10022792" in stored and "1240" not in stored
    for row in stored.values():
        assert row["product_original"] and row["title_original"] and row["brand"] and row["alert_date"]
        assert row["risk_class"] in ("자발적리콜", "명령에따른리콜") and row["extra"]["recall_kind"]
        assert row["extra"]["model"] and row["source_lang"] == "ko"
    assert sum(1 for row in stored.values() if row["category"]) == 8
    assert stored["10022783"]["category"] == ["물놀이기구"]
    assert sum(1 for row in stored.values() if row["extra"]["recall_kind"] == "ordered") == 8
