"""sources/cpsc.py: the CPSC Recall REST API in date windows → product alerts (authored recalls
and the loopback API in fixtures/cpsc/, expected values in fixtures/cpsc/README.md)."""
import datetime as dt
import itertools
import json
from urllib.parse import parse_qs, urlsplit

import pytest

from basecrawler.testing import Request, fast_settings
from sources.cpsc import CpscCrawler, grid, window_cap

from support import FakeClock, fixture_api, handler_transport, real_sample

REAL = real_sample("cpsc_recalls_2013_old_api.json")
NOW = dt.datetime(2026, 12, 3, 12, tzinfo=dt.timezone.utc).timestamp()


api = fixture_api("cpsc")


transport = handler_transport


def run(db_path, handle, requested=None, **kw):
    clock = FakeClock(NOW)
    crawler = CpscCrawler(db_path, mode="full", settings=fast_settings(db_path), clock=clock, sleep=clock.sleep,
                          transport=transport(handle, requested), **kw)
    return crawler, crawler.run()


def stored(crawler) -> dict[str, dict]:
    rows = crawler.store.query("SELECT * FROM product_alerts WHERE source = 'cpsc'")
    for row in rows:
        for column in ("category", "hazard_type", "made_in", "company", "distribution", "extra"):
            row[column] = json.loads(row[column]) if row[column] else ([] if column != "extra" else {})
    return {row["alert_id"]: row for row in rows}


def letters(crawler) -> list[dict]:
    return crawler.store.dead_letters.list_dead_letters("cpsc")


# ---- the authored fixtures --------------------------------------------------------------
def test_the_fixture_recalls_are_stored_once_each_and_the_error_window_is_a_dead_letter(db_path):
    crawler, result = run(db_path, api.handler())
    assert result.status == "succeeded"
    c = result.counts
    # 6 recalls + 9202 answered again in the 2026 window (merged); 1990 answered RecallID 0
    assert (c.fetched, c.new, c.merged, c.dead_lettered) == (7, 6, 1, 1)
    alerts = stored(crawler)
    assert sorted(alerts) == ["9101", "9102", "9201", "9202", "9301", "9302"]
    [letter] = letters(crawler)
    assert "RecallID 0" in letter["error"] and "1990-01-01..1990-12-31" in letter["error"]


def test_golden_record_with_every_list_kept(db_path):
    crawler, _ = run(db_path, api.handler())
    alert = stored(crawler)["9102"]
    assert (alert["country"], alert["recall_number"], alert["alert_date"]) == ("US", "24102", "2024-07-02")
    assert alert["title_original"] == "Little Stars Baby Rattles Recalled Due to Choking Hazard"
    assert alert["product_original"] == "Star rattle (pink); Star rattle (blue); Star rattle gift set"
    assert alert["category"] == ["Toys", "Baby Products"]
    assert alert["hazard_type"] == ["Choking"]             # published HazardType
    assert alert["made_in"] == ["Vietnam", "China"]
    assert alert["company"] == ["Little Stars Ltd.", "Little Stars USA Inc.", "Kids Wholesale LLC"]
    assert alert["what_to_do_original"] == "Stop using the rattles and return them for a refund."
    assert alert["authority"] == "CPSC"
    extra = alert["extra"]
    assert extra["upcs"] == ["840000111116", "840000111123"]
    assert extra["images"] == [{"url": "https://www.cpsc.gov/s3fs-public/rattle-pink.jpg"},
                               {"url": "https://www.cpsc.gov/s3fs-public/rattle-blue.jpg"}]
    assert extra["retailers"] == ["Toy Barn"] and extra["importers"] == ["Little Stars USA Inc."]
    assert extra["distributors"] == ["Kids Wholesale LLC"] and extra["remedy_options"] == ["Refund", "Return"]
    assert extra["in_conjunction"][0]["Name"] == "Health Canada"
    assert extra["products"][0] == {"Name": "Star rattle (pink)", "Type": "Toys", "NumberOfUnits": "About 4,500"}
    assert extra["last_publish_date"] == "2024-07-09" and "hazard_type_from_text" not in extra


def test_html_in_text_is_plain_and_hazard_types_come_from_the_text_when_not_published(db_path):
    crawler, _ = run(db_path, api.handler())
    alerts = stored(crawler)
    heater = alerts["9101"]
    assert heater["description_original"] == ("This recall involves Acme model SH-100 space heaters. "
                                              "The heaters are white & gray.")
    assert heater["hazard_type"] == ["Fire", "Burn"] and heater["extra"]["hazard_type_from_text"] is True
    assert heater["extra"]["retailers"][0].startswith("Sold at hardware stores nationwide")
    assert heater["extra"]["injuries"] == ["The firm has received 3 reports of overheating, including one minor burn."]
    assert alerts["9201"]["hazard_type"] == ["Entrapment", "Fall"] and alerts["9201"]["category"] == []
    assert alerts["9202"]["description_original"] == "String lights with 100 LED bulbs – green wire."
    assert alerts["9301"]["description_original"] == "Ridge model R7 electric bicycles. Frame color: black."
    assert alerts["9302"]["extra"]["NewField"] == "a field the API added"
    assert alerts["9302"]["company"] == ["Brightly Apparel Imports"]


def test_each_window_is_asked_with_its_dates_as_query_parameters(db_path):
    requested = []
    run(db_path, api.handler(), requested)
    assert len(requested) == len(grid()) == 54
    first, last = (parse_qs(urlsplit(str(u)).query) for u in (requested[0], requested[-1]))
    assert first == {"format": ["json"], "RecallDateEnd": ["1973-12-31"]}
    assert last == {"format": ["json"], "RecallDateStart": ["2026-01-01"]}
    assert all(u.path == "/RestWebServices/Recall" for u in requested)


# ---- the failure shapes -----------------------------------------------------------------
def test_a_misspelled_filter_answering_everything_stores_nothing(db_path):
    """The real API ignores a parameter it does not know: every window gets every recall."""
    recalls, _ = api.load()
    every = lambda request: api.handler(recalls, {})(Request("GET", "/RestWebServices/Recall?format=json", {}, 0))  # noqa: E731
    crawler, result = run(db_path, every)
    assert stored(crawler) == {}
    assert result.counts.dead_lettered == len(grid())
    assert all("outside the window" in letter["error"] for letter in letters(crawler))


def test_an_answer_larger_than_the_window_could_hold_is_a_failure_not_data(db_path):
    day = dt.date(2026, 5, 4)
    many = [{"RecallID": 50000 + n, "RecallNumber": str(n), "RecallDate": f"{day}T00:00:00"} for n in range(250)]
    assert window_cap(day, day + dt.timedelta(days=1), day) == 200
    crawler, result = run(db_path, api.handler(many, {}), since=day, until=day + dt.timedelta(days=1))
    assert stored(crawler) == {} and result.counts.fetched == 0
    [letter] = letters(crawler)
    assert "too large" in letter["error"] and "201+" in letter["error"]


def test_the_cap_can_be_raised_for_a_window_known_to_be_large(db_path, monkeypatch):
    day = dt.date(2026, 5, 4)
    many = [{"RecallID": 50000 + n, "RecallNumber": str(n), "RecallDate": f"{day}T00:00:00"} for n in range(250)]
    monkeypatch.setenv("BASECRAWLER_CPSC_MAX_WINDOW_RECORDS", "1000")
    crawler, result = run(db_path, api.handler(many, {}), since=day, until=day)
    assert len(stored(crawler)) == 250 and result.counts.dead_lettered == 0


def test_an_error_shaped_200_in_one_window_keeps_the_others(db_path):
    from basecrawler.testing import Reply

    def handle(request):
        query = parse_qs(urlsplit(request.path).query)
        if query.get("RecallDateStart") == ["2026-01-01"]:
            return Reply(200, b"<html><body>Service Unavailable</body></html>", {"Content-Type": "text/html"})
        return Reply(200, json.dumps([{"RecallID": 9500, "RecallNumber": "26500", "RecallDate": "2025-12-30"}]),
                     {"Content-Type": "application/json"})
    crawler, result = run(db_path, handle, since=dt.date(2025, 12, 1), until=dt.date(2026, 5, 4))
    assert result.status == "succeeded"
    assert list(stored(crawler)) == ["9500"]
    [letter] = letters(crawler)
    assert "not a JSON array" in letter["error"] and "2026-01-01..2026-05-04" in letter["error"]


def test_a_failing_body_of_each_shape_is_a_dead_letter_of_its_window(db_path):
    from basecrawler.testing import Reply
    shapes = {
        "2026-01-01": b'{"Message": "An error has occurred."}',
        "2026-02-01": b'[{"RecallID": 9400, "RecallDate": "2026-02-04"}, {"RecallID": 0, "Title": "Error"}]',
        "2026-03-01": b'[{"RecallID": 9401, "RecallDate": "2026-03-04"}, {"RecallID": 94',
        "2026-04-01": b"[17]",
    }
    words = ["not a JSON array", "RecallID 0", "breaks after", "not a JSON object"]

    def handle(request):
        start = parse_qs(urlsplit(request.path).query)["RecallDateStart"][0]
        return Reply(200, shapes[start], {"Content-Type": "application/json"})
    for n, start in enumerate(shapes):
        day = dt.date.fromisoformat(start)
        crawler, result = run(f"{db_path}.{n}", handle, since=day, until=day + dt.timedelta(days=20))
        assert stored(crawler) == {}, start
        [letter] = letters(crawler)
        assert words[n] in letter["error"], letter["error"]


def test_a_record_without_a_recall_id_is_its_own_dead_letter(db_path):
    recalls = [{"RecallID": 9600, "RecallDate": "2026-03-01"}, {"RecallNumber": "x", "RecallDate": "2026-03-02"}]
    crawler, result = run(db_path, api.handler(recalls, {}), since=dt.date(2026, 3, 1), until=dt.date(2026, 3, 31))
    assert list(stored(crawler)) == ["9600"] and result.counts.unparseable == 1


# ---- the window grid --------------------------------------------------------------------
def test_the_grid_covers_every_day_once_and_does_not_move_with_the_clock():
    windows = grid()
    assert windows[0] == (None, dt.date(1973, 12, 31)) and windows[-1] == (dt.date(2026, 1, 1), None)
    for (_, end), (start, _) in zip(windows, windows[1:]):
        assert start == end + dt.timedelta(days=1)
    assert grid(dt.date(2025, 11, 3), dt.date(2026, 2, 1)) == [
        (dt.date(2025, 11, 3), dt.date(2025, 12, 31)), (dt.date(2026, 1, 1), dt.date(2026, 2, 1))]
    assert grid(dt.date(2026, 11, 20)) == [(dt.date(2026, 11, 20), None)]


# ---- the real sample (an older envelope of the same records) ----------------------------
def as_todays_shape(old: dict) -> dict:
    """One record of the 2013 API in today's field names. The old API has no RecallID: the
    recall number (unique in the sample, digits only) stands in for it; `descriptions` are
    product descriptions; `hazards` are hazard types (the old API published types only)."""
    return {
        "RecallID": int(old["recall_number"]), "RecallNumber": old["recall_number"],
        "RecallDate": old["recall_date"] + "T00:00:00", "URL": old["recall_url"],
        "Products": [{"Name": d, "Type": t} for d, t in
                     itertools.zip_longest(old["descriptions"] or [], old["product_types"] or [])],
        "Manufacturers": [{"Name": m} for m in old["manufacturers"] or []],
        "ManufacturerCountries": [{"Country": c} for c in old["countries"] or []],
        "ProductUPCs": [{"UPC": u} for u in old["upcs"] or []],
        "Hazards": [{"Name": "", "HazardType": h} for h in old["hazards"] or []],
    }


@pytest.mark.skipif(not REAL.exists(), reason="../shared/real-samples is absent")
def test_the_real_sample_every_recall_stored_once_with_what_is_comparable(db_path):
    old = json.loads(REAL.read_text(encoding="utf-8"))["success"]["results"]
    recalls = [as_todays_shape(r) for r in old]
    crawler, result = run(db_path, api.handler(recalls, {}))
    assert (result.status, result.counts.new, result.counts.dead_lettered) == ("succeeded", 50, 0)
    alerts = {row["recall_number"]: row for row in stored(crawler).values()}
    assert len(alerts) == 50
    for record in old:
        alert = alerts[record["recall_number"]]
        assert alert["alert_date"] == record["recall_date"]
        assert alert["source_url"] == record["recall_url"]
        assert alert["category"] == list(dict.fromkeys(record["product_types"] or []))
        assert alert["hazard_type"] == list(dict.fromkeys(record["hazards"] or []))
        assert alert["made_in"] == list(dict.fromkeys(record["countries"] or []))
        assert alert["company"] == list(dict.fromkeys(record["manufacturers"] or []))
        assert alert["extra"].get("upcs", []) == (record["upcs"] or [])
    assert alerts["14014"]["made_in"] == ["China"] and alerts["14014"]["hazard_type"] == ["Fire & Fire-Related Burn"]
    assert sum(1 for a in alerts.values() if a["extra"].get("upcs")) == 2
