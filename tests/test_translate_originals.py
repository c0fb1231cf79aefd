"""Issue 31: text already in Korean is never sent to a translator (its originals are its Korean
fields, counted done), and text that several records share is sent once (the translation
memory, within a batch, across batches, across sources and runs). Measured with a counting
backend."""
import datetime as dt

import httpx

from basecrawler import BaseCrawler
from basecrawler.cli import main as cli_main
from basecrawler.testing import fast_settings
from translate.backends import Backend
from translate.fakeserver import pseudo_korean
from translate.jobhook import translate_after_job
from translate.originals import ORIGINAL_NOTE
from translate.testing import seed, statuses
from translate.worker import translate_pending

SITE = "https://kr.example"
ROWS = [{"id": "K1", "date": "2024-05-01", "title": "전기 온수매트 화재 위험", "maker": "가나전자(주)"},
        {"id": "K2", "date": "2024-05-03", "title": "어린이 장난감 납 기준 초과", "maker": "다라완구"}]


class Counting(Backend):
    """A backend that translates with the fake's pseudo-Korean and keeps every text it got."""

    name = "counting"

    def __init__(self):
        super().__init__()
        self.texts: list[str] = []

    def translate(self, texts, source_lang, target_lang="ko"):
        self.count_call()
        self.texts.extend(texts)
        return [pseudo_korean(t) for t in texts]


class KoreanDemo(BaseCrawler):
    """A demo source whose language is Korean, written on the run context."""

    source = "kodemo"
    country = "KR"
    source_lang = "ko"
    endpoints = {"site": SITE}

    def fetch(self, ctx):
        yield from ctx.http.get_json(ctx.url("site", "/list.json"))

    def parse(self, ctx, raw):
        return {"recall_number": raw["id"], "recall_date": raw["date"], "summary_original": raw["title"],
                "manufacturer_original": raw["maker"]}


def crawl_korean(db_path):
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=ROWS))
    crawler = KoreanDemo(db_path, mode="full", settings=fast_settings(db_path), transport=transport)
    assert crawler.run().status == "succeeded"
    return crawler


def test_a_korean_source_is_never_sent_and_its_originals_are_its_korean_fields(db_path):
    crawler = crawl_korean(db_path)
    store = crawler.store
    seed(store, 2)   # English rows beside it: those are sent
    backend = Counting()
    report = translate_pending(store, backend)
    assert report.originals == 2 and report.processed == 4
    assert "already Korean 2" in report.summary_line()
    assert not any("전기" in t or "장난감" in t or "가나" in t for t in backend.texts)
    rows = store.query("SELECT * FROM recalls WHERE source = 'kodemo' ORDER BY recall_number")
    assert [(r["summary_ko"], r["manufacturer_ko"]) for r in rows] == [(r["title"], r["maker"]) for r in ROWS]
    assert {(r["translation_status"], r["translation_note"]) for r in rows} == {("translated", ORIGINAL_NOTE)}
    assert store.lookup.translation_counts("kodemo") == {"translated": 2}


def test_korean_rows_are_counted_done_without_any_backend(db_path, monkeypatch, capsys):
    crawl_korean(db_path)
    for name in ("BASECRAWLER_TRANSLATE_BACKEND", "BASECRAWLER_LIBRETRANSLATE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert cli_main(["--db", db_path, "translate", "--no-progress"]) == 0   # nothing else pending
    assert "already Korean 2" in capsys.readouterr().out
    from basecrawler import Store
    store = Store(db_path)
    try:
        assert store.lookup.translation_counts("kodemo") == {"translated": 2}
        assert store.lookup.translation_backlog() == 0
    finally:
        store.close()


def test_the_daily_job_settles_korean_rows_without_a_backend(db_path, monkeypatch):
    crawler = crawl_korean(db_path)
    monkeypatch.delenv("BASECRAWLER_TRANSLATE_BACKEND", raising=False)
    line = translate_after_job(crawler.store)
    assert line == "skipped: no translation backend configured (already Korean 2)"
    assert statuses(crawler.store) == {"translated": 2}


def test_a_row_marked_ko_kr_counts_as_korean(store):
    seed(store, 3, country="KR", source="kodemo", lang="ko-KR", summary="브레이크 호스 {i}번 교체")
    backend = Counting()
    translate_pending(store, backend)
    assert backend.calls == 0 and statuses(store) == {"translated": 3}


# ---- text shared by several records -------------------------------------------------------------

SHARED = ["The airbag inflator may rupture.", "The brake hose may leak fluid.", "The seat belt may not latch.",
          "The fuel pump may stop working."]


def test_text_shared_by_many_records_is_sent_once_across_batches_sources_and_runs(store):
    # 40 records over two sources (one recall published twice, as in a group), four distinct texts.
    backend = Counting()
    seed_shared(store, "hc", "CA", 20)
    seed_shared(store, "oecd", "CA", 20, offset=100)
    translate_pending(store, backend, batch_rows=7)
    sent = [t for t in backend.texts if t in SHARED]
    assert sorted(sent) == sorted(SHARED)   # each shared text once, though 40 rows carry them
    later = Counting()
    seed_shared(store, "cpsc", "US", 10, offset=200)
    report = translate_pending(store, later, batch_rows=7)
    assert not [t for t in later.texts if t in SHARED]   # remembered: the new rows are served by memory
    assert report.translated == 0 and report.from_memory == 10


def seed_shared(store, source, country, count, offset=0):
    from basecrawler import Recall
    records = [Recall(country=country, recall_number=f"{source}-{offset + i}",
                      recall_date=(dt.date(2024, 1, 1) + dt.timedelta(days=i)).isoformat(),
                      summary_original=SHARED[i % len(SHARED)], source_lang="en")
               for i in range(count)]
    store.upsert("vehicle_recall", records, source=source)
