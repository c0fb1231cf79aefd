"""sources/fda.py: openFDA enforcement reports walked by report_date windows → product alerts
(authored records and the loopback API in fixtures/fda/, expected values in fixtures/fda/README.md)."""
import datetime as dt
import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from basecrawler.testing import fast_settings
from sources.fda import FdaCrawler, distribution, fda_date, search_query

from support import FakeClock, fixture_api, handler_transport, real_sample

REAL = real_sample("fda_enforcement_report_2012-06-13.jsonl")
NOW = dt.datetime(2026, 12, 3, 12, tzinfo=dt.timezone.utc).timestamp()


api = fixture_api("fda")


transport = handler_transport


class SmallPages(FdaCrawler):
    """The walk with a page of 2 and a skip cap of 4 (the API's 1000 and 25,000, scaled down)."""

    page_size, skip_cap = 2, 4


def run(db_path, handle, requested=None, cls=FdaCrawler, **kw):
    clock = FakeClock(NOW)
    crawler = cls(db_path, mode="full", settings=fast_settings(db_path), clock=clock, sleep=clock.sleep,
                  transport=transport(handle, requested), **kw)
    return crawler, crawler.run()


def stored(crawler) -> dict[str, dict]:
    rows = crawler.store.query("SELECT * FROM product_alerts WHERE source = 'fda'")
    for row in rows:
        for column in ("category", "company", "distribution", "extra"):
            row[column] = json.loads(row[column]) if row[column] else ([] if column != "extra" else {})
    return {row["alert_id"]: row for row in rows}


def food(n: int, day: str, **fields) -> dict:
    return {"recall_number": f"F-{n:04d}-2026", "event_id": str(80000 + n), "report_date": day,
            "product_type": "Food", "classification": "Class II", "status": "Ongoing", "recalling_firm": "Firm",
            "product_description": f"Product {n}", "reason_for_recall": "Listeria", **fields}


# ---- the authored fixtures --------------------------------------------------------------
def test_the_fixture_records_are_stored_once_each(db_path):
    crawler, result = run(db_path, api.handler())
    assert result.status == "succeeded"
    assert (result.counts.fetched, result.counts.new, result.counts.merged, result.counts.dead_lettered) == (8, 7, 1, 0)
    assert sorted(stored(crawler)) == ["D-0450-2026", "D-0451-2026", "F-0101-2026", "F-0102-2026", "F-0230-2026",
                                       "F-0231-2026", "Z-1201-2026"]


def test_golden_records(db_path):
    crawler, _ = run(db_path, api.handler())
    alerts = stored(crawler)
    granola = alerts["F-0101-2026"]
    assert (granola["country"], granola["alert_date"], granola["recall_number"]) == ("US", "2026-01-28", "F-0101-2026")
    assert granola["product_original"] == "Prairie Granola, Honey & Oat, 12 oz bags, UPC 0 12345 67890 5"
    assert granola["hazard_original"] == "Undeclared peanuts."   # the tags dropped, no space left before the stop
    assert (granola["risk_class"], granola["status"], granola["category"]) == ("Class I", "Ongoing", ["Food"])
    assert granola["company"] == ["Prairie Foods Inc."] and granola["distribution"] == ["Nationwide"]
    assert granola["event_id"] == alerts["F-0102-2026"]["event_id"] == "90001"   # one event, two recall numbers
    extra = granola["extra"]
    assert extra["recall_initiation_date"] == "2026-01-05" and extra["center_classification_date"] == "2026-01-20"
    assert extra["firm_address"] == "1 Mill Rd, Springfield, IL, 62701, United States"
    assert extra["distribution_pattern"] == "Nationwide" and extra["code_info"] == "Lot 1234"
    assert alerts["F-0230-2026"]["distribution"] == ["MA", "ME", "NH", "NY"]
    apples = alerts["F-0231-2026"]
    assert apples["distribution"] == ["International", "ID", "OR", "WA"]
    assert (apples["status"], apples["extra"]["termination_date"]) == ("Terminated", "2026-06-01")
    drug = alerts["D-0450-2026"]
    assert drug["brand"] == "METFORMIN HYDROCHLORIDE" and drug["category"] == ["Drugs"]
    assert drug["extra"]["openfda"]["product_ndc"] == ["12345-678"]
    pump = alerts["Z-1201-2026"]
    assert pump["distribution"] == ["Nationwide", "International"] and pump["extra"]["product_code"] == "FRN"
    assert pump["authority"] == "FDA"


def test_a_page_is_asked_with_the_documented_search_syntax(db_path):
    requested = []
    run(db_path, api.handler(), requested, since="2026-03-01")
    assert [u.path for u in requested] == ["/food/enforcement.json", "/drug/enforcement.json", "/device/enforcement.json"]
    assert "search=report_date:[20260301+TO+20991231]" in str(requested[0])
    assert parse_qs(urlsplit(str(requested[0])).query)["search"] == ["report_date:[20260301 TO 20991231]"]
    assert search_query(dt.date(2026, 1, 1), dt.date(2026, 1, 31), 25000, 1000) == \
        "search=report_date:[20260101+TO+20260131]&limit=1000&skip=25000&sort=report_date:asc"


# ---- the window walk --------------------------------------------------------------------
def test_a_window_over_the_skip_cap_is_split_and_no_record_is_skipped(db_path):
    days = [f"2026{month:02d}{day:02d}" for month in (1, 2, 3, 4) for day in (7, 14, 21, 28)]
    records = [food(n, days[n % len(days)]) for n in range(40)]   # 40 records, at most 3 a day
    requested = []
    crawler, result = run(db_path, api.handler({"food": records}, skip_cap=4, max_limit=2), requested, cls=SmallPages)
    assert result.status == "succeeded" and result.counts.dead_lettered == 0
    assert sorted(stored(crawler)) == sorted(r["recall_number"] for r in records)
    skips = [int(parse_qs(urlsplit(str(u)).query)["skip"][0]) for u in requested]
    assert max(skips) <= 4                                         # never past the cap
    windows = {parse_qs(urlsplit(str(u)).query)["search"][0] for u in requested if "/food/" in u.path}
    assert len(windows) > 5                                        # it was split


def test_without_the_split_the_cap_would_lose_records(db_path):
    """The walk's reason: paging one window to the cap reaches 6 of 40 records."""
    records = [food(n, "20260107" if n < 3 else f"202602{n % 28 + 1:02d}") for n in range(40)]

    class NoSplit(SmallPages):
        skip_cap = 10_000   # believes it may page anywhere; the API refuses past 4
    crawler, result = run(db_path, api.handler({"food": records}, skip_cap=4, max_limit=2), cls=NoSplit)
    assert len(stored(crawler)) == 6 and result.counts.dead_lettered == 1   # the refused page, kept


def test_one_report_date_beyond_the_cap_is_a_loud_dead_letter(db_path):
    records = [food(n, "20260107") for n in range(8)] + [food(100, "20260301")]
    crawler, result = run(db_path, api.handler({"food": records}, skip_cap=4, max_limit=2), cls=SmallPages)
    assert list(stored(crawler)) == ["F-0100-2026"]
    [letter] = crawler.store.dead_letters.list_dead_letters("fda")
    assert "cannot be split" in letter["error"] and "20260107" in letter["error"]


def test_no_match_is_an_empty_window_not_a_failure(db_path):
    crawler, result = run(db_path, api.handler({"food": [food(1, "20260107")]}))
    assert result.status == "succeeded" and result.counts.dead_lettered == 0
    assert list(stored(crawler)) == ["F-0001-2026"]


def test_an_error_shaped_200_fails_that_kind_only(db_path):
    crawler, result = run(db_path, api.handler(error_200={"device"}))
    assert "Z-1201-2026" not in stored(crawler) and len(stored(crawler)) == 6
    [letter] = crawler.store.dead_letters.list_dead_letters("fda")
    assert "200" in letter["error"] and "device" in letter["error"]


def test_a_404_without_an_error_object_is_a_failure(db_path):
    from basecrawler.testing import Reply
    crawler, result = run(db_path, lambda request: Reply(404, "<html>gone</html>", {"Content-Type": "text/html"}))
    assert result.counts.dead_lettered == 3 and stored(crawler) == {}


def test_a_record_without_a_recall_number_is_its_own_dead_letter(db_path):
    records = [food(1, "20260107"), {**food(2, "20260107"), "recall_number": ""}]
    crawler, result = run(db_path, api.handler({"food": records}))
    assert list(stored(crawler)) == ["F-0001-2026"] and result.counts.unparseable == 1


@pytest.mark.parametrize("text, values", [
    ("Nationwide", ["Nationwide"]),
    ("OH, CA", ["CA", "OH"]),
    ("DISTRIBUTED IN CA AND OR", ["CA"]),            # capitals: IN and OR are words there
    ("Distributed in Indiana and Oregon", ["IN", "OR"]),
    ("Worldwide", ["International"]),
    ("", []),
])
def test_distribution_facet(text, values):
    assert distribution(text) == values


def test_dates():
    assert (fda_date("20260128"), fda_date("06/13/2012"), fda_date("20261340"), fda_date("")) == \
        ("2026-01-28", "2012-06-13", None, None)


# ---- the real sample (one weekly report of 2012, the older shape) -------------------------
_NUMBER_RE = re.compile(r"Recall\s*#?\s*([A-Z]-\d{1,5}-\d{2,4})\b")


def as_todays_records(line: dict) -> list[dict]:
    """One line of the 2012 report as today's records: the older shape names its recall
    numbers inside `product-description` ("1) … Recall # F-1336-2012; 2) …"); today's API
    gives each number its own record with its own product text. A line naming none stays one
    record without a recall number (a dead letter)."""
    text = line["product-description"]
    found = list(_NUMBER_RE.finditer(text))
    if len(found) <= 1:
        return [{**line, "recall-number": found[0].group(1) if found else ""}]
    pieces = []
    for index, match in enumerate(found):
        start = found[index - 1].end() if index else 0
        pieces.append({**line, "product-description": text[start:match.start()].strip(" ;."),
                       "recall-number": match.group(1)})
    return pieces


@pytest.mark.skipif(not REAL.exists(), reason="../shared/real-samples is absent")
def test_the_real_sample_every_recall_number_stored_once(db_path):
    lines = [json.loads(line) for line in REAL.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) == 72
    records = [r for line in lines for r in as_todays_records(line)]
    kinds = {"Food": "food", "Drugs": "drug", "Devices": "device", "Biologics": "drug"}
    by_kind: dict[str, list] = {}
    for record in records:
        # the loopback API filters on the snake_case date, the source reads the record as sent
        by_kind.setdefault(kinds[record["product-type"]], []).append({**record, "report_date": "20120613"})
    crawler, result = run(db_path, api.handler(by_kind))
    alerts = stored(crawler)
    assert len(alerts) == 134 and result.counts.unparseable == 2      # 2 lines name no recall number
    assert all(a["alert_date"] == "2012-06-13" and a["product_original"] and a["risk_class"] for a in alerts.values())
    assert alerts["F-1336-2012"]["product_original"].startswith("1) Turkey & Ham Footlong")
    assert alerts["F-1337-2012"]["product_original"].startswith("2) Italian Footlong")
    assert alerts["F-1336-2012"]["company"][0].startswith("M.E. Thompson Inc., Jacksonville, FL")
    assert alerts["F-1336-2012"]["distribution"] == ["Nationwide"]
    assert sum(1 for a in alerts.values() if a["category"] == ["Biologics"]) == 62
    assert {a["risk_class"] for a in alerts.values()} == {"Class I", "Class II", "Class III"}
