"""Upsert throughput: 100,000 recalls through Store.upsert_recalls (validation included)
compared in the same run with a plain sqlite3.executemany of the same rows into the same
schema (the physical reference); then a re-run of the unchanged data.

    python bench/bench_upsert.py [N]
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from basecrawler import Recall, Store  # noqa: E402
from basecrawler.store import DATA_COLUMNS  # noqa: E402


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


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rows = raw_rows(n)
    tmp = tempfile.mkdtemp()

    # Reference: plain executemany of already-prepared tuples into the same schema.
    ref_store = Store(os.path.join(tmp, "ref.db"))
    cols = list(DATA_COLUMNS) + ["first_seen_at", "updated_at"]
    prepared = [
        ("us", r["country"], r["recall_number"], r["recall_date"], 0, r["manufacturer_original"], r["model_original"],
         r["component_original"], r["summary_original"], None, r["consequence_original"], r["remedy_original"],
         r["model_year"], int(r["affected_units"]), "en", r["source_url"], json.dumps(r["extra"]), "t", "t")
        for r in rows
    ]
    conn = ref_store.db.conn
    started = time.perf_counter()
    conn.execute("BEGIN")
    for i in range(0, n, 500):
        conn.executemany(f"INSERT INTO recalls ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", prepared[i:i + 500])
    conn.execute("COMMIT")
    plain_s = time.perf_counter() - started

    store = Store(os.path.join(tmp, "bench.db"))

    def through_store() -> tuple[float, int, object]:
        before = store.db.conn.total_changes
        started = time.perf_counter()
        totals = None
        for i in range(0, n, 500):
            batch = [Recall.model_validate(r) for r in rows[i:i + 500]]
            result = store.upsert_recalls(batch, source="us")
            if totals is None:
                totals = result
            else:
                totals.add(result)
        return time.perf_counter() - started, store.db.conn.total_changes - before, totals

    first_s, first_writes, first = through_store()
    second_s, second_writes, second = through_store()

    print(f"{'measure':<44}{'value':>14}")
    print(f"{'records':<44}{n:>14,}")
    print(f"{'plain executemany (records/s)':<44}{n / plain_s:>14,.0f}")
    print(f"{'store upsert incl. validation (records/s)':<44}{n / first_s:>14,.0f}")
    print(f"{'ratio store / plain (target >= 0.5)':<44}{plain_s / first_s:>14.2f}")
    print(f"{'first run: new / rows written':<44}{f'{first.new} / {first_writes}':>14}")
    print(f"{'re-run: unchanged / rows written (target 0)':<44}{f'{second.unchanged} / {second_writes}':>14}")
    print(f"{'re-run time / first run (target < 0.20)':<44}{second_s / first_s:>14.2f}")
    print(f"{'peak RSS (MB)':<44}{rss_mb():>14.0f}")


if __name__ == "__main__":
    main()
