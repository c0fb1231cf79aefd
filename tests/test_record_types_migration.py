"""A store made before record types migrates in place: the `recalls` key moves from
(country, recall_number) to (source, country, recall_number) with every row, id, translation,
run and dead letter kept (SQLite: a store made by the code of commit 0880bd7; PostgreSQL: the
schema of that release re-created on a throw-away cluster)."""
import sqlite3
from pathlib import Path

from basecrawler import Recall, Store
from basecrawler.store.engines import pg_migrations
from basecrawler.store.migrations import MIGRATIONS
from pgcluster import pg_cluster, pg_url  # noqa: F401  (fixtures)
from basecrawler.store.engines.dialect import dialect_of

OLD_STORE = Path(__file__).resolve().parents[1] / "fixtures" / "stores" / "store_0880bd7.sql"


def _unique_indexes(store, table):
    return sorted(tuple(i.columns) for i in store.db[table].indexes if i.unique)


def _recall(source_number, summary):
    return Recall(country="CA", recall_number=source_number, recall_date="2024-03-01", summary_original=summary)


def test_a_store_of_the_last_release_migrates_in_place_keeping_everything(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(OLD_STORE.read_text(encoding="utf-8"))
    conn.execute("INSERT INTO enrichment (source, country, recall_number, recall_date, state, level, attempts, "
                 "transient_failures) VALUES ('ca', 'CA', '2024-001', '2024-03-01', 'retry', 2, 3, 0)")
    before = conn.execute("SELECT * FROM recalls ORDER BY id").fetchall()
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
    conn.close()

    store = Store(path)
    assert store.scalar("PRAGMA user_version") == len(MIGRATIONS)
    assert _unique_indexes(store, "recalls") == [("source", "country", "recall_number")]
    # The queue and the letters name a record's key generically (migration 10), rows kept.
    assert _unique_indexes(store, "enrichment") == [("source", "key_prefix", "record_key")]
    assert store.query("SELECT source, key_prefix, record_key, record_date, state, level FROM enrichment") == [
        {"source": "ca", "key_prefix": "CA", "record_key": "2024-001", "record_date": "2024-03-01",
         "state": "retry", "level": 2}]
    columns = [d[0] for d in store.db.conn.execute("SELECT * FROM recalls WHERE 1 = 0").description]
    after = store.db.conn.execute(f"SELECT {', '.join(columns[:33])} FROM recalls ORDER BY id").fetchall()
    assert after == before                                   # every row, id and translation as it was
    translated = store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2024-001"})
    assert (translated["summary_ko"], translated["translation_status"]) == ("브레이크 호스 누유", "translated")
    assert store.runs.last_run("ca")["status"] == "succeeded" and store.get_meta("probe") == "kept"
    letter, = store.dead_letters.open_dead_letters("ca")
    assert letter["record_key"] == "2024-009" and letter["record_type"] is None
    assert "recall_number" not in store.db["dead_letters"].columns_dict
    assert store.scalar("SELECT rowid FROM recalls_fts WHERE recalls_fts MATCH 'brake'") == 1

    # The old source's rows re-crawled: unchanged, translation kept; another source's same number: a second row.
    assert store.upsert("vehicle_recall", [_recall("2024-001", "Brake hose may leak.")], source="ca").unchanged == 1
    assert store.upsert("vehicle_recall", [_recall("2024-001", "Brake hose.")], source="rsa").new == 1
    assert store.lookup.count("vehicle_recall") == 4 and store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2024-001"})["summary_ko"] == "브레이크 호스 누유"
    store.close()


def test_a_postgresql_store_of_the_last_release_moves_its_key_in_place(pg_url):  # noqa: F811
    store = Store(pg_url)
    store.upsert("vehicle_recall", [_recall("2024-001", "Brake hose may leak.")], source="ca")
    store.write(lambda db: db.conn.execute(dialect_of(db.conn).write("UPDATE recalls SET summary_ko = '브레이크', translated_at = 't'")))
    # Back to the schema of the last release: version 7, keys without the source, no record_type,
    # the queue's and letters' key columns under a vehicle recall's names.
    store.db.executescript(
        'DROP INDEX recalls_key; CREATE UNIQUE INDEX recalls_key ON recalls (country, recall_number);'
        'DROP INDEX "idx_enrichment_source_key_prefix_record_key";'
        'ALTER TABLE enrichment RENAME COLUMN key_prefix TO country;'
        'ALTER TABLE enrichment RENAME COLUMN record_key TO recall_number;'
        'ALTER TABLE enrichment RENAME COLUMN record_date TO recall_date;'
        'ALTER TABLE dead_letters RENAME COLUMN record_key TO recall_number;'
        'CREATE UNIQUE INDEX "idx_enrichment_country_recall_number" ON enrichment (country, recall_number);'
        "INSERT INTO enrichment (source, country, recall_number, recall_date, state, level, attempts, "
        "transient_failures) VALUES ('ca', 'CA', '2024-001', '2024-03-01', 'retry', 2, 3, 0);"
        "INSERT INTO dead_letters (source, stage, kind, error, recall_number, retry_count) "
        "VALUES ('ca', 'parse', 'validation', 'x', '2024-009', 0);"
        'ALTER TABLE dead_letters DROP COLUMN record_type; UPDATE schema_version SET version = 7;')
    store.close()

    store = Store(pg_url)
    assert store.scalar(dialect_of(store).query("SELECT MAX(version) FROM schema_version")) == pg_migrations.latest_version()
    definition = store.scalar(dialect_of(store).query("SELECT indexdef FROM pg_indexes WHERE indexname = 'recalls_key'"))
    assert "(source, country, recall_number)" in definition
    assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'idx_enrichment_country_recall_number'")) == 0
    assert store.scalar(dialect_of(store).query("SELECT indexdef FROM pg_indexes WHERE indexname = "
                        "'idx_enrichment_source_key_prefix_record_key'")).endswith("(source, key_prefix, record_key)")
    assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'idx_enrichment_source_country_recall_number'")) == 0
    assert store.query(dialect_of(store).query("SELECT key_prefix, record_key, record_date, level FROM enrichment")) == [
        {"key_prefix": "CA", "record_key": "2024-001", "record_date": "2024-03-01", "level": 2}]
    assert [letter["record_key"] for letter in store.dead_letters.open_dead_letters("ca")] == ["2024-009"]
    assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'dead_letters' "
                        "AND column_name = 'record_type'")) == 1
    assert store.lookup.get("vehicle_recall", {"country": "CA", "recall_number": "2024-001"})["summary_ko"] == "브레이크"
    assert store.upsert("vehicle_recall", [_recall("2024-001", "Brake hose.")], source="rsa").new == 1
    assert store.lookup.count("vehicle_recall") == 2
    store.close()
