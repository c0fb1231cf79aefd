"""The database file is never damaged by a read (issue 22.5): a zero-length, foreign SQLite or
non-SQLite file given as --db to a read command is "not a basecrawler database" (one line,
exit 2) and stays byte for byte what it was; only `run` initialises an empty file."""
import hashlib
import sqlite3

import pytest

from basecrawler import BaseCrawler
from basecrawler.cli import main
from basecrawler.commands import run as run_command
from basecrawler.store.dbfile import NotABasecrawlerDatabase, check_basecrawler_database

READ_COMMANDS = [["status"], ["search", "brake"], ["export", "-o", "OUT"], ["dead-letters", "list"],
                 ["dead-letters", "retry"], ["browse", "--port", "1"], ["types"]]


def _empty(path):
    path.write_bytes(b"")


def _foreign_sqlite(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
    conn.commit()
    conn.close()


def _text(path):
    path.write_text("these are not the recalls you are looking for\n" * 200)


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("make", [_empty, _foreign_sqlite, _text], ids=["zero-length", "foreign-sqlite", "text"])
@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_read_command_refuses_a_file_that_is_not_ours_and_leaves_it_alone(tmp_path, make, command, capsys):
    db = tmp_path / "given.db"
    make(db)
    before, files_before = _digest(db), sorted(p.name for p in tmp_path.iterdir())
    argv = [a.replace("OUT", str(tmp_path / "out.csv")) for a in command]
    assert main([*argv, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"basecrawler: {db} is not a basecrawler database" in err
    assert "Traceback" not in err
    assert _digest(db) == before                                           # byte for byte
    assert sorted(p.name for p in tmp_path.iterdir()) == files_before      # no -wal, no export, nothing


def test_the_reason_is_named(tmp_path):
    db = tmp_path / "x.db"
    _empty(db)
    with pytest.raises(NotABasecrawlerDatabase, match="the file is empty"):
        check_basecrawler_database(db)
    _foreign_sqlite(db.with_name("f.db"))
    with pytest.raises(NotABasecrawlerDatabase, match="no crawl_runs, dead_letters, recalls table"):
        check_basecrawler_database(db.with_name("f.db"))
    _text(db)
    with pytest.raises(NotABasecrawlerDatabase, match="not an SQLite file"):
        check_basecrawler_database(db)


def test_a_store_with_its_schema_only_in_the_write_ahead_log_is_ours(store, db_path):
    # A fresh WAL store keeps its schema in -wal until a checkpoint: the check must see it.
    check_basecrawler_database(db_path)


class _One(BaseCrawler):
    source = "one"
    country = "AA"
    endpoints = {"site": "https://a.example"}

    def fetch(self):
        yield {"id": "A-1"}

    def parse(self, raw):
        return {"recall_number": raw["id"], "recall_date": "2024-01-02"}


def test_run_initialises_an_empty_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_command, "discover", lambda: {"one": _One})
    db = tmp_path / "new.db"
    _empty(db)
    assert main(["--db", str(db), "run", "--source", "one"]) == 0
    assert main(["--db", str(db), "status", "--json"]) == 0
    assert '"records": 1' in capsys.readouterr().out
