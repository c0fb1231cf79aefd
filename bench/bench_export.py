"""Export benchmark (run on demand): fill a store with generated recalls, export CSV, JSONL
and XLSX each in a fresh process, and print one table with rows/s and peak RSS (plus the time
one page of search results takes over the same store).

    python bench/bench_export.py                 # 500k recalls; XLSX on the newest 100k
    python bench/bench_export.py --rows 50000 --xlsx-rows 50000

Each export runs in its own child process so its peak RSS (ru_maxrss) is the export's alone,
not the generator's. Target: CSV and JSONL under 200 MB at 500k records.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MAKERS = [("トヨタ自動車株式会社", "도요타 자동차"), ("Ford Motor Company", "포드"), ("本田技研工業株式会社", "혼다"),
          ("Volkswagen AG", "폭스바겐"), ("General Motors LLC", "제너럴 모터스"), ("マツダ株式会社", "마쓰다")]
SUMMARIES = [
    ("ブレーキホースの取り付けが不適切なため、走行中の振動で損傷し、制動力が低下するおそれがある。",
     "브레이크 호스 장착이 부적절하여 주행 중 진동으로 손상되어 제동력이 저하될 우려가 있다."),
    ("The fuel pump impeller may deform, causing the engine to stall while driving and increasing the risk of a crash.",
     "연료 펌프 임펠러가 변형되어 주행 중 엔진이 정지하고 충돌 위험이 커질 수 있다."),
    ("Le coussin gonflable frontal du passager peut ne pas se déployer correctement en cas de collision.",
     "충돌 시 조수석 전면 에어백이 제대로 전개되지 않을 수 있다."),
]


def generate(db_path: str, rows: int) -> float:
    """Insert `rows` recalls the fast way (one transaction, executemany); the FTS triggers run
    as in production. Returns seconds taken."""
    from basecrawler import Store

    store = Store(db_path)
    rng = random.Random(9)
    start = time.monotonic()
    columns = ["source", "country", "recall_number", "recall_date", "date_unknown",
               "manufacturer_original", "manufacturer_ko", "model_original", "component_original",
               "summary_original", "summary_ko", "remedy_original", "model_year", "affected_units",
               "source_lang", "source_url", "extra", "first_seen_at", "updated_at"]
    sql = f"INSERT INTO recalls ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    base = dt.date(2000, 1, 1)

    def batch(first: int, size: int):
        for n in range(first, first + size):
            maker, maker_ko = MAKERS[n % len(MAKERS)]
            summary, summary_ko = SUMMARIES[n % len(SUMMARIES)]
            year = 2000 + n % 25
            yield ("bench", ("US", "JP", "CA", "EU", "AU")[n % 5], f"R{n:08d}",
                   (base + dt.timedelta(days=n % 9000)).isoformat(), 0, maker, maker_ko, f"Model {n % 997}",
                   "Brakes / ブレーキ", f"{summary} (#{n})", summary_ko if n % 4 else None,
                   "Dealers will replace the part free of charge.", f"{year}-{year + rng.randint(0, 3)}",
                   rng.randint(1, 200_000), "en", f"https://example.gov/recalls/{n}",
                   json.dumps({"vehicles": [{"make": maker, "units": n % 500}]}, ensure_ascii=False), now, now)

    step = 20_000
    for first in range(0, rows, step):
        size = min(step, rows - first)
        store.write(lambda db: db.conn.executemany(sql, batch(first, size)))
    store.close()
    return time.monotonic() - start


def child(fmt: str, db_path: str, output: str, limit: int | None) -> None:
    """Export in this (fresh) process and print its figures as JSON."""
    from basecrawler import Store
    from basecrawler.reading.export import export_recalls
    from basecrawler.reading.search import RecallFilter

    store = Store(db_path)
    start = time.monotonic()
    written = export_recalls(store.db.conn, RecallFilter(), fmt, output, limit=limit)
    seconds = time.monotonic() - start
    store.close()
    print(json.dumps({"rows": written, "seconds": seconds,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "file_mb": os.path.getsize(output) / 2**20}))


def measure(fmt: str, db_path: str, folder: Path, limit: int | None) -> dict:
    output = folder / f"export.{fmt}"
    args = [sys.executable, __file__, "--child", fmt, "--db", db_path, "--out", str(output)]
    if limit:
        args += ["--limit", str(limit)]
    done = subprocess.run(args, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--xlsx-rows", type=int, default=100_000,
                        help="XLSX is far slower per row (openpyxl); export only the newest N (0 = all)")
    parser.add_argument("--child", choices=["csv", "jsonl", "xlsx"], help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.db, args.out, args.limit)
        return 0

    with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
        folder = Path(tmp)
        db_path = str(folder / "bench.db")
        seconds = generate(db_path, args.rows)
        db_mb = sum(p.stat().st_size for p in folder.glob("bench.db*")) / 2**20
        print(f"generated {args.rows:,} recalls in {seconds:.1f}s ({args.rows / seconds:,.0f} rows/s, "
              f"database {db_mb:,.0f} MB with the FTS index)")
        print(f"{'format':<7} {'rows':>9} {'seconds':>8} {'rows/s':>9} {'peak RSS MB':>12} {'file MB':>8}")
        for fmt in ("csv", "jsonl", "xlsx"):
            limit = args.xlsx_rows if fmt == "xlsx" and args.xlsx_rows else None
            r = measure(fmt, db_path, folder, limit)
            print(f"{fmt:<7} {r['rows']:>9,} {r['seconds']:>8.1f} {r['rows'] / r['seconds']:>9,.0f} "
                  f"{r['peak_rss_mb']:>12.0f} {r['file_mb']:>8.0f}")
            (folder / f"export.{fmt}").unlink()
        print(search_timings(db_path))
    return 0


def search_timings(db_path: str) -> str:
    """One page of search results over the whole store: FTS (3+ chars) and LIKE (shorter)."""
    from basecrawler import Store
    from basecrawler.reading.search import RecallFilter, search

    store = Store(db_path)
    parts = []
    try:
        for label, term in (("fts 'ブレーキ'", "ブレーキ"), ("fts 'fuel pump'", "fuel pump"), ("like '制動'", "制動"),
                            ("like '브레'", "브레")):
            start = time.monotonic()
            found = search(store.db.conn, RecallFilter(text=term), limit=50)
            parts.append(f"{label} {time.monotonic() - start:.2f}s ({len(found)} shown)")
    finally:
        store.close()
    return "search, first page of 50: " + "; ".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
