"""Adding a record type is dropping in files: a type module and a source module written into a
temporary folder, made discoverable by a distribution's entry points on sys.path (what
`pip install` of a plug-in package leaves), and every command run on them through the CLI — with
no file of the framework or of this repository touched."""
import csv
import json
import sqlite3
import sys
import textwrap

import pytest

from basecrawler.cli import main
from basecrawler.recordtypes import get_record_type, record_types, register_record_type
from basecrawler.recordtypes.registry import forget_registered_types
from basecrawler.testing import LoopbackServer, Reply
from translate.fakeserver import FakeLibreTranslate

TYPE_MODULE = '''
"""bridge_closure: a road bridge closed or restricted (a type dropped in by a test)."""
import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from basecrawler.recordtypes import Facet, RecordType
from basecrawler.recordtypes.fields import clean_strings, date_or_unknown


class BridgeClosure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        return date_or_unknown(clean_strings(data), "closed_on") if isinstance(data, dict) else data

    region: str = Field(min_length=1)
    closure_id: str = Field(min_length=1)
    closed_on: dt.date | None = None
    reason_original: str | None = None
    reason_ko: str | None = None
    road: str | None = None
    lanes: list[str] = Field(default_factory=list)
    source_lang: str = "en"
    source_url: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


BRIDGE_CLOSURE = RecordType(
    name="bridge_closure", title="Bridge closures", model=BridgeClosure, table="bridge_closures",
    key=("region", "closure_id"), date_field="closed_on", translated=("reason",), searchable=("road",),
    facets=(Facet("region", "Region"), Facet("road", "Road"), Facet("lanes", "Lanes", multi=True),
            Facet("source", "Source")),
    labels={"closure_id": "Closure", "closed_on": "Closed on", "reason_original": "Reason"},
    display=("reason",), listing=("closed_on", "region", "closure_id", "road", "reason_original"),
    card=("closure_id", "closed_on", "region", "road", "lanes", "reason", "source_url"),
)
'''

SOURCE_MODULE = '''
"""bridges: closures from a JSON list (a source dropped in by a test)."""
from basecrawler import BaseCrawler


class BridgesCrawler(BaseCrawler):
    source = "bridges"
    record_type = "bridge_closure"
    endpoints = {"api": "https://bridges.example.org"}

    def fetch(self):
        yield from self.http.get_json(self.url("api", "/closures.json"))

    def parse(self, raw):
        return {"region": raw["region"], "closure_id": raw["id"], "closed_on": raw.get("date"),
                "reason_original": raw.get("reason"), "road": raw.get("road"), "lanes": raw.get("lanes") or [],
                "source_url": raw.get("url")}
'''

ENTRY_POINTS = """
[basecrawler.record_types]
bridge_closure = bridge_type

[basecrawler.sources]
bridges = bridge_source
"""

# Five closures and one item without an id (a dead letter); two without a date.
CLOSURES = [
    {"region": "north", "id": "N-1", "date": "2026-05-02", "reason": "Cracked bearing on pier two",
     "road": "Route 7", "lanes": ["east", "west"], "url": "https://bridges.example.org/N-1"},
    {"region": "north", "id": "N-2", "date": "2026-05-09", "reason": "Deck resurfacing", "road": "Route 7",
     "lanes": ["east"]},
    {"region": "south", "id": "S-1", "date": None, "reason": "Flood damage to the abutment", "road": "Coast Road",
     "lanes": ["north", "south"]},
    {"region": "south", "id": "S-2", "date": "", "reason": "Scour inspection", "road": "Coast Road"},
    {"region": "west", "id": "W-1", "date": "2026-04-20", "reason": "Expansion joint replacement",
     "road": "Hill Pass", "lanes": ["west"]},
    {"region": "west", "reason": "no id in this item"},
]


@pytest.fixture
def dropped_in(tmp_path, monkeypatch):
    """The two modules and a distribution's entry points in a folder on sys.path."""
    site = tmp_path / "site"
    (site / "bridges_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "bridge_type.py").write_text(textwrap.dedent(TYPE_MODULE), encoding="utf-8")
    (site / "bridge_source.py").write_text(textwrap.dedent(SOURCE_MODULE), encoding="utf-8")
    (site / "bridges_plugin-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: bridges-plugin\nVersion: 0.1\n", encoding="utf-8")
    (site / "bridges_plugin-0.1.dist-info" / "entry_points.txt").write_text(ENTRY_POINTS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    forget_registered_types()          # types are discovered once per process: look again
    yield site
    for name in ("bridge_type", "bridge_source"):
        sys.modules.pop(name, None)
    monkeypatch.undo()
    forget_registered_types()


@pytest.fixture
def bridges_api(monkeypatch):
    def handler(request):
        if request.path == "/closures.json":
            return Reply(200, json.dumps(CLOSURES), {"Content-Type": "application/json"})
        return Reply(404, b"")
    with LoopbackServer(handler) as server:
        monkeypatch.setenv("BASECRAWLER_BRIDGES_API_URL", server.url)
        yield server


def cli(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_type_and_a_source_dropped_in_go_through_every_command(dropped_in, bridges_api, db_path, tmp_path,
                                                                    capsys, monkeypatch):
    db = ["--db", db_path]
    assert "bridge_closure" in record_types() and get_record_type("bridge_closure").table == "bridge_closures"

    # run: five records stored, the id-less item a dead letter; a re-run writes nothing
    code, out = cli(capsys, *db, "run", "--source", "bridges", "--mode", "full")
    assert "new 5" in out and "dead-lettered 1" in out
    code, out = cli(capsys, *db, "run", "--source", "bridges", "--mode", "full")
    assert "new 0, updated 0, unchanged 5" in out

    rows = {r["closure_id"]: r for r in _rows(db_path, "bridge_closures")}
    assert set(rows) == {"N-1", "N-2", "S-1", "S-2", "W-1"}
    assert {k for k, r in rows.items() if r["date_unknown"]} == {"S-1", "S-2"}
    assert json.loads(rows["N-1"]["lanes"]) == ["east", "west"]

    # status and types: the type, its source and its counts
    code, out = cli(capsys, *db, "status")
    assert code == 0 and "bridges" in out and "bridge_closure" in out
    code, out = cli(capsys, *db, "types")
    assert code == 0 and "bridge_closure" in out and "lanes" in out and "5" in out

    # search: text, a facet, a multi-valued facet (any of its values)
    code, out = cli(capsys, *db, "search", "--type", "bridge_closure", "--json", "abutment")
    assert [r["closure_id"] for r in json.loads(out)] == ["S-1"]
    code, out = cli(capsys, *db, "search", "--type", "bridge_closure", "--json", "--filter", "road=Route 7")
    assert sorted(r["closure_id"] for r in json.loads(out)) == ["N-1", "N-2"]
    code, out = cli(capsys, *db, "search", "--type", "bridge_closure", "--json", "--filter", "lanes=west")
    assert sorted(r["closure_id"] for r in json.loads(out)) == ["N-1", "W-1"]

    # export: csv, jsonl, xlsx with the declared labels
    exported = tmp_path / "out"
    exported.mkdir()
    assert cli(capsys, *db, "export", "--type", "bridge_closure", "-o", str(exported / "b.csv"))[0] == 0
    with open(exported / "b.csv", encoding="utf-8-sig", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == 5 and json.loads(next(r for r in table if r["closure_id"] == "N-1")["lanes"]) == ["east", "west"]
    assert cli(capsys, *db, "export", "--type", "bridge_closure", "--filter", "region=south",
               "-o", str(exported / "b.jsonl"))[0] == 0
    lines = [json.loads(line) for line in (exported / "b.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(line["closure_id"] for line in lines) == ["S-1", "S-2"]
    assert cli(capsys, *db, "export", "--type", "bridge_closure", "-o", str(exported / "b.xlsx"))[0] == 0
    from openpyxl import load_workbook
    sheet = load_workbook(exported / "b.xlsx", read_only=True).active
    header = [cell.value for cell in next(sheet.iter_rows(max_row=1))]
    assert "Closure" in header and "Closed on" in header          # the declared labels
    assert sum(1 for _ in sheet.iter_rows(min_row=2)) == 5

    # dead letters: the id-less item of each run, listed with its raw input; a retry re-parses
    # it with the type's model and, still without an id, keeps it open
    code, out = cli(capsys, *db, "dead-letters", "--source", "bridges", "--json")
    letters = json.loads(out)
    assert len(letters) == 2 and all("no id in this item" in json.dumps(letter) for letter in letters)
    cli(capsys, *db, "dead-letters", "retry", "--source", "bridges")
    code, out = cli(capsys, *db, "dead-letters", "--source", "bridges", "--json")
    assert len(json.loads(out)) == 2

    # migrate: the new type's table is copied whole into another SQLite file
    target = str(tmp_path / "copy.db")
    code, out = cli(capsys, *db, "migrate", "--to", target)
    assert code == 0, out
    assert sorted(r["closure_id"] for r in _rows(target, "bridge_closures")) == ["N-1", "N-2", "S-1", "S-2", "W-1"]


def test_the_translated_field_of_a_dropped_in_type_gets_its_korean(dropped_in, bridges_api, db_path, capsys,
                                                                   monkeypatch):
    db = ["--db", db_path]
    cli(capsys, *db, "run", "--source", "bridges", "--mode", "full")
    with FakeLibreTranslate() as server:
        monkeypatch.setenv("BASECRAWLER_TRANSLATE_BACKEND", "libretranslate")
        monkeypatch.setenv("BASECRAWLER_LIBRETRANSLATE_URL", server.url)
        assert cli(capsys, *db, "translate", "--no-progress")[0] == 0
    translated = _rows(db_path, "bridge_closures")
    assert len(translated) == 5 and all(r["reason_ko"] and r["translated_at"] for r in translated)


def test_register_record_type_adds_a_type_in_process(dropped_in):
    import importlib

    module = importlib.import_module("bridge_type")
    forget_registered_types()
    register_record_type(module.BRIDGE_CLOSURE)
    assert get_record_type("bridge_closure") is module.BRIDGE_CLOSURE


def _rows(db_path: str, table: str) -> list[dict]:
    connection = sqlite3.connect(db_path)
    connection.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in connection.execute(f"SELECT * FROM {table}")]
    finally:
        connection.close()
