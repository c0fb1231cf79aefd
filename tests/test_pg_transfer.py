"""`migrate` copies every table the source database holds, both ways, and fails loudly on any
table it cannot copy (issue #24); `snapshot_to_sqlite` makes a read-only SQLite copy of a
PostgreSQL store (for `browse`)."""
from __future__ import annotations

import os
import sqlite3

import pytest

from basecrawler import Recall, Store
from basecrawler.cli import main
from basecrawler.store.engines.transfer import TransferFailed, copy_store, snapshot_to_sqlite, tables
from pgcluster import pg_cluster, pg_url  # noqa: F401  (fixtures)
from basecrawler.store.engines.dialect import dialect_of


def _fill(store) -> None:
    store.upsert("vehicle_recall", [Recall(country="US", recall_number=f"24V-{n:03d}", recall_date="2024-05-01",
                                 summary_original=f"ブレーキ summary {n}") for n in range(25)], source="us")
    store.runs.start_run("us", "full", "succeeded", os.getpid())
    store.set_meta("note", "kept")


def _add_record_type_table(store) -> None:
    """A table the framework does not know, as a record type or schema extension adds one."""
    integer = "BIGINT" if store.engine == "postgresql" else "INTEGER"
    store.write(lambda db: db.conn.execute(
        dialect_of(db.conn).write(f"CREATE TABLE extension_rows (id {integer} PRIMARY KEY, title TEXT, risk REAL, photo "
        f"{'BYTEA' if store.engine == 'postgresql' else 'BLOB'})")))
    d = dialect_of(store)
    store.write(lambda db: db.conn.executemany(
        d.write(f"INSERT INTO extension_rows (id, title, risk, photo) VALUES ({d.params(4)})"),
        [[n, f"alert {n}", n / 2, bytes([n, 0, 255])] for n in range(1, 8)]))


@pytest.mark.parametrize("direction", ["sqlite→postgresql", "postgresql→sqlite"])
def test_migrate_copies_every_table_including_ones_added_later(direction, tmp_path, pg_cluster, capsys):  # noqa: F811
    lite = str(tmp_path / "store.db")
    source_db, target_db = ((lite, pg_cluster.new_database()) if direction.startswith("sqlite")
                            else (pg_cluster.new_database(), lite))
    source = Store(source_db)
    _fill(source)
    _add_record_type_table(source)
    expected = {t: source.scalar(dialect_of(source).query(f"SELECT COUNT(*) FROM {t}")) for t in tables(source)}
    source.close()
    assert "extension_rows" in expected and "recalls" in expected

    assert main(["--db", source_db, "migrate", "--to", target_db]) == 0
    out = capsys.readouterr().out
    for table in expected:   # every table of the source has its ✓ line
        assert any(line.startswith(table + " ") and line.rstrip().endswith(("✓", "(created in the target)"))
                   for line in out.splitlines()), (table, out)
    target = Store(target_db)
    try:
        assert {t: target.scalar(dialect_of(target).query(f"SELECT COUNT(*) FROM {t}")) for t in expected} == expected
        assert target.query(dialect_of(target).query("SELECT title, risk, photo FROM extension_rows WHERE id = 3")) == [
            {"title": "alert 3", "risk": 1.5, "photo": bytes([3, 0, 255])}]
        from basecrawler.reading.search import RecallFilter, count
        assert count(target.db.conn, RecallFilter(text="ブレーキ")) == 25   # the target's search index is complete
    finally:
        target.close()


def test_a_table_that_cannot_be_copied_fails_the_migration_by_name(tmp_path, pg_url, capsys):  # noqa: F811
    lite = str(tmp_path / "store.db")
    source = Store(lite)
    _fill(source)
    # SQLite keeps text in an INTEGER column; PostgreSQL's BIGINT cannot take it.
    source.write(lambda db: db.conn.execute("CREATE TABLE sloppy (id INTEGER PRIMARY KEY, amount INTEGER)"))
    source.write(lambda db: db.conn.execute("INSERT INTO sloppy (id, amount) VALUES (1, 'twelve')"))
    source.close()

    assert main(["--db", lite, "migrate", "--to", pg_url]) == 1
    out = capsys.readouterr().out
    sloppy = [line for line in out.splitlines() if line.startswith("sloppy ")]
    assert sloppy and "✗" in sloppy[0] and "✓" not in sloppy[0], out
    assert "INCOMPLETE" in out and "not copied: sloppy" in out
    assert [line for line in out.splitlines() if line.startswith("recalls ")][0].rstrip().endswith("✓")


def test_a_column_the_target_lacks_is_added_not_dropped(tmp_path, pg_url):  # noqa: F811
    lite = str(tmp_path / "store.db")
    source = Store(lite)
    _fill(source)
    source.write(lambda db: db.conn.execute("ALTER TABLE recalls ADD COLUMN reviewer TEXT"))
    source.write(lambda db: db.conn.execute("UPDATE recalls SET reviewer = 'kim'"))
    target = Store(pg_url)
    try:
        result = copy_store(source, target)
        assert result["recalls"].ok
        assert target.scalar(dialect_of(target).query("SELECT COUNT(*) FROM recalls WHERE reviewer = 'kim'")) == 25
    finally:
        source.close()
        target.close()


def test_snapshot_to_sqlite_is_a_complete_read_only_file(tmp_path, pg_url):  # noqa: F811
    store = Store(pg_url)
    _fill(store)
    store.close()
    path = tmp_path / "browse.db"
    result = snapshot_to_sqlite(pg_url, path)
    assert result["recalls"].ok and result["recalls"].target_rows == 25
    assert not (tmp_path / "browse.db.partial").exists() and not (tmp_path / "browse.db-wal").exists()
    assert oct(path.stat().st_mode & 0o777) == "0o444"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT COUNT(*) FROM recalls").fetchone()[0] == 25
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("SELECT COUNT(*) FROM recalls_fts WHERE recalls_fts MATCH 'ブレーキ'").fetchone()[0] == 25
    finally:
        conn.close()
    # A second snapshot replaces the first (the file is read-only, the folder is not).
    store = Store(pg_url)
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="24V-999", recall_date="2024-06-01")], source="us")
    store.close()
    assert snapshot_to_sqlite(pg_url, path)["recalls"].target_rows == 26


def test_a_snapshot_that_cannot_copy_a_table_raises_and_leaves_the_old_file(tmp_path, pg_url, monkeypatch):  # noqa: F811
    store = Store(pg_url)
    _fill(store)
    store.close()
    path = tmp_path / "browse.db"
    snapshot_to_sqlite(pg_url, path)
    store = Store(pg_url)
    store.write(lambda db: db.conn.execute(dialect_of(db.conn).write("CREATE TABLE odd (k TEXT PRIMARY KEY, v TEXT)")))
    store.write(lambda db: db.conn.execute(dialect_of(db.conn).write("INSERT INTO odd VALUES ('a', 'x')")))
    store.close()
    from basecrawler.store.engines import transfer
    real = transfer._copy_rows

    def refusing(source, target, table, names):   # the target refuses this one table's rows
        if table == "odd":
            raise sqlite3.IntegrityError("UNIQUE constraint failed: odd.k")
        return real(source, target, table, names)
    monkeypatch.setattr(transfer, "_copy_rows", refusing)
    with pytest.raises(TransferFailed, match="odd"):
        snapshot_to_sqlite(pg_url, path)
    assert path.exists() and not (tmp_path / "browse.db.partial").exists()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert "odd" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
