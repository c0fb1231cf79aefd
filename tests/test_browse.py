"""`browse`: Datasette on loopback serving the store read-only with facets and full-text search."""
import json
import socket
import urllib.error
import urllib.parse
import urllib.request

import pytest

from basecrawler import Recall, Store
from basecrawler.browse import BrowseServer, build_metadata, database_name
from basecrawler.cli import main

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db_path = tmp_path_factory.mktemp("browse") / "recalls.db"
    store = Store(db_path)
    store.upsert_recalls([
        Recall(country="JP", recall_number="JP-4980", recall_date="2024-03-14", source_lang="ja",
               manufacturer_original="トヨタ自動車株式会社", summary_original="ブレーキホースが損傷するおそれ。"),
        Recall(country="US", recall_number="24V-101", recall_date="2024-02-20", source_lang="en",
               manufacturer_original="Ford Motor Company", summary_original="Rear brake hose may rupture."),
    ], source="test")
    store.write(lambda db: db.conn.execute(
        "UPDATE recalls SET summary_ko = '브레이크 호스 손상' WHERE recall_number = 'JP-4980'"))
    store.close()
    with BrowseServer(db_path, port=free_port()) as running:
        yield running


def test_serves_recalls_json_on_loopback(server):
    assert server.url.startswith("http://127.0.0.1:")
    data = get_json(f"{server.url}/recalls/recalls.json?_shape=objects")
    assert sorted(row["recall_number"] for row in data["rows"]) == ["24V-101", "JP-4980"]


def test_full_text_search_is_enabled_for_korean_and_japanese(server):
    for term, expected in (("브레이크", ["JP-4980"]), ("ブレーキ", ["JP-4980"]), ("brake hose", ["24V-101"])):
        query = urllib.parse.urlencode({"_search": term, "_shape": "objects"})
        data = get_json(f"{server.url}/recalls/recalls.json?{query}")
        assert [row["recall_number"] for row in data["rows"]] == expected, term


def test_configured_facets_are_offered(server):
    data = get_json(f"{server.url}/recalls/recalls.json?_extra=facet_results")
    facets = data["facet_results"]
    facets = facets.get("results", facets)        # Datasette 1.0 nests them under "results"
    assert {"country", "manufacturer_original", "model_year", "translation_status"} <= set(facets)


def test_database_is_not_writable_through_the_web_view(server):
    query = urllib.parse.urlencode({"sql": "DELETE FROM recalls"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{server.url}/recalls.json?{query}", timeout=10)
    assert caught.value.code == 400
    data = get_json(f"{server.url}/recalls/recalls.json?_shape=objects")
    assert len(data["rows"]) == 2


def test_metadata_describes_columns_and_search_index(tmp_path):
    table = build_metadata(tmp_path / "basecrawler.db")["databases"]["basecrawler"]["tables"]["recalls"]
    assert table["fts_table"] == "recalls_fts" and table["fts_pk"] == "id"
    assert "Korean" in table["columns"]["summary_ko"]
    assert database_name("/x/y/basecrawler.db") == "basecrawler"


def test_browse_without_datasette_explains_how_to_install(db_path, monkeypatch, capsys):
    monkeypatch.setattr("basecrawler.commands.browse.datasette_available", lambda: False)
    assert main(["--db", db_path, "browse"]) == 2
    assert "pip install 'basecrawler[web]'" in capsys.readouterr().err
