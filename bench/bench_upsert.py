"""Upsert throughput: N recalls through Store.upsert_recalls (validation included) compared in
the same run with a plain sqlite3.executemany of the same rows into the same schema (the
physical reference); then a re-run of the unchanged data.

Two ways of feeding the FTS5 trigram index are measured, each for the store and for the plain
reference, on fresh databases:
- per row: an AFTER INSERT trigger (the schema before migration _m006);
- per batch: one `INSERT INTO recalls_fts … SELECT … WHERE id > ?` per 500 rows (today's store).

Every measurement is repeated (fresh database each time, variants interleaved so a busy
neighbour hurts all of them alike); the table shows the median and the min–max spread, of
wall-clock time and of this process's CPU time (steadier on a shared machine: SQLite runs in
process and WAL commits with synchronous=NORMAL do not wait for the disk).

    python bench/bench_upsert.py [N] [REPEATS] [--profile TOP] [--batch 500]

"Like for like" (issue #23.1): the plain reference does the same work as the store on the same
rows — the same table and indexes, the trigram index fed the same way (per row by trigger, or
per batch by the store's own statement), one transaction — so the ratio store / plain is what
the framework adds. `--profile TOP` runs the store's upsert once more under cProfile and prints
its TOP costliest functions. The store is called through `Store.upsert(record_type, …)` when the
store has it (record types, issue #24), else through `upsert_recalls`.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from basecrawler import Recall, Store  # noqa: E402
from basecrawler.store.schema import FTS_COLUMNS, FTS_INSERT_TRIGGER  # noqa: E402
from basecrawler.store.core import _FEED_FTS_SQL, DATA_COLUMNS  # noqa: E402

BATCH = 500


class Timer:
    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def raw_rows(n: int) -> list[dict]:
    makers = ["Ford", "Toyota", "Honda", "BMW", "Hyundai", "Kia", "Tesla", "GM"]
    return [
        {
            "country": "US", "recall_number": f"24V{n_:06d}", "recall_date": f"2024-{1 + n_ % 12:02d}-{1 + n_ % 28:02d}",
            "manufacturer_original": makers[n_ % len(makers)], "model_original": f"Model {n_ % 300}",
            "component_original": "AIR BAGS", "summary_original": f"The air bag inflator may rupture (case {n_}).",
            "consequence_original": "Metal fragments may strike occupants.",
            "remedy_original": "Dealers will replace the inflator, free of charge.",
            "model_year": "2019-2021", "affected_units": str(1000 + n_), "source_lang": "en",
            "source_url": f"https://www.nhtsa.gov/recalls?nhtsaId=24V{n_:06d}", "extra": {"recall_type": "Vehicle"},
        }
        for n_ in range(n)
    ]


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_store(path: str, per_row_trigger: bool) -> Store:
    """A fresh store; with `per_row_trigger` the old AFTER INSERT trigger is put back, which
    the store notices on opening (it then leaves feeding the index to the trigger)."""
    store = Store(path)
    if per_row_trigger:
        cols = ", ".join(FTS_COLUMNS)
        store.db.conn.execute(
            f"CREATE TRIGGER {FTS_INSERT_TRIGGER} AFTER INSERT ON recalls BEGIN "
            f"INSERT INTO recalls_fts(rowid, {cols}) VALUES (new.id, {', '.join('new.' + c for c in FTS_COLUMNS)}); END")
        store.close()
        store = Store(path)
        assert not store._feed_fts_per_batch
    return store


def plain(path: str, prepared: list[tuple], per_row_trigger: bool) -> Timer:
    """Seconds for executemany of ready tuples; per batch, the same one FTS statement the store uses."""
    store = open_store(path, per_row_trigger)
    conn = store.db.conn
    cols = list(DATA_COLUMNS) + ["first_seen_at", "updated_at"]
    sql = f"INSERT INTO recalls ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    with Timer() as timer:
        conn.execute("BEGIN")
        for i in range(0, len(prepared), BATCH):
            last_id = conn.execute("SELECT COALESCE(MAX(id), 0) FROM recalls").fetchone()[0]
            conn.executemany(sql, prepared[i:i + BATCH])
            if not per_row_trigger:
                conn.execute(_FEED_FTS_SQL, [last_id])
        conn.execute("COMMIT")
    store.close()
    return timer


def upsert(store: Store, records: list, source: str):
    """One batch through the store's public write path, whichever this version of the store has."""
    generic = getattr(store, "upsert", None)
    if generic is not None:
        return generic("vehicle_recall", records, source=source)
    return store.upsert_recalls(records, source=source)


def through_store(store: Store, rows: list[dict]) -> tuple[Timer, int, object]:
    before = store.db.conn.total_changes
    totals = None
    with Timer() as timer:
        for i in range(0, len(rows), BATCH):
            batch = [Recall.model_validate(r) for r in rows[i:i + BATCH]]
            result = upsert(store, batch, "us")
            if totals is None:
                totals = result
            else:
                totals.add(result)
    return timer, store.db.conn.total_changes - before, totals


# ---- a second record type (issue #24): the same like-for-like pair on a type declared here ----
def alert_type():
    """A product-alert-like type: four translated pairs, a multi-valued category, an optional
    date. None when this version of the store has no record types."""
    try:
        from basecrawler.recordtypes import Facet, RecordType, get_record_type, register_record_type
    except ImportError:
        return None, None
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

    try:
        return get_record_type("bench_alert"), BenchAlert
    except KeyError:
        pass
    rt = register_record_type(RecordType(
        name="bench_alert", title="Bench alerts", model=BenchAlert, table="bench_alerts", key=("country", "alert_id"),
        date_field="alert_date", translated=("title", "product", "hazard", "remedy"), searchable=("authority",),
        facets=(Facet("category", "Category", multi=True), Facet("risk_class", "Risk class"))))
    return rt, BenchAlert


def alert_rows(n: int) -> list[dict]:
    cats = [["Food"], ["Toys"], ["Cosmetics", "Chemicals"], ["Electrical appliances"], ["Medical devices"]]
    return [
        {"country": "CA", "alert_id": f"RA-{i:06d}", "alert_date": None if i % 13 == 0 else f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}",
         "title_original": f"Brand {i % 97} product recalled due to {('undeclared milk', 'choking hazard', 'fire hazard')[i % 3]} ({i})",
         "product_original": f"Product line {i % 211}", "hazard_original": "The product may overheat and ignite.",
         "remedy_original": "Stop using the product and return it for a full refund.", "category": cats[i % len(cats)],
         "authority": ("Health Canada", "CFIA", "Transport Canada")[i % 3], "risk_class": f"Class {1 + i % 3}",
         "source_url": f"https://recalls-rappels.canada.ca/en/alert-recall/ra-{i}"}
        for i in range(n)
    ]


def plain_type(path: str, rt, prepared: list[list]) -> Timer:
    """The engine alone for a declared type: executemany of the store's own parameters into the
    type's table, its full-text index fed per batch by the store's statement, one transaction."""
    from basecrawler.recordtypes.tables import feed_fts_sql
    from basecrawler.recordtypes.upsert import plan_for

    store = Store(path)
    store.ensure_type_tables()
    plan = plan_for(rt)
    cols = [*plan.written, *plan.derived, "input_hash", "first_seen_at", "updated_at"]
    sql = f"INSERT INTO [{rt.table}] ({', '.join(f'[{c}]' for c in cols)}) VALUES ({', '.join('?' * len(cols))})"
    feed = feed_fts_sql(rt)
    conn = store.db.conn
    with Timer() as timer:
        conn.execute("BEGIN")
        for i in range(0, len(prepared), BATCH):
            last_id = conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM [{rt.table}]").fetchone()[0]
            conn.executemany(sql, prepared[i:i + BATCH])
            if feed:
                conn.execute(feed, [last_id])
        conn.execute("COMMIT")
    store.close()
    return timer


def store_type(path: str, rt, model, rows: list[dict]) -> Timer:
    store = Store(path)
    store.ensure_type_tables()
    with Timer() as timer:
        for i in range(0, len(rows), BATCH):
            result = store.upsert(rt, [model.model_validate(r) for r in rows[i:i + BATCH]], source="bench")
            assert result.new == len(rows[i:i + BATCH])
    store.close()
    return timer


def second_type(tmp: str, n: int, repeats: int):
    """(plain timers, store timers) for the second type, or None without record types."""
    rt, model = alert_type()
    if rt is None:
        return None
    from basecrawler.recordtypes.upsert import plan_for
    rows = alert_rows(n)
    plan = plan_for(rt)
    def hashed(row: dict) -> dict:   # the store writes each row's input_hash: so does the reference
        if hasattr(plan, "input_hash"):
            row["input_hash"] = plan.input_hash(row)
        return row
    prepared = [plan.params(hashed(plan.row_of(model.model_validate(r), "bench")), "t") for r in rows]
    plains, stores = [], []
    for rep in range(repeats):
        plains.append(plain_type(os.path.join(tmp, f"tp{rep}.db"), rt, prepared))
        stores.append(store_type(os.path.join(tmp, f"ts{rep}.db"), rt, model, rows))
    return plains, stores


def spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"


def profile_store(path: str, rows: list[dict], top: int) -> str:
    """The store's first run (validation included) under cProfile: its `top` costliest functions."""
    store = open_store(path, per_row_trigger=False)
    profiler = cProfile.Profile()
    profiler.enable()
    through_store(store, rows)
    profiler.disable()
    store.close()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=100_000)
    parser.add_argument("repeats", nargs="?", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, metavar="TOP")
    parser.add_argument("--batch", type=int, default=BATCH,
                        help="records per store call (= per commit); the pipeline commits per 5,000 since #23.2")
    args = parser.parse_args()
    globals()["BATCH"] = args.batch
    n, repeats = args.n, args.repeats
    rows = raw_rows(n)
    prepared = [
        ("us", r["country"], r["recall_number"], r["recall_date"], 0, r["manufacturer_original"], r["model_original"],
         r["component_original"], r["summary_original"], None, r["consequence_original"], r["remedy_original"],
         r["model_year"], int(r["affected_units"]), "en", r["source_url"], json.dumps(r["extra"]), "t", "t")
        for r in rows
    ]
    tmp = tempfile.mkdtemp()
    times: dict[str, list[Timer]] = {}
    rerun: list[tuple[Timer, Timer, int, int]] = []
    for rep in range(repeats):
        for variant, per_row in (("per row", True), ("per batch", False)):
            times.setdefault(f"plain {variant}", []).append(plain(os.path.join(tmp, f"p{rep}{per_row}.db"), prepared, per_row))
            store = open_store(os.path.join(tmp, f"s{rep}{per_row}.db"), per_row)
            first, first_writes, first_result = through_store(store, rows)
            assert first_result.new == n and first_writes >= n, (first_result.new, first_writes)
            times.setdefault(f"store {variant}", []).append(first)
            if not per_row:
                second, second_writes, second_result = through_store(store, rows)
                rerun.append((second, first, second_writes, second_result.unchanged))
            store.close()

    def row(label: str, values) -> None:
        """values(clock) -> list of numbers for clock 'wall' / 'cpu'."""
        fmt = ",.0f" if "rec/s" in label else ".2f"
        print(f"{label:<50}{spread(values('wall'), fmt):>26}{spread(values('cpu'), fmt):>26}")

    def rate(key):
        return lambda clock: [n / getattr(t, clock) for t in times[key]]

    def ratio(fast_key, slow_key):   # per repetition, so a noisy moment hits both sides of a pair
        return lambda clock: [getattr(s, clock) / getattr(f, clock) for s, f in zip(times[slow_key], times[fast_key])]

    print(f"{n:,} records, {repeats} repetitions: median (min–max)")
    print(f"{'measure':<50}{'wall clock':>26}{'process CPU':>26}")
    for variant in ("per row", "per batch"):
        row(f"plain executemany, FTS {variant} (rec/s)", rate(f"plain {variant}"))
        row(f"store upsert + validation, FTS {variant} (rec/s)", rate(f"store {variant}"))
        row(f"ratio store / plain, both FTS {variant}", ratio(f"store {variant}", f"plain {variant}"))
    row("ratio store per batch / plain per row", ratio("store per batch", "plain per row"))
    row("speed-up of the store, per batch over per row", ratio("store per batch", "store per row"))
    row("re-run time / first run (per batch)", lambda clock: [getattr(a, clock) / getattr(b, clock) for a, b, _, _ in rerun])
    print(f"{'re-run: unchanged / rows written (target 0)':<50}{f'{rerun[-1][3]} / {max(r[2] for r in rerun)}':>26}")
    second = second_type(tmp, n, repeats)
    if second is not None:
        plains, stores = second
        times["plain alert"], times["store alert"] = plains, stores
        row("bench_alert: plain, FTS per batch (rec/s)", rate("plain alert"))
        row("bench_alert: store + validation (rec/s)", rate("store alert"))
        row("bench_alert: ratio store / plain, like for like", ratio("store alert", "plain alert"))
    print(f"{'peak RSS (MB)':<50}{rss_mb():>26.0f}")
    if args.profile:
        print(profile_store(os.path.join(tmp, "profile.db"), rows, args.profile))


if __name__ == "__main__":
    main()
