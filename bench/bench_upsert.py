"""Write path, like for like (issue #23.1–#23.3): N records of a type through the framework and
through the engine alone, doing the same work; then a re-run of the unchanged data.

    python bench/bench_upsert.py [N] [REPEATS] [--batch 5000] [--type vehicle_recall|bench_alert]
                                 [--profile TOP] [--scale]

Measured on fresh SQLite files, variants interleaved per repetition (a busy neighbour hurts all
of them alike), median (min–max) of wall-clock and of this process's CPU time (steadier on a
shared machine: SQLite runs in process, and WAL commits with synchronous=NORMAL do not wait for
the disk):

- **plain**: the engine alone. `executemany` of the store's own parameters for the same rows
  (the same values, derived columns and input hashes) into the same table with the same
  indexes, the full-text index fed per batch by the store's own statement, one transaction:
  what any program must make SQLite do to hold these rows. **plain, COMMIT per batch**: the
  same with a commit per batch, the durability the pipeline keeps (#23.2: a kill -9 loses at
  most one batch), so the framework's share can be told from the engine's commits.
- **store**: `Model.model_validate` of each dict + `Store.upsert(type, batch, behind=True)` per
  `--batch` records (the pipeline commits per 5,000 records or 2 s since #23.2): validation, the
  stored-row lookup, the COALESCE merge, exact counts, a commit per batch; as in the pipeline,
  each batch's index feed and COMMIT finish on a background thread while the next batch is
  validated (store/finishing.py), timed until the last one is committed. **store, each commit
  waited for**: the same with `behind=False` (wave 5's path): what the overlap buys in wall
  time; process CPU counts both threads, so it shows the work, which the overlap does not cut.
- **pipeline**: a whole `BaseCrawler.run()` whose fetch() yields the dicts and parse() returns
  them: input hashes, the recognition lookup, validation, prepare, the date window, the store,
  the run row and its counts.
- **re-run**: the pipeline again over the unchanged dicts (0 rows written, exact counts).

The like-for-like ratio is plain time / store time (and / pipeline time): 1.0 would mean the
framework adds nothing to what the engine must do. The per-row ratio compares with a plain
executemany feeding the full-text index per row through an insert trigger (the schema before
migration 6), as the issue's first numbers did. `--scale` times the store's upsert of 50,000
new records into a store already holding 100,000 and 500,000 (#23: no more than 10 % lower).
`--profile TOP` prints the pipeline's first run under cProfile.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import benchkit  # noqa: E402
from basecrawler import BaseCrawler, Store  # noqa: E402
from basecrawler.config import Settings  # noqa: E402
from basecrawler.pipeline.collector import fewer_collections  # noqa: E402
from basecrawler.recordtypes import Facet, RecordType, get_record_type, register_record_type  # noqa: E402
from basecrawler.recordtypes.tables import feed_fts_sql, fts_table  # noqa: E402
from basecrawler.recordtypes.upsert import plan_for  # noqa: E402

BATCH = 5000


class Timer:
    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


# ---- the data -------------------------------------------------------------------------------
def vehicle_rows(n: int, start: int = 0) -> list[dict]:
    makers = ["Ford", "Toyota", "Honda", "BMW", "Hyundai", "Kia", "Tesla", "GM"]
    return [
        {
            "country": "US", "recall_number": f"24V{n_:07d}", "recall_date": f"2024-{1 + n_ % 12:02d}-{1 + n_ % 28:02d}",
            "manufacturer_original": makers[n_ % len(makers)], "model_original": f"Model {n_ % 300}",
            "component_original": "AIR BAGS", "summary_original": f"The air bag inflator may rupture (case {n_}).",
            "consequence_original": "Metal fragments may strike occupants.",
            "remedy_original": "Dealers will replace the inflator, free of charge.",
            "model_year": "2019-2021", "affected_units": str(1000 + n_), "source_lang": "en",
            "source_url": f"https://www.nhtsa.gov/recalls?nhtsaId=24V{n_:07d}", "extra": {"recall_type": "Vehicle"},
        }
        for n_ in range(start, start + n)
    ]


def alert_type() -> RecordType:
    """A product-alert-like second type declared here: four translated pairs, a multi-valued
    category, an optional date."""
    try:
        return get_record_type("bench_alert")
    except KeyError:
        pass
    from pydantic import BaseModel

    class BenchAlert(BaseModel):
        country: str
        alert_id: str
        alert_date: str | None = None
        title_original: str | None = None
        title_ko: str | None = None
        product_original: str | None = None
        product_ko: str | None = None
        hazard_original: str | None = None
        hazard_ko: str | None = None
        remedy_original: str | None = None
        remedy_ko: str | None = None
        category: list[str] = []
        authority: str | None = None
        risk_class: str | None = None
        source_url: str | None = None
        source_lang: str = "en"

    return register_record_type(RecordType(
        name="bench_alert", title="Bench alerts", model=BenchAlert, table="bench_alerts", key=("country", "alert_id"),
        date_field="alert_date", translated=("title", "product", "hazard", "remedy"), searchable=("authority",),
        facets=(Facet("category", "Category", multi=True), Facet("risk_class", "Risk class"))))


def alert_rows(n: int, start: int = 0) -> list[dict]:
    cats = [["Food"], ["Toys"], ["Cosmetics", "Chemicals"], ["Electrical appliances"], ["Medical devices"]]
    return [
        {"country": "CA", "alert_id": f"RA-{i:07d}", "alert_date": None if i % 13 == 0 else f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}",
         "title_original": f"Brand {i % 97} product recalled due to {('undeclared milk', 'choking hazard', 'fire hazard')[i % 3]} ({i})",
         "product_original": f"Product line {i % 211}", "hazard_original": "The product may overheat and ignite.",
         "remedy_original": "Stop using the product and return it for a full refund.", "category": cats[i % len(cats)],
         "authority": ("Health Canada", "CFIA", "Transport Canada")[i % 3], "risk_class": f"Class {1 + i % 3}",
         "source_url": f"https://recalls-rappels.canada.ca/en/alert-recall/ra-{i}"}
        for i in range(start, start + n)
    ]


def type_and_rows(name: str):
    if name == "bench_alert":
        return alert_type(), alert_rows
    return get_record_type(name), vehicle_rows


# ---- the measured paths ---------------------------------------------------------------------
def fresh_store(path: str) -> Store:
    store = Store(path)
    store.ensure_type_tables()
    if os.environ.get("BENCH_CACHE_KIB"):   # to compare page cache sizes (the store sets its own)
        store.db.conn.execute(f"PRAGMA cache_size = -{int(os.environ['BENCH_CACHE_KIB'])}")
    return store


def plain(path: str, rt: RecordType, params: list[list], per_row_trigger: bool = False,
          commit_per_batch: bool = False) -> Timer:
    """The engine alone: the store's parameters, one transaction, the full-text index fed per
    batch by the store's statement (or per row by an insert trigger); `commit_per_batch`: a
    COMMIT per batch as the pipeline makes (its durability), to tell that cost apart."""
    store = fresh_store(path)
    plan = plan_for(rt)
    conn = store.db.conn
    sql = plan.insert_sql   # the statement the store writes new rows with
    feed = feed_fts_sql(rt)
    if per_row_trigger and feed:
        text = rt.text_index_columns
        conn.execute(f"CREATE TRIGGER bench_fts_ai AFTER INSERT ON [{rt.table}] BEGIN INSERT INTO [{fts_table(rt)}]"
                     f"(rowid, {', '.join(text)}) VALUES (new.id, {', '.join('new.' + c for c in text)}); END")
        feed = None
    # `timer.parts`: the CPU of each kind of statement (bench_write_path.py prints it).
    parts = {"INSERT": 0.0, "full-text feed": 0.0, "COMMIT": 0.0}
    clock = time.process_time
    with fewer_collections(), Timer() as timer:
        conn.execute("BEGIN")
        for i in range(0, len(params), BATCH):
            last_id = conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM [{rt.table}]").fetchone()[0]
            started = clock()
            conn.executemany(sql, params[i:i + BATCH])
            inserted = clock()
            if feed:
                conn.execute(feed, [last_id])
            fed = clock()
            if commit_per_batch:
                conn.execute("COMMIT")
                conn.execute("BEGIN")
            parts["INSERT"] += inserted - started
            parts["full-text feed"] += fed - inserted
            parts["COMMIT"] += clock() - fed
        started = clock()
        conn.execute("COMMIT")
        parts["COMMIT"] += clock() - started
    timer.parts = parts
    store.close()
    return timer


def through_store(store: Store, rt: RecordType, rows: list[dict], behind: bool = True) -> tuple[Timer, object]:
    validate = rt.model.model_validate
    totals = None
    # Under the garbage-collector setting a run has (pipeline/collector.py), as the plain path.
    with fewer_collections(), Timer() as timer:
        for i in range(0, len(rows), BATCH):
            # As the pipeline stores: the batch's index feed and commit finish behind the
            # validation of the next one (store/finishing.py); timed until the last is committed.
            # `behind=False`: each commit waited for, as before wave 6.
            result = store.upsert(rt, [validate(r) for r in rows[i:i + BATCH]], source="bench", behind=behind)
            totals = result if totals is None else (totals.add(result) or totals)
        store.settle()
    return timer, totals


class ListCrawler(BaseCrawler):
    source = "bench"
    country = ""

    def __init__(self, store, rows, record_type: str):
        super().__init__(store, mode="full", settings=Settings.from_env())
        self.rows = rows
        self.record_type = record_type

    def fetch(self):
        yield from self.rows

    def parse(self, raw):
        return raw


def through_pipeline(store: Store, rt: RecordType, rows: list[dict]) -> tuple[Timer, object, int]:
    """One run; and how many rows of the type's table it inserted or updated (counted by
    triggers, which cost nothing while nothing is written)."""
    conn = store.db.conn
    conn.execute("CREATE TABLE IF NOT EXISTS bench_writes (n INTEGER)")
    conn.execute("DELETE FROM bench_writes")
    conn.execute("INSERT INTO bench_writes VALUES (0)")
    for event in ("INSERT", "UPDATE"):
        conn.execute(f"CREATE TRIGGER IF NOT EXISTS bench_{event.lower()} AFTER {event} ON [{rt.table}] "
                     "BEGIN UPDATE bench_writes SET n = n + 1; END")
    conn.commit()
    with Timer() as timer:
        result = ListCrawler(store, rows, rt.name).run()
    assert result.status == "succeeded", result.error
    writes = conn.execute("SELECT n FROM bench_writes").fetchone()[0]
    return timer, result, writes


def plain_params(rt: RecordType, rows: list[dict]) -> list[list]:
    plan = plan_for(rt)
    params = []
    for r in rows:
        row = plan.row_of(rt.model.model_validate(r), "bench")
        row["input_hash"] = plan.input_hash(row)
        params.append(plan.params(row, "2026-12-02T00:00:00+00:00"))
    return params


# ---- output ---------------------------------------------------------------------------------
def spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"


def profile_pipeline(path: str, rt: RecordType, rows: list[dict], top: int) -> str:
    store = fresh_store(path)
    profiler = cProfile.Profile()
    profiler.enable()
    through_pipeline(store, rt, rows)
    profiler.disable()
    store.close()
    return profile_report(profiler, top)


def profile_report(profiler: cProfile.Profile, top: int) -> str:
    """The `top` functions by own time, then by cumulative time."""
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def scale(tmp: str, rt: RecordType, make_rows, step: int = 50_000) -> None:
    """Store upsert rate of `step` new records into a store holding 100k and 500k, and the
    engine's own rate (a plain executemany of another `step` new records, the index fed per
    batch) at the same sizes: how much of a slow-down is the engine's."""
    store = fresh_store(os.path.join(tmp, "scale.db"))
    plan = plan_for(rt)
    cols = [*plan.written, *plan.derived, "input_hash", "first_seen_at", "updated_at"]
    sql = f"INSERT INTO [{rt.table}] ({', '.join(f'[{c}]' for c in cols)}) VALUES ({', '.join('?' * len(cols))})"
    feed = feed_fts_sql(rt)
    conn = store.db.conn
    held, rates = 0, {}
    for mark in (100_000, 500_000):
        while held < mark:
            through_store(store, rt, make_rows(min(step, mark - held), start=held))
            held = min(held + step, mark)
        timer, result = through_store(store, rt, make_rows(step, start=10_000_000 + held))
        assert result.new == step
        params = plain_params(rt, make_rows(step, start=20_000_000 + held))
        with Timer() as plain_timer:
            conn.execute("BEGIN")
            for i in range(0, step, BATCH):
                last_id = conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM [{rt.table}]").fetchone()[0]
                conn.executemany(sql, params[i:i + BATCH])
                if feed:
                    conn.execute(feed, [last_id])
            conn.execute("COMMIT")
        held += 2 * step
        rates[mark] = {"store": timer, "plain": plain_timer}
    for what in ("store", "plain"):
        low, high = rates[100_000][what], rates[500_000][what]
        print(f"{what:>5}: {step:,} new records into 100k rows {step / low.wall:,.0f} rec/s wall {step / low.cpu:,.0f} CPU; "
              f"into 500k rows {step / high.wall:,.0f} wall {step / high.cpu:,.0f} CPU; "
              f"500k / 100k = {low.wall / high.wall:.2f} wall, {low.cpu / high.cpu:.2f} CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=100_000)
    parser.add_argument("repeats", nargs="?", type=int, default=3)
    parser.add_argument("--batch", type=int, default=BATCH, help="records per store call and commit (pipeline: 5,000)")
    parser.add_argument("--type", default="vehicle_recall", choices=("vehicle_recall", "bench_alert"))
    parser.add_argument("--profile", type=int, default=0, metavar="TOP")
    parser.add_argument("--scale", action="store_true")
    args = parser.parse_args()
    globals()["BATCH"] = args.batch
    os.environ["BASECRAWLER_BATCH_SIZE"] = str(args.batch)
    n, repeats = args.n, args.repeats
    rt, make_rows = type_and_rows(args.type)
    rows = make_rows(n)
    tmp = benchkit.scratch_folder("bench-upsert-")
    if args.scale:
        scale(tmp, rt, make_rows)
        return
    params = plain_params(rt, rows)
    times: dict[str, list[Timer]] = {}
    written: list[int] = []
    for rep in range(repeats):
        times.setdefault("plain", []).append(plain(os.path.join(tmp, f"p{rep}.db"), rt, params))
        times.setdefault("plain per row", []).append(plain(os.path.join(tmp, f"r{rep}.db"), rt, params, True))
        times.setdefault("plain, commits", []).append(plain(os.path.join(tmp, f"c{rep}.db"), rt, params,
                                                            commit_per_batch=True))
        store = fresh_store(os.path.join(tmp, f"s{rep}.db"))
        timer, result = through_store(store, rt, rows)
        assert result.new == n, result.new
        times.setdefault("store", []).append(timer)
        store.close()
        store = fresh_store(os.path.join(tmp, f"w{rep}.db"))
        timer, result = through_store(store, rt, rows, behind=False)
        assert result.new == n, result.new
        times.setdefault("store, waited", []).append(timer)
        store.close()
        store = fresh_store(os.path.join(tmp, f"l{rep}.db"))
        timer, result, _ = through_pipeline(store, rt, rows)
        assert result.counts.new == n, result.counts
        times.setdefault("pipeline", []).append(timer)
        timer, result, writes = through_pipeline(store, rt, rows)
        assert result.counts.unchanged == n and result.counts.saved == n, result.counts
        times.setdefault("re-run", []).append(timer)
        written.append(writes)
        store.close()

    def line(label: str, values) -> None:
        fmt = ",.0f" if "rec/s" in label else ".2f"
        print(f"{label:<58}{spread(values('wall'), fmt):>26}{spread(values('cpu'), fmt):>26}")

    def rate(key):
        return lambda clock: [n / getattr(t, clock) for t in times[key]]

    def ratio(numerator, denominator):   # per repetition: a noisy moment hits both sides of a pair
        return lambda clock: [getattr(a, clock) / getattr(b, clock) for a, b in zip(times[numerator], times[denominator])]

    print(f"{rt.name}: {n:,} records, batches of {BATCH:,}, {repeats} repetitions: median (min–max)")
    print(f"{'measure':<58}{'wall clock':>26}{'process CPU':>26}")
    line("plain executemany, FTS per batch (rec/s)", rate("plain"))
    line("plain executemany, FTS per row by trigger (rec/s)", rate("plain per row"))
    line("plain executemany, FTS per batch, COMMIT per batch (rec/s)", rate("plain, commits"))
    line("store: validation + upsert (rec/s)", rate("store"))
    line("store, each commit waited for (rec/s)", rate("store, waited"))
    line("pipeline: run() first run (rec/s)", rate("pipeline"))
    line("pipeline: re-run of the unchanged data (rec/s)", rate("re-run"))
    line("like for like: plain / store", ratio("plain", "store"))
    line("like for like: plain / store, each commit waited for", ratio("plain", "store, waited"))
    line("like for like: plain / pipeline", ratio("plain", "pipeline"))
    line("same commits: plain, COMMIT per batch / store", ratio("plain, commits", "store"))
    line("same commits: plain, COMMIT per batch / pipeline", ratio("plain, commits", "pipeline"))
    line("per row: plain (FTS per row) / store", ratio("plain per row", "store"))
    line("re-run / first run (pipeline)", ratio("re-run", "pipeline"))
    print(f"{'re-run: rows written (target 0)':<58}{max(written):>26}")
    print(f"{'peak RSS (MB)':<58}{benchkit.peak_rss_mb():>26.0f}")
    if args.profile:
        print(profile_pipeline(os.path.join(tmp, "profile.db"), rt, rows, args.profile))


if __name__ == "__main__":
    main()
