"""Upsert throughput: N recalls through Store.upsert_recalls (validation included) compared in
the same run with a plain sqlite3.executemany of the same rows into the same schema (the
physical reference); then a re-run of the unchanged data.

Two ways of feeding the FTS5 trigram index are measured, each for the store and for the plain
reference, on fresh databases:
- per row: an AFTER INSERT trigger (the schema before migration _m006);
- per batch: one `INSERT INTO recalls_fts … SELECT … WHERE id > ?` per 500 rows (today's store).

Every measurement is repeated (fresh database each time, variants interleaved so a busy
neighbour hurts all of them alike); the table shows the median and the min–max spread.

    python bench/bench_upsert.py [N] [REPEATS]
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from basecrawler import Recall, Store  # noqa: E402
from basecrawler.schema import FTS_COLUMNS, FTS_INSERT_TRIGGER  # noqa: E402
from basecrawler.store import _FEED_FTS_SQL, DATA_COLUMNS  # noqa: E402

BATCH = 500


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


def plain(path: str, prepared: list[tuple], per_row_trigger: bool) -> float:
    """Seconds for executemany of ready tuples; per batch, the same one FTS statement the store uses."""
    store = open_store(path, per_row_trigger)
    conn = store.db.conn
    cols = list(DATA_COLUMNS) + ["first_seen_at", "updated_at"]
    sql = f"INSERT INTO recalls ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    started = time.perf_counter()
    conn.execute("BEGIN")
    for i in range(0, len(prepared), BATCH):
        last_id = conn.execute("SELECT COALESCE(MAX(id), 0) FROM recalls").fetchone()[0]
        conn.executemany(sql, prepared[i:i + BATCH])
        if not per_row_trigger:
            conn.execute(_FEED_FTS_SQL, [last_id])
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def through_store(store: Store, rows: list[dict]) -> tuple[float, int, object]:
    before = store.db.conn.total_changes
    started = time.perf_counter()
    totals = None
    for i in range(0, len(rows), BATCH):
        batch = [Recall.model_validate(r) for r in rows[i:i + BATCH]]
        result = store.upsert_recalls(batch, source="us")
        if totals is None:
            totals = result
        else:
            totals.add(result)
    return time.perf_counter() - started, store.db.conn.total_changes - before, totals


def spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rows = raw_rows(n)
    prepared = [
        ("us", r["country"], r["recall_number"], r["recall_date"], 0, r["manufacturer_original"], r["model_original"],
         r["component_original"], r["summary_original"], None, r["consequence_original"], r["remedy_original"],
         r["model_year"], int(r["affected_units"]), "en", r["source_url"], json.dumps(r["extra"]), "t", "t")
        for r in rows
    ]
    tmp = tempfile.mkdtemp()
    times: dict[str, list[float]] = {}
    rerun: list[tuple[float, int, int]] = []
    for rep in range(repeats):
        for variant, per_row in (("per row", True), ("per batch", False)):
            times.setdefault(f"plain {variant}", []).append(plain(os.path.join(tmp, f"p{rep}{per_row}.db"), prepared, per_row))
            store = open_store(os.path.join(tmp, f"s{rep}{per_row}.db"), per_row)
            first_s, first_writes, first = through_store(store, rows)
            assert first.new == n and first_writes >= n, (first.new, first_writes)
            times.setdefault(f"store {variant}", []).append(first_s)
            if not per_row:
                second_s, second_writes, second = through_store(store, rows)
                rerun.append((second_s / first_s, second_writes, second.unchanged))
            store.close()

    def rate(key: str) -> list[float]:
        return [n / s for s in times[key]]

    def ratio(store_key: str, plain_key: str) -> list[float]:   # per repetition, so noise pairs up
        return [p / s for p, s in zip(times[plain_key], times[store_key])]

    print(f"{n:,} records, {repeats} repetitions: median (min–max)")
    print(f"{'measure':<52}{'value':>28}")
    for variant in ("per row", "per batch"):
        print(f"{f'plain executemany, FTS {variant} (records/s)':<52}{spread(rate(f'plain {variant}'), ',.0f'):>28}")
        print(f"{f'store upsert incl. validation, FTS {variant} (rec/s)':<52}{spread(rate(f'store {variant}'), ',.0f'):>28}")
        print(f"{f'ratio store / plain, both FTS {variant}':<52}{spread(ratio(f'store {variant}', f'plain {variant}'), '.2f'):>28}")
    print(f"{'ratio store per batch / plain per row (target >= 0.7)':<52}"
          f"{spread(ratio('store per batch', 'plain per row'), '.2f'):>28}")
    print(f"{'store per batch / store per row (speed-up)':<52}"
          f"{spread([r / b for r, b in zip(times['store per row'], times['store per batch'])], '.2f'):>28}")
    print(f"{'re-run: unchanged / rows written (target 0)':<52}"
          f"{f'{rerun[-1][2]} / {max(w for _, w, _ in rerun)}':>28}")
    print(f"{'re-run time / first run (target < 0.20)':<52}{spread([r for r, _, _ in rerun], '.2f'):>28}")
    print(f"{'peak RSS (MB)':<52}{rss_mb():>28.0f}")


if __name__ == "__main__":
    main()
