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


class _TwoEndpoints:
    """A source declaring two endpoints (the test points both at ports nobody listens on)."""
    endpoints = {"api": "http://127.0.0.1:9", "site": "http://127.0.0.1:9"}


def _offline_checks(db_path, monkeypatch):
    import socket

    from basecrawler.commands import doctor
    from basecrawler.config import Settings

    urls = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            urls.append(f"http://127.0.0.1:{sock.getsockname()[1]}")
    monkeypatch.setenv("BASECRAWLER_OFFDEMO_API_URL", urls[0])
    monkeypatch.setenv("BASECRAWLER_OFFDEMO_SITE_URL", urls[1])
    monkeypatch.delenv("BASECRAWLER_TRANSLATE_BACKEND", raising=False)
    return doctor.run_checks(Settings.from_env(db_path=db_path), timeout_s=2, sources={"offdemo": _TwoEndpoints})


def test_doctor_offline_with_a_full_store_says_it_once_and_passes(tmp_path, monkeypatch):
    path = str(tmp_path / "full.db")
    store = Store(path)
    store.write(lambda db: db.conn.execute(
        "INSERT INTO recalls (source, country, recall_number, recall_date) VALUES ('us', 'US', 'R1', '2024-01-01')"))
    store.close()
    checks = _offline_checks(path, monkeypatch)
    assert not [c for c in checks if c.name.startswith("source offdemo")]   # no ✗ per endpoint
    network = [c for c in checks if c.name == "network"]
    assert len(network) == 1 and network[0].ok and network[0].note
    assert "reaches no publisher" in network[0].detail and "1 records" in network[0].detail
    assert "scripts/run --replay" in network[0].line()


def test_doctor_offline_with_nothing_stored_is_one_failure_naming_the_replay(tmp_path, monkeypatch):
    path = str(tmp_path / "empty.db")
    Store(path).close()
    checks = _offline_checks(path, monkeypatch)
    failed = [c for c in checks if not c.ok]
    assert [c.name for c in failed if c.name.startswith(("source offdemo", "network"))] == ["network"]
    network = next(c for c in failed if c.name == "network")
    assert "reaches no publisher" in network.detail and "scripts/run --replay" in network.line()


def test_the_replays_pypi_run_line_says_why_a_stored_release_waits(store, settings, caplog):
    """The replay's release whose metadata is not served yet is saved (from the feed) and kept in
    the list ledger, not dead-lettered: the run line says so beside its "dead-lettered 0"."""
    from test_pypi import crawler

    caplog.set_level(logging.INFO)
    source = crawler(store, settings)
    result = source.run()
    assert result.status == "succeeded" and result.counts.dead_lettered == 0 and result.counts.saved == 6
    run_line = next(r.getMessage() for r in caplog.records if "dead-lettered 0" in r.getMessage())
    assert "warnings 1" in run_line and "without their metadata yet (quillmark 0.9.0b1)" in run_line
    assert "kept in the list ledger" in run_line
