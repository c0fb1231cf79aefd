"""What grouping costs a search (issue #31, on demand): the same searches over a store of
generated vehicle recalls (bench/read_data.py) with no groups, then with a share of its records
linked as other publishers' copies (`record_groups`), which every search then hides
(`build_query(hide_copies=True)`: one NOT EXISTS per row read, on the member index).

    python bench/bench_groups.py                      # 1,000,000 recalls, 10 % of them copies
    python bench/bench_groups.py --count 200000 --copies 0.2 --db /tmp/g/bench.db   # keeps the file

Prints, per search, the median of the repeats (one page of 50 and its count, as `search` asks)
without and with groups, and their ratio. Target (#31): with groups ≤ 1.10 × without.
"""
from __future__ import annotations

import argparse
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


def timed(conn, filters, repeats: int) -> float:
    from basecrawler.reading.search import count_upto, search
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        search(conn, filters, limit=50)
        count_upto(conn, filters)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def link_copies(db_path: str, share: float) -> int:
    """Every k-th record becomes a copy of the record after it (k = 1 / share)."""
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
            groups.flag_copies(db, get_record_type("vehicle_recall"))   # as relink does: the flags, their indexes
            db.conn.execute("ANALYZE")
            return db.conn.execute("SELECT COUNT(*) FROM record_groups").fetchone()[0]
        return store.write(op)
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--copies", type=float, default=0.10, help="share of records linked as copies")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--db", help="keep / reuse the store here")
    args = parser.parse_args()

    import sqlite3

    import read_data
    from basecrawler.reading.search import RecallFilter

    db_path = args.db or str(Path(tempfile.mkdtemp(prefix="bench-groups-")) / "bench.db")
    if not Path(db_path).exists():
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        print(f"generating {args.count:,} recalls in {read_data.generate_sqlite(db_path, args.count):.0f} s")
    results = {}
    for phase, share in (("without groups", 0.0), ("with groups", args.copies)):
        linked = link_copies(db_path, share) if share else link_copies(db_path, 1e-12)
        conn = sqlite3.connect(db_path)
        conn.row_factory = sqlite3.Row
        try:
            for name, options in SEARCHES:
                filters = RecallFilter(**options)
                timed(conn, filters, 1)   # warm: the page cache and the plan
                results.setdefault(name, {})[phase] = timed(conn, filters, args.repeats)
        finally:
            conn.close()
        print(f"{phase}: {linked:,} records linked as copies")
    print(f"\n{'search':28} {'without':>10} {'with':>10} {'ratio':>7}")
    for name, by_phase in results.items():
        without, with_ = by_phase["without groups"], by_phase["with groups"]
        print(f"{name:28} {without * 1000:8.1f} ms {with_ * 1000:8.1f} ms {with_ / without:7.2f}")


if __name__ == "__main__":
    main()
