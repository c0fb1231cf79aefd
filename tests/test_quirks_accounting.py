"""Issue #13 points 3, 5 and 6, driven through `python -m basecrawler run` against loopback
servers (endpoint override) or authored replay folders. Every expected value below is read
off the payload written in the test, not taken from a run of the code.

3. A date before 1900 or after tomorrow is stored as date-unknown with the raw date in extra;
   the incremental watermark only looks at plausible dates.
5. The run line adds up (equations in basecrawler/pipeline/crawler.py's docstring).
6. A count that does not fit (10^23, 1e400, -5) is None with the raw value in extra.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import sqlite3
from urllib.parse import unquote

from basecrawler import Skip
from basecrawler.recordtypes import record_types
from basecrawler.fetch.replay import save_exchange
from basecrawler.testing import LoopbackServer, Reply
from sources.ca import COLUMNS

from quirks_support import REPLAY_DIR, cli, recall, rows
from basecrawler.pipeline.registry import discover
from support import ItemsCrawler, assert_adds_up

EQUATION_COLUMNS = ("fetched", "parsed", "out_of_range", "new", "updated", "unchanged", "merged", "skipped",
                    "unparseable", "store_failed", "saved", "dead_lettered")


# ---- US: a loopback NHTSA --------------------------------------------------------------------
def us_row(number: str, received: str, units: str | None = "1,200") -> dict:
    return {"nhtsa_id": number, "report_received_date": received, "manufacturer": "Acme Motors",
            "component": "BRAKES", "subject": f"Brake hose {number}", "potentially_affected": units,
            "recall_link": {"url": f"https://www.nhtsa.gov/recalls?nhtsaId={number}"}}


def us_server(list_rows: list[dict]) -> LoopbackServer:
    def handler(request):
        if request.path.startswith("/resource/6axg-epim.json"):
            return Reply(200, json.dumps(list_rows), {"Content-Type": "application/json"})
        return Reply(404, "{}", {"Content-Type": "application/json"})  # detail: "not there yet"
    return LoopbackServer(handler)


def us_env(server) -> dict:
    return {"BASECRAWLER_US_BULK_URL": server.url, "BASECRAWLER_US_DETAIL_URL": server.url}


# ---- point 3: implausible dates --------------------------------------------------------------
def test_us_implausible_dates_are_kept_as_date_unknown_and_never_become_the_watermark(tmp_path):
    db = tmp_path / "us.db"
    payload = [us_row("24V100000", "9999-12-31T00:00:00.000"),
               us_row("24V200000", "1899-12-31T00:00:00.000"),
               us_row("24V300000", "2024-10-01T00:00:00.000")]
    with us_server(payload) as server:
        done = cli(db, "run", "--source", "us", "--mode", "full", env=us_env(server))
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert done.stderr.count("is implausible") == 2 and "WARNING" in done.stderr

        future, ancient, good = (recall(db, "US", n) for n in ("24V100000", "24V200000", "24V300000"))
        assert (future["date_unknown"], future["recall_date"]) == (1, "1970-01-01")
        assert future["extra"]["implausible_recall_date"] == "9999-12-31"
        assert future["summary_original"] == "Brake hose 24V100000"      # the record itself is whole
        assert (ancient["date_unknown"], ancient["recall_date"]) == (1, "1970-01-01")
        assert ancient["extra"]["implausible_recall_date"] == "1899-12-31"
        assert (good["date_unknown"], good["recall_date"]) == (0, "2024-10-01")

        # A database written before dates were checked may already hold a 9999 date: it must
        # not become the watermark either.
        conn = sqlite3.connect(str(db))
        conn.execute("INSERT INTO recalls (source, country, recall_number, recall_date, date_unknown) "
                     "VALUES ('us', 'US', '24V999999', '9999-12-31', 0)")
        conn.commit()
        conn.close()

        server.requests.clear()
        done = cli(db, "run", "--source", "us", env=us_env(server))
        assert done.returncode == 0, done.stderr
        # newest plausible date 2024-10-01 minus the 14-day overlap
        assert rows(db, "SELECT since FROM crawl_runs ORDER BY id DESC LIMIT 1")[0]["since"] == "2024-09-17"
        list_requests = [unquote(r.path) for r in server.requests if r.path.startswith("/resource/")]
        assert list_requests and "report_received_date >= '2024-09-17T00:00:00'" in list_requests[0]


def test_eu_report_dated_9999_keeps_its_alerts_as_date_unknown(tmp_path):
    replay = tmp_path / "replay"
    index = ('<?xml version="1.0" encoding="UTF-8"?><Safety-Gate><weeklyReport><reference>Report-9999-52</reference>'
             '<publicationDate>31/12/9999</publicationDate><year>9999</year><week>52</week>'
             '<URL>https://ec.europa.eu/safety-gate-alerts/api/download/weeklyReport/detail/xml/10000201?language=en'
             '</URL></weeklyReport></Safety-Gate>')
    save_exchange(replay, "https://ec.europa.eu/safety-gate-alerts/api/download/weeklyReport/list/xml/en", index,
                  headers={"content-type": "application/xml;charset=UTF-8"})
    report = (REPLAY_DIR / "ec.europa.eu" /
              "GET_safety-gate-alerts_api_download_weeklyReport_detail_xml_10000201_language_en_ac8598856b8ec1ed.body"
              ).read_text(encoding="utf-8")
    assert report.count("<report_date>24/07/2026</report_date>") == 1
    save_exchange(replay, "https://ec.europa.eu/safety-gate-alerts/api/download/weeklyReport/detail/xml/10000201?language=en",
                  report.replace("<report_date>24/07/2026</report_date>", "<report_date>31/12/9999</report_date>"),
                  headers={"content-type": "application/xml;charset=UTF-8"})
    db = tmp_path / "eu.db"
    done = cli(db, "run", "--source", "eu", "--mode", "full", "--replay", str(replay))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    # The report's vehicle alerts (a motor vehicle and a tyre; the toy and the baby carrier are not).
    for number in ("SR/01901/26", "SR/01907/26"):
        row = recall(db, "EU", number)
        assert (row["date_unknown"], row["recall_date"]) == (1, "1970-01-01")
        assert row["extra"]["implausible_recall_date"] == "9999-12-31"
    assert rows(db, "SELECT COUNT(*) AS n FROM recalls")[0]["n"] == 2


class DatedDemo(ItemsCrawler):
    source = "datedemo"

    def parse(self, raw):
        if raw.get("skip"):
            raise Skip(raw["skip"])
        if raw.get("nothing"):
            return None
        return {"recall_number": raw["id"], "recall_date": raw.get("date"), "summary_original": "s"}


def test_tomorrow_is_plausible_the_day_after_is_not_by_the_injected_clock(store, settings):
    noon = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.timezone.utc).timestamp()
    items = [{"id": "today", "date": "2026-03-10"}, {"id": "tomorrow", "date": "2026-03-11"},
             {"id": "after", "date": "2026-03-12"}, {"id": "y1900", "date": "1900-01-01"}]
    DatedDemo(store, items=items, settings=settings, mode="full", clock=lambda: noon).run()
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "tomorrow"})["recall_date"] == "2026-03-11"
    assert store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "y1900"})["recall_date"] == "1900-01-01"
    after = store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "after"})
    assert after["date_unknown"] == 1 and after["extra"]["implausible_recall_date"] == "2026-03-12"
    # The watermark is the newest plausible date.
    crawler = DatedDemo(store, items=[], settings=settings, clock=lambda: noon)
    crawler.run()
    assert crawler.since == dt.date(2026, 3, 11) - dt.timedelta(days=14)


# ---- point 5: the run line adds up -------------------------------------------------------------
def test_every_source_replay_run_adds_up(tmp_path):
    db = tmp_path / "all.db"
    done = cli(db, "run", "--all", "--mode", "full", "--replay", str(REPLAY_DIR), timeout=600)
    assert done.returncode == 0, done.stderr
    runs = {r["source"]: r for r in rows(db, "SELECT * FROM crawl_runs")}
    assert set(runs) == set(discover())     # every source has a replay set (tests/test_every_source.py)
    for run in runs.values():
        assert_adds_up(run)
    # Hand-counted from fixtures/replay: eu's 4 reports hold 4 + 3 + 2 + 4 = 13 notifications,
    # each one product alert; 8 of them are vehicle alerts (motor vehicles, tyres, automotive
    # accessories, car floor mats), each also a vehicle recall; SR/02101/26 is repeated by a later
    # report (an addendum). → 13 items, 13 + 8 = 21 records, 12 + 7 = 19 new, 1 + 1 merged.
    eu = runs["eu"]
    assert (eu["fetched"], eu["parsed"], eu["new"], eu["merged"]) == (13, 21, 19, 2)
    assert "merged 2" in eu["summary"]
    assert rows(db, "SELECT COUNT(*) AS n FROM recalls WHERE source='eu'")[0]["n"] == 7
    assert rows(db, "SELECT COUNT(*) AS n FROM product_alerts WHERE source='eu'")[0]["n"] == 12
    # us: one list page of 12 rows; au: 23 detail pages; jp: 4 list PDFs holding several recalls each.
    assert (runs["us"]["fetched"], runs["us"]["new"]) == (12, 12)
    assert (runs["au"]["fetched"], runs["au"]["new"]) == (23, 23)
    assert runs["jp"]["fetched"] == 4 and runs["jp"]["parsed"] > 4
    tables = [record_type.table for record_type in record_types().values()]
    for source, run in runs.items():
        stored = sum(rows(db, f"SELECT COUNT(*) AS n FROM {table} WHERE source = ?", (source,))[0]["n"] for table in tables)
        assert stored == run["new"], source


def test_skips_are_counted_with_reasons_and_a_silent_none_is_a_skip_too(store, settings):
    items = [{"id": "A", "date": "2024-01-01"}, {"skip": "not a vehicle"}, {"skip": "not a vehicle"},
             {"nothing": True}, {"id": "A", "date": "2024-01-02"}, {"id": "B", "date": "2024-01-03"}]
    result = DatedDemo(store, items=items, settings=settings.with_(batch_size=1), mode="full").run()
    c = result.counts
    assert (c.fetched, c.parsed, c.skipped, c.new, c.merged) == (6, 3, 3, 2, 1)
    assert c.skip_reasons == {"not a vehicle": 2, "no record": 1}
    run = store.query("SELECT * FROM crawl_runs")[-1]
    assert_adds_up(run)
    assert json.loads(run["skip_reasons"]) == {"not a vehicle": 2, "no record": 1}
    assert "skipped 3 (no record 1, not a vehicle 2)" in run["summary"] and "merged 1" in run["summary"]


def test_a_key_repeated_inside_one_batch_is_merged_not_saved_twice(store, settings):
    items = [{"id": "A", "date": "2024-01-01"}, {"id": "A", "date": "2024-01-01"}, {"id": "B", "date": "2024-01-03"}]
    result = DatedDemo(store, items=items, settings=settings, mode="full").run()   # one batch of 3
    assert (result.counts.parsed, result.counts.saved, result.counts.merged) == (3, 2, 1)


# ---- CA: a loopback Transport Canada with points 3, 5 and 6 in one file ---------------------------
def ca_csv(rows_: list[dict]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows_:
        writer.writerow([row.get(column, "") for column in COLUMNS])
    return out.getvalue().encode("utf-8")


def ca_row(number, model, units, date, **kw) -> dict:
    return {"RECALL_NUMBER_NUM": number, "YEAR": "2022", "MAKE_NAME_NM": "FORD", "MODEL_NAME_NM": model,
            "UNIT_AFFECTED_NBR": units, "SYSTEM_TYPE_ETXT": "Brakes", "COMMENT_ETXT": f"Issue: brake {model}.",
            "RECALL_DATE_DTE": date, **kw}


def test_ca_quirks_every_row_ends_in_a_count(tmp_path):
    body = ca_csv([
        ca_row("2024990", "F-150", "-5", "2024-05-14"),
        ca_row("2024991", "RANGER", "1,000.00", "9999-12-31"),
        ca_row("", "ORPHAN", "10", "2024-05-15"),                         # no recall number
        ca_row("2024992", "BRONCO", "100000000000000000000000", "2024-05-16"),
    ])
    with LoopbackServer(lambda request: Reply(200, body, {"Content-Type": "text/csv"})) as server:
        db = tmp_path / "ca.db"
        done = cli(db, "run", "--source", "ca", "--mode", "full", env={"BASECRAWLER_CA_DATA_URL": server.url})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr

    negative, future, huge = (recall(db, "CA", n) for n in ("2024990", "2024991", "2024992"))
    assert negative["affected_units"] is None and negative["extra"]["unparsed_affected_units"] == "-5"
    assert huge["affected_units"] is None
    assert huge["extra"]["unparsed_affected_units"] == "100000000000000000000000"
    assert (future["date_unknown"], future["extra"]["implausible_recall_date"]) == (1, "9999-12-31")
    assert future["affected_units"] == 1000

    letters = rows(db, "SELECT * FROM dead_letters")
    assert len(letters) == 1 and letters[0]["stage"] == "parse" and "ORPHAN" in letters[0]["raw"]
    assert "RECALL_NUMBER_NUM" in letters[0]["error"]
    run = rows(db, "SELECT * FROM crawl_runs")[-1]
    assert (run["fetched"], run["parsed"], run["new"], run["unparseable"], run["dead_lettered"]) == (4, 3, 3, 1, 1)
    assert_adds_up(run)


# ---- point 6: numbers that do not fit ------------------------------------------------------------
def test_us_counts_that_do_not_fit_are_none_with_the_raw_value_kept(tmp_path):
    payload = [us_row("24V100000", "2024-10-01T00:00:00.000", "100000000000000000000000"),
               us_row("24V200000", "2024-10-01T00:00:00.000", "1e400"),
               us_row("24V300000", "2024-10-01T00:00:00.000", "-5"),
               us_row("24V400000", "2024-10-01T00:00:00.000", "1,200")]
    db = tmp_path / "us.db"
    with us_server(payload) as server:
        done = cli(db, "run", "--source", "us", "--mode", "full", env=us_env(server))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("is not a plausible count") == 3
    for number, raw in (("24V100000", "100000000000000000000000"), ("24V200000", "1e400"), ("24V300000", "-5")):
        row = recall(db, "US", number)
        assert row["affected_units"] is None and row["extra"]["unparsed_affected_units"] == raw, number
        assert row["summary_original"] == f"Brake hose {number}"
    assert recall(db, "US", "24V400000")["affected_units"] == 1200
    assert rows(db, "SELECT COUNT(*) AS n FROM dead_letters")[0]["n"] == 0
