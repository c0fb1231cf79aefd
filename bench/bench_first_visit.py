"""A reader's first visits after `browse` starts, while the start-up warm-up counts every table's
facets (plugins/basecrawler_facets.py `_warm`): the pages of bench_web_attack.py visited in turn
from the moment the server answers, for `--seconds`, no attackers.

    python bench/bench_first_visit.py --db /tmp/w19/attack1m.db [--starts 3] [--seconds 40]

The store is made as bench_web_attack.py makes it (`--rows` recalls, `--alerts` product alerts)
when the file does not exist. Each start is a fresh server on a store whose runs kept no facet
counts, so the warm-up counts every table. Prints, per start, each visit over 1 s (when, which
page, how long) and the slowest; then the slowest of every start. Target (#34.6): ≤ 1 s.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from bench_web_attack import ALERT_PAGES, PAGES, fetch, free_port, load, next_token  # noqa: E402


def one_start(db_path: str, pages: list[tuple[str, str]], seconds: float) -> list[tuple[float, str, float, int]]:
    """(seconds since the server answered, page, seconds the visit took, status) of every visit."""
    from basecrawler.reading.browse import BrowseServer

    db = Path(db_path).stem
    visits = []
    with BrowseServer(db_path, port=free_port()) as server:
        server.wait_ready(120)
        opened = time.monotonic()
        token = next_token(f"{server.url}/{db}/recalls.json?_col=id")
        shown = [(name, path.replace("{next}", token).format(db=db)) for name, path in pages]
        while time.monotonic() - opened < seconds:
            for name, path in shown:
                at = time.monotonic() - opened
                status, took = fetch(server.url + path)
                visits.append((at, name, took, status))
    return visits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="database file (made when missing)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--alerts", type=int, default=1_000_000)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()

    from read_data import generate_sqlite
    from web_attack_data import alert_rows, generate_alerts
    if not os.path.exists(args.db):
        print(f"generated {args.rows:,} recalls in {generate_sqlite(args.db, args.rows):.0f} s", flush=True)
    if args.alerts and alert_rows(args.db) < args.alerts:
        print(f"generated {args.alerts:,} product alerts in {generate_alerts(args.db, args.alerts):.0f} s", flush=True)
    pages = PAGES + (ALERT_PAGES if args.alerts else [])
    slowest = []
    for start in range(1, args.starts + 1):
        before = load()
        visits = one_start(args.db, pages, args.seconds)
        over = [v for v in visits if v[2] > 1.0 or v[3] != 200]
        worst = max(visits, key=lambda v: v[2])
        slowest.append(worst[2])
        print(f"start {start}: {len(visits)} visits in {args.seconds:.0f} s, {len(over)} over 1 s or not 200, "
              f"slowest {worst[2]:.2f} s ({worst[1]}, at {worst[0]:.1f} s); median "
              f"{statistics.median(v[2] for v in visits):.3f} s; load {before} → {load()}", flush=True)
        for at, name, took, status in over:
            print(f"    at {at:5.1f} s  {took:5.2f} s  {status}  {name}")
    print(f"slowest visit per start: {', '.join(f'{s:.2f}' for s in slowest)} s")


if __name__ == "__main__":
    main()
