"""The write path end to end (issue 35, item 8): a whole `run()` against the engine alone, side by
side in one process run.

    python bench/bench_write_path.py [N] [REPEATS] [--pg] [--pg-only] [--profile TOP]

- **engine**: the store's own parameters for the same N vehicle-recall rows (the same values,
  derived columns and input hashes, made beforehand) written into an empty store's table with
  the same indexes, one transaction. SQLite: `executemany` of the store's INSERT per 5,000 rows,
  the full-text index fed per batch by the store's own statement. **engine, many-row INSERT**:
  the same, each 5,000 written by the store's many-row statements (as the pipeline writes new
  rows since w12-write): the stricter reference, printed beside. PostgreSQL: `COPY` straight
  into the table per 5,000 rows (the trigram index is the engine's own GIN index, fed by it).
- **pipeline**: `run()` of a test source whose fetch() yields the N dicts and parse() returns
  them (bench_upsert.py's `ListCrawler`), into an empty store: input hashes, the recognition
  lookup, validation, the merge rule, exact counts, a commit per batch, the run row. Process
  start-up and opening the store are outside the timing.
- **least pipeline**: what any pipeline must do before the engine's work, and nothing else:
  each dict hashed as a run hashes it and validated, then written by the store's own
  `Store.upsert` in batches of the pipeline's size, finishing behind as a run's do. Left out:
  what a run adds between validation and the store (the recognition lookup, preparing, the
  structural limits, the date window, counting, dead letters). engine / least pipeline is the
  most the pipeline could reach with all of that free; least / pipeline is what that part costs.
- **re-run**: the same `run()` again over the unchanged dicts (0 rows written, counted by
  triggers installed after the first run: on the first run they would cost a statement per
  inserted row that the engine side does not pay).

Variants interleaved per repetition on fresh stores (a busy neighbour hurts all alike); the
ratios engine / pipeline and re-run / first run are taken per repetition, median (min–max), by
wall clock and by this process's CPU. `--pg` adds the same on a throw-away PostgreSQL cluster
(tests/pgcluster.py, fsync off); its CPU column is this process's plus the cluster's (every
server process's user + system time, those that exited included: the engine side's work is
nearly all the server's). SQLite also prints where each side's CPU went: the engine's by kind of
statement, the pipeline's first run by thread (its own, the batch finisher, the checkpointer).
`--profile TOP` prints the SQLite pipeline's first run under cProfile.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

import bench_upsert  # noqa: E402
import benchkit  # noqa: E402
from bench_upsert import (BATCH, Timer, fresh_store, plain, plain_params,  # noqa: E402
                          through_pipeline, vehicle_rows, ListCrawler)
from basecrawler import Store  # noqa: E402
from basecrawler.config import Settings  # noqa: E402
from basecrawler.pipeline.collector import fewer_collections  # noqa: E402
from basecrawler.recordtypes import get_record_type  # noqa: E402
from basecrawler.recordtypes.upsert import INPUT_HASH, plan_for  # noqa: E402
from basecrawler.store.engines.dialect import POSTGRES  # noqa: E402

TYPE = "vehicle_recall"


def spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"


def many_row_engine(path: str, rt, params: list[list]) -> Timer:
    """The engine side with the store's many-row INSERT (store/records.py `_insert_at_once`:
    the same statement sizes) instead of one executemany step per row; otherwise as `plain`."""
    import itertools

    from basecrawler.store.engines.dialect import SQLITE
    from basecrawler.store.records import FEWEST_ROWS_PER_INSERT, ROWS_PER_INSERT
    from basecrawler.recordtypes.tables import feed_fts_sql

    store = fresh_store(path)
    plan, conn, feed = plan_for(rt), store.db.conn, feed_fts_sql(rt)
    with fewer_collections(), Timer() as timer:
        conn.execute("BEGIN")
        for i in range(0, len(params), BATCH):
            last_id = conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM [{rt.table}]").fetchone()[0]
            batch, start = params[i:i + BATCH], 0
            while len(batch) - start >= FEWEST_ROWS_PER_INSERT:
                count = ROWS_PER_INSERT
                while count > len(batch) - start:
                    count //= 2
                conn.execute(plan.insert_rows_sql_for(SQLITE, count),
                             list(itertools.chain.from_iterable(batch[start:start + count])))
                start += count
            if start < len(batch):
                conn.executemany(plan.insert_sql, batch[start:])
            if feed:
                conn.execute(feed, [last_id])
        conn.execute("COMMIT")
    store.close()
    return timer


def least_pipeline(path: str, rt, rows: list[dict]) -> Timer:
    """Hash, validate and `Store.upsert` (see the module's docstring); batches end where a run's
    do (`batch_size` records or `batch_bytes` of input, `Intake.batch_full`)."""
    from basecrawler.pipeline.inputhash import EntryMaker, hash_context, stored_input_hash
    from basecrawler.pipeline.records import validate

    settings, store = Settings.from_env(), fresh_store(path)
    maker = EntryMaker("bench", (), lambda record_type: hash_context(record_type, "bench", []))
    with fewer_collections(), Timer() as timer:
        batch, size, finishing = [], 0, None
        for i, row in enumerate(rows):
            entry = maker.entry(rt, row)
            batch.append((validate(entry), row, entry.input_hash))
            size += entry.size
            if len(batch) >= settings.batch_size or size >= settings.batch_bytes or i == len(rows) - 1:
                records, raws, hashes = zip(*batch)
                if finishing is not None:
                    finishing.result()   # (as the run confirms the batch before)
                finishing = store.upsert(rt, records, source="bench", raws=raws, behind=True, input_hashes=[
                    stored_input_hash(rt, given, record) for record, given in zip(records, hashes)]).finishing
                batch, size = [], 0
        if finishing is not None:
            finishing.result()
    assert store.lookup.count(rt) == len(rows)
    store.close()
    return timer


def sqlite_round(folder: str, rep: int, rt, rows: list[dict], params: list[list]) -> dict[str, Timer]:
    """One repetition of the SQLite variants; their stores (about 160 MB each at 100,000
    records) are removed afterwards, so a long bench never fills the disk."""
    tmp = tempfile.mkdtemp(dir=folder)
    try:
        return _sqlite_round(tmp, rep, rt, rows, params)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _sqlite_round(tmp: str, rep: int, rt, rows: list[dict], params: list[list]) -> dict[str, Timer]:
    n = len(rows)
    # Each variant starts with the page cache written back (`os.sync`, untimed): otherwise the
    # one after the engines pays for writing back their two files (the kernel throttles a
    # writer while dirty pages are over its limit) and its wall clock measures the disk.
    os.sync()
    engine = plain(os.path.join(tmp, f"e{rep}.db"), rt, params)
    # (Absent from a tree before w12-write, so the bench also runs on older code for an A/B.)
    os.sync()
    many = many_row_engine(os.path.join(tmp, f"m{rep}.db"), rt, params) if hasattr(plan_for(rt), "insert_rows_sql_for") else None
    os.sync()
    least = least_pipeline(os.path.join(tmp, f"l{rep}.db"), rt, rows)
    store = fresh_store(os.path.join(tmp, f"p{rep}.db"))
    os.sync()
    first, result = first_run(store, rt, rows)
    assert result.counts.new == n and store.lookup.count(rt) == n, result.counts
    os.sync()
    again, result, writes = through_pipeline(store, rt, rows)
    assert result.counts.unchanged == n and result.counts.saved == n and writes == 0, (result.counts, writes)
    store.close()
    timers = {"engine": engine, "least pipeline": least, "pipeline": first, "re-run": again}
    if many is not None:
        timers["engine, many-row INSERT"] = many
    return timers


def first_run(store: Store, rt, rows: list[dict]) -> tuple[Timer, object]:
    """The first run into an empty store, as a user's: no bench trigger on the table (the
    re-run's write-counting triggers, `through_pipeline`, would run once per inserted row here,
    work the engine side does not do). `timer.parts`: the CPU of each thread (`thread_cpu`)."""
    before = thread_cpu()
    with Timer() as timer:
        result = ListCrawler(store, rows, rt.name).run()
    after = thread_cpu()
    timer.parts = {name: cpu - before.get(name, 0.0) for name, cpu in after.items()}
    assert result.status == "succeeded", result.error
    return timer, result


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process, by its Python name without the pool's
    number ("MainThread", "basecrawler-store-finish", …), read from Linux's /proc (empty
    elsewhere). Ticks of 10 ms: enough for a run of seconds."""
    names = {thread.native_id: thread.name.rsplit("_", 1)[0] for thread in threading.enumerate()}
    tick, found = os.sysconf("SC_CLK_TCK"), {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return {}
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:   # the thread ended meanwhile
            continue
        name = names.get(int(task), "other")
        found[name] = found.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return found


def profile_first_run(path: str, rt, rows: list[dict], top: int) -> str:
    """The SQLite pipeline's first run under cProfile (this thread only: the batch's index
    feed and commit run on the store's finishing thread), by own time and by cumulative time."""
    import cProfile

    from bench_upsert import profile_report

    store = fresh_store(path)
    profiler = cProfile.Profile()
    profiler.runcall(ListCrawler(store, rows, rt.name).run)
    store.close()
    return profile_report(profiler, top)


class ServerTimer(Timer):
    """Timer whose `cpu` adds the cluster's CPU time: the postmaster's, its live children's and
    its reaped children's (/proc/PID/stat utime, stime, cutime, cstime)."""

    def __init__(self, cluster):
        self.cluster = cluster

    def __enter__(self):
        self.server = cluster_cpu(self.cluster)
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        self.cpu += cluster_cpu(self.cluster) - self.server


def cluster_cpu(cluster) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    with open(os.path.join(cluster.data, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:   # gone meanwhile (its time is then in the postmaster's cutime)
            continue
        parent, times = int(fields[1]), [int(v) for v in fields[11:15]]
        if int(pid) == postmaster:
            total += sum(times)
        elif parent == postmaster:
            total += times[0] + times[1]
    return total / tick


def pg_engine(cluster, url: str, rt, params: list[list]) -> Timer:
    """COPY of the store's parameters straight into the type's table, 5,000 rows a COPY, one transaction."""
    import psycopg

    plan = plan_for(rt)
    cols = ", ".join(f'"{c}"' for c in [*plan.written, *plan.derived, INPUT_HASH, "first_seen_at", "updated_at"])
    params = [[int(v) if isinstance(v, bool) else v for v in row] for row in params]
    with psycopg.connect(url) as conn:
        with fewer_collections(), ServerTimer(cluster) as timer:
            with conn.transaction():
                for i in range(0, len(params), BATCH):
                    with conn.cursor().copy(f'COPY "{rt.table}" ({cols}) FROM STDIN') as copy:
                        for row in params[i:i + BATCH]:
                            copy.write_row(row)
        assert conn.execute(f'SELECT COUNT(*) FROM "{rt.table}"').fetchone()[0] == len(params)
    return timer


def pg_round(cluster, rt, rows: list[dict], params: list[list]) -> dict[str, Timer]:
    n = len(rows)
    engine = pg_engine(cluster, cluster.new_database(), rt, params)
    store = Store(cluster.new_database())
    timers = {"engine": engine}
    for name in ("pipeline", "re-run"):
        if name == "re-run":
            after = store.scalar(POSTGRES.query("SELECT txid_current()"))
        with ServerTimer(cluster) as timer:
            result = ListCrawler(store, rows, rt.name).run()
        assert result.status == "succeeded", result.error
        if name == "pipeline":
            assert result.counts.new == n, result.counts
        else:
            assert result.counts.unchanged == n and result.counts.saved == n, result.counts
            written = store.scalar(POSTGRES.query(f'SELECT COUNT(*) FROM "{rt.table}" WHERE xmin::text::bigint > {POSTGRES.p}'),
                                   [after])
            assert written == 0, written
        timers[name] = timer
    store.close()
    return timers


def report(engine_name: str, n: int, rounds: list[dict[str, Timer]], load_before: tuple) -> None:
    load = f"load {load_before[0]:.1f} → {os.getloadavg()[0]:.1f}"
    print(f"{engine_name}: {n:,} {TYPE} records, batches of {BATCH:,}, {len(rounds)} repetitions ({load}): median (min–max)")
    cpu = "process + server CPU" if engine_name == "PostgreSQL" else "process CPU"
    print(f"{'measure':<44}{'wall clock':>28}{cpu:>28}")

    def line(label, values):
        fmt = ",.0f" if "rec/s" in label else ".3f"
        print(f"{label:<44}{spread(values('wall'), fmt):>28}{spread(values('cpu'), fmt):>28}")
    for name in ("engine", "engine, many-row INSERT", "least pipeline", "pipeline", "re-run"):
        if name in rounds[0]:
            line(f"{name} (rec/s)", lambda clock, name=name: [n / getattr(r[name], clock) for r in rounds])
    line("engine / pipeline (target >= 0.7)",
         lambda clock: [getattr(r["engine"], clock) / getattr(r["pipeline"], clock) for r in rounds])
    if "engine, many-row INSERT" in rounds[0]:   # the stricter reference: the engine written as the store writes
        line("engine many-row / pipeline",
             lambda clock: [getattr(r["engine, many-row INSERT"], clock) / getattr(r["pipeline"], clock) for r in rounds])
    if "least pipeline" in rounds[0]:   # the most the pipeline could reach, and what its own part costs
        line("engine / least pipeline",
             lambda clock: [getattr(r["engine"], clock) / getattr(r["least pipeline"], clock) for r in rounds])
        line("least pipeline / pipeline",
             lambda clock: [getattr(r["least pipeline"], clock) / getattr(r["pipeline"], clock) for r in rounds])
    line("re-run / first run (target <= 0.15)",
         lambda clock: [getattr(r["re-run"], clock) / getattr(r["pipeline"], clock) for r in rounds])
    for name, what in (("engine", "by statement"), ("pipeline", "by thread")):
        parts = [getattr(r[name], "parts", None) or {} for r in rounds]
        named = [part for part in dict.fromkeys(key for each in parts for key in each)
                 if statistics.median(each.get(part, 0.0) for each in parts) >= 0.005]
        if named:
            print(f"{name} CPU {what} (s): " + ", ".join(
                f"{part} {spread([each.get(part, 0.0) for each in parts], '.2f')}" for part in named))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=100_000)
    parser.add_argument("repeats", nargs="?", type=int, default=3)
    parser.add_argument("--pg", action="store_true", help="also on a throw-away PostgreSQL cluster")
    parser.add_argument("--pg-only", action="store_true", help="only on PostgreSQL")
    parser.add_argument("--profile", type=int, default=0, metavar="TOP")
    parser.add_argument("--batch", type=int, default=Settings().batch_size,
                        help="the engine's rows per feed and the pipeline's records per batch (default: the "
                             "pipeline's own; its byte bound, BASECRAWLER_BATCH_BYTES, may end a batch sooner)")
    args = parser.parse_args()
    # The engine feeds its index per batch of the pipeline's size (the feed's cost hardly
    # depends on it: bench/README.md), so both sides write in the same steps.
    global BATCH
    BATCH = bench_upsert.BATCH = args.batch
    os.environ["BASECRAWLER_BATCH_SIZE"] = str(BATCH)
    rt = get_record_type(TYPE)
    rows = vehicle_rows(args.n)
    params = plain_params(rt, rows)
    tmp = benchkit.scratch_folder("bench-write-path-")
    if not args.pg_only:
        load = os.getloadavg()
        report("SQLite", args.n, [sqlite_round(tmp, rep, rt, rows, params) for rep in range(args.repeats)], load)
    if args.pg or args.pg_only:
        from pgcluster import Cluster, _bin_dir
        cluster = Cluster(_bin_dir()).start()
        try:
            load = os.getloadavg()
            report("PostgreSQL", args.n, [pg_round(cluster, rt, rows, params) for _ in range(args.repeats)], load)
        finally:
            cluster.stop()
    if args.profile:
        print(profile_first_run(os.path.join(tmp, "profile.db"), rt, rows, args.profile))


if __name__ == "__main__":
    main()
