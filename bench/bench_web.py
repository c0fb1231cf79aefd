"""Web view benchmark (run on demand): fill a store with generated recalls (bench_export's
generator), serve it with `browse`'s Datasette and time the pages a person opens, with their
facets: the table page, a filtered page, a facet selection and search pages.

    python bench/bench_web.py                      # 1,000,000 recalls
    python bench/bench_web.py --rows 200000 --db /tmp/web200k.db   # keeps / reuses the file
    python bench/bench_web.py --db /tmp/web1m.db --indexes         # + the indexes the view needs

--indexes adds what the store's schema does not derive (yet): one index on the type's date field
(the default sort) and one per single-valued facet field, named web_bench_* (the file is changed).

Each page is fetched four times, two seconds apart; the table prints the first (cold: the
start-up warm-up may still be counting) and the median of the last three, and whether any facet
timed out on the last (a filtered page's facet that runs out of time is finished in the
background for the next visitor); for a search page whose first visit showed without its
facets, when they were shown by the page's script (bench_read.follow does what it does). Target (#23.5): ≤ 0.5 s with every facet shown.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import benchkit  # noqa: E402

PAGES = [
    ("table page (home, default columns)", "/{db}/recalls"),
    ("filtered: country=JP", "/{db}/recalls?country=JP"),
    ("facet selection: model year 2012", "/{db}/recalls?_bcf_model_year=2012"),
    ("search: #12345 (a few records, trigram)", "/{db}/recalls?_search=" + urllib.parse.quote("#12345")),
    ("search: brake (every record, trigram)", "/{db}/recalls?_search=brake"),
    ("search: fuel (some records, trigram)", "/{db}/recalls?_search=fuel"),
    ("search: 燃料 (2 chars, LIKE scan)", "/{db}/recalls?_search=" + urllib.parse.quote("燃料")),
    ("card", "/{db}/recalls/1"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fetch(url: str) -> tuple[float, str]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:   # follows the default-columns redirect
        body = response.read().decode("utf-8", "replace")
    return time.perf_counter() - start, body


def add_indexes(db_path: str) -> None:
    import sqlite3

    from record_types.vehicle_recall import VEHICLE_RECALL as declared

    wanted = [declared.date_field, *(f.field for f in declared.facets if not f.multi)]
    with sqlite3.connect(db_path) as conn:
        for column in wanted:
            started = time.monotonic()
            conn.execute(f"CREATE INDEX IF NOT EXISTS web_bench_{column} ON [{declared.table}] ([{column}])")
            print(f"index on {column}: {time.monotonic() - started:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--db", help="database file to create (or reuse when it exists)")
    parser.add_argument("--indexes", action="store_true", help="add an index on the date field and each facet field")
    args = parser.parse_args()

    from bench_export import generate
    from basecrawler.reading.browse import BrowseServer

    folder = benchkit.scratch_folder("bench-web-")
    db_path = args.db or os.path.join(folder, "bench.db")
    if not Path(db_path).exists():
        seconds = generate(db_path, args.rows)
        from basecrawler import Store
        store = Store(db_path)   # the generator bypasses the per-batch index feed: build it once
        started = time.monotonic()
        store.write(lambda db: db.conn.execute("INSERT INTO recalls_fts(recalls_fts) VALUES ('rebuild')"))
        store.close()
        print(f"full-text index built in {time.monotonic() - started:.0f} s")
        print(f"generated {args.rows:,} recalls in {seconds:.0f} s ({Path(db_path).stat().st_size / 1e6:.0f} MB)")
    if args.indexes:
        add_indexes(db_path)
    db = Path(db_path).stem
    with BrowseServer(db_path, port=free_port()) as server:
        print(f"{'page':<40} {'cold s':>8} {'warm s':>8}  facets")
        for name, path in PAGES:
            url = server.url + path.format(db=db)
            times, body, followed = [], "", ""
            try:
                for visit in range(4):
                    seconds, body = fetch(url)
                    times.append(seconds)
                    if visit == 0 and "These facets timed out" in body and "_search=" in path:
                        # As the page's script does: its facets follow once counted.
                        from bench_read import follow
                        followed = f"; first visit's facets by its script after {seconds + follow(server.url, path.format(db=db)):.2f} s"
                    elif visit == 0:
                        followed = "; first visit: all shown"
                    time.sleep(2)
            except urllib.error.HTTPError as exc:   # Datasette's SQL time limit answers 400
                print(f"{name:<40} {'—':>8} {'—':>8}  HTTP {exc.code}: {exc.read()[:80]!r}")
                continue
            timed_out = "TIMED OUT: " + body.split("These facets timed out:")[1][:80].split("</p>")[0].strip() \
                if "These facets timed out" in body else "all shown"
            print(f"{name:<40} {times[0]:>8.2f} {statistics.median(times[1:]):>8.2f}  {timed_out}{followed}")


if __name__ == "__main__":
    main()
