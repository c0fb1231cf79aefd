"""sources/us.py — NHTSA: the Socrata list, the campaign detail API and the enrichment ladder,
against the authored fixtures in fixtures/us/ (never the internet)."""
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs

import httpx
import pytest

from sources.us import UsCrawler

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "us"
PAGES = [json.loads((FIXTURES / f"list_page{n}.json").read_text()) for n in (1, 2, 3)]


def fixture(name):
    return json.loads((FIXTURES / name).read_text())


class FakeNhtsa:
    """MockTransport handler for both hosts. Detail answers per campaign are scripted: a list
    of fixture names or status codes, consumed one per request, the last one repeating.
    Campaigns with no script answer their fixture if there is one, else Count 0."""

    def __init__(self, details=None, pages=PAGES):
        self.details = {k: list(v) for k, v in (details or {}).items()}
        self.pages = pages
        self.list_requests: list[httpx.Request] = []
        self.detail_requests: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "data.transportation.gov":
            self.list_requests.append(request)
            query = parse_qs(request.url.query.decode())
            offset, limit = int(query["$offset"][0]), int(query["$limit"][0])
            rows = [row for page in self.pages for row in page][offset:offset + limit]
            return httpx.Response(200, json=rows)
        number = request.url.params["campaignNumber"]
        self.detail_requests.append(number)
        default = f"detail_{number}.json" if (FIXTURES / f"detail_{number}.json").exists() else "detail_count0.json"
        script = self.details.get(number, [default])
        answer = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(answer, int):
            return httpx.Response(answer, text="<html><body>Error</body></html>")
        return httpx.Response(200, json=fixture(answer))

    def detail_count(self, number):
        return self.detail_requests.count(number)


@pytest.fixture(autouse=True)
def small_pages(monkeypatch):
    monkeypatch.setattr(UsCrawler, "page_size", 5)


def crawl(store, settings, server, **kw):
    return UsCrawler(store, settings=settings, transport=httpx.MockTransport(server), **kw).run()


def queue_row(store, number):
    return store.query("SELECT * FROM enrichment WHERE record_key = ?", [number])[0]


def test_list_row_maps_to_recall_fields(store, settings):
    crawl(store, settings.with_(enrich_limit=0), FakeNhtsa(), mode="full")
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V701000"})
    assert row["recall_date"] == "2024-09-19"
    assert row["manufacturer_original"] == "Ford Motor Company"
    assert row["summary_original"] == "Rear Axle Bolt May Fracture"
    assert row["component_original"] == "POWER TRAIN"
    assert row["defect_cause_original"].startswith("Ford Motor Company is recalling")
    assert row["consequence_original"].startswith("This condition can increase")
    assert row["remedy_original"].startswith("Dealers will inspect")
    assert row["affected_units"] == 248550
    assert row["source_url"] == "https://www.nhtsa.gov/recalls?nhtsaId=24V701000"
    assert row["extra"] == {"mfr_campaign_number": "24S55", "recall_type": "Vehicle", "fire_risk_when_parked": "No",
                            "do_not_drive": "No", "completion_rate": "31.4"}
    assert row["model_original"] is None and row["source_lang"] == "en"


def test_units_with_thousands_separator_are_a_count(store, settings):
    crawl(store, settings.with_(enrich_limit=0), FakeNhtsa(), mode="full")
    assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V655000"})["affected_units"] == 1117


def test_list_is_paged_until_a_short_page(store, settings):
    server = FakeNhtsa()
    result = crawl(store, settings.with_(enrich_limit=0), server, mode="full")
    queries = [parse_qs(r.url.query.decode()) for r in server.list_requests]
    assert [q["$offset"] for q in queries] == [["0"], ["5"], ["10"]]
    assert all(q["$limit"] == ["5"] and q["$order"] == ["report_received_date DESC,nhtsa_id"] for q in queries)
    assert all("$where" not in q for q in queries)
    assert result.counts.fetched == 12 and store.lookup.count("vehicle_recall", "us") == 12


def test_incremental_run_asks_only_from_newest_stored_date_minus_overlap(store, settings):
    crawl(store, settings.with_(enrich_limit=0), FakeNhtsa(), mode="full")
    server = FakeNhtsa()
    crawl(store, settings.with_(enrich_limit=0), server)
    where = parse_qs(server.list_requests[0].url.query.decode())["$where"]
    assert where == ["report_received_date >= '2024-09-13T00:00:00'"]      # 2024-09-27 minus 14 days


def test_app_token_is_sent_and_never_logged(store, settings, monkeypatch, caplog):
    monkeypatch.setenv("BASECRAWLER_US_APP_TOKEN", "s3cr3t-token")
    server = FakeNhtsa()
    crawl(store, settings.with_(enrich_limit=0), server, mode="full")
    assert all(r.headers["X-App-Token"] == "s3cr3t-token" for r in server.list_requests)
    assert "s3cr3t-token" not in caplog.text


def test_detail_with_many_vehicles_fills_model_year_range_and_vehicle_list(store, settings):
    crawl(store, settings, FakeNhtsa(), mode="full")
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V701000"})
    assert row["model_original"] == "AVIATOR, EXPLORER, POLICE INTERCEPTOR UTILITY"
    assert row["model_year"] == "2020-2022"
    vehicles = row["extra"]["vehicles"]
    assert len(vehicles) == 8
    assert {"make": "LINCOLN", "model": "AVIATOR", "model_year": "2021"} in vehicles
    assert row["extra"]["mfr_campaign_number"] == "24S55"          # list extras survive the detail
    assert queue_row(store, "24V701000")["state"] == "done"


def test_model_year_9999_is_ignored(store, settings):
    crawl(store, settings, FakeNhtsa(), mode="full")
    equipment = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V702000"})
    assert equipment["model_original"] == "WINGBAR EVO" and equipment["model_year"] is None
    mixed = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V690000"})
    assert mixed["model_year"] == "2023-2024"
    assert {"make": "FOREST RIVER", "model": "CHEROKEE", "model_year": None} in mixed["extra"]["vehicles"]


def test_detail_report_date_is_read_day_first(store, settings):
    crawl(store, settings, FakeNhtsa(), mode="full")
    # "11/09/2024" in the detail API is 11 September (DD/MM/YYYY), not 9 November.
    assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V690000"})["extra"]["detail_report_received_date"] == "2024-09-11"


def test_detail_with_count_zero_is_not_yet(store, settings):
    server = FakeNhtsa({"24V701000": ["detail_count0.json"]})
    result = crawl(store, settings, server, mode="full")
    row = queue_row(store, "24V701000")
    assert (row["state"], row["level"]) == ("retry", 1)
    assert result.status == "succeeded" and store.dead_letters.open_dead_letters("us") == []


def test_campaign_detail_found_on_third_attempt_is_done_after_exactly_three_requests(store, settings):
    server = FakeNhtsa({"24V703000": [404, 404, "detail_24V703000.json"]})
    for _ in range(4):                      # zero backoffs: every run is a due attempt
        crawl(store, settings, server)
    assert server.detail_count("24V703000") == 3
    assert queue_row(store, "24V703000")["state"] == "done"
    assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V703000"})["model_original"] == "ACCORD, CIVIC, ILX"


def test_campaign_never_served_is_gone_after_five_attempts(store, settings):
    server = FakeNhtsa({"24V704000": [404]})
    for _ in range(4):
        crawl(store, settings, server)
    assert queue_row(store, "24V704000")["state"] == "retry"
    crawl(store, settings, server)
    assert queue_row(store, "24V704000")["state"] == "gone" and server.detail_count("24V704000") == 5


def test_campaign_failing_with_503_never_becomes_gone(store, settings):
    server = FakeNhtsa({"24V705000": [503]})
    for _ in range(7):
        crawl(store, settings, server)
    row = queue_row(store, "24V705000")
    assert row["state"] == "pending" and row["level"] == 0 and row["transient_failures"] == 7


def test_second_list_crawl_keeps_detail_fields(store, settings):
    crawl(store, settings, FakeNhtsa(), mode="full")
    result = crawl(store, settings, FakeNhtsa(), mode="full")       # list rows carry no model at all
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V701000"})
    assert row["model_original"] == "AVIATOR, EXPLORER, POLICE INTERCEPTOR UTILITY"
    assert row["model_year"] == "2020-2022" and len(row["extra"]["vehicles"]) == 8
    assert result.counts.updated == 0


def test_manufacturer_comes_from_detail_only_when_the_list_lacks_it(store, settings):
    pages = json.loads(json.dumps(PAGES))
    del pages[0][4]["manufacturer"]                                 # 24V701000 without a manufacturer
    crawl(store, settings, FakeNhtsa(pages=pages), mode="full")
    assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V701000"})["manufacturer_original"] == "Ford Motor Company"
    assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V703000"})["manufacturer_original"] == "Honda (American Honda Motor Co.)"


def test_list_answer_that_is_not_an_array_fails_the_run(store, settings):
    def handler(request):
        return httpx.Response(200, json={"error": True, "message": "query timeout"})

    result = UsCrawler(store, settings=settings, transport=httpx.MockTransport(handler), mode="full").run()
    assert result.status == "failed" and "not a JSON array" in result.error


def test_replay_run_works_offline(tmp_path):
    db = tmp_path / "replay.db"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "basecrawler", "--db", str(db), "run", "--source", "us",
                          "--mode", "full", "--replay", str(REPO / "fixtures" / "replay")],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    status = subprocess.run([sys.executable, "-m", "basecrawler", "--db", str(db), "status", "--json"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    us = json.loads(status.stdout)["sources"]["us"]
    assert us["records"] == 12 and us["last_run"]["status"] == "succeeded"
    assert us["enrichment"] == {"done": 10, "retry1": 2}
