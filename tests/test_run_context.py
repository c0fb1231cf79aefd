"""The run context (basecrawler/pipeline/context.py): a source written as `fetch(self, ctx)` /
`parse(self, ctx, raw)` / `fetch_detail(self, ctx, recall)` gets everything a run offers through
`ctx`, and a source of the first API (`fetch(self)`) keeps working beside it."""
import datetime as dt

import httpx
import pytest

from basecrawler import BaseCrawler
from basecrawler.errors import NotFound, UnsafePath
from basecrawler.fetch.urls import path_segment
from basecrawler.pipeline.context import RunContext
from basecrawler.testing import fast_settings

from support import FakeClock

SITE = "https://api.example"
ROWS = [{"id": "A1", "date": "2024-05-01"}, {"id": "B2", "date": "2024-05-03"}]


def transport(routes):
    def handler(request):
        body = routes.get(request.url.path)
        if body is None:
            return httpx.Response(404)
        return httpx.Response(200, json=body)
    return httpx.MockTransport(handler)


class ContextSource(BaseCrawler):
    """Written on the run context only: nothing but `ctx` is used."""

    source = "ctxdemo"
    country = "XX"
    endpoints = {"api": SITE}

    seen: list = []

    def fetch(self, ctx):
        assert isinstance(ctx, RunContext)
        self.seen.append(("fetch", ctx.source, ctx.mode, ctx.today()))
        for row in ctx.http.get_json(ctx.url("api", "/list/{}.json", "recalls")):
            if ctx.in_window(dt.date.fromisoformat(row["date"])):
                yield row

    def parse(self, ctx, raw):
        self.seen.append(("parse", raw["id"]))
        return {"recall_number": raw["id"], "recall_date": raw["date"]}


class FirstApiSource(BaseCrawler):
    """The first API: everything on `self`, no context parameter."""

    source = "firstapi"
    country = "XX"
    endpoints = {"api": SITE}

    def fetch(self):
        yield from self.http.get_json(self.url("api", "/list/recalls.json"))

    def parse(self, raw):
        return {"recall_number": raw["id"], "recall_date": raw["date"]}


class DetailSource(ContextSource):
    source = "ctxdetail"
    asked: list = []

    def fetch_detail(self, ctx, recall):
        self.asked.append((type(ctx).__name__, recall["recall_number"]))
        detail = ctx.http.get_json(ctx.url("api", "/detail/{}.json", recall["recall_number"]))
        return {"model_original": detail["model"]}


clock = FakeClock(dt.datetime(2024, 6, 1, 12, tzinfo=dt.timezone.utc).timestamp())


def test_a_source_written_on_the_context_runs_the_whole_pipeline(db_path):
    ContextSource.seen = []
    crawler = ContextSource(db_path, mode="full", settings=fast_settings(db_path), clock=clock, sleep=clock.sleep,
                            transport=transport({"/list/recalls.json": ROWS}))
    result = crawler.run()
    assert result.status == "succeeded"
    assert (result.counts.fetched, result.counts.new) == (2, 2)
    assert ContextSource.seen[0] == ("fetch", "ctxdemo", "full", dt.date(2024, 6, 1))
    assert [s for s in ContextSource.seen if s[0] == "parse"] == [("parse", "A1"), ("parse", "B2")]
    stored = {row["recall_number"] for row in crawler.store.query("SELECT recall_number FROM recalls")}
    assert stored == {"A1", "B2"}


def test_the_context_window_is_the_runs(db_path):
    crawler = ContextSource(db_path, mode="full", since="2024-05-02", settings=fast_settings(db_path), clock=clock, sleep=clock.sleep,
                            transport=transport({"/list/recalls.json": ROWS}))
    result = crawler.run()
    assert result.counts.fetched == 1   # A1 (05-01) is before the window and never yielded


def test_a_source_of_the_first_api_still_runs(db_path):
    crawler = FirstApiSource(db_path, mode="full", settings=fast_settings(db_path),
                             transport=transport({"/list/recalls.json": ROWS}))
    assert not FirstApiSource.takes_context("fetch") and not FirstApiSource.takes_context("parse")
    result = crawler.run()
    assert (result.status, result.counts.new) == ("succeeded", 2)


def test_the_signature_tells_the_two_apis_apart():
    assert ContextSource.takes_context("fetch") and ContextSource.takes_context("parse")
    assert not ContextSource.has_detail_phase() and not FirstApiSource.has_detail_phase()
    assert DetailSource.takes_context("fetch_detail") and DetailSource.has_detail_phase()


def test_fetch_detail_on_the_context_is_called_by_the_ladder(db_path):
    DetailSource.asked = []
    routes = {"/list/recalls.json": ROWS[:1], "/detail/A1.json": {"model": "Roadster"}}
    crawler = DetailSource(db_path, mode="full", settings=fast_settings(db_path), clock=clock, sleep=clock.sleep,
                           transport=transport(routes))
    crawler.run()
    assert DetailSource.asked == [("RunContext", "A1")]
    row = crawler.store.query("SELECT model_original FROM recalls")[0]
    assert row["model_original"] == "Roadster"


def test_the_context_offers_no_way_to_the_store(db_path):
    crawler = ContextSource(db_path, settings=fast_settings(db_path))
    public = {name for name in dir(crawler.context) if not name.startswith("_")}
    assert not public & {"store", "counts", "archive", "run_id", "settings"}


@pytest.mark.parametrize("value", ["..", ".", "", "  ", "a\x00b"])
def test_a_path_segment_that_would_step_is_refused(value):
    with pytest.raises(UnsafePath):
        path_segment(value)


@pytest.mark.parametrize("value, encoded", [
    ("../../etc/passwd", "..%2F..%2Fetc%2Fpasswd"),
    ("a/b/c", "a%2Fb%2Fc"),
    ("x?y#z", "x%3Fy%23z"),
    ("%2e%2e", "%252e%252e"),
    ("K26/EP/10022792", "K26%2FEP%2F10022792"),
])
def test_a_path_segment_is_one_segment(value, encoded):
    assert path_segment(value) == encoded


def test_ctx_url_encodes_each_value_as_a_segment(db_path):
    ctx = ContextSource(db_path, settings=fast_settings(db_path)).context
    assert ctx.url("api", "/pypi/{}/{}/json", "../../etc/passwd", "1.0") == \
        f"{SITE}/pypi/..%2F..%2Fetc%2Fpasswd/1.0/json"


def test_a_detail_lookup_that_is_not_there_yet_is_not_found(db_path):
    routes = {"/list/recalls.json": ROWS[:1]}
    crawler = DetailSource(db_path, mode="full", settings=fast_settings(db_path), clock=clock, sleep=clock.sleep,
                           transport=transport(routes))
    with pytest.raises(NotFound):
        crawler.detail_of({"recall_number": "A1"})
