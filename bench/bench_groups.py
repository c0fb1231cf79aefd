"""What grouping costs a search (issue #31, on demand): the same searches over two stores of the
same generated vehicle recalls (bench/read_data.py), one without groups and one with a share of
its records linked as other publishers' copies (`record_groups`, flagged by `is_copy`), which
every search of it then hides.

    python bench/bench_groups.py                                  # 1,000,000 recalls, 10 % copies
    python bench/bench_groups.py --db /tmp/g --count 200000       # keeps / reuses /tmp/g/{plain,grouped}.db

Both stores are built once (the grouped one is a copy of the plain one, then linked) and kept with
`--db`. The repetitions are interleaved (without, with, without, with, …, the order swapped every
other pair) so each ratio compares two runs made within milliseconds of each other, on a shared
machine whose load changes by the second. One run is a page of 50 and its count up to the cap, as
`search` asks; a run shorter than `--sample-ms` is repeated inside one sample. Times are this
process's CPU time (the query runs in this thread; waiting for a core is not counted), the wall
time beside them. Prints per search the median CPU time of each side and the median (min–max) of
the paired ratios. Target (#31): with groups ≤ 1.10 × without, every row.

    python bench/bench_groups.py --db /tmp/g --web               # the web view's page, both stores

`--web` serves both stores with the web view (one server each, on 127.0.0.1) and times whole page
loads of the same six searches instead (wall time, interleaved pairs, warm). `--cold` first starts
each store's server alone and loads its table page every quarter second from the moment it
answers: the first visit's time, and how long until a visit shows every facet counted (no
"still counting") and how long that visit took. `--settle` waits, before the pairs, until both
table pages show every facet (the start-up counts done), so the pairs time the steady state.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

SEARCHES = [("rare term (#123456)", {"text": "#123456"}), ("common term (vehicle)", {"text": "vehicle"}),
            ("2 characters (ブレ)", {"text": "ブレ"}), ("Japanese (燃料)", {"text": "燃料"}),
            ("a facet (country JP)", {"countries": ("JP",)}), ("no filter (the table)", {})]


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def one_run(conn, filters) -> None:
    from basecrawler.reading.search import count_upto, search
    search(conn, filters, limit=50)
    count_upto(conn, filters)


def sample(conn, filters, inner: int) -> tuple[float, float]:
    """(CPU s, wall s) of one run, averaged over `inner` runs."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(inner):
        one_run(conn, filters)
    return (time.process_time() - cpu) / inner, (time.perf_counter() - wall) / inner


def link_copies(db_path: str, share: float) -> int:
    """Every k-th record becomes a copy of the record after it (k = 1 / share), linked and
    flagged as `relink` does (the group table, the flags, their indexes, in one transaction)."""
    from basecrawler import Store
    from basecrawler.recordtypes import get_record_type
    from basecrawler.store import groups
    step = max(1, round(1 / share))
    store = Store(db_path)
    try:
        def op(db):
            db.conn.execute("DELETE FROM record_groups")
            db.conn.execute("INSERT INTO record_groups (record_type, member_id, member_source, primary_id, "
                            "primary_source) SELECT 'vehicle_recall', id, source, id + 1, source FROM recalls "
                            "WHERE id % ? = 0", (step,))
            groups.flag_copies(db, get_record_type("vehicle_recall"))
            db.conn.execute("ANALYZE")
            return db.conn.execute("SELECT COUNT(*) FROM record_groups").fetchone()[0]
        return store.write(op)
    finally:
        store.close()


def stores(folder: Path, count: int, share: float, relink: bool = False) -> tuple[str, str]:
    """The two stores in `folder`, made when missing (or of another size / share); `relink`
    makes the grouped one again from the plain one (after a change of how copies are flagged)."""
    import read_data
    plain, grouped = folder / "plain.db", folder / "grouped.db"
    if plain.exists() and _rows(plain) != count:
        plain.unlink()
        grouped.unlink(missing_ok=True)
    if not plain.exists():
        folder.mkdir(parents=True, exist_ok=True)
        print(f"generating {count:,} recalls in {read_data.generate_sqlite(str(plain), count):.0f} s", flush=True)
    wanted = count // max(1, round(1 / share))
    if relink or not grouped.exists() or _linked(grouped) != wanted:
        source = sqlite3.connect(plain)
        target = sqlite3.connect(grouped)
        source.backup(target)
        source.close()
        target.close()
        print(f"linked {link_copies(str(grouped), share):,} records as copies", flush=True)
    return str(plain), str(grouped)


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT max(rowid) FROM recalls").fetchone()[0] or 0


def _linked(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM record_groups").fetchone()[0]


def check(plain, grouped, filters) -> None:
    """The grouped store answers as the plain one less its copies; with every copy, as the plain."""
    from dataclasses import replace

    from basecrawler.reading.search import count, count_upto, search
    everything = replace(filters, all_copies=True)
    assert count_upto(grouped, everything) == count_upto(plain, filters), filters
    assert [r["id"] for r in search(grouped, everything)] == [r["id"] for r in search(plain, filters)], filters
    shown = search(grouped, filters)
    assert all(r["is_copy"] is None for r in shown), filters
    if count_upto(plain, filters) <= 10_000:
        copies = grouped.execute("SELECT count(*) FROM recalls WHERE is_copy = 1").fetchone()[0]
        assert count(grouped, filters) <= count(plain, filters) <= count(grouped, filters) + copies


def measure(plain, grouped, filters, repeats: int, sample_ms: float) -> dict:
    for conn in (plain, grouped):
        one_run(conn, filters)   # warm: the page cache, the plan, the term's sampled share
    warm = min(sample(plain, filters, 1)[0], sample(grouped, filters, 1)[0])
    inner = max(1, round(sample_ms / 1000 / max(warm, 1e-6)))
    pairs = []
    for n in range(repeats):
        first, second = (plain, grouped) if n % 2 == 0 else (grouped, plain)
        a = sample(first, filters, inner)
        b = sample(second, filters, inner)
        without, with_ = (a, b) if first is plain else (b, a)
        pairs.append((without, with_))
    ratios = [w[0] / o[0] for o, w in pairs]
    return {"without": statistics.median(o[0] for o, _ in pairs), "with": statistics.median(w[0] for _, w in pairs),
            "wall_without": statistics.median(o[1] for o, _ in pairs),
            "wall_with": statistics.median(w[1] for _, w in pairs),
            "ratio": statistics.median(ratios), "low": min(ratios), "high": max(ratios), "runs": repeats * inner}


WEB_PAGES = {"rare term (#123456)": "?_search=%23123456", "common term (vehicle)": "?_search=vehicle",
             "2 characters (ブレ)": "?_search=%E3%83%96%E3%83%AC", "Japanese (燃料)": "?_search=%E7%87%83%E6%96%99",
             "a facet (country JP)": "?country=JP", "no filter (the table)": ""}


TIMED_OUT = b'class="facets-timed-out"'   # templates/table.html: a facet still counting
COLD_LIMIT_S = 120.0


def _port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _page(url: str) -> tuple[float, bytes]:
    import urllib.request

    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = response.read()
    return time.perf_counter() - started, body


def _until_counted(url: str, since: float) -> tuple[float, float, float, int]:
    """Load `url` every quarter second until a visit shows every facet: (first visit's s, s from
    `since` to the complete visit's start, the complete visit's s, visits)."""
    first, visits = None, 0
    while True:
        started = time.perf_counter()
        took, body = _page(url)
        visits += 1
        first = took if first is None else first
        if TIMED_OUT not in body or started - since > COLD_LIMIT_S:
            return first, started - since, took, visits
        time.sleep(0.25)


def cold(paths: list[str]) -> None:
    """The table page of each store right after its server starts (each server alone)."""
    from basecrawler.reading.browse import BrowseServer

    print(f"\n{'table page, cold':24} {'first':>9} {'complete after':>15} {'that visit':>11} visits")
    for path in paths:
        started = time.perf_counter()
        with BrowseServer(path, port=_port()) as server:
            up = time.perf_counter()
            first, after, took, visits = _until_counted(f"{server.url}/{Path(path).stem}/recalls", up)
        print(f"{Path(path).stem:24} {first * 1000:6.0f} ms {after:12.2f} s {took * 1000:8.0f} ms {visits:6d}"
              f"   (server start {up - started:.1f} s)", flush=True)


def web(plain_path: str, grouped_path: str, repeats: int, only: str | None, settle: bool = False) -> None:
    """Whole page loads of each search on the two stores' web views, interleaved pairs."""
    from basecrawler.reading.browse import BrowseServer

    def load_page(url: str) -> float:
        return _page(url)[0]

    port = _port
    with BrowseServer(plain_path, port=port()) as plain, BrowseServer(grouped_path, port=port()) as grouped:
        if settle:
            up = time.perf_counter()
            for server, path in ((plain, plain_path), (grouped, grouped_path)):
                _until_counted(f"{server.url}/{Path(path).stem}/recalls", up)
            print(f"both table pages counted {time.perf_counter() - up:.1f} s after the servers started", flush=True)
        print(f"\n{'web page':24} {'without':>9} {'with':>9}  ratio, median (min–max)")
        for name, query in WEB_PAGES.items():
            if only and only not in name:
                continue
            urls = (f"{plain.url}/{Path(plain_path).stem}/recalls{query}",
                    f"{grouped.url}/{Path(grouped_path).stem}/recalls{query}")
            for url in urls:
                load_page(url)   # warm
            pairs = []
            for n in range(repeats):
                order = (0, 1) if n % 2 == 0 else (1, 0)
                times = {side: load_page(urls[side]) for side in order}
                pairs.append((times[0], times[1]))
            ratios = [w / o for o, w in pairs]
            print(f"{name:24} {statistics.median(o for o, _ in pairs) * 1000:6.0f} ms "
                  f"{statistics.median(w for _, w in pairs) * 1000:6.0f} ms  {statistics.median(ratios):5.2f} "
                  f"({min(ratios):.2f}–{max(ratios):.2f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--copies", type=float, default=0.10, help="share of records linked as copies")
    parser.add_argument("--repeats", type=int, default=21, help="interleaved pairs per search")
    parser.add_argument("--sample-ms", type=float, default=20.0, help="a shorter run is repeated within a sample")
    parser.add_argument("--db", help="folder keeping (and reusing) the two stores")
    parser.add_argument("--relink", action="store_true", help="make the grouped store again")
    parser.add_argument("--only", help="only the searches whose name contains this")
    parser.add_argument("--web", action="store_true", help="time the web view's page loads instead")
    parser.add_argument("--cold", action="store_true", help="with --web: first the table page after a server start")
    parser.add_argument("--settle", action="store_true", help="with --web: pairs once the start-up counts are done")
    args = parser.parse_args()

    from basecrawler.reading.search import RecallFilter

    folder = Path(args.db) if args.db else Path(tempfile.mkdtemp(prefix="bench-groups-"))
    try:
        plain_path, grouped_path = stores(folder, args.count, args.copies, args.relink)
        if args.web:
            print(f"load before {load()}", flush=True)
            if args.cold:
                cold([plain_path, grouped_path])
            web(plain_path, grouped_path, args.repeats, args.only, settle=args.settle)
            print(f"\nload after {load()}")
            return
        conns = []
        for path in (plain_path, grouped_path):
            conn = sqlite3.connect(path)
            conn.row_factory = sqlite3.Row
            conns.append(conn)
        print(f"load before {load()}", flush=True)
        print(f"\n{'search':24} {'without':>9} {'with':>9}  {'ratio, median (min–max)':24} {'wall without/with':>19} runs")
        for name, options in SEARCHES:
            if args.only and args.only not in name:
                continue
            filters = RecallFilter(**options)
            check(*conns, filters)
            r = measure(*conns, filters, args.repeats, args.sample_ms)
            print(f"{name:24} {r['without'] * 1000:6.2f} ms {r['with'] * 1000:6.2f} ms  "
                  f"{r['ratio']:5.2f} ({r['low']:.2f}–{r['high']:.2f}){'':10} "
                  f"{r['wall_without'] * 1000:7.2f}/{r['wall_with'] * 1000:.2f} ms {r['runs']:5d}", flush=True)
        print(f"\nload after {load()}")
        for conn in conns:
            conn.close()
    finally:
        if not args.db:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
