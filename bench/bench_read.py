"""Read-side benchmark (#23.5, run on demand): a store of generated vehicle recalls
(bench/read_data.py), then, warm, the median of repeats of what a person reads:

- the web view (`browse`'s Datasette): the table page and search pages — a rare term, a
  common one, one in every record, 1 and 2 characters, Japanese — each with every declared
  facet, and whether any facet timed out;
- CLI `search` in-process (the command's own calls: one page and its count) and as a
  subprocess, minus the start-up of the same command with nothing to find in an empty store;
- `status` (in-process `collect_status`);
- `export --filter`: the first rows (time to the first row) and the whole export to CSV.

    python bench/bench_read.py                          # 1,000,000 recalls, SQLite
    python bench/bench_read.py --db /tmp/read1m/bench.db   # keeps / reuses the file
    python bench/bench_read.py --pg [--url postgresql://…] [--search-index windows]  # PostgreSQL (a throw-away cluster; --url reuses its rows)
    python bench/bench_read.py --skip web,subprocess

On PostgreSQL `browse` serves a SQLite snapshot (browse.py), so the web rows are the SQLite
ones; --pg times the CLI, status and export against the server.
Targets (#23.5): web pages ≤ 0.5 s with every facet; CLI search ≤ 0.2 s above start-up.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "tests")]

import benchkit  # noqa: E402

TERMS = [("rare (#123456, 1 record)", "#123456"), ("common (vehicle, 80 %)", "vehicle"),
         ("every record (brake)", "brake"), ("Japanese (燃料ポンプ, 20 %)", "燃料ポンプ"),
         ("2 characters (燃料, 20 %)", "燃料"), ("2 characters (Q7, in no record)", "Q7"),
         ("2 characters Japanese (火災, in no record)", "火災"), ("1 character (x)", "x")]
EXPORT_FILTER = ("country", "JP")
REPEATS = 3


def timed(fn, repeats: int = REPEATS) -> tuple[float, float, object]:
    """(first, median of the next `repeats`, last result)."""
    started = time.perf_counter()
    result = fn()
    first = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return first, statistics.median(times), result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fetch(url: str) -> tuple[float, str]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=300) as response:
        body = response.read().decode("utf-8", "replace")
    return time.perf_counter() - started, body


def follow(base: str, path: str) -> float:
    """What the page's script (web/static/basecrawler.js) does when its counts follow: ask
    /-/bc-summary until they are ready, then read the page again. Seconds it took (None on
    an older version without the endpoint)."""
    started = time.perf_counter()
    table_path, query = path.split("?", 1)
    search = urllib.parse.parse_qs(query)["_search"][0]
    state = base + "/-/bc-summary" + table_path + "?_search=" + urllib.parse.quote(search)
    while time.perf_counter() - started < 120:
        try:
            _, body = fetch(state)
        except urllib.error.HTTPError:
            return float("nan")
        if '"ready": true' in body:
            break
        time.sleep(0.25)
    _, body = fetch(base + path)
    return time.perf_counter() - started


def web_rows(db_path: str) -> list[tuple]:
    from basecrawler.reading.browse import BrowseServer

    db = Path(db_path).stem
    pages = [("web: table page", f"/{db}/recalls")]
    pages += [(f"web: search {label}", f"/{db}/recalls?_search=" + urllib.parse.quote(term)) for label, term in TERMS]
    out = []
    with BrowseServer(db_path, port=free_port()) as server:
        time.sleep(1)
        for name, path in pages:
            times, bodies, followed = [], [], None
            try:
                for visit in range(REPEATS + 1):
                    seconds, body = fetch(server.url + path)
                    times.append(seconds)
                    bodies.append(body)
                    if visit == 0 and "These facets timed out" in body and "_search=" in path:
                        followed = seconds + follow(server.url, path)
                    time.sleep(1)
            except urllib.error.HTTPError as exc:
                out.append((name, None, None, f"HTTP {exc.code}: {exc.read()[:60]!r}"))
                continue
            note = ("TIMED OUT: " + body.split("These facets timed out:")[1][:60].split("</p>")[0].strip()
                    if "These facets timed out" in body else "every facet shown")
            # The first visit (since the server started): its facets, or those still counting.
            note += "; first visit: " + ("facets still counting" if "These facets timed out" in bodies[0]
                                         else "every facet shown")
            if followed is not None:
                note += f", shown by the page's script {followed:.2f} s after it was asked for"
            shown = [n for n, b in enumerate(bodies) if "These facets timed out" not in b]
            if shown and shown[0] > 0:   # visits are ~1 s apart: when the counts that follow arrived
                note += f", every facet from visit {shown[0] + 1} ({sum(times[:shown[0]]) + shown[0]:.1f} s after the first)"
            if "about" in body and "bc-about" in body:
                note += " (some counts about)"
            out.append((name, times[0], statistics.median(times[1:]), note))
    return out


def cli_rows(url: str) -> list[tuple]:
    from basecrawler.commands.status import collect_status
    from basecrawler.pipeline.registry import discover
    from basecrawler.reading.export import export_recalls
    from basecrawler.reading import search as searching
    from basecrawler.reading.search import RecallFilter, iter_recalls, search
    # What the command counts with: `count_upto` (stops at COUNT_CAP) where it exists, else
    # the exact `count` (before #23.5).
    count = getattr(searching, "count_upto", searching.count)
    from basecrawler.store.core import Store

    store = Store(url)
    conn = store.db.conn
    out = []
    for label, term in TERMS:
        filters = RecallFilter(text=term)

        def one():
            rows = search(conn, filters, limit=50)
            return len(rows), count(conn, filters)
        first, warm, (shown, total) = timed(one)
        out.append((f"CLI search in-process: {label}", first, warm, f"{shown} shown of {total}"))
    first, warm, _ = timed(lambda: collect_status(store, discover()))
    out.append(("status (collect_status)", first, warm, ""))
    try:   # the facet counts a run that changed data keeps for the web view (after #23.5)
        from basecrawler.reading.facetcounts import store_whole_table_counts
    except ImportError:
        store_whole_table_counts = None
    if store_whole_table_counts is not None:
        first, warm, _ = timed(lambda: store_whole_table_counts(store))
        out.append(("facet counts kept at a run's end (store_whole_table_counts)", first, warm, ""))
    filters = RecallFilter(facets=(EXPORT_FILTER,))

    def first_row():
        _, rows = iter_recalls(conn, filters)
        return next(rows, None) is not None
    first, warm, _ = timed(first_row)
    out.append((f"export --filter {'='.join(EXPORT_FILTER)}: first row", first, warm, ""))
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        written = export_recalls(conn, filters, "csv", os.path.join(tmp, "out.csv"))
        seconds = time.perf_counter() - started
    out.append((f"export --filter {'='.join(EXPORT_FILTER)}: whole CSV", seconds, None, f"{written:,} rows"))
    store.close()
    return out


def subprocess_rows(url: str) -> list[tuple]:
    """`basecrawler search TERM` as a person types it, minus start-up (the same command on an
    empty store: imports, argument parsing, opening a store)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(db: str, term: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "basecrawler", "--db", db, "search", term],
                       check=True, capture_output=True, env=env)
        return time.perf_counter() - started

    with tempfile.TemporaryDirectory() as tmp:
        empty = os.path.join(tmp, "empty.db")
        from basecrawler.store.core import Store
        Store(empty).close()
        start_up = statistics.median(run(empty, "brake") for _ in range(2 * REPEATS + 1))
    out = [("CLI search subprocess: start-up (empty store)", None, start_up, "")]
    for label, term in TERMS:
        total = statistics.median(run(url, term) for _ in range(2 * REPEATS + 1))
        out.append((f"CLI search subprocess: {label}", None, total, f"{total - start_up:.2f} s above start-up"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--db", help="SQLite file to create (or reuse when it exists)")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL: a throw-away cluster unless --url")
    parser.add_argument("--url", help="postgresql://… of a server that allows CREATE DATABASE")
    parser.add_argument("--skip", default="", help="comma-separated: web, cli, subprocess")
    parser.add_argument("--search-index", choices=("trgm", "windows"),
                        help="PostgreSQL: the search index the stores get (BASECRAWLER_PG_SEARCH_INDEX; "
                             "default: what the store has, pg_trgm for a new one)")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if args.search_index:
        os.environ["BASECRAWLER_PG_SEARCH_INDEX"] = args.search_index   # read when a store opens (pg_migrations)

    import read_data

    cluster = None
    if args.pg:
        import pgcluster

        url = args.url
        if url is None:
            cluster = pgcluster.Cluster(pgcluster._bin_dir())
            cluster.start()
            url = cluster.new_database()
        if read_data.pg_rows(url) < args.rows:
            print(f"generated {args.rows:,} recalls in {read_data.generate_pg(url, args.rows):.0f} s (PostgreSQL)")
        skip.add("web")
    else:
        url = args.db or os.path.join(benchkit.scratch_folder("bench-read-"), "bench.db")
        if not Path(url).exists():
            print(f"generated {args.rows:,} recalls in {read_data.generate_sqlite(url, args.rows):.0f} s "
                  f"({Path(url).stat().st_size / 1e6:,.0f} MB)")
    print(f"{'measure':<58} {'first s':>8} {'warm s':>8}  note", flush=True)
    try:
        for part, measure in (("cli", cli_rows), ("subprocess", subprocess_rows), ("web", web_rows)):
            if part not in skip:
                for name, first, warm, note in measure(url):
                    show = lambda v: f"{v:>8.3f}" if v is not None else f"{'—':>8}"   # noqa: E731
                    print(f"{name:<58} {show(first)} {show(warm)}  {note}", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
