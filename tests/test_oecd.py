"""sources/oecd.py and basecrawler/operations/coverage.py: the OECD GlobalRecalls 7-day feed →
product alerts, one per (country, origin id); runs further apart than the feed's window show
as gaps in `status` and `doctor` (fixtures in fixtures/oecd/, made by make_fixtures.py)."""
import datetime as dt
import json
from pathlib import Path

import httpx
import pytest

from basecrawler.commands.doctor import coverage_checks
from basecrawler.commands.status import collect_status
from basecrawler.operations import coverage
from basecrawler.store.core import Store
from basecrawler.testing import fast_settings
from sources.oecd import FEED_PATH, OecdGlobalRecallsCrawler, split_guid

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "oecd"
SHARED = next((p for p in (REPO.parent / "shared", REPO.parents[1] / "shared")
               if (p / "real-samples").is_dir()), REPO.parent / "shared")
REAL_SAMPLE = SHARED / "real-samples" / "oecd_globalrecalls_rss_2026-08-19.xml"
UTC = dt.timezone.utc


def serve(body: bytes, content_type="application/rss+xml; charset=UTF-8") -> httpx.MockTransport:
    def handler(request):
        if request.url.path != FEED_PATH:
            return httpx.Response(404)
        return httpx.Response(200, content=body, headers={"content-type": content_type})
    return httpx.MockTransport(handler)


def run_feed(db_path, body: bytes, content_type="application/rss+xml; charset=UTF-8"):
    crawler = OecdGlobalRecallsCrawler(db_path, mode="full", settings=fast_settings(db_path),
                                       transport=serve(body, content_type))
    return crawler, crawler.run()


def alerts(crawler) -> dict:
    rows = crawler.store.query("SELECT * FROM product_alerts WHERE source = 'oecd' ORDER BY id")
    return {(row["country"], row["alert_id"]): {**row, "extra": json.loads(row["extra"] or "{}")} for row in rows}


@pytest.mark.parametrize("guid, parts", [
    ("http://PoliciesApplications.oecd.org/GlobalRecalls/Recall/EN/KR/K26/EP/10022792", ("en", "KR", "K26/EP/10022792")),
    ("http://PoliciesApplications.oecd.org/GlobalRecalls/Recall/EN/BG/SR/03722/25", ("en", "BG", "SR/03722/25")),
    ("http://PoliciesApplications.oecd.org/GlobalRecalls/Recall/FR/CA/82438", ("fr", "CA", "82438")),
    ("http://PoliciesApplications.oecd.org/GlobalRecalls/Recall/EN/US/", None),
    ("not a guid", None),
    (None, None),
])
def test_the_guid_gives_language_country_and_the_origin_id_with_its_slashes(guid, parts):
    assert split_guid(guid) == parts


def test_the_authored_feed_gives_each_recall_once_english_and_french_as_one(db_path):
    crawler, result = run_feed(db_path, (FIXTURES / "feed_day4.xml").read_bytes())
    c = result.counts
    assert result.status == "succeeded"
    # 9 items: 7 recalls, the Canadian one in two languages and one item listed twice.
    assert (c.fetched, c.parsed, c.new, c.merged, c.unparseable) == (9, 9, 7, 2, 0)
    stored = alerts(crawler)
    assert sorted(stored) == [("AU", "PS1134930"), ("AU", "PS1135001"), ("BG", "SR/03722/25"), ("CA", "82438"),
                              ("TW", "20260816"), ("US", "00175"), ("US", "26720")]
    canada = stored[("CA", "82438")]
    assert canada["title_original"] == "RELLET Hyaluronic Acid Spray" and canada["source_lang"] == "en"
    assert canada["extra"]["fr"]["title"] == "Vaporisateur RELLET à l’acide hyaluronique"
    assert canada["extra"]["languages"] == ["en", "fr"] and canada["extra"]["origin_id"] == "82438"
    assert canada["authority"] == "Canada" and canada["alert_date"] == "2026-08-05"
    # Escaped HTML in the description: tags dropped, entities decoded.
    assert stored[("AU", "PS1135001")]["description_original"] == "Lid may open <during> boiling."
    assert stored[("AU", "PS1134930")]["description_original"] == "Pull string tentacle toy. SKU: 1011414"
    # The recall's own date, even when it is old; a pubDate cut short is kept as published.
    assert stored[("US", "00175")]["alert_date"] == "2000-08-31"
    assert stored[("AU", "PS1134930")]["extra"]["published_text"] == "Wed, 19 Aug 2026 13:"
    assert stored[("BG", "SR/03722/25")]["extra"]["origin_id"] == "SR/03722/25"


def test_the_korean_item_carries_the_kats_uid_for_the_link_to_kr(db_path):
    crawler, _ = run_feed(db_path, (FIXTURES / "feed_day1.xml").read_bytes())
    korea = alerts(crawler)[("KR", "K26/EP/10022792")]
    assert korea["extra"]["kats_uid"] == "10022792" and korea["country"] == "KR"


def test_four_daily_snapshots_with_overlapping_windows_give_each_recall_once(db_path):
    seen = []
    for day in range(1, 5):
        crawler, result = run_feed(db_path, (FIXTURES / f"feed_day{day}.xml").read_bytes())
        assert result.status == "succeeded"
        seen.append((result.counts.new, result.counts.updated))
    stored = alerts(crawler)
    assert len(stored) == 9   # every recall of the four days, once
    assert len(crawler.store.query("SELECT 1 FROM product_alerts")) == 9
    assert seen[0][0] == 6 and sum(new for new, _ in seen) == 9
    # The item that moved between days (republished on the 21st) is the same record, updated.
    assert stored[("TW", "20260816")]["extra"]["published"] == "2026-08-21T06:00:00+00:00"
    assert seen[2][1] == 1


def test_an_error_page_instead_of_the_feed_fails_the_run_and_is_kept(db_path):
    crawler, result = run_feed(db_path, (FIXTURES / "error_page.html").read_bytes(), content_type="text/html")
    assert result.status == "failed" and result.counts.new == 0
    letters = crawler.store.dead_letters.open_dead_letters("oecd")
    assert len(letters) == 1 and letters[0]["kind"] == "unexpected"


def test_an_item_without_a_guid_is_a_dead_letter_not_a_lost_item(db_path):
    body = (FIXTURES / "feed_day1.xml").read_bytes().replace(
        b'<guid isPermaLink="true">http://PoliciesApplications.oecd.org/GlobalRecalls/Recall/EN/US/00175</guid>', b"")
    crawler, result = run_feed(db_path, body)
    assert (result.counts.fetched, result.counts.unparseable, result.counts.dead_lettered) == (7, 1, 1)
    assert ("US", "00175") not in alerts(crawler)


# ---- coverage: a missed week is a gap in status and doctor --------------------------------
def _runs_at(db_path, starts):
    """Successful oecd runs that started at these moments (the store writes the real time)."""
    body = (FIXTURES / "feed_day1.xml").read_bytes()
    for start in starts:
        crawler, result = run_feed(db_path, body)
        crawler.store.runs.update_run(result.run_id, started_at=start.isoformat())
        crawler.store.close()


def test_a_missed_week_is_a_gap_in_status_and_the_loss_is_loud(db_path):
    _runs_at(db_path, [dt.datetime(2026, 8, 19, 6, tzinfo=UTC), dt.datetime(2026, 8, 20, 6, tzinfo=UTC),
                       dt.datetime(2026, 9, 3, 6, tzinfo=UTC)])
    store = Store(db_path)
    try:
        report = collect_status(store, {"oecd": OecdGlobalRecallsCrawler}, now=dt.datetime(2026, 9, 20, tzinfo=UTC))
    finally:
        store.close()
    entry = report["sources"]["oecd"]["coverage"]
    assert entry["window_days"] == 7
    assert entry["gaps"] == [{"from": "2026-08-20", "to": "2026-08-27", "days": 7}]
    assert entry["lost"] == {"from": "2026-09-03", "to": "2026-09-13"}
    assert "records published between 2026-09-03 and 2026-09-13 may be lost for good" in entry["message"]
    assert [(run["from"], run["to"]) for run in entry["runs"]] == [
        ("2026-08-12", "2026-08-19"), ("2026-08-13", "2026-08-20"), ("2026-08-27", "2026-09-03")]
    assert [run["run_id"] for run in entry["runs"]] == [1, 2, 3]


def test_doctor_fails_on_a_lost_window_and_passes_inside_it(db_path):
    _runs_at(db_path, [dt.datetime(2026, 8, 19, 6, tzinfo=UTC)])
    sources = {"oecd": OecdGlobalRecallsCrawler}
    inside = coverage_checks(db_path, sources, now=dt.datetime(2026, 8, 25, tzinfo=UTC))
    assert [(c.name, c.ok) for c in inside] == [("source oecd coverage", True)]
    late = coverage_checks(db_path, sources, now=dt.datetime(2026, 9, 1, tzinfo=UTC))
    assert [(c.name, c.ok) for c in late] == [("source oecd coverage", False)]
    assert "records published between 2026-08-19 and 2026-08-25 may be lost for good" in late[0].detail


def test_doctor_without_a_store_notes_the_window_and_a_source_without_one_is_not_checked(tmp_path):
    checks = coverage_checks(str(tmp_path / "none.db"), {"oecd": OecdGlobalRecallsCrawler})
    assert [(c.ok, c.note) for c in checks] == [(True, True)]
    assert not (tmp_path / "none.db").exists()   # read-only: nothing created
    assert coverage.window_days(object) is None


@pytest.mark.skipif(not REAL_SAMPLE.exists(), reason="real samples folder absent")
def test_the_real_day_of_the_feed_stores_every_recall_once_with_its_fields(db_path):
    crawler, result = run_feed(db_path, REAL_SAMPLE.read_bytes())
    c = result.counts
    # 49 items: 43 recalls; 6 Canadian recalls in English and French.
    assert (c.fetched, c.parsed, c.new, c.merged, c.unparseable, c.dead_lettered) == (49, 49, 43, 6, 0, 0)
    stored = alerts(crawler)
    assert len(stored) == 43
    from collections import Counter
    assert Counter(country for country, _ in stored) == {"US": 27, "AU": 8, "CA": 6, "TW": 1, "KR": 1}
    for row in stored.values():
        assert row["title_original"] and row["alert_date"] and row["authority"] and row["source_url"]
        assert row["extra"]["origin_id"] == row["alert_id"]
    # Canada's items carry no description in the feed; every other recall has one, as text.
    assert sum(1 for row in stored.values() if row["description_original"]) == 37
    assert not any("<" in (row["description_original"] or "") for row in stored.values())
    assert all(stored[("CA", n)]["extra"]["fr"]["title"] for n in ("82438", "82318", "82446", "82474", "82475", "82482"))
    assert stored[("KR", "K26/EP/10022792")]["extra"]["kats_uid"] == "10022792"


def test_status_prints_the_loss_loudly(db_path, capsys):
    from types import SimpleNamespace

    from basecrawler.commands.status import cmd_status

    # Relative to the real clock (cmd_status reads it): two runs long enough ago to leave a gap
    # between them and a loss after the last, whatever the day the test runs.
    now = dt.datetime.now(UTC)
    _runs_at(db_path, [now - dt.timedelta(days=40), now - dt.timedelta(days=20)])
    assert cmd_status(SimpleNamespace(settings=fast_settings(db_path), json=False, lang="en")) == 0
    out = capsys.readouterr().out
    lost = [line for line in out.splitlines() if "LOST" in line]
    assert len(lost) == 1 and "may be lost for good" in lost[0]
    assert "nothing was collected between" in out
