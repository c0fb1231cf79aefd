"""The web view's rules over HTTP (no browser): facets read from the record-type declaration,
the home page, the continuous chart query, the Content-Security-Policy on every response, the
formula-safe CSV download, and `browse` on PostgreSQL through a SQLite snapshot.
What a person sees in Chromium is tests/test_web_view.py."""
import csv
import dataclasses
import io
import json
import sqlite3
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from pydantic import BaseModel

from basecrawler import Recall, Store
from basecrawler.reading.browse import (WEB_DIR, BrowseServer, SnapshotServer, build_metadata, chart_sql, default_columns,
                                http_url, snapshot_to_sqlite)
from basecrawler.reading import cellsafe
from basecrawler.reading.facetcounts import values_sql
from basecrawler.recordtypes import Facet, RecordType
from pgcluster import pg_cluster, pg_url  # noqa: F401  (fixtures)
from record_types.vehicle_recall import VEHICLE_RECALL
from web_fixture import fill, free_port

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.headers, response.read()


def get_json(url: str):
    return json.loads(get(url)[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db_path = fill(tmp_path_factory.mktemp("declared") / "recalls.db", extra=True, hostile=True)
    with BrowseServer(db_path, port=free_port()) as running:
        yield running


@pytest.fixture
def plugins(monkeypatch):
    monkeypatch.syspath_prepend(str(WEB_DIR / "plugins"))   # where `browse` loads the plugins from
    import basecrawler_facets
    import basecrawler_cards   # the cells and the card (split out of basecrawler_web)
    import basecrawler_guard
    return basecrawler_cards, basecrawler_facets, basecrawler_guard


def facet(server, name: str, query: str = "") -> list[tuple[str, int]]:
    """A facet's counts. A count the page's budget did not reach (a loaded machine) is left out
    of that answer and finished for the next visit (reading/web/facetcache.py): asked again."""
    deadline = time.monotonic() + 30
    while True:
        data = get_json(f"{server.url}/recalls/recalls.json?_extra=facet_results&_size=0&{query}")
        results = data["facet_results"]
        results = results.get("results", results)
        if name in results or time.monotonic() > deadline:
            return [(v["value"], v["count"]) for v in results[name]["results"]]
        time.sleep(0.2)


def numbers(server, query: str) -> list[str]:
    data = get_json(f"{server.url}/recalls/recalls.json?_shape=objects&_col=recall_number&_size=max&{query}")
    return sorted(row["recall_number"] for row in data["rows"])


# ---- facets from the declaration -----------------------------------------------------------
def test_model_year_facet_counts_each_year_of_a_range(server):
    counts = dict(facet(server, "model_year", "_facet_size=max"))
    # 2019-2021 (JP-4980), 2018-2020 (JP-4777), 2021-2023 (PRA 2024/20011) count under every year.
    assert counts["2020"] == 4 and counts["2019"] == 2 and counts["2018"] == 2 and counts["2023"] == 4
    assert not [value for value in counts if "-" in value]            # no range is a facet value


def test_selecting_a_year_finds_the_ranges_that_cover_it(server):
    assert numbers(server, "_bcf_model_year=2019") == ["JP-4777", "JP-4980"]
    assert numbers(server, "_bcf_model_year=2020&country=US") == ["24V-150"]


def test_unknown_dates_are_their_own_facet_value_never_1970(server):
    months = facet(server, "recall_date", "_facet_size=max")
    assert ("date unknown", 1) in months
    assert not [value for value, _ in months if value.startswith("1970")]
    assert numbers(server, "date_unknown=1") == ["2024-077"]


def test_chart_query_has_every_month_with_zero_where_none(server):
    rows = get_json(f"{server.url}/recalls/vehicle_recall_per_month.json?_shape=objects&_size=max")["rows"]
    months = sorted({row["month"] for row in rows})
    assert months[0] == "2023-10" and months[-1] == "2024-06" and len(months) == 9    # 2023-11, -12 included
    assert {row["records"] for row in rows if row["month"] == "2023-11"} == {0}
    assert sum(row["records"] for row in rows) == 16                                  # every dated recall once


def test_chart_query_spans_ten_years_at_most():
    with sqlite3.connect(":memory:") as conn:
        conn.execute("CREATE TABLE recalls (recall_date TEXT, country TEXT, date_unknown INTEGER)")
        conn.executemany("INSERT INTO recalls VALUES (?, ?, 0)", [("1990-05-01", "US"), ("2024-06-01", "US")])
        months = [row[0] for row in conn.execute(chart_sql(VEHICLE_RECALL))]
    assert months[0] == "2014-07" and months[-1] == "2024-06" and len(months) == 120


# ---- opening on the data ---------------------------------------------------------------------
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_home_opens_on_the_table_of_the_type_with_most_records(server):
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.build_opener(NoRedirect).open(f"{server.url}/", timeout=10)
    assert caught.value.code == 302 and caught.value.headers["location"] == "/recalls/recalls"
    assert caught.value.headers["content-security-policy"].startswith("default-src 'self'")
    assert server.table_url == f"{server.url}/recalls/recalls"


# ---- nothing the view sends executes (#22.4) -------------------------------------------------
@pytest.mark.parametrize("path", ["/recalls/recalls?_col=recall_number", "/recalls/recalls/1", "/recalls/recalls.json",
                                  "/recalls/recalls.csv", "/-/dashboards/records", "/-/dashboards/records/per-month-vehicle_recall",
                                  "/recalls", "/bc-static/basecrawler.js"])
def test_every_response_carries_the_content_security_policy(server, path):
    headers, _ = get(server.url + path)
    policy = headers["content-security-policy"]
    script_src = next(part for part in policy.split(";") if part.strip().startswith("script-src"))
    assert policy.startswith("default-src 'self'")
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src
    assert "'sha256-" in script_src          # Datasette's fixed inline scripts, by hash only
    assert headers["x-content-type-options"] == "nosniff"


def test_csv_download_neutralises_formula_cells(server):
    query = urllib.parse.urlencode([("recall_number", "EVIL-2"), ("_col", "manufacturer_original"),
                                    ("_col", "model_original"), ("_col", "summary_original"), ("_col", "affected_units")])
    _, body = get(f"{server.url}/recalls/recalls.csv?{query}")
    header, row = list(csv.reader(io.StringIO(body.decode("utf-8"))))
    cells = dict(zip(header, row))
    assert cells["manufacturer_original"] == "'-2+3+cmd|' /C calc'!A0"
    assert cells["model_original"] == "'@SUM(1+1)*cmd|' /C calc'!A0"
    assert cells["summary_original"] == "'=1+1 tab first"        # the store strips the TAB; = remains
    _, body = get(f"{server.url}/recalls/recalls.csv?recall_number=EVIL-1&_col=model_original&_col=source_url")
    header, row = list(csv.reader(io.StringIO(body.decode("utf-8"))))
    assert dict(zip(header, row))["model_original"].startswith("'=HYPERLINK(")


def test_neutralise_keeps_numbers_and_plain_text():
    neutralise = cellsafe.neutralise
    assert neutralise("-12.5") == "-12.5" and neutralise("+3") == "+3"
    assert neutralise("Brake hose") == "Brake hose" and neutralise("") == ""
    assert [neutralise(v) for v in ("=1", "+A1", "-A1", "@A1", "\tx", "\rx")] == \
        ["'=1", "'+A1", "'-A1", "'@A1", "'\tx", "'\rx"]
    # Quotes, commas and line breaks inside cells survive the rewrite.
    body = 'a,b\r\n"x, ""y""","=1\nz"\r\n'.encode()
    assert list(csv.reader(io.StringIO(cellsafe.neutralise_csv(body).decode()))) == [["a", "b"], ['x, "y"', "'=1\nz"]]


@pytest.mark.parametrize("value, expected", [
    ("https://example.org/a?b=1", "https://example.org/a?b=1"), ("HTTP://EXAMPLE.ORG", "HTTP://EXAMPLE.ORG"),
    ("javascript:alert(1)", None), (" javascript:alert(1)", None), ("data:text/html,<b>x</b>", None),
    ("vbscript:x", None), ("//evil.example", None), ("/relative", None), ("https://a b", None), (None, None),
])
def test_only_http_urls_become_links(value, expected):
    assert http_url(value) == expected


def test_a_non_http_source_link_renders_as_text(plugins):
    web = plugins[0]
    html = str(web.link_or_text('javascript:alert("x")'))
    assert "<a" not in html and "href" not in html and "javascript:alert(&#34;x&#34;)" in html
    assert 'href="https://example.org/x"' in str(web.link_or_text("https://example.org/x"))


# ---- no per-type code: a type the view has never seen ------------------------------------------
class Gadget(BaseModel):
    country: str
    alert_id: str
    alert_date: str | None = None
    title_original: str | None = None
    title_ko: str | None = None
    hazard_original: str | None = None
    hazard_ko: str | None = None
    category: str | None = None
    page_url: str | None = None


GADGET = RecordType(
    name="gadget_alert", title="Gadget alerts", model=Gadget, table="gadget_alerts", key=("country", "alert_id"),
    date_field="alert_date", translated=("title", "hazard"),
    facets=(Facet("country", "Country"), Facet("category", "Category", multi=True)),
    labels={"title_original": "Title", "hazard_original": "Hazard", "page_url": "Page"},
    display=("title", "hazard"), listing=("alert_date", "country", "alert_id"),
    card=("alert_id", "alert_date", "title", "hazard", "page_url"), url_fields=("page_url",))


def test_metadata_card_and_best_text_follow_any_declaration(plugins, monkeypatch):
    web, facets, _ = plugins
    monkeypatch.setitem(web.TYPES, "gadget_alerts", GADGET)
    monkeypatch.setattr("basecrawler.reading.webmeta.types_by_table", lambda: {"recalls": VEHICLE_RECALL, "gadget_alerts": GADGET})
    table = build_metadata("/nowhere/x.db")["databases"]["x"]["tables"]["gadget_alerts"]
    assert table["facets"] == [{"values": "country"}, {"values": "category"}, {"month": "alert_date"}]
    assert table["sort_desc"] == "alert_date" and table["columns"]["hazard_original"] == "Hazard"
    assert default_columns(GADGET) == ("alert_date", "country", "alert_id", "title_ko", "page_url")
    row = {"country": "CA", "alert_id": "N-1", "alert_date": "2024-01-02", "title_original": None,
           "hazard_original": "Choking", "hazard_ko": "질식", "page_url": "data:text/html,x", "source_lang": "en"}
    card = web.card("gadget_alerts", row)
    # No heading declared: the card is headed by the best text (Korean first), its number beneath.
    assert card["title"] == "질식" and card["title_original"] == "Choking"
    assert "N-1" in card["number"]
    assert [t["label"] for t in card["texts"]] == ["Hazard"]
    assert card["links"] == [{"label": "Page", "url": None, "text": "data:text/html,x"}]
    best = str(web.best_text_html(GADGET, row))
    assert "질식" in best and "Choking" in best and "Hazard" in best and "not yet translated" not in best


def test_multi_valued_and_undated_cells_read_as_words(plugins, monkeypatch):
    web = plugins[0]
    monkeypatch.setitem(web.TYPES, "gadget_alerts", GADGET)
    assert web.render_cell({}, '["Food", "Toys"]', "category", "gadget_alerts", "x", None) == "Food, Toys"
    assert "날짜 미상" in str(web.render_cell({}, None, "alert_date", "gadget_alerts", "x", None))
    assert "날짜 미상" in str(web.render_cell({}, "1970-01-01", "recall_date", "recalls", "x", None))
    assert web.render_cell({}, "2024-01-02", "recall_date", "recalls", "x", None) == "2024년 1월 2일"   # as Korean writes dates
    monkeypatch.setitem(web.TYPES, "gadget_alerts", dataclasses.replace(GADGET, card=(*GADGET.card, "category")))
    card = web.card("gadget_alerts", {"country": "CA", "alert_id": "N-2", "category": '["Food", "Toys"]'})
    assert {"label": "category", "value": "Food, Toys"} in card["facts"]


def test_multi_valued_facet_counts_each_listed_value():
    with sqlite3.connect(":memory:") as conn:
        conn.row_factory = sqlite3.Row
        conn.execute("CREATE TABLE gadget_alerts (category TEXT)")
        conn.executemany("INSERT INTO gadget_alerts VALUES (?)", [('["Food","Toys"]',), ('["Food"]',), ("Toys",), (None,)])
        rows = conn.execute(values_sql("category", True, "SELECT * FROM gadget_alerts")).fetchall()
    assert sorted((row["value"], row["count"]) for row in rows) == [("Food", 2), ("Toys", 2)]


# ---- PostgreSQL: a read-only SQLite snapshot ---------------------------------------------------
def test_browse_on_postgresql_serves_a_refreshed_snapshot(pg_url, tmp_path):  # noqa: F811
    store = Store(pg_url)
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="24V-001", recall_date="2024-01-05", source_lang="en",
                                 summary_original="Brake hose may rupture.")], source="us")
    snapshot = snapshot_to_sqlite(pg_url, tmp_path / "snap.db")
    with sqlite3.connect(snapshot) as conn:
        assert conn.execute("SELECT recall_number FROM recalls").fetchall() == [("24V-001",)]
    server = SnapshotServer(pg_url, tmp_path, port=free_port(), refresh_s=3600)
    try:
        server.refresh(quiet=True)
        database = urllib.parse.urlsplit(pg_url).path.strip("/")
        assert server.snapshot == tmp_path / "browse-snapshot" / f"{database}.db"
        url = f"{server.server.url}/{database}/recalls.json?_shape=objects&_col=recall_number"
        assert [r["recall_number"] for r in get_json(url)["rows"]] == ["24V-001"]
        store.upsert("vehicle_recall", [Recall(country="US", recall_number="24V-002", recall_date="2024-01-06",
                                     source_lang="en")], source="us")
        server.refresh(quiet=True)            # what the periodic refresh does
        assert sorted(r["recall_number"] for r in get_json(url)["rows"]) == ["24V-001", "24V-002"]
        assert not list(tmp_path.glob("**/*.partial*"))
    finally:
        server.stop()
        store.close()


def test_whole_table_facet_counts_are_counted_once_per_run(tmp_path):
    db_path = fill(tmp_path / "recalls.db")
    with BrowseServer(db_path, port=free_port()) as server:
        before = dict(facet(server, "country"))
        with sqlite3.connect(db_path) as conn:     # a change no run made: the cache still holds
            conn.execute("UPDATE recalls SET country = 'KR' WHERE country = 'AU'")
        assert dict(facet(server, "country")) == before
        assert dict(facet(server, "country", "source=au")) == {"KR": 2}   # a page not counted before
        with sqlite3.connect(db_path) as conn:     # a run finished: counted again
            conn.execute("INSERT INTO crawl_runs (source, mode, status, started_at, finished_at) "
                         "VALUES ('au', 'incremental', 'ok', '2024-07-01T00:00:00', '2024-07-01T00:01:00')")
        after = dict(facet(server, "country"))
        assert after["KR"] == 2 and "AU" not in after


def test_browse_refresh_must_be_positive(monkeypatch, capsys):
    from basecrawler.cli import main

    monkeypatch.setattr("basecrawler.commands.browse.datasette_available", lambda: True)
    assert main(["--db", "postgresql://nobody@127.0.0.1:1/store", "browse", "--refresh", "0",
                 "--port", str(free_port())]) == 2
    assert "--refresh must be a positive number of minutes" in capsys.readouterr().err


def test_a_card_links_the_same_recall_from_another_source(tmp_path):
    # Identity includes the source (#24.3): two sources keep two records of one recall.
    db_path = tmp_path / "recalls.db"
    store = Store(db_path)
    for source in ("ca", "cawide"):
        store.upsert("vehicle_recall", [Recall(country="CA", recall_number="2024-150", recall_date="2024-04-30",
                                     source_lang="en", summary_original=f"Brake fluid may leak ({source}).")],
                             source=source)
    store.close()
    with BrowseServer(db_path, port=free_port()) as server:
        ids = {row["source"]: row["id"] for row in
               get_json(f"{server.url}/recalls/recalls.json?_shape=objects&_col=source")["rows"]}
        page = get(f"{server.url}/recalls/recalls/{ids['ca']}?_lang=en")[1].decode()
    assert "The same recall, published again" in page
    assert f'href="/recalls/recalls/{ids["cawide"]}"' in page and f'href="/recalls/recalls/{ids["ca"]}"' not in page


def test_the_engines_snapshot_is_used_when_the_store_has_one(tmp_path, monkeypatch):
    import basecrawler.store.engines.transfer as transfer

    calls = []
    monkeypatch.setattr(transfer, "snapshot_to_sqlite", lambda url, path: calls.append((url, Path(path))),
                        raising=False)
    assert snapshot_to_sqlite("postgresql://u@h/db", tmp_path / "db.db") == tmp_path / "db.db"
    assert calls == [("postgresql://u@h/db", tmp_path / "db.db")]
