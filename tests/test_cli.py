"""Command line, source discovery and configuration."""
import json
import textwrap
import uuid
from pathlib import Path

import pytest

import basecrawler.registry as registry
from basecrawler import BaseCrawler, DuplicateSource
from basecrawler.cli import main
from basecrawler.commands import run as run_command

SOURCES_DIR = Path(__file__).resolve().parent.parent / "sources"


class GoodA(BaseCrawler):
    source = "ga"
    country = "AA"
    endpoints = {"site": "https://a.example"}

    def fetch(self):
        yield {"id": "A-1", "date": "2024-01-02"}

    def parse(self, raw):
        return {"recall_number": raw["id"], "recall_date": raw["date"]}


class Broken(GoodA):
    source = "broken"
    country = "BB"

    def fetch(self):
        raise ConnectionError("listing unreachable")
        yield  # pragma: no cover


class GoodC(GoodA):
    source = "gc"
    country = "CC"


@pytest.fixture
def fake_registry(monkeypatch):
    fake = {"broken": Broken, "ga": GoodA, "gc": GoodC}
    monkeypatch.setattr(run_command, "discover", lambda: fake)
    return fake


def test_run_all_stores_other_sources_when_one_fails_and_exits_1(db_path, fake_registry, capsys):
    assert main(["--db", db_path, "run", "--all", "--mode", "full"]) == 1
    assert main(["--db", db_path, "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["sources"]["ga"]["records"] == 1 and status["sources"]["gc"]["records"] == 1
    assert status["sources"]["broken"]["last_run"]["status"] == "failed"
    assert "listing unreachable" in status["sources"]["broken"]["last_run"]["error"]


def test_run_of_succeeding_sources_exits_0(db_path, fake_registry):
    assert main(["--db", db_path, "run", "--source", "ga", "--source", "gc"]) == 0


def test_unknown_source_exits_2_with_known_ids(db_path, fake_registry, capsys):
    assert main(["--db", db_path, "run", "--source", "nope"]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "ga" in err and "gc" in err


def test_usage_error_exits_2(db_path):
    with pytest.raises(SystemExit) as info:
        main(["--db", db_path, "run"])
    assert info.value.code == 2


def test_db_from_environment(tmp_path, fake_registry, monkeypatch):
    target = tmp_path / "env.db"
    monkeypatch.setenv("BASECRAWLER_DB", str(target))
    assert main(["run", "--source", "ga"]) == 0
    assert target.exists()


def test_dropping_a_module_into_sources_makes_it_runnable(db_path, capsys):
    source_id = "drop" + uuid.uuid4().hex[:6]
    module = SOURCES_DIR / f"zz_{source_id}.py"
    module.write_text(textwrap.dedent(f'''
        from basecrawler import BaseCrawler

        class DropIn(BaseCrawler):
            """A source added by dropping one file."""
            source = "{source_id}"
            country = "DI"
            endpoints = {{"site": "https://drop.example"}}

            def fetch(self):
                yield {{"n": "7"}}

            def parse(self, raw):
                return {{"recall_number": raw["n"], "recall_date": "2024-06-01"}}
    '''))
    try:
        assert main(["--db", db_path, "run", "--source", source_id]) == 0
        assert main(["list"]) == 0
        assert source_id in capsys.readouterr().out
    finally:
        module.unlink()
    from basecrawler import Store
    assert Store(db_path).get_recall("DI", "7") is not None


def test_two_classes_with_one_id_is_a_clear_error(tmp_path, monkeypatch):
    package = tmp_path / "dupsrc"
    package.mkdir()
    (package / "__init__.py").write_text("")
    body = textwrap.dedent('''
        from basecrawler import BaseCrawler
        class {name}(BaseCrawler):
            source = "same"
            def fetch(self): return []
            def parse(self, raw): return None
    ''')
    (package / "one.py").write_text(body.format(name="One"))
    (package / "two.py").write_text(body.format(name="Two"))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(DuplicateSource, match="'same' is defined twice"):
        registry.discover("dupsrc")


def test_entry_point_sources_are_registered(monkeypatch):
    class FakeEntryPoint:
        name = "thirdparty"

        def load(self):
            return GoodC

    real = registry.importlib.metadata.entry_points
    monkeypatch.setattr(registry.importlib.metadata, "entry_points",
                        lambda group=None: [FakeEntryPoint()] if group == registry.ENTRY_POINT_GROUP else real(group=group))
    assert registry.discover()["gc"] is GoodC


def test_list_shows_every_registered_source(capsys):
    assert main(["list", "--json"]) == 0
    listed = {row["id"] for row in json.loads(capsys.readouterr().out)}
    assert listed == set(registry.discover())
