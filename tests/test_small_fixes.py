"""Small things on a new user's path (issue 32): a new store does not log an upgrade; `list`
shows a source's whole summary; `doctor` without network says so once; the replay's run line
explains a release that is stored but not complete yet."""
import logging

from basecrawler.store.core import Store

UPGRADE_WORDS = ("added column", "rebuilding the full-text index")


def _upgrade_lines(caplog):
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.INFO and any(word in r.getMessage() for word in UPGRADE_WORDS)]


def test_a_new_store_logs_no_upgrade(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    Store(str(tmp_path / "new.db")).close()
    assert _upgrade_lines(caplog) == []


def test_a_real_upgrade_still_says_what_it_does(tmp_path, caplog):
    path = str(tmp_path / "old.db")
    store = Store(path)
    store.write(lambda db: db.conn.execute(
        "INSERT INTO recalls (source, country, recall_number, recall_date) VALUES ('us', 'US', 'R1', '2024-01-01')"))
    # As a store of an older version: no input_hash column, the plain full-text index.
    def older(db):
        for (name,) in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'recalls' "
                                       "AND sql LIKE '%input_hash%'").fetchall():
            db.conn.execute(f"DROP INDEX [{name}]")
        db.conn.execute("ALTER TABLE recalls DROP COLUMN input_hash")
        for (name,) in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'view' AND tbl_name LIKE "
                                       "'%recalls%'").fetchall():
            db.conn.execute(f"DROP VIEW [{name}]")
    store.write(older)
    store.close()
    caplog.clear()
    caplog.set_level(logging.INFO)
    Store(path).close()
    lines = _upgrade_lines(caplog)
    assert any("added column recalls.input_hash" in line for line in lines)
    assert any("rebuilding the full-text index of recalls" in line for line in lines)


def test_list_shows_a_summary_that_wraps_onto_a_second_line_whole(capsys, monkeypatch):
    from basecrawler import BaseCrawler
    from basecrawler.cli import main

    class Wrapped(BaseCrawler):
        """A publisher whose summary is long: every notice a product alert,
        the vehicle ones also vehicle recalls.

        Details that are not the summary."""

        source = "wrapdemo"
        country = "EU"

    monkeypatch.setattr("basecrawler.commands.run.discover", lambda: {"wrapdemo": Wrapped})
    assert main(["list"]) == 0
    row = capsys.readouterr().out.splitlines()[-1]
    assert row.endswith("A publisher whose summary is long: every notice a product alert, the vehicle ones also "
                        "vehicle recalls.")
    assert "Details" not in row
