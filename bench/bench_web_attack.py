"""Web view under attack (run on demand, issue #34.6): a store of generated recalls
(read_data.py, 1,000,000 by default), `browse`'s Datasette, four clients sending the heaviest
query strings they can build over and over, and meanwhile the pages a person opens, timed.

    python bench/bench_web_attack.py                          # 1,000,000 recalls, 60 s of attack
    python bench/bench_web_attack.py --db /tmp/attack1m.db    # keeps / reuses the file
    python bench/bench_web_attack.py --rows 100000 --seconds 30

Prints per page: status, median and worst seconds over the visits made during the attack
(target: ≤ 1 s, or a clear "busy" answer within it); per attack: the answers it got; the
server's peak resident memory (sampled). Loopback only.
"""
from __future__ import annotations

import argparse
import collections
import itertools
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

PAGES = [
    ("table page (home)", "/{db}/recalls"),
    ("filtered: country=JP", "/{db}/recalls?country=JP"),
    ("facet selection: model year 2012", "/{db}/recalls?_bcf_model_year=2012"),
    ("search: #12345 (one record)", "/{db}/recalls?_search=" + urllib.parse.quote("#12345")),
    ("search: brake (every record)", "/{db}/recalls?_search=brake"),
    ("search: 燃料 (2 characters)", "/{db}/recalls?_search=" + urllib.parse.quote("燃料")),
    ("search: Q7 (2 characters, none)", "/{db}/recalls?_search=Q7"),
    ("card", "/{db}/recalls/1"),
]
HANGUL = "가나다라마바사아자차카타파하"


def attacks(db: str, rng: random.Random):
    """The heaviest query strings a client can build with SQL off, each new (no cache helps)."""
    q = urllib.parse.quote
    for n in itertools.count():
        two = rng.choice(HANGUL) + rng.choice(HANGUL)
        yield from [
            ("_where randomblob", f"/{db}/recalls.json?_where=" + q("length(randomblob(1000000000))")),
            ("sql recursive", f"/{db}.json?sql=" + q("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
                                                     "SELECT count(*) FROM c")),
            ("2-char rare search", f"/{db}/recalls?_search=" + q(two)),
            ("many-term search", f"/{db}/recalls?_search=" + q(" ".join(f"x{n}{i}" for i in range(40)))),
            ("sort unindexed, max size", f"/{db}/recalls.json?_sort=summary_original&_size=max&_bc_all=1"),
            ("contains filters", f"/{db}/recalls?summary_original__contains={n}zz&remedy_original__contains=q{n}"),
            ("facet every column", f"/{db}/recalls?" + "&".join(f"_facet={c}" for c in
                                                                ("summary_original", "remedy_original", "model_original",
                                                                 "component_original", "recall_number")) + "&_facet_size=max"),
            ("csv max", f"/{db}/recalls.csv?_size=max&_bc_all=1&_sort=remedy_original"),
            ("like glob", f"/{db}/recalls?summary_original__glob=" + q("*a*b*c*d*e*f*g*h*" + str(n))),
        ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fetch(url: str, timeout: float = 60) -> tuple[int, float]:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        error.read()
        status = error.code
    except (urllib.error.URLError, TimeoutError, ConnectionError):
        status = 0
    return status, time.perf_counter() - started


def rss_mb(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(text.split("VmRSS:")[1].split()[0]) // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--db", help="database file to create (or reuse when it exists)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the attack lasts")
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()

    from read_data import generate_sqlite
    from basecrawler.reading.browse import BrowseServer

    db_path = args.db or os.path.join(tempfile.mkdtemp(prefix="bench-web-attack-"), "attack.db")
    if not Path(db_path).exists():
        print(f"generated {args.rows:,} recalls in {generate_sqlite(db_path, args.rows):.0f} s", flush=True)
    db = Path(db_path).stem
    with BrowseServer(db_path, port=free_port()) as server:
        pid = server.process.pid
        for _, path in PAGES:   # once each before: a first visit's one-time work is not the attack's
            fetch(server.url + path.format(db=db))
        stop = time.monotonic() + args.seconds
        answers: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        peak = [rss_mb(pid)]

        def attacker(seed: int) -> None:
            for name, path in attacks(db, random.Random(seed)):
                if time.monotonic() >= stop:
                    return
                status, _ = fetch(server.url + path)
                answers[name][status] += 1

        def sampler() -> None:
            while time.monotonic() < stop:
                peak[0] = max(peak[0], rss_mb(pid))
                time.sleep(0.2)

        threads = [threading.Thread(target=attacker, args=(n,)) for n in range(args.clients)]
        threads.append(threading.Thread(target=sampler))
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        visits: dict[str, list[tuple[int, float]]] = collections.defaultdict(list)
        while time.monotonic() < stop - 2:
            for name, path in PAGES:
                visits[name].append(fetch(server.url + path.format(db=db)))
        for thread in threads:
            thread.join()
        print(f"{args.clients} attackers for {args.seconds:.0f} s over {args.rows:,} recalls; server peak RSS "
              f"{peak[0]} MB")
        print(f"{'page':<36} {'visits':>6} {'median s':>9} {'worst s':>8}  answers")
        for name, _ in PAGES:
            seen = visits[name]
            times = [t for _, t in seen]
            statuses = collections.Counter(s for s, _ in seen)
            print(f"{name:<36} {len(seen):>6} {statistics.median(times):>9.2f} {max(times):>8.2f}  {dict(statuses)}")
        print("attacks answered:")
        for name, counter in answers.items():
            print(f"  {name:<28} {dict(counter)}")


if __name__ == "__main__":
    main()
