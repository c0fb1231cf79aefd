"""One store contract, two engines (issue #17): every test here runs on SQLite and on a real
PostgreSQL server (tests/pgcluster.py starts a throw-away cluster).

The pipeline, enrichment and search tests written for SQLite are collected here again under
fixtures that open each engine in turn; the tests below them check what differs in how the
engines are driven (write counting, a refused row, locks, concurrent claims, moving a store).
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from basecrawler import Recall, Store
from basecrawler.pipeline import enrichment
from basecrawler.cli import main
from basecrawler.pipeline.runlock import RunLock
from pgcluster import any_db, pg_cluster, pg_url  # noqa: F401  (fixtures)

# The SQLite-era behaviour tests, now run on both engines through the fixtures below.
from test_pipeline import (  # noqa: F401
    item, run,
    test_blank_value_inside_extra_never_erases_a_stored_one,
    test_changed_value_updates_and_clears_its_translation,
    test_demo_source_runs_end_to_end,
    test_fetch_failure_keeps_records_fetched_before_it,
    test_incremental_window_is_newest_minus_overlap,
    test_missing_field_in_second_crawl_keeps_stored_value,
    test_parse_and_validation_failures_become_dead_letters,
    test_parse_may_return_many_records_or_none,
    test_unparseable_date_is_kept_with_sentinel_and_never_filtered,
)
from test_enrichment import (  # noqa: F401
    test_abandoned_claim_is_reclaimed_after_processing_timeout,
    test_claims_newest_recalls_first_and_at_most_the_limit,
    test_detail_404_twice_then_found_is_done_after_three_requests_none_before_backoff,
    test_detail_dead_letter_is_resolved_when_the_detail_later_succeeds,
    test_detail_that_adds_an_original_queues_the_row_for_translation,
    test_full_run_requeues_gone_items,
)
from test_unchanged_input import (  # noqa: F401
    validations,
    test_a_change_to_the_code_that_makes_records_sends_everything_the_whole_way_once,
    test_a_key_the_model_normalises_is_not_found_by_its_raw_form_and_goes_the_whole_way,
    test_a_recognised_record_is_windowed_by_its_own_date,
    test_a_recognised_record_with_a_changed_one_of_its_key_waiting_goes_the_whole_way,
    test_only_the_changed_records_of_a_rerun_are_validated_and_written,
    test_records_of_a_type_without_a_date_and_of_two_types_from_one_item,
)
from test_groups import (  # noqa: F401
    test_a_republished_recall_is_shown_once_with_the_original_first,
    test_an_export_holds_each_group_once_unless_every_copy_is_asked,
    test_nothing_is_overwritten_each_publisher_keeps_its_record,
)
from test_search import (  # noqa: F401
    filled,
    test_all_words_must_match,
    test_country_filter,
    test_date_window_filter,
    test_english_term_matches_substrings_case_insensitively,
    test_filters_combine,
    test_hostile_or_syntax_terms_are_plain_text,
    test_japanese_term_finds_japanese_original,
    test_korean_term_finds_translated_row,
    test_like_wildcards_in_input_are_literal,
    test_manufacturer_filter_uses_the_normalised_key,
    test_model_year_filter_matches_inside_a_range,
    test_results_are_newest_first,
    test_search_command_prints_json,
    test_two_character_japanese_term_falls_back_to_like,
    test_two_character_korean_term_finds_translation,
    test_untranslated_hint_counts_only_the_filtered_recalls,
)
from basecrawler.store.engines.dialect import dialect_of

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def db_path(any_db):  # noqa: F811
    """Every test here on both engines: conftest's `store` and `settings` take this db_path."""
    return any_db


def _count_recall_writes(store) -> None:
    """Every row the database inserts or updates in recalls lands in recall_writes. Every data
    write sets updated_at; pointing an unchanged row at the input it was seen with this time
    (the bookkeeping `input_hash` alone, issue #23.3) is not a data write."""
    if store.engine == "sqlite":
        store.db.executescript(
            "CREATE TABLE recall_writes (id INTEGER);"
            "CREATE TRIGGER w_i AFTER INSERT ON recalls BEGIN INSERT INTO recall_writes VALUES (new.id); END;"
            "CREATE TRIGGER w_u AFTER UPDATE OF updated_at ON recalls "
            "BEGIN INSERT INTO recall_writes VALUES (new.id); END;")
    else:
        store.db.executescript(
            "CREATE TABLE recall_writes (id BIGINT);"
            "CREATE FUNCTION note_write() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO recall_writes VALUES (NEW.id); RETURN NULL; END $$;"
            "CREATE TRIGGER w AFTER INSERT OR UPDATE OF updated_at ON recalls FOR EACH ROW EXECUTE FUNCTION note_write();")


def test_unchanged_rerun_writes_no_recall_row(store, settings):
    _count_recall_writes(store)
    first = run(store, [item(1), item(2), item(3)], settings)
    assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM recall_writes")) == 3 == first.counts.new
    again = run(store, [item(1), item(2), item(3, summary="")], settings)   # a blank erases nothing
    assert (again.counts.new, again.counts.updated, again.counts.unchanged) == (0, 0, 3)
    assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM recall_writes")) == 3
    changed = run(store, [item(1), item(2, model="M2b"), item(4)], settings)
    assert (changed.counts.new, changed.counts.updated, changed.counts.unchanged) == (1, 1, 1)
    assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM recall_writes")) == 5


def test_a_row_the_database_refuses_is_bisected_into_one_dead_letter(store, settings):
    if store.engine == "sqlite":
        store.db.execute("CREATE TRIGGER refuse_r13 BEFORE INSERT ON recalls WHEN new.recall_number = 'R13' "
                         "BEGIN SELECT RAISE(ABORT, 'refuse_r13'); END")
    else:
        store.db.execute(dialect_of(store.db).write("ALTER TABLE recalls ADD CONSTRAINT refuse_r13 CHECK (recall_number <> 'R13')"))
    result = run(store, [item(n) for n in range(1, 41)], settings.with_(batch_size=40))
    assert result.counts.saved == 39 and result.counts.dead_lettered == 1 and result.counts.store_failed == 1
    assert store.lookup.count("vehicle_recall", "demo") == 39
    letter = store.dead_letters.open_dead_letters("demo")[0]
    assert letter["stage"] == "store" and "refuse_r13" in letter["error"] and letter["record_key"] == "R13"
    assert json.loads(letter["raw"])["id"] == "R13"


def test_dead_letters_keep_bytes_text_and_json_raws(store):
    ids = [store.dead_letters.add_dead_letter(source="demo", run_id=None, stage="parse", kind="k", error="e", raw=raw)
           for raw in (b"\x00\xffPDF", "テキスト", {"a": [1, "二"]}, None, "nul\x00 in text", {"k": "nul\x00"})]
    assert ids == sorted(ids) and len(set(ids)) == 6
    from basecrawler.store.core import decode_raw
    kept = [decode_raw(l["raw_kind"], l["raw"], l["raw_bytes"]) for l in store.dead_letters.open_dead_letters("demo")]
    assert kept == [b"\x00\xffPDF", "テキスト", {"a": [1, "二"]}, None, "nul\x00 in text", {"k": "nul\x00"}]


def test_runs_ledger_meta_and_memory_round_trip(store):
    run_id = store.runs.start_run("demo", "full", "running", os.getpid())
    store.runs.update_run(run_id, status="succeeded", new=2, skip_reasons={"not a vehicle": 1}, duration_s=1.5)
    last = store.runs.last_run("demo")
    assert (last["id"], last["status"], last["new"], last["duration_s"]) == (run_id, "succeeded", 2, 1.5)
    assert json.loads(last["skip_reasons"]) == {"not a vehicle": 1}

    store.ledger.note("demo", "w1", url="https://x/1", listed_date="2024-01-01", data={"n": 1})
    store.ledger.note("demo", "w1", url=None, listed_date=None, data=None)        # a known item keeps its facts
    letter = store.dead_letters.add_dead_letter(source="demo", run_id=run_id, stage="fetch", kind="http", error="500", raw=None)
    assert store.ledger.failed("demo", "w1", "500", max_attempts=2, letters=[letter]) == {"state": "failing", "attempts": 1}
    assert store.ledger.items("demo", ["failing"])[0]["data"] == {"n": 1}
    assert store.ledger.done("demo", ["w1"]) == 1 and store.dead_letters.open_dead_letters("demo") == []
    assert store.ledger.counts("demo") == {"done": 1}

    assert store.ledger.failed("demo", "w2", "blocked", max_attempts=1, count=False) == {}   # never listed
    store.ledger.note("demo", "w2", url=None, listed_date="2024-01-02", data=None)
    assert store.ledger.failed("demo", "w2", "500", max_attempts=1) == {"state": "given_up", "attempts": 1}
    assert store.ledger.requeue_given_up("demo") == 1 and store.ledger.counts("demo") == {"done": 1, "failing": 1}

    store.set_meta("k", "v1")
    store.set_meta("k", "v2")
    assert store.get_meta("k") == "v2"

    from translate.memory import TranslationMemory
    memory = TranslationMemory(store)
    store.write(lambda db: memory.remember(db, "ja", {"制動": "제동"}, "fake"))
    store.write(lambda db: memory.remember(db, "ja", {"制動": "다른"}, "fake"))   # the first one is kept
    store.write(lambda db: memory.count_uses(db, "ja", {"制動": 2}))
    assert memory.lookup("ja", ["制動", "なし"]) == {"制動": "제동"}
    assert store.scalar(dialect_of(store).query("SELECT uses FROM translation_memory")) == 2


def test_the_enrichment_queue_keeps_its_ladder_and_resolves_only_its_records_letters(store):
    queue, t = store.enrichment, "2026-01-01T00:00:0{}.000000+00:00".format
    wanted = [("US", "R1", "2024-01-01"), ("US", "R2", "2024-03-01")]
    assert queue.enqueue("demo", wanted, state="pending", now=t(0)) == 2
    assert queue.enqueue("demo", [("US", "R1", "2024-05-01")], state="pending", now=t(1)) == 0   # kept, date follows
    claimed = queue.claim("demo", due=["pending", "retry"], claimed="processing", now=t(2), limit=1)
    assert [item["record_key"] for item in claimed] == ["R1"]   # the newest record first
    assert queue.claim("demo", due=["pending"], claimed="processing", now=t(2), limit=0) == []
    r2 = queue.claim("demo", due=["pending"], claimed="processing", now=t(2), limit=5)[0]
    assert queue.counts("demo") == {"processing": 2}

    queue.release(r2["id"], state="pending", due=t(5), now=t(3), attempted=True, error="timeout")
    assert queue.claim("demo", due=["pending"], claimed="processing", now=t(4), limit=5) == []   # not due yet
    for source in ("demo", "other"):
        store.dead_letters.add_dead_letter(source=source, run_id=None, stage="detail", kind="k", error="e", raw=None, record_key="R1")
    queue.settle("demo", claimed[0], state="done", level=0, due=None, now=t(4), attempted=True, error=None,
                 resolve_letters=True)
    assert [letter["source"] for letter in store.dead_letters.open_dead_letters()] == ["other"]
    assert queue.reclaim("demo", claimed="processing", claimed_before=t(9), retry="retry", pending="pending",
                         now=t(9)) == []   # R2 was released, R1 settled: nothing stuck
    row = store.query(dialect_of(store).query("SELECT * FROM enrichment WHERE record_key = 'R2'"))[0]
    assert (row["state"], row["attempts"], row["transient_failures"], row["last_error"]) == ("pending", 1, 1, "timeout")
    queue.settle("demo", r2, state="gone", level=4, due=None, now=t(6), attempted=True, error="404",
                 resolve_letters=False)
    assert queue.counts("demo") == {"done": 1, "gone": 1}
    assert queue.requeue("demo", state="gone", to="pending", now=t(7)) == 1 and queue.counts("demo") == {
        "done": 1, "pending": 1}


def test_dead_crawl_runs_are_closed_alive_ones_kept(store):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        alive = store.runs.start_run("demo", "full", "running", os.getpid())
        gone = store.runs.start_run("demo", "full", "running", 2 ** 22 + 12345)   # above pid_max: no such process
        assert store.runs.close_dead_runs() == [gone]
        d = dialect_of(store)
        assert store.runs.last_run("demo")["id"] == gone and store.query(
            d.query(f"SELECT status FROM crawl_runs WHERE id = {d.p}"), [alive])[0]["status"] == "running"
    finally:
        child.kill()
        child.wait()


# ---- coordination by the engine (PostgreSQL) --------------------------------------------------
def test_run_lock_is_an_advisory_lock_per_source_released_when_its_holder_dies(pg_url):  # noqa: F811
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, %r)\n"
        "from basecrawler.pipeline.runlock import RunLock\n"
        "lock = RunLock(%r, scope='jp'); assert lock.try_acquire(); print('held', flush=True); time.sleep(60)"
        % (str(REPO), pg_url))], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        jp, eu = RunLock(pg_url, scope="jp"), RunLock(pg_url, scope="eu")
        assert not jp.try_acquire()
        assert jp.holder_pid() == holder.pid
        assert eu.try_acquire()                      # another source crawls meanwhile
        with pytest.raises(Exception, match="still held"):
            RunLock(pg_url, timeout_s=0.3, scope="jp").acquire()
        holder.send_signal(signal.SIGKILL)           # a crash: its session ends, the lock goes with it
        holder.wait()
        deadline = time.monotonic() + 10
        while not jp.try_acquire():
            assert time.monotonic() < deadline, "the dead holder's lock was never released"
            time.sleep(0.05)
        jp.release()
        eu.release()
    finally:
        holder.kill()
        holder.wait()


def _claim_concurrently(make_claim, workers: int) -> list[list]:
    """Run `make_claim()` (a function claiming one batch) in `workers` threads until the queue
    is empty; every thread starts at once. Returns each thread's claimed keys."""
    start = threading.Barrier(workers)
    taken: list[list] = [[] for _ in range(workers)]

    def work(index):
        claim = make_claim()
        start.wait()
        while True:
            batch = claim()
            if not batch:
                return
            taken[index].extend(batch)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return taken


def test_enrichment_workers_never_claim_the_same_item(pg_url):  # noqa: F811
    setup = Store(pg_url)
    now = "2024-01-01T00:00:00+00:00"
    d = dialect_of(setup)
    setup.write(lambda db: db.conn.executemany(
        d.write("INSERT INTO enrichment (source, key_prefix, record_key, record_date, state, level, attempts, "
                f"transient_failures, next_attempt_at, created_at, updated_at) VALUES ('demo','XX',{d.p},{d.p},'pending',0,0,0,"
                f"{d.params(3)})"),
        [[f"R{n}", f"2024-01-{n % 28 + 1:02d}", now, now, now] for n in range(200)]))
    stores = []

    def make_claim():
        store = Store(pg_url)
        stores.append(store)
        crawler = SimpleNamespace(store=store, source="demo", settings=SimpleNamespace(enrich_limit=3),
                                  clock=time.time)
        return lambda: [i["record_key"] for i in enrichment.claim_due(crawler)]
    taken = _claim_concurrently(make_claim, 4)
    every = [key for keys in taken for key in keys]
    assert len(every) == len(set(every)) == 200
    assert sum(1 for keys in taken if keys) >= 2          # the work was shared
    for s in stores + [setup]:
        s.close()


def test_translation_workers_never_send_the_same_row_twice(pg_url):  # noqa: F811
    from translate.backends import Backend
    from translate.fakeserver import pseudo_korean
    from translate.worker import translate_pending

    class Counting(Backend):
        name = "counting"

        def __init__(self, sent):
            super().__init__()
            self.sent = sent

        def translate(self, texts, source_lang, target_lang="ko"):
            self.count_call()
            self.sent.extend(texts)
            time.sleep(0.01)                  # a backend takes its time; the others go on
            return [pseudo_korean(t) for t in texts]

    setup = Store(pg_url)
    setup.upsert("vehicle_recall", [Recall(country="XX", recall_number=f"T{n}", recall_date=f"2024-02-{n % 28 + 1:02d}",
                                 source_lang="en", summary_original=f"Summary number {n} of the fleet")
                          for n in range(120)], source="demo")
    sent: list[str] = []
    reports = []
    stores = []

    def make_claim():
        store = Store(pg_url)
        stores.append(store)
        backend = Counting(sent)

        def one_batch():
            report = translate_pending(store, backend, limit=10, batch_rows=5)
            reports.append(report)
            return report.processed
        return lambda: [None] * one_batch()
    _claim_concurrently(make_claim, 4)
    assert len(sent) == len(set(sent)) == 120           # every distinct text sent once
    assert setup.scalar(dialect_of(setup).query("SELECT COUNT(*) FROM recalls WHERE translation_status = 'translated'")) == 120
    assert setup.scalar(dialect_of(setup).query("SELECT COUNT(*) FROM translation_claims")) == 0   # every claim given back
    for s in stores + [setup]:
        s.close()


def test_pg_search_uses_the_trigram_index(pg_url, monkeypatch):  # noqa: F811
    from basecrawler.reading.search import RecallFilter, build_query
    monkeypatch.setenv("BASECRAWLER_PG_SEARCH_INDEX", "trgm")   # (the windows index: tests/test_read_pg_short.py)
    store = Store(pg_url)
    sql, params = build_query(RecallFilter(text="ブレーキ"), dialect="postgresql")
    store.db.execute(dialect_of(store.db).write("SET enable_seqscan = off"))
    plan = "\n".join(r[0] for r in store.db.execute(sql.dialect.query("EXPLAIN " + sql), params).fetchall())
    assert "recalls_search_trgm" in plan
    store.close()


# ---- moving a store, and the replay demo on both engines ---------------------------------------
def _records(db) -> list[dict]:
    store = Store(db)
    try:
        rows = store.query(dialect_of(store).query("SELECT * FROM recalls ORDER BY country, recall_number"))
    finally:
        store.close()
    for row in rows:
        for volatile in ("id", "first_seen_at", "updated_at"):
            row.pop(volatile)
    return rows


@pytest.mark.slow
def test_replay_demo_gives_the_same_records_on_both_engines_and_migrates_both_ways(tmp_path, pg_cluster, capsys):  # noqa: F811
    replay = str(REPO / "fixtures" / "replay")
    lite, pg = str(tmp_path / "demo.db"), pg_cluster.new_database()
    for db in (lite, pg):
        assert main(["--db", db, "run", "--all", "--mode", "full", "--replay", replay]) == 0
    on_sqlite, on_pg = _records(lite), _records(pg)
    assert len(on_sqlite) > 50 and on_sqlite == on_pg
    capsys.readouterr()
    reports = []
    for db in (lite, pg):    # the read commands answer the same on both engines
        assert main(["--db", db, "status", "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        status.pop("db")
        for source in status["sources"].values():   # when it ran differs, what it holds does not
            for moment in ("last_run", "last_success"):
                source.pop(moment, None)
            source.get("coverage", {}).pop("last_success", None)   # a rolling-window source's, too
        assert main(["--db", db, "dead-letters", "list", "--json"]) == 0
        letters = json.loads(capsys.readouterr().out)
        assert main(["--db", db, "export", "--format", "csv", "-o", str(tmp_path / "out.csv")]) == 0
        capsys.readouterr()
        reports.append((status, len(letters), (tmp_path / "out.csv").read_text(encoding="utf-8").count("\n")))
    assert reports[0] == reports[1] and reports[0][2] > 50

    target = pg_cluster.new_database()
    assert main(["--db", lite, "migrate", "--to", target]) == 0
    out = capsys.readouterr().out
    assert "copied" in out and "✗" not in out
    assert _records(target) == on_sqlite
    moved = Store(target)
    tables = ("crawl_runs", "dead_letters", "list_ledger", "enrichment", "responses", "artifacts")
    assert {t: moved.scalar(dialect_of(moved).query(f"SELECT COUNT(*) FROM {t}")) for t in tables} == \
        {t: Store(lite).scalar(f"SELECT COUNT(*) FROM {t}") for t in tables}
    new_id = moved.runs.start_run("demo", "full", "running", os.getpid())   # ids continue after the copied ones
    assert new_id > Store(lite).scalar("SELECT MAX(id) FROM crawl_runs")
    moved.close()

    back = str(tmp_path / "back.db")
    assert main(["--db", pg, "migrate", "--to", back]) == 0
    assert _records(back) == on_pg
    from basecrawler.reading.search import RecallFilter, count
    local = Store(back)
    assert count(local.db.conn, RecallFilter(text="ブレーキ")) == count(Store(pg).db.conn, RecallFilter(text="ブレーキ")) > 0
    local.close()
    assert main(["--db", lite, "migrate", "--to", back]) == 2   # never into a store that holds data


def test_doctor_notes_a_store_whose_short_terms_read_the_table_and_says_how_to_switch(pg_url, monkeypatch):  # noqa: F811
    from basecrawler.commands.doctor import check_database

    monkeypatch.setenv("BASECRAWLER_PG_SEARCH_INDEX", "trgm")   # as a store made before the windows index
    short = {c.name: c for c in check_database(pg_url)}["short-term search"]
    assert short.ok and short.note and short.mark == "–"   # it works: a note, not a failure
    assert "recalls" in short.detail and "pg_trgm" in short.detail
    assert "BASECRAWLER_PG_SEARCH_INDEX=windows" in short.fix


def test_doctor_checks_the_postgresql_connection_and_the_scheduler_lock(pg_url, pg_cluster):  # noqa: F811
    from basecrawler.commands.doctor import check_database, check_scheduler
    from basecrawler.operations.scheduler import daemon_lock

    checks = {c.name: c for c in check_database(pg_url)}
    assert checks["database connection"].ok and "schema version" in checks["database connection"].detail
    assert checks["search index"].ok
    short = checks["short-term search"]
    assert short.ok and not short.note and "every table" in short.detail
    refused = check_database(f"postgresql://postgres:pw@127.0.0.1:{pg_cluster.port}/no_such_db")[0]
    assert not refused.ok and "pw" not in refused.detail and refused.fix

    assert not check_scheduler(pg_url).ok
    running = daemon_lock(pg_url)
    assert running.try_acquire()
    try:
        assert check_scheduler(pg_url).ok
    finally:
        running.release()


def test_translation_claims_of_a_live_worker_wait_dead_or_stale_ones_return(store):
    from translate.backends import Backend
    from translate.fakeserver import pseudo_korean
    from translate.worker import translate_pending

    class Echo(Backend):
        def translate(self, texts, source_lang, target_lang="ko"):
            self.count_call()
            return [pseudo_korean(t) for t in texts]

    store.upsert("vehicle_recall", [Recall(country="XX", recall_number=f"C{n}", recall_date="2024-03-01", source_lang="en",
                                 summary_original=f"Summary {'abcd'[n]} of the fleet") for n in range(4)], source="demo")
    from translate.claims import _host
    fresh, stale = time.time() + 3600, time.time() - 3600
    # translate/claims.py: a claimer is "<host> <pid> <random>"; this test process is alive.
    live, dead = f"{_host()} {os.getpid()} other", f"{_host()} {2 ** 22 + 7} gone"
    d = dialect_of(store)
    for number, claimed_at, by in (("C0", fresh, live), ("C1", stale, live), ("C2", fresh, dead)):
        store.write(lambda db: db.conn.execute(
            d.write("INSERT INTO translation_claims (tbl, row_id, claimed_by, claimed_at) "
                    f"SELECT 'recalls', id, {d.p}, {d.p} FROM recalls WHERE recall_number = {d.p}"), [by, claimed_at, number]))
    report = translate_pending(store, Echo())
    done = {r["recall_number"] for r in store.query(dialect_of(store).query("SELECT recall_number FROM recalls WHERE translated_at IS NOT NULL"))}
    assert done == {"C1", "C2", "C3"} and report.translated == 3    # C0: a live worker is on it
    store.write(lambda db: db.conn.execute(d.write(f"UPDATE translation_claims SET claimed_at = {d.p}"), [stale]))   # lease ran out
    assert translate_pending(store, Echo()).translated == 1


# ---- schema extensions (issue #15.4): the translate package owns translation_memory --------
def test_the_translation_memory_table_is_the_translate_schema_extension(store):
    from translate.schema import MIGRATIONS
    assert store.scalar(dialect_of(store).query("SELECT COUNT(*) FROM translation_memory")) == 0   # the table exists, empty
    assert store.scalar(dialect_of(store).query("SELECT version FROM schema_extensions WHERE name = 'translate'")) == len(MIGRATIONS)


def test_a_schema_extension_runs_once_reaches_both_engines_and_can_grow(db_path, monkeypatch):
    from basecrawler.store import schema
    calls = []

    def m1(db):
        calls.append("m1")
        db["demo_ext"].create({"key": str, "value": str}, pk="key", if_not_exists=True)

    def m2(db):
        calls.append("m2")
        db["demo_ext"].add_column("extra", int)
        db["demo_ext"].create_index(["value"], index_name="demo_ext_value")

    def columns(store):
        cursor = store.db.conn.execute(dialect_of(store.db.conn).query("SELECT * FROM demo_ext WHERE 1 = 0"))
        return [d[0] for d in cursor.description]

    Store(db_path).close()                          # a database made before the extension existed
    monkeypatch.setitem(schema._registered, "zz_demo", [m1])
    store = Store(db_path)
    assert columns(store) == ["key", "value"]
    store.write(lambda db: db.conn.execute(dialect_of(db.conn).write("INSERT INTO demo_ext (key, value) VALUES ('a', 'b')")))
    assert store.scalar(dialect_of(store).query("SELECT version FROM schema_extensions WHERE name = 'zz_demo'")) == 1
    store.close()
    if store.engine == "sqlite":
        assert calls == ["m1"]
    calls.clear()
    Store(db_path).close()                          # a second open runs nothing
    assert calls == []

    monkeypatch.setitem(schema._registered, "zz_demo", [m1, m2])
    store = Store(db_path)
    assert columns(store) == ["key", "value", "extra"]
    assert store.scalar(dialect_of(store).query("SELECT value FROM demo_ext")) == "b"       # the rows stay
    assert store.scalar(dialect_of(store).query("SELECT version FROM schema_extensions WHERE name = 'zz_demo'")) == 2
    store.close()
    if store.engine == "sqlite":
        assert calls == ["m2"]


def test_migrate_copies_the_translation_memory_but_not_the_extension_bookkeeping(store, tmp_path):
    from basecrawler.store.engines.transfer import copy_store
    from translate.memory import TranslationMemory
    store.write(lambda db: TranslationMemory(store).remember(db, "ja", {"制動": "제동"}, "fake"))
    target = Store(str(tmp_path / "copy.db"))
    counts = copy_store(store, target)
    memory = counts["translation_memory"]
    assert (memory.source_rows, memory.target_rows, memory.ok) == (1, 1, True) and "schema_extensions" not in counts
    assert TranslationMemory(target).lookup("ja", ["制動"]) == {"制動": "제동"}
    from translate.schema import MIGRATIONS
    assert target.scalar("SELECT version FROM schema_extensions WHERE name = 'translate'") == len(MIGRATIONS)
    target.close()
