"""Migration 9 (issue #21): rows stored before the maker table learned a name (katakana makers)
get the key the table gives them now, on SQLite and PostgreSQL."""
import sqlite3

from basecrawler import Store
from basecrawler.store.engines import pg_migrations
from basecrawler.store.migrations import MIGRATIONS
from pgcluster import pg_cluster, pg_url  # noqa: F401  (pytest fixtures)
from basecrawler.store.engines.dialect import dialect_of

OLD_ROWS = [("t", "JP", "1", "フィアット", "フィアット"),      # the key the old table gave: the name itself
            ("t", "JP", "2", "ドゥカティ", "ドゥカティ"),
            ("t", "US", "3", "FORD MOTOR CO.", "FORD")]         # already right: left as it is


def _keys(store) -> dict:
    return {r["recall_number"]: r["manufacturer_key"]
            for r in store.query(dialect_of(store).query("SELECT recall_number, manufacturer_key FROM recalls"))}


def test_a_sqlite_store_with_old_katakana_keys_gets_them_refilled(tmp_path):
    path = tmp_path / "old.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.executemany("INSERT INTO recalls (source, country, recall_number, recall_date, manufacturer_original, "
                     "manufacturer_key) VALUES (?, ?, ?, '2024-01-01', ?, ?)", OLD_ROWS)
    refill = MIGRATIONS.index(next(m for m in MIGRATIONS if m.__name__ == "_m009_refill_maker_keys"))
    conn.execute(f"PRAGMA user_version = {refill}")   # a store from before migration 9
    conn.commit()
    conn.close()
    store = Store(path)
    try:
        assert _keys(store) == {"1": "FIAT", "2": "DUCATI", "3": "FORD"}
        assert store.scalar("PRAGMA user_version") == len(MIGRATIONS)
        assert store.scalar("SELECT manufacturer_original FROM recalls WHERE recall_number = '1'") == "フィアット"
    finally:
        store.close()


def test_a_postgresql_store_with_old_katakana_keys_gets_them_refilled(pg_url):  # noqa: F811
    store = Store(pg_url)
    d = dialect_of(store)
    store.write(lambda db: db.conn.executemany(
        d.write("INSERT INTO recalls (source, country, recall_number, recall_date, manufacturer_original, manufacturer_key) "
                f"VALUES ({d.params(3)}, '2024-01-01', {d.params(2)})"), OLD_ROWS))
    step = pg_migrations.BASELINE + 1 + [s.__name__ for s in pg_migrations.STEPS].index("_p009_refill_maker_keys")
    # A database made before step 9 (a new one holds one row, at the newest version).
    store.write(lambda db: db.conn.execute(d.write(f"UPDATE schema_version SET version = {d.p} WHERE version >= {d.p}"), [step - 1, step]))
    store.close()
    store = Store(pg_url)
    try:
        assert _keys(store) == {"1": "FIAT", "2": "DUCATI", "3": "FORD"}
        assert store.scalar(dialect_of(store).query("SELECT MAX(version) FROM schema_version")) == pg_migrations.latest_version()
    finally:
        store.close()
