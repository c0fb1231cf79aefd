"""`migrate` and `watch deliver` end with the exit codes the error classes declare (issue #35.5),
not codes of their own: a class's code changed is the code these commands return."""
from __future__ import annotations

from basecrawler import Store
from basecrawler.cli import main
from basecrawler.errors import EXIT_OK, CrawlerError
from basecrawler.store.engines.transfer import TableCopy, TransferFailed
from translate.testing import seed


def _db(tmp_path) -> str:
    path = str(tmp_path / "source.db")
    store = Store(path)
    seed(store, 2)
    store.close()
    return path


def test_migrate_exits_with_the_classes_codes(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(CrawlerError, "exit_code", 43)
    monkeypatch.setattr(TransferFailed, "exit_code", 41)
    db = _db(tmp_path)
    assert main(["--db", db, "migrate", "--to", str(tmp_path / "copy.db")]) == EXIT_OK
    # A target that cannot be opened (its folder is a file): the database cannot be opened.
    (tmp_path / "a-file").write_text("x")
    assert main(["--db", db, "migrate", "--to", str(tmp_path / "a-file" / "copy.db")]) == 43
    assert "cannot open the target" in capsys.readouterr().err

    # A table whose counts differ after the copy: the transfer failed.
    import basecrawler.commands.migrate as migrate
    monkeypatch.setattr(migrate, "copy_store", lambda source, target: {"recalls": TableCopy(source_rows=2, target_rows=1)})
    assert main(["--db", db, "migrate", "--to", str(tmp_path / "other.db")]) == 41
    assert "INCOMPLETE" in capsys.readouterr().out


def test_watch_deliver_exits_with_the_classes_codes(tmp_path, monkeypatch, capsys):
    from basecrawler.watch import delivery

    monkeypatch.setattr(CrawlerError, "exit_code", 43)
    db = _db(tmp_path)
    assert main(["--db", db, "watch", "deliver"]) == EXIT_OK   # nothing queued, nothing failed
    monkeypatch.setattr(delivery, "deliver", lambda store: delivery.DeliveryReport(queued=1, failed=1))
    assert main(["--db", db, "watch", "deliver"]) == 43
    assert "1 failed" in capsys.readouterr().out
