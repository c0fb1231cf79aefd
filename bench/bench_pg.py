"""PostgreSQL under load (issue #17): several processes on one database.

1. Translation scaling: R pending rows (every text unique, so a text sent twice can only be a
   row translated twice) translated by 1, 2 and 4 worker processes against the fake
   LibreTranslate on 127.0.0.1 with L s latency, one request in flight per worker (one model
   endpoint each). Rows/s, backend texts sent vs distinct texts.
2. Mixed load: 4 translating + 2 crawling processes at once. Each crawler upserts its own
   source in batches, then re-sends every record with a changed summary (which clears `_ko` and
   queues the row again); the translators run until the crawlers are done and nothing is
   pending. Checked: every record stored exactly once with its last summary, every final
   summary translated, no text sent twice.
3. Upsert rate: N records through Store.upsert_recalls (validation, COALESCE, counts) vs a plain
   psycopg executemany of the same rows into the same schema on the same server.

A throw-away cluster is started in a temp folder (tests/pgcluster.py; fsync off), or pass
--url postgresql://… for a server of your own (it must allow CREATE DATABASE).

    python bench/bench_pg.py [--rows 1200] [--latency 0.05] [--upsert 20000]
"""
from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from basecrawler import Recall, Store  # noqa: E402
from basecrawler.store import DATA_COLUMNS  # noqa: E402
from translate.backends import LibreTranslateBackend  # noqa: E402
from translate.fakeserver import FakeLibreTranslate  # noqa: E402
from translate.worker import translate_pending  # noqa: E402


class OneAtATime(LibreTranslateBackend):
    concurrency = 1   # one request in flight per worker: scaling comes from processes


def word(n: int) -> str:
    """n spelt in letters: the worker masks digits and codes before sending, so a text made
    unique by a number would reach the backend as the same template as its neighbours."""
    letters = "bcdfghjklmnpqrstvwxz"
    out = ""
    while True:
        out = letters[n % 20] + "a" + out
        n //= 20
        if not n:
            return out


def recall(country: str, n: int, version: int = 0) -> Recall:
    tag = f"{word(n)} {country.lower()}o"
    return Recall(country=country, recall_number=f"{country}-{n:06d}", recall_date=f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}",
                  source_lang="en", manufacturer_original=f"Maker {tag}",
                  summary_original=f"Summary {tag} {'first' if version == 0 else 'second'} version: the brake hose may rupture.",
                  remedy_original=f"Remedy {tag}: dealers replace the hose.")


# ---- worker processes ------------------------------------------------------------------------
def _translator(url: str, server_url: str, done_event, results, ready, go) -> None:
    logging.disable(logging.WARNING)
    store = Store(url)
    backend = OneAtATime(server_url, retry_waits_s=(), timeout_s=30)
    ready.put(1)
    go.wait()                                      # timing starts when every process is up
    rows = 0
    while True:
        crawlers_done = done_event.is_set()        # read before the run: nothing may slip past
        rows += translate_pending(store, backend, batch_rows=20).processed
        if crawlers_done and not store.scalar("SELECT COUNT(*) FROM recalls WHERE translated_at IS NULL"):
            break
        time.sleep(0.05)
    results.put(rows)
    store.close()


def _crawler(url: str, country: str, count: int, results, ready, go) -> None:
    logging.disable(logging.WARNING)
    store = Store(url)
    ready.put(1)
    go.wait()
    totals = {"new": 0, "updated": 0, "unchanged": 0, "failed": 0}
    for version in (0, 1):
        for start in range(0, count, 100):
            r = store.upsert_recalls([recall(country, n, version) for n in range(start, min(start + 100, count))],
                                     source=country.lower())
            for key in ("new", "updated", "unchanged"):
                totals[key] += getattr(r, key)
            totals["failed"] += len(r.failed)
            time.sleep(0.1)                        # a crawler also waits for its sources
    results.put((country, totals))
    store.close()


def _start(procs, ready, go) -> float:
    """Start the processes, wait until each has imported and connected, then let them go."""
    for p in procs:
        p.start()
    for _ in procs:
        ready.get()
    go.set()
    return time.perf_counter()


# ---- the three measurements -------------------------------------------------------------------
def translation_scaling(cluster, rows: int, latency: float, processes: int) -> dict:
    url = cluster.new_database()
    store = Store(url)
    store.upsert_recalls([recall("XX", n) for n in range(rows)], source="xx")
    with FakeLibreTranslate(delay_s=latency) as server:
        ctx = mp.get_context("spawn")
        done, results, ready, go = ctx.Event(), ctx.Queue(), ctx.Queue(), ctx.Event()
        done.set()                                 # no crawler in this part
        procs = [ctx.Process(target=_translator, args=(url, server.url, done, results, ready, go))
                 for _ in range(processes)]
        started = _start(procs, ready, go)
        per_process = [results.get() for _ in procs]
        for p in procs:
            p.join()
        seconds = time.perf_counter() - started
        texts = server.texts
    pending = store.scalar("SELECT COUNT(*) FROM recalls WHERE translated_at IS NULL")
    store.close()
    return {"processes": processes, "rows": rows, "seconds": seconds, "rows_per_s": rows / seconds,
            "per_process": per_process, "texts_sent": len(texts), "distinct": len(set(texts)), "pending": pending}


def mixed_load(cluster, rows: int, latency: float) -> dict:
    url = cluster.new_database()
    Store(url).close()
    ctx = mp.get_context("spawn")
    with FakeLibreTranslate(delay_s=latency) as server:
        done, results, crawl_results, ready, go = ctx.Event(), ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Event()
        translators = [ctx.Process(target=_translator, args=(url, server.url, done, results, ready, go))
                       for _ in range(4)]
        crawlers = [ctx.Process(target=_crawler, args=(url, c, rows, crawl_results, ready, go)) for c in ("AA", "BB")]
        started = _start(translators + crawlers, ready, go)
        crawled = dict(crawl_results.get() for _ in crawlers)
        for p in crawlers:
            p.join()
        done.set()
        translated = [results.get() for _ in translators]
        for p in translators:
            p.join()
        seconds = time.perf_counter() - started
        texts = server.texts
    store = Store(url)
    stored = store.query("SELECT recall_number, summary_original, summary_ko, translated_at FROM recalls")
    store.close()
    expected = {f"{c}-{n:06d}": recall(c, n, 1).summary_original for c in ("AA", "BB") for n in range(rows)}
    return {
        "seconds": seconds, "crawled": crawled, "translated_per_process": translated,
        "records": len(stored), "expected": len(expected),
        "distinct_keys": len({r["recall_number"] for r in stored}),
        "wrong_or_missing": sum(1 for r in stored if expected.get(r["recall_number"]) != r["summary_original"])
        + len(expected.keys() - {r["recall_number"] for r in stored}),
        "untranslated": sum(1 for r in stored if not r["translated_at"] or not r["summary_ko"]),
        "texts_sent": len(texts), "distinct": len(set(texts)),
    }


def upsert_rate(cluster, count: int, repeats: int = 3) -> dict:
    import psycopg

    records = [recall("US", n) for n in range(count)]
    store_rates, plain_rates = [], []
    cols = list(DATA_COLUMNS) + ["first_seen_at", "updated_at"]
    sql = f"INSERT INTO recalls ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})"
    for _ in range(repeats):
        url = cluster.new_database()
        store = Store(url)
        started = time.perf_counter()
        for start in range(0, count, 500):
            store.upsert_recalls(records[start:start + 500], source="us")
        store_rates.append(count / (time.perf_counter() - started))
        store.close()

        url = cluster.new_database()
        rows = []
        for r in records:
            row = r.to_row() | {"source": "us"}
            rows.append([row.get(c) if c != "extra" else None for c in DATA_COLUMNS]
                        + ["2024-01-01T00:00:00+00:00"] * 2)
        rows = [[int(v) if isinstance(v, bool) else v for v in row] for row in rows]
        with psycopg.connect(url) as conn:
            started = time.perf_counter()
            for start in range(0, count, 500):     # one transaction per 500 rows, as the store
                with conn.transaction():
                    conn.cursor().executemany(sql, rows[start:start + 500])
            plain_rates.append(count / (time.perf_counter() - started))
    store_rate, plain_rate = statistics.median(store_rates), statistics.median(plain_rates)
    return {"records": count, "store": store_rate, "plain": plain_rate, "ratio": store_rate / plain_rate,
            "store_all": store_rates, "plain_all": plain_rates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1200)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--upsert", type=int, default=20000)
    parser.add_argument("--url", help="an existing server instead of a throw-away cluster")
    args = parser.parse_args()
    from pgcluster import Cluster, _bin_dir

    if args.url:
        cluster = _ExistingServer(args.url)
    else:
        cluster = Cluster(_bin_dir()).start()
    try:
        print(f"translation scaling: {args.rows} rows × 3 texts, {args.latency * 1000:.0f} ms per request, "
              "batches of 20 rows, one request in flight per process")
        base = None
        for processes in (1, 2, 4):
            r = translation_scaling(cluster, args.rows, args.latency, processes)
            base = base or r["rows_per_s"]
            print(f"  {processes} process(es): {r['rows_per_s']:7.1f} rows/s ({r['rows_per_s'] / base:.2f}×), "
                  f"{r['seconds']:.1f} s; texts sent {r['texts_sent']} = distinct {r['distinct']}: "
                  f"{r['texts_sent'] == r['distinct']}; rows per process {r['per_process']}; pending {r['pending']}")
        m = mixed_load(cluster, args.rows // 2, args.latency)
        print(f"mixed: 4 translators + 2 crawlers ({args.rows // 2} records each, sent twice): {m['seconds']:.1f} s; "
              f"records {m['records']}/{m['expected']} (distinct keys {m['distinct_keys']}), wrong or missing "
              f"{m['wrong_or_missing']}, untranslated {m['untranslated']}; texts sent {m['texts_sent']} = distinct "
              f"{m['distinct']}: {m['texts_sent'] == m['distinct']}; crawl counts {m['crawled']}; "
              f"rows per translator {m['translated_per_process']}")
        u = upsert_rate(cluster, args.upsert)
        print(f"upsert {u['records']} records, batches of 500: store {u['store']:,.0f} rec/s, plain executemany "
              f"{u['plain']:,.0f} rec/s → ratio {u['ratio']:.2f} (store {[round(x) for x in u['store_all']]}, "
              f"plain {[round(x) for x in u['plain_all']]})")
    finally:
        cluster.stop()


class _ExistingServer:
    def __init__(self, url: str):
        self.url, self.made = url, []

    def new_database(self) -> str:
        import psycopg
        name = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        self.made.append(name)
        return self.url.rsplit("/", 1)[0] + "/" + name

    def stop(self) -> None:
        import psycopg
        with psycopg.connect(self.url, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f"DROP DATABASE IF EXISTS {name}")


if __name__ == "__main__":
    main()
