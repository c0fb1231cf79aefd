"""Matching 10,000 new records against 1,000 watches (issue #33), on SQLite and PostgreSQL.

    python bench/bench_watch_match.py [--repeats 5] [--records 10000] [--watches 1000]
                                      [--stored 0] [--engines sqlite,postgresql] [--tree DIR] [--phases]

One command, one table: each engine `--repeats` times (a fresh store each time, PostgreSQL on
a throw-away cluster), wall time min / median / max, the process's CPU time (less sensitive to
what else runs on the machine), and the load average before and after. `--tree DIR` times the
code of another checkout (e.g. /work/main: before/after). `--phases`: where the time went, per
function of the matcher (summed wall time of each call).

The watches mix what people save: a category facet, a word of the titles, both, a source
list; the records are product alerts of two sources. `--stored N`: N records stored and seen
before them (a store that has been running), which are not candidates. Times `matching.match`
(candidates, every watch's search, the outbox written); numbers go in bench/README.md."""
from __future__ import annotations

import argparse
import collections
import importlib
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

CATEGORIES = ["Food", "Toys", "Cosmetics", "Electrical", "Vehicles", "Medical", "Chemical", "Clothing"]
# Words of titles and watches: brands and product codes are what watches name, so a watch selects
# a few records of the 10,000, as in use (a watch matching a tenth of everything is a feed).
# (Made-up names of 7 letters: names sharing a prefix, brand001 … brand400, would share the
# trigram windows PostgreSQL's index reads, which no real list of brands does.)
_LETTERS = random.Random(7)
WORDS = sorted({"".join(_LETTERS.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(400)})
PHASES = {"basecrawler.watch.matching": ["_fill_candidates", "_rows", "_queue", "version_of", "payload_of",
                                         "delivery_id", "set_checked", "all_watches"],
          "basecrawler.watch.selection": ["filter_ids", "term_ids", "store_term_ids", "_scan", "_fill"],
          "basecrawler.watch.outbox": ["insert_new"],
          "basecrawler.watch.pg_terms": ["term_ids", "matching_ids", "_filter_ids", "_term_ids"]}


def _use_tree(tree: Path) -> None:
    sys.path[:0] = [str(tree), str(tree / "tests")]


def _alerts(ProductAlert, rng: random.Random, source: str, count: int, prefix: str = "") -> list:
    return [ProductAlert(country="CA" if source == "hc" else "FR", alert_id=f"{prefix}{source}-{i}", alert_date="2025-01-01",
                         title_original=f"{rng.choice(WORDS)} {rng.choice(WORDS)} in product {i}",
                         hazard_original=f"risk of {rng.choice(WORDS)}", category=[rng.choice(CATEGORIES)])
            for i in range(count)]


def _store(store, rng: random.Random, records: int, prefix: str = "") -> None:
    from record_types.product_alert import ProductAlert

    for source in ("hc", "eu"):
        batch = _alerts(ProductAlert, rng, source, records // 2, prefix)
        for start in range(0, len(batch), 1000):
            store.upsert("product_alert", batch[start:start + 1000], source=source)


def run(url: str, records: int, watches: int, stored: int = 0) -> tuple[float, float, object]:
    """(wall s, CPU s, MatchReport) of one `matching.match` over a store filled at `url`."""
    from basecrawler.store.core import Store
    from basecrawler.watch import matching, repository
    from basecrawler.watch.model import Watch

    rng = random.Random(33)
    store = Store(url)
    cursor = "2000-01-01T00:00:00+00:00"
    try:
        if stored:   # records the watches saw already (changed long before their cursor): not candidates
            _store(store, rng, stored, prefix="old-")
            store.write(lambda db: db.conn.execute("UPDATE product_alerts SET updated_at = '1999-01-01T00:00:00+00:00'"))
            store.write(lambda db: db.conn.execute("ANALYZE"))   # (as autovacuum would have by now)
        for n in range(watches):
            kind = n % 4
            repository.add(store, Watch(
                name=f"w{n}", channel="feed", record_type="product_alert",
                facets=(("category", rng.choice(CATEGORIES)),) if kind in (0, 2) else (),
                text=rng.choice(WORDS) + (f" {rng.choice(WORDS)}" if n % 7 == 0 else ""),
                sources=("hc",) if kind == 3 else (), options={"as_soon_as_seen": True}),
                now=cursor)
        _store(store, rng, records)
        started, cpu = time.perf_counter(), time.process_time()
        report = matching.match(store)
        return time.perf_counter() - started, time.process_time() - cpu, report
    finally:
        store.close()


def _timed_phases() -> collections.Counter:
    """Wraps the matcher's functions (those the tree has) to sum their wall time."""
    spent: collections.Counter = collections.Counter()
    for module_name, names in PHASES.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in names:
            original = getattr(module, name, None)
            if original is None:
                continue

            def timed(*args, _original=original, _key=f"{module_name.rsplit('.', 1)[-1]}.{name}", **kwargs):
                started = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    spent[_key] += time.perf_counter() - started
            setattr(module, name, timed)
    return spent


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--watches", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--stored", type=int, default=0, help="records stored and seen before the new ones")
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout whose code is timed (default: this one)")
    parser.add_argument("--phases", action="store_true", help="sum the wall time of the matcher's functions")
    args = parser.parse_args()
    _use_tree(args.tree.resolve())
    spent = _timed_phases() if args.phases else None
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    results = {}
    for engine in engines:
        cluster = None
        if engine == "postgresql":
            from pgcluster import Cluster, _bin_dir

            cluster = Cluster(_bin_dir()).start()
        try:
            times, cpus, before = [], [], _load()
            for _ in range(args.repeats):
                if cluster is not None:
                    wall, cpu, report = run(cluster.new_database(), args.records, args.watches, args.stored)
                else:
                    with tempfile.TemporaryDirectory() as folder:
                        wall, cpu, report = run(str(Path(folder) / "bench.db"), args.records, args.watches, args.stored)
                times.append(wall)
                cpus.append(cpu)
                print(f"  {engine}: {wall:.2f} s (CPU {cpu:.2f} s; {report.candidates:,} candidates, "
                      f"{report.matched:,} matches, {report.queued:,} queued; load {_load()})", file=sys.stderr)
            results[engine] = (times, cpus, before, _load(), report)
        finally:
            if cluster is not None:
                cluster.stop()
    seen = f" (+{args.stored:,} seen before)" if args.stored else ""
    print(f"\n{args.records:,} records{seen} x {args.watches:,} watches, {args.repeats} runs, code of {args.tree}")
    print("| engine | min | median | max | CPU median | matches | load before → after |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for engine, (times, cpus, before, after, report) in results.items():
        print(f"| {engine} | {min(times):.2f} s | {statistics.median(times):.2f} s | {max(times):.2f} s | "
              f"{statistics.median(cpus):.2f} s | {report.matched:,} | {before} → {after} |")
    if spent is not None:
        runs = args.repeats * len(results)
        print("\nper run, summed over each function's calls (nested calls counted in their callers too):")
        for key, seconds in spent.most_common():
            print(f"  {key:32s} {seconds / runs:6.3f} s")


if __name__ == "__main__":
    main()
