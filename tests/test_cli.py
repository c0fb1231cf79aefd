"""Command line, source discovery and configuration."""
import json
import textwrap
import uuid
from pathlib import Path

import pytest

import basecrawler.pipeline.registry as registry
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
    assert Store(db_path).lookup.get("vehicle_recall", {"country": "DI", "recall_number": "7"}) is not None


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


# ---- CLI basics (issue 14.6) -------------------------------------------------------------------
import argparse
import os
import socket
import stat
import subprocess

from basecrawler.cli import build_parser

REPO = SOURCES_DIR.parent


def test_version_prints_the_installed_version(capsys):
    import importlib.metadata

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"basecrawler {importlib.metadata.version('basecrawler')}"


def test_global_options_work_after_the_sub_command(tmp_path, fake_registry, capsys):
    db = tmp_path / "after.db"
    assert main(["run", "--source", "ga", "--db", str(db), "-q"]) == 0
    assert main(["status", "--json", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["sources"]["ga"]["records"] == 1


def test_global_option_before_the_sub_command_is_not_reset_by_it(tmp_path, fake_registry, capsys):
    db = tmp_path / "before.db"
    assert main(["--db", str(db), "run", "--source", "ga"]) == 0
    assert main(["--db", str(db), "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["db"] == str(db)


@pytest.mark.parametrize("command", [["status"], ["search", "brake"], ["export", "-o", "OUT/x.csv"],
                                     ["dead-letters", "list"]])
def test_read_commands_never_create_a_database(tmp_path, command, capsys):
    db = tmp_path / "missing" / "x.db"
    argv = [a.replace("OUT", str(tmp_path / "out")) for a in command]
    assert main([*argv, "--db", str(db)]) == 2
    assert capsys.readouterr().err.strip().startswith(f"basecrawler: no database at {db}")
    assert list(tmp_path.iterdir()) == []          # neither the database nor its folder


@pytest.fixture
def filled_db(tmp_path, fake_registry):
    db = tmp_path / "filled.db"
    assert main(["--db", str(db), "run", "--source", "ga"]) == 0
    return db


def test_export_to_a_folder_is_one_line_and_exit_3(filled_db, tmp_path, capsys):
    assert main(["--db", str(filled_db), "export", "-o", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and str(tmp_path) in err


def test_export_into_an_unwritable_folder_is_one_line_and_exit_3(filled_db, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        assert main(["--db", str(filled_db), "export", "-o", str(locked / "x.csv")]) == 3
    finally:
        locked.chmod(0o700)
    err = capsys.readouterr().err
    assert err == f"basecrawler: cannot use {locked / 'x.csv'}: Permission denied\n"


def test_export_under_a_file_is_one_line_and_exit_3(filled_db, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["--db", str(filled_db), "export", "-o", str(blocker / "x.csv")]) == 3
    assert capsys.readouterr().err == f"basecrawler: cannot use {blocker}: is a file, not a folder\n"


def test_a_database_under_a_folder_that_cannot_be_created_is_one_line_and_exit_3(tmp_path, fake_registry, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["--db", str(blocker / "sub" / "x.db"), "run", "--source", "ga"]) == 3
    assert capsys.readouterr().err == f"basecrawler: cannot use {blocker}: is a file, not a folder\n"


def test_browse_on_a_port_in_use_is_one_line_and_exit_3(filled_db, capsys, monkeypatch):
    monkeypatch.setattr("basecrawler.commands.browse.datasette_available", lambda: True)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        assert main(["--db", str(filled_db), "browse", "--port", str(port)]) == 3
    finally:
        taken.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"port {port} on 127.0.0.1 is not free" in err


def test_replay_from_a_missing_folder_is_a_usage_error(tmp_path, fake_registry, capsys):
    assert main(["--db", str(tmp_path / "r.db"), "run", "--all", "--replay", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"basecrawler: --replay {tmp_path / 'nope'}: no such folder\n"
    assert not (tmp_path / "r.db").exists()


def test_search_for_an_unknown_source_is_a_usage_error(filled_db, capsys, monkeypatch):
    monkeypatch.setattr("basecrawler.commands.search.discover", lambda: {"ga": GoodA})
    assert main(["--db", str(filled_db), "search", "--source", "nope"]) == 2
    assert capsys.readouterr().err == "basecrawler: unknown source 'nope'; known sources: ga\n"


def test_exported_files_get_the_usual_permissions(filled_db, tmp_path):
    previous = os.umask(0o022)
    try:
        assert main(["--db", str(filled_db), "export", "-o", str(tmp_path / "out.csv")]) == 0
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "out.csv").stat().st_mode) == 0o644


def _all_parsers(parser, name="basecrawler"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _all_parsers(sub, f"{name} {sub_name}")


def test_every_option_has_help_text():
    missing = [f"{name} {'/'.join(action.option_strings) or action.dest}"
               for name, parser in _all_parsers(build_parser()) for action in parser._actions
               if not isinstance(action, argparse._SubParsersAction) and not action.help]
    assert missing == []


def test_the_scheduler_lock_files_are_ignored_by_git():
    names = ["basecrawler.db.schedule.lock", "basecrawler.db.scheduler.lock", "data/x.db.scheduler.lock"]
    done = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=REPO, capture_output=True, text=True)
    assert done.stdout.split() == names


def test_a_file_that_is_not_a_database_is_one_line_and_exit_2(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("these are not the recalls you are looking for\n" * 200)
    assert main(["status", "--db", str(notes)]) == 2
    assert capsys.readouterr().err == (f"basecrawler: {notes} is not a basecrawler database (not an SQLite file); "
                                       "give the right --db, or `basecrawler run` to start a new one in an empty file\n")


def test_list_is_a_table_with_a_header_and_one_row_per_source(capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "country", "language", "endpoints", "description"]
    assert [line.split()[0] for line in lines[2:]] == sorted(registry.discover())


def test_list_names_a_portal_of_many_countries(capsys):
    """oecd declares no one country: its row says so (and --json carries the flag)."""
    assert main(["list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("oecd "))
    assert row.split()[1] == "(many)"
    assert main(["list", "--json"]) == 0
    listed = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert listed["oecd"]["many_countries"] is True and listed["jp"]["many_countries"] is False
