"""Matching 10,000 new records against 1,000 watches (issue #33), on SQLite and PostgreSQL.

    PYTHONPATH=. python bench/bench_watch_match.py [--records 10000] [--watches 1000] [--stored 0] [--pg]

The watches mix what people save: a category facet, a word of the titles, both, a source
list; the records are product alerts of two sources. `--stored N`: N records stored and seen
before them (a store that has been running), which are not candidates. Times `matching.match` (candidates,
every watch's search, the outbox written); numbers go in bench/README.md."""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "tests")]

from basecrawler.store.core import Store  # noqa: E402
from basecrawler.watch import matching, repository  # noqa: E402
from basecrawler.watch.model import Watch  # noqa: E402
from record_types.product_alert import ProductAlert  # noqa: E402

CATEGORIES = ["Food", "Toys", "Cosmetics", "Electrical", "Vehicles", "Medical", "Chemical", "Clothing"]
# Words of titles and watches: brands and product codes are what watches name, so a watch selects
# a few records of the 10,000, as in use (a watch matching a tenth of everything is a feed).
# (Made-up names of 7 letters: names sharing a prefix, brand001 … brand400, would share the
# trigram windows PostgreSQL's index reads, which no real list of brands does.)
_LETTERS = random.Random(7)
WORDS = sorted({"".join(_LETTERS.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(400)})


def _alerts(rng: random.Random, source: str, count: int, prefix: str = "") -> list[ProductAlert]:
    return [ProductAlert(country="CA" if source == "hc" else "FR", alert_id=f"{prefix}{source}-{i}", alert_date="2025-01-01",
                         title_original=f"{rng.choice(WORDS)} {rng.choice(WORDS)} in product {i}",
                         hazard_original=f"risk of {rng.choice(WORDS)}", category=[rng.choice(CATEGORIES)])
            for i in range(count)]


def _store(store, rng: random.Random, records: int, prefix: str = "") -> None:
    for source in ("hc", "eu"):
        batch = _alerts(rng, source, records // 2, prefix)
        for start in range(0, len(batch), 1000):
            store.upsert("product_alert", batch[start:start + 1000], source=source)


def run(url: str, records: int, watches: int, stored: int = 0) -> float:
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
        started = time.perf_counter()
        report = matching.match(store)
        elapsed = time.perf_counter() - started
        seen = f" (and {stored:,} seen before)" if stored else ""
        print(f"{store.engine}: {records:,} records{seen} x {watches:,} watches: {elapsed:.2f} s "
              f"({report.candidates:,} candidates, {report.matched:,} matches queued {report.queued:,})")
        return elapsed
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--watches", type=int, default=1_000)
    parser.add_argument("--pg", action="store_true", help="also on a throw-away PostgreSQL cluster")
    parser.add_argument("--pg-only", action="store_true")
    parser.add_argument("--stored", type=int, default=0, help="records stored and seen before the new ones")
    args = parser.parse_args()
    if not args.pg_only:
        with tempfile.TemporaryDirectory() as folder:
            run(str(Path(folder) / "bench.db"), args.records, args.watches, args.stored)
    if args.pg or args.pg_only:
        from pgcluster import Cluster, _bin_dir

        cluster = Cluster(_bin_dir()).start()
        try:
            run(cluster.new_database(), args.records, args.watches, args.stored)  # noqa
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
