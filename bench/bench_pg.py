"""PostgreSQL under load (issue #17): several processes on one database.

1. Translation scaling: R pending rows (every text unique, so a text sent twice can only be a
   row translated twice) translated by 1, 2 and 4 worker processes against the fake
   LibreTranslate on 127.0.0.1 with L s latency, one request in flight per worker (one model
   endpoint each). Rows/s, backend texts sent vs distinct texts.
2. Mixed load: 4 translating + 2 crawling processes at once. Each crawler upserts its own
   source in batches, then re-sends every record with a changed summary (which clears `_ko` and
   queues the row again); the translators run until the crawlers are done and nothing is
   pending. Checked: every record stored exactly once with its last summary, every final
   summary translated, no text sent twice.
3. Upsert rate: N records through the store (COPY + one merge statement per batch,
   basecrawler/store/engines/pg_upsert.py; COALESCE, counts) vs the engine doing the same work
   on the same rows and schema: a plain psycopg executemany, and COPY into a staging table + one
   INSERT … ON CONFLICT per batch (see `upsert_rate`); also the store's row-by-row path (what it
   ran before the merge, and still runs for a batch the server refuses) and an unchanged re-run.
   `--profile TOP` then prints the store's client profile and the merge's EXPLAIN ANALYZE.
4. `--pipeline N`: the whole pipeline (bench_upsert.py's data and crawler, `--type` vehicle_recall
   or bench_alert), a first run of N records and a re-run of the unchanged data, --repeats fresh
   databases: the re-run's share.

A throw-away cluster is started in a temp folder (tests/pgcluster.py; fsync off), or pass
--url postgresql://… for a server of your own (it must allow CREATE DATABASE).

    python bench/bench_pg.py [--rows 1200] [--latency 0.05] [--upsert 20000] [--repeats 3] [--upsert-only]
                             [--profile 25] [--pipeline 50000 [--type bench_alert]] [--search-index windows]
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from basecrawler import Recall, Store  # noqa: E402
from basecrawler.recordtypes import get_record_type  # noqa: E402
from basecrawler.recordtypes.upsert import INPUT_HASH, plan_for  # noqa: E402
from translate.backends import LibreTranslateBackend  # noqa: E402
from translate.fakeserver import FakeLibreTranslate  # noqa: E402
from translate.worker import translate_pending  # noqa: E402


class OneAtATime(LibreTranslateBackend):
    concurrency = 1   # one request in flight per worker: scaling comes from processes


def word(n: int) -> str:
    """n spelt in letters: the worker masks digits and codes before sending, so a text made
    unique by a number would reach the backend as the same template as its neighbours."""
    letters = "bcdfghjklmnpqrstvwxz"
    out = ""
    while True:
        out = letters[n % 20] + "a" + out
        n //= 20
        if not n:
            return out


def recall(country: str, n: int, version: int = 0) -> Recall:
    tag = f"{word(n)} {country.lower()}o"
    return Recall(country=country, recall_number=f"{country}-{n:06d}", recall_date=f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}",
                  source_lang="en", manufacturer_original=f"Maker {tag}",
                  summary_original=f"Summary {tag} {'first' if version == 0 else 'second'} version: the brake hose may rupture.",
                  remedy_original=f"Remedy {tag}: dealers replace the hose.")


# ---- worker processes ------------------------------------------------------------------------
def _translator(url: str, server_url: str, done_event, results, ready, go) -> None:
    logging.disable(logging.WARNING)
    store = Store(url)
    backend = OneAtATime(server_url, retry_waits_s=(), timeout_s=30)
    ready.put(1)
    go.wait()                                      # timing starts when every process is up
    rows = 0
    while True:
        crawlers_done = done_event.is_set()        # read before the run: nothing may slip past
        rows += translate_pending(store, backend, batch_rows=20).processed
        if crawlers_done and not store.scalar("SELECT COUNT(*) FROM recalls WHERE translated_at IS NULL"):
            break
        time.sleep(0.05)
    results.put(rows)
    store.close()


def _crawler(url: str, country: str, count: int, results, ready, go) -> None:
    logging.disable(logging.WARNING)
    store = Store(url)
    ready.put(1)
    go.wait()
    totals = {"new": 0, "updated": 0, "unchanged": 0, "failed": 0}
    for version in (0, 1):
        for start in range(0, count, 100):
            r = store.upsert("vehicle_recall", [recall(country, n, version) for n in range(start, min(start + 100, count))],
                             source=country.lower())
            for key in ("new", "updated", "unchanged"):
                totals[key] += getattr(r, key)
            totals["failed"] += len(r.failed)
            time.sleep(0.1)                        # a crawler also waits for its sources
    results.put((country, totals))
    store.close()


def _start(procs, ready, go) -> float:
    """Start the processes, wait until each has imported and connected, then let them go."""
    for p in procs:
        p.start()
    for _ in procs:
        ready.get()
    go.set()
    return time.perf_counter()


# ---- the three measurements -------------------------------------------------------------------
def translation_scaling(cluster, rows: int, latency: float, processes: int) -> dict:
    url = cluster.new_database()
    store = Store(url)
    store.upsert("vehicle_recall", [recall("XX", n) for n in range(rows)], source="xx")
    with FakeLibreTranslate(delay_s=latency) as server:
        ctx = mp.get_context("spawn")
        done, results, ready, go = ctx.Event(), ctx.Queue(), ctx.Queue(), ctx.Event()
        done.set()                                 # no crawler in this part
        procs = [ctx.Process(target=_translator, args=(url, server.url, done, results, ready, go))
                 for _ in range(processes)]
        started = _start(procs, ready, go)
        per_process = [results.get() for _ in procs]
        for p in procs:
            p.join()
        seconds = time.perf_counter() - started
        texts = server.texts
    pending = store.scalar("SELECT COUNT(*) FROM recalls WHERE translated_at IS NULL")
    store.close()
    return {"processes": processes, "rows": rows, "seconds": seconds, "rows_per_s": rows / seconds,
            "per_process": per_process, "texts_sent": len(texts), "distinct": len(set(texts)), "pending": pending}


def mixed_load(cluster, rows: int, latency: float) -> dict:
    url = cluster.new_database()
    Store(url).close()
    ctx = mp.get_context("spawn")
    with FakeLibreTranslate(delay_s=latency) as server:
        done, results, crawl_results, ready, go = ctx.Event(), ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Event()
        translators = [ctx.Process(target=_translator, args=(url, server.url, done, results, ready, go))
                       for _ in range(4)]
        crawlers = [ctx.Process(target=_crawler, args=(url, c, rows, crawl_results, ready, go)) for c in ("AA", "BB")]
        started = _start(translators + crawlers, ready, go)
        crawled = dict(crawl_results.get() for _ in crawlers)
        for p in crawlers:
            p.join()
        done.set()
        translated = [results.get() for _ in translators]
        for p in translators:
            p.join()
        seconds = time.perf_counter() - started
        texts = server.texts
    store = Store(url)
    stored = store.query("SELECT recall_number, summary_original, summary_ko, translated_at FROM recalls")
    store.close()
    expected = {f"{c}-{n:06d}": recall(c, n, 1).summary_original for c in ("AA", "BB") for n in range(rows)}
    return {
        "seconds": seconds, "crawled": crawled, "translated_per_process": translated,
        "records": len(stored), "expected": len(expected),
        "distinct_keys": len({r["recall_number"] for r in stored}),
        "wrong_or_missing": sum(1 for r in stored if expected.get(r["recall_number"]) != r["summary_original"])
        + len(expected.keys() - {r["recall_number"] for r in stored}),
        "untranslated": sum(1 for r in stored if not r["translated_at"] or not r["summary_ko"]),
        "texts_sent": len(texts), "distinct": len(set(texts)),
    }


def _unique_key(conn) -> list[str]:
    """The columns of the recalls table's unique key, read from the database (the key gains
    `source` with record types, issue #24)."""
    rows = conn.execute(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = 'recalls'::regclass AND i.indisunique AND NOT i.indisprimary "
        "ORDER BY array_position(i.indkey::int2[], a.attnum)").fetchall()
    return [r[0] for r in rows]


def _backend_cpu(pid: int | None) -> float | None:
    """CPU seconds (user + system) the server process `pid` has used so far, read from /proc:
    a local server only (None for another host or without /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Clock:
    """Wall clock, this process's CPU and, given the server process serving the connection,
    its CPU: `total` (client + server CPU) is what a busy shared machine disturbs least."""

    def __init__(self, backend_pid: int | None = None):
        self.pid = backend_pid

    def __enter__(self):
        self.wall, self.cpu, self.server = time.perf_counter(), time.process_time(), _backend_cpu(self.pid)
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        after = _backend_cpu(self.pid)
        self.server = after - self.server if after is not None and self.server is not None else None
        self.total = self.cpu + self.server if self.server is not None else None


def upsert_records(count: int, start: int = 0) -> list[Recall]:
    """A source names a few hundred makers, not one per recall: so does this data (the store
    derives a normalised maker key per row, cached per name)."""
    return [recall("US", n).model_copy(update={"manufacturer_original": f"Maker {word(n % 300)}"})
            for n in range(start, start + count)]


def upsert_rate(cluster, count: int, repeats: int = 3) -> dict:
    """The store against the engine doing the same work on the same rows and schema, each on a
    fresh database, variants interleaved per repetition: wall and client CPU time.
    - store: `Store.upsert` per 500 (COPY + one merge per batch, counts);
    - store, row by row: the same with the merge switched off (the keyed lookups, the merge in
      Python, executemany in a savepoint: the path before #23, and the fallback for a refused batch);
    - store re-run: the store's rows sent again unchanged (0 rows written);
    - executemany: a plain psycopg `executemany` of ready rows, one transaction per 500;
    - copy + merge: `COPY` into a temporary staging table, then one `INSERT … SELECT … ON
      CONFLICT (key) DO UPDATE SET c = COALESCE(excluded.c, c)` per 500 (the same merge rule);
    - copy + merge, store's values: the same with every value the store writes (the derived
      maker key, which has an index, and the input hash), the store's own parameters for these
      rows made beforehand — what bench_upsert.py's plain path does on SQLite.
    The trigram index is a GIN index on the columns themselves: every variant feeds it alike."""
    import psycopg

    records = upsert_records(count)
    DATA_COLUMNS = plan_for(get_record_type("vehicle_recall")).written   # the columns a crawl writes
    cols = list(DATA_COLUMNS) + ["first_seen_at", "updated_at"]
    rows = []
    for r in records:
        row = r.to_row() | {"source": "us"}
        rows.append([row.get(c) if c != "extra" else None for c in DATA_COLUMNS] + ["2024-01-01T00:00:00+00:00"] * 2)
    rows = [[int(v) if isinstance(v, bool) else v for v in row] for row in rows]
    insert = f"INSERT INTO recalls ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})"
    plan = plan_for(get_record_type("vehicle_recall"))
    full_cols = [*plan.written, *plan.derived, INPUT_HASH, "first_seen_at", "updated_at"]
    full_rows = []
    for r in records:
        row = plan.row_of(r, "us")
        row[INPUT_HASH] = plan.input_hash(row)
        full_rows.append([int(v) if isinstance(v, bool) else v for v in plan.params(row, "2024-01-01T00:00:00+00:00")])
    timings: dict[str, list[_Clock]] = {"store": [], "store, row by row": [], "store re-run": [],
                                        "executemany": [], "copy + merge": [], "copy + merge, store's values": []}

    def through_store(store) -> _Clock:
        store.scalar("SELECT 1")   # connected: the server process to watch
        with _Clock(store.db.conn.raw.info.backend_pid) as clock:
            for start in range(0, count, 500):
                store.upsert("vehicle_recall", records[start:start + 500], source="us")
        return clock

    for _ in range(repeats):
        store = Store(cluster.new_database())
        timings["store"].append(through_store(store))
        timings["store re-run"].append(through_store(store))
        store.close()

        store = Store(cluster.new_database())
        with _row_by_row():
            timings["store, row by row"].append(through_store(store))
        store.close()

        url = cluster.new_database()
        with psycopg.connect(url) as conn:
            with _Clock(conn.info.backend_pid) as clock:
                for start in range(0, count, 500):     # one transaction per 500 rows, as the store
                    with conn.transaction():
                        conn.cursor().executemany(insert, rows[start:start + 500])
        timings["executemany"].append(clock)

        for name, columns, values in (("copy + merge", cols, rows), ("copy + merge, store's values", full_cols, full_rows)):
            timings[name].append(_copy_merge(cluster.new_database(), columns, values, count))

    clocks = ("wall", "cpu", "total") if all(t.total for ts in timings.values() for t in ts) else ("wall", "cpu")

    def median(name, clock):
        return statistics.median(count / getattr(t, clock) for t in timings[name])

    def ratio(name, clock):   # per repetition: a noisy moment hits both sides of a pair
        return statistics.median(getattr(p, clock) / getattr(s, clock) for s, p in zip(timings["store"], timings[name]))

    def spread(name, clock="wall"):   # the ratio per repetition: min, median, max
        pairs = [getattr(p, clock) / getattr(s, clock) for s, p in zip(timings["store"], timings[name])]
        return min(pairs), statistics.median(pairs), max(pairs)
    return {"records": count, "repeats": repeats,
            "rates": {name: {clock: median(name, clock) for clock in clocks} for name in timings},
            "ratios": {name: {clock: ratio(name, clock) for clock in clocks}
                       for name in ("executemany", "copy + merge", "copy + merge, store's values")},
            "row by row / store": {clock: ratio("store, row by row", clock) for clock in ("wall", "cpu")},
            "spread": {name: {clock: spread(name, clock) for clock in clocks}
                       for name in ("executemany", "copy + merge", "copy + merge, store's values")},
            "re-run spread": [r.wall / f.wall for f, r in zip(timings["store"], timings["store re-run"])]}


def _copy_merge(url: str, cols: list[str], rows: list[list], count: int) -> _Clock:
    """COPY into a staging table + one COALESCE merge per 500 rows, one transaction each."""
    import psycopg

    with psycopg.connect(url) as conn:
        key = _unique_key(conn)
        updates = ", ".join(f"{c} = COALESCE(excluded.{c}, recalls.{c})" for c in cols if c not in key)
        merge = (f"INSERT INTO recalls ({', '.join(cols)}) SELECT {', '.join(cols)} FROM stage "
                 f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}")
        conn.execute(f"CREATE TEMP TABLE stage ON COMMIT DELETE ROWS AS SELECT {', '.join(cols)} FROM recalls WITH NO DATA")
        conn.commit()
        with _Clock(conn.info.backend_pid) as clock:
            for start in range(0, count, 500):
                with conn.transaction():
                    with conn.cursor().copy(f"COPY stage ({', '.join(cols)}) FROM STDIN") as copy:
                        for row in rows[start:start + 500]:
                            copy.write_row(row)
                    conn.execute(merge)
        assert conn.execute("SELECT COUNT(*) FROM recalls").fetchone()[0] == count
    return clock


@contextlib.contextmanager
def _row_by_row():
    """The store with its PostgreSQL merge switched off: every batch takes the row-by-row path."""
    from basecrawler.store.engines import pg_upsert
    real = pg_upsert.merge_batch
    pg_upsert.merge_batch = lambda *args: False
    try:
        yield
    finally:
        pg_upsert.merge_batch = real


def pipeline_rerun(cluster, count: int, repeats: int, type_name: str = "vehicle_recall") -> dict:
    """The whole pipeline on PostgreSQL, as bench_upsert.py measures it on SQLite (its data and
    crawler): a first `run()` of `count` records into a fresh database, then a re-run of the
    unchanged data (exact counts, 0 rows written), per repetition; the ratio re-run / first run
    is taken per repetition. Rows written by the re-run are the rows whose `xmin` is a
    transaction after the first run's (no trigger: it would slow the first run)."""
    from bench_upsert import ListCrawler, type_and_rows

    record_type, make_rows = type_and_rows(type_name)
    rows = make_rows(count)
    times: dict[str, list] = {"first run": [], "re-run": []}
    written = []
    for _ in range(repeats):
        store = Store(cluster.new_database())
        for name in times:
            if name == "re-run":
                after = store.scalar("SELECT txid_current()")   # a transaction of its own: every later write is above it
            store.scalar("SELECT 1")   # connected: the server process to watch
            with _Clock(store.db.conn.raw.info.backend_pid) as timer:
                result = ListCrawler(store, rows, record_type.name).run()
            assert result.status == "succeeded", result.error
            counts = result.counts
            if name == "first run":
                assert counts.new == count, counts
            else:
                assert counts.unchanged == count and counts.saved == count, counts
                written.append(store.scalar(f"SELECT COUNT(*) FROM {record_type.table} WHERE xmin::text::bigint > ?", [after]))
            times[name].append(timer)
        store.close()
    return {"records": count, "repeats": repeats, "times": times, "written": written, "type": record_type.name}


def _print_pipeline(p: dict) -> None:
    count, times = p["records"], p["times"]

    def spread(values, fmt):
        return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"
    print(f"pipeline on PostgreSQL: {count:,} {p['type']} records (bench_upsert's data), batches of "
          f"{os.environ.get('BASECRAWLER_BATCH_SIZE', '5000')}, {p['repeats']} fresh databases: median (min–max)")
    for name, timers in times.items():
        print(f"  {name:<10} {spread([count / t.wall for t in timers], ',.0f'):>28} rec/s wall  "
              f"{spread([count / t.cpu for t in timers], ',.0f'):>28} rec/s client CPU")
    pairs = list(zip(times["first run"], times["re-run"]))
    total = (f", {spread([r.total / f.total for f, r in pairs], '.3f')} client + server CPU"
             if all(t.total for f, r in pairs for t in (f, r)) else "")
    print(f"  re-run / first run: {spread([r.wall / f.wall for f, r in pairs], '.3f')} wall, "
          f"{spread([r.cpu / f.cpu for f, r in pairs], '.3f')} client CPU{total}; "
          f"rows written by the re-run: {max(p['written'])}")


def profile_store(cluster, count: int, top: int) -> None:
    """Where the store's time goes: cProfile of the client over `count` records, then EXPLAIN
    ANALYZE of the merge statement for 500 new rows and for 500 unchanged ones."""
    import cProfile
    import pstats

    from basecrawler.formats.dates import utc_now_iso
    from basecrawler.store.engines.pg_upsert import merge_sql

    records = upsert_records(count + 500)
    store = Store(cluster.new_database())
    profiler = cProfile.Profile()
    with _Clock() as clock:
        profiler.enable()
        for start in range(0, count, 500):
            store.upsert("vehicle_recall", records[start:start + 500], source="us")
        profiler.disable()
    print(f"profile: {count} records through the store, {clock.wall:.2f} s wall, {clock.cpu:.2f} s client CPU "
          "(under the profiler); by own time:")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)

    plan = plan_for(get_record_type("vehicle_recall"))
    sql, now = merge_sql(plan), utc_now_iso()

    def staged(batch):
        rows = [plan.row_of(r, "us") for r in batch]
        for row in rows:
            row[INPUT_HASH] = plan.input_hash(row)
        return [[int(v) if isinstance(v, bool) else v for v in plan.params(row, now)] for row in sorted(rows, key=plan.key)]
    raw = store.db.conn.raw
    for label, values in (("500 new rows", staged(records[count:count + 500])), ("500 unchanged rows", staged(records[:500]))):
        with raw.transaction(force_rollback=True):
            raw.execute(sql.create)
            with raw.cursor().copy(sql.copy) as copy:
                for row in values:
                    copy.write_row(row)
            plan_text = "\n".join(r[0] for r in raw.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql.insert))
        print(f"EXPLAIN ANALYZE of the insert, {label}:")
        print("\n".join(line for line in plan_text.splitlines() if "Filter:" not in line))   # the filter is one long line
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1200)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--upsert", type=int, default=20000)
    parser.add_argument("--url", help="an existing server instead of a throw-away cluster")
    parser.add_argument("--repeats", type=int, default=3, help="fresh databases per upsert variant")
    parser.add_argument("--upsert-only", action="store_true", help="only the upsert measurement")
    parser.add_argument("--pipeline", type=int, metavar="N", help="only the whole pipeline's first run and re-run of "
                        "N records (bench_upsert.py's data), --repeats times")
    parser.add_argument("--type", default="vehicle_recall", choices=("vehicle_recall", "bench_alert"),
                        help="the record type of --pipeline (bench_upsert.py's data of it)")
    parser.add_argument("--profile", type=int, metavar="TOP", help="then profile the store's upsert (cProfile top TOP, "
                        "EXPLAIN ANALYZE of the merge)")
    parser.add_argument("--search-index", choices=("trgm", "windows"),
                        help="PostgreSQL: the search index the stores get (BASECRAWLER_PG_SEARCH_INDEX; "
                             "default: what the store has, pg_trgm for a new one)")
    args = parser.parse_args()
    from pgcluster import Cluster, _bin_dir
    if args.search_index:
        os.environ["BASECRAWLER_PG_SEARCH_INDEX"] = args.search_index   # read when a store opens (pg_migrations)

    if args.url:
        cluster = _ExistingServer(args.url)
    else:
        cluster = Cluster(_bin_dir()).start()
    try:
        if args.pipeline:
            _print_pipeline(pipeline_rerun(cluster, args.pipeline, args.repeats, args.type))
            return
        if args.upsert_only:
            _print_upsert(upsert_rate(cluster, args.upsert, args.repeats))
            if args.profile:
                profile_store(cluster, args.upsert, args.profile)
            return
        print(f"translation scaling: {args.rows} rows × 3 texts, {args.latency * 1000:.0f} ms per request, "
              "batches of 20 rows, one request in flight per process")
        base = None
        for processes in (1, 2, 4):
            r = translation_scaling(cluster, args.rows, args.latency, processes)
            base = base or r["rows_per_s"]
            print(f"  {processes} process(es): {r['rows_per_s']:7.1f} rows/s ({r['rows_per_s'] / base:.2f}×), "
                  f"{r['seconds']:.1f} s; texts sent {r['texts_sent']} = distinct {r['distinct']}: "
                  f"{r['texts_sent'] == r['distinct']}; rows per process {r['per_process']}; pending {r['pending']}")
        m = mixed_load(cluster, args.rows // 2, args.latency)
        print(f"mixed: 4 translators + 2 crawlers ({args.rows // 2} records each, sent twice): {m['seconds']:.1f} s; "
              f"records {m['records']}/{m['expected']} (distinct keys {m['distinct_keys']}), wrong or missing "
              f"{m['wrong_or_missing']}, untranslated {m['untranslated']}; texts sent {m['texts_sent']} = distinct "
              f"{m['distinct']}: {m['texts_sent'] == m['distinct']}; crawl counts {m['crawled']}; "
              f"rows per translator {m['translated_per_process']}")
        _print_upsert(upsert_rate(cluster, args.upsert, args.repeats))
    finally:
        cluster.stop()


def _print_upsert(u: dict) -> None:
    print(f"upsert {u['records']} records, batches of 500, {u['repeats']} fresh databases each, median "
          "(rec/s by wall clock / by this process's CPU; the server's CPU is not in the second figure):")
    for name, rate in u["rates"].items():
        total = f"  {rate['total']:>9,.0f} rec/s client + server CPU" if "total" in rate else ""
        print(f"  {name:<28} {rate['wall']:>9,.0f} rec/s wall  {rate['cpu']:>9,.0f} rec/s client CPU{total}")
    for name, r in u["ratios"].items():
        print(f"  ratio store / {name:<28} {r['wall']:.2f} wall  {r['cpu']:.2f} client CPU"
              + (f"  {r['total']:.2f} client + server CPU" if "total" in r else ""))
        for clock, (low, mid, high) in u["spread"][name].items():
            print(f"      per repetition, {clock:<5}: min {low:.2f}, median {mid:.2f}, max {high:.2f}")
    for clock in u["rates"]["store"]:
        best = max(u["rates"][name][clock] for name in u["ratios"])
        print(f"  store / best plain path ({clock}, median rates): {u['rates']['store'][clock] / best:.2f}")
    r = u["row by row / store"]
    print(f"  store (merge) / store row by row: {r['wall']:.2f} wall  {r['cpu']:.2f} client CPU")
    reruns = u["re-run spread"]
    print(f"  store re-run / first run (wall): {u['rates']['store']['wall'] / u['rates']['store re-run']['wall']:.2f} "
          f"(per repetition: min {min(reruns):.2f}, median {statistics.median(reruns):.2f}, max {max(reruns):.2f})")


class _ExistingServer:
    def __init__(self, url: str):
        self.url, self.made = url, []

    def new_database(self) -> str:
        import psycopg
        name = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        self.made.append(name)
        return self.url.rsplit("/", 1)[0] + "/" + name

    def stop(self) -> None:
        import psycopg
        with psycopg.connect(self.url, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f"DROP DATABASE IF EXISTS {name}")


if __name__ == "__main__":
    main()
