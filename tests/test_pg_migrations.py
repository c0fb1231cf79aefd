"""Step-wise PostgreSQL migrations (issue #21 point 10): numbered steps recorded in
schema_version, applied once each and in order, starting from the previous release's schema
(fixtures/pg/schema_0880bd7.sql) with its data kept."""
from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest

from basecrawler import Recall, Store
from basecrawler.store.engines import pg_migrations
from pgcluster import pg_cluster  # noqa: F401  (fixture)
from basecrawler.store.engines.dialect import dialect_of

OLD_SCHEMA = Path(__file__).resolve().parent.parent / "fixtures" / "pg" / "schema_0880bd7.sql"


@pytest.fixture
def old_url(pg_cluster):  # noqa: F811
    """A database as the release at 0880bd7 left it, with a recall, a run and a memory entry."""
    # A fresh name each time: id(object()) was reused by the next test once the object was
    # freed, and CREATE DATABASE then failed on the name the last test had left.
    name = f"old_{pg_cluster.port}_{uuid.uuid4().hex}"
    pg_cluster.admin(f"CREATE DATABASE {name}")
    url = pg_cluster.url(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(OLD_SCHEMA.read_text())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO recalls (source, country, recall_number, recall_date, date_unknown, "
                     "summary_original, summary_ko, translated_at) VALUES "
                     "('us', 'US', '24V-001', '2024-05-01', 0, 'Brake fluid leak', '브레이크액 누출', '2024-05-02')")
        conn.execute("INSERT INTO crawl_runs (source, mode, status, started_at, new) "
                     "VALUES ('us', 'full', 'succeeded', '2024-05-01T00:00:00+00:00', 1)")
        conn.execute("INSERT INTO translation_memory (source_lang, target_lang, source_hash, source_text, "
                     "translated_text, uses) VALUES ('en', 'ko', 'h1', 'Brake fluid leak', '브레이크액 누출', 3)")
        conn.execute("INSERT INTO enrichment (source, country, recall_number, recall_date, state, level, attempts, "
                     "transient_failures) VALUES ('us', 'US', '24V-001', '2024-05-01', 'retry', 1, 2, 0)")
        conn.execute("INSERT INTO dead_letters (source, stage, kind, error, recall_number, retry_count) "
                     "VALUES ('us', 'detail', 'validation', 'bad detail', '24V-001', 0)")
    return url


def _versions(url):
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT * FROM schema_version ORDER BY version").fetchall() if not _has_step(conn) \
            else conn.execute("SELECT version, step FROM schema_version ORDER BY version").fetchall()


def _has_step(conn) -> bool:
    return bool(conn.execute("SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'schema_version' "
                             "AND column_name = 'step'").fetchone()[0])


def test_the_previous_release_schema_upgrades_step_by_step_with_its_data_kept(old_url):
    assert [v for v, *_ in _versions(old_url)] == [7]
    store = Store(old_url)
    try:
        versions = _versions(old_url)
        assert [v for v, _ in versions] == [7, 8, 9, 10, 11] == list(range(7, pg_migrations.latest_version() + 1))
        assert versions[1][1] == "_p008_version_history"
        row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V-001"})
        assert (row["summary_original"], row["summary_ko"], row["translated_at"]) == (
            "Brake fluid leak", "브레이크액 누출", "2024-05-02")
        assert store.runs.last_run("us")["new"] == 1
        assert store.scalar(dialect_of(store).query("SELECT uses FROM translation_memory WHERE source_hash = 'h1'")) == 3
        # Step 10: the queue and the letters keep their rows under the key's generic names.
        assert store.query(dialect_of(store).query("SELECT key_prefix, record_key, record_date, level FROM enrichment")) == [
            {"key_prefix": "US", "record_key": "24V-001", "record_date": "2024-05-01", "level": 1}]
        assert [(d["record_key"], d["error"]) for d in store.dead_letters.open_dead_letters("us")] == [("24V-001", "bad detail")]
        # The upgraded store still works: a changed summary updates the row and clears its translation.
        result = store.upsert("vehicle_recall", [Recall(country="US", recall_number="24V-001", recall_date="2024-05-01",
                                              summary_original="Brake fluid leak (amended)")], source="us")
        assert (result.updated, result.new) == (1, 0)
        assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "24V-001"})["summary_ko"] is None
    finally:
        store.close()
    Store(old_url).close()   # opening again runs nothing twice
    assert [v for v, _ in _versions(old_url)] == list(range(7, pg_migrations.latest_version() + 1))


def test_a_new_step_runs_once_in_order_and_is_recorded(old_url, monkeypatch):
    ran = []

    def _p009_split_units(conn):
        ran.append(9)
        conn.executescript("ALTER TABLE recalls ADD COLUMN units_note TEXT")
        conn.execute(dialect_of(conn).write("UPDATE recalls SET units_note = 'from step 9'"))

    def _p010_after(conn):
        # Runs after step 9: its column exists and is filled.
        ran.append(conn.execute(dialect_of(conn).query("SELECT units_note FROM recalls")).fetchone()[0])

    # After step 8 only (the later real steps would take these numbers).
    monkeypatch.setattr(pg_migrations, "STEPS", [pg_migrations.STEPS[0], _p009_split_units, _p010_after])
    Store(old_url).close()
    Store(old_url).close()
    assert ran == [9, "from step 9"]
    assert [(v, s) for v, s in _versions(old_url)][1:] == [
        (8, "_p008_version_history"), (9, "_p009_split_units"), (10, "_p010_after")]


def test_a_failing_step_leaves_the_database_as_it_was(old_url, monkeypatch):
    def _p009_broken(conn):
        conn.executescript("ALTER TABLE recalls ADD COLUMN half_done TEXT")
        raise RuntimeError("step 9 cannot run")

    monkeypatch.setattr(pg_migrations, "STEPS", [*pg_migrations.STEPS, _p009_broken])
    with pytest.raises(RuntimeError):
        Store(old_url)
    assert [v for v, *_ in _versions(old_url)] == [7]
    with psycopg.connect(old_url) as conn:
        assert conn.execute("SELECT COUNT(*) FROM information_schema.columns "
                            "WHERE table_name = 'recalls' AND column_name = 'half_done'").fetchone()[0] == 0


def test_a_new_database_is_derived_and_recorded_at_the_newest_version(pg_cluster):  # noqa: F811
    pg_cluster.admin("CREATE DATABASE fresh_pg_migrations")
    url = pg_cluster.url("fresh_pg_migrations")
    Store(url).close()
    assert _versions(url) == [(pg_migrations.latest_version(), "new database (derived)")]


def test_a_reference_schema_change_reaches_an_up_to_date_database(old_url, monkeypatch):
    """A SQLite migration that adds a column needs no PostgreSQL step: the derivation runs
    again when the reference schema's fingerprint changed."""
    Store(old_url).close()
    from basecrawler.store import schema

    def _m099_note(db):
        db["recalls"].add_column("reviewer_note", str)
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, _m099_note])
    pg_migrations._derived_ddl.cache_clear()
    try:
        Store(old_url).close()
        with psycopg.connect(old_url) as conn:
            assert conn.execute("SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'recalls' "
                                "AND column_name = 'reviewer_note'").fetchone()[0] == 1
    finally:
        pg_migrations._derived_ddl.cache_clear()
