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
import json
import os
import random
import socket
import statistics
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import benchkit  # noqa: E402

PAGES = [
    ("table page (home)", "/{db}/recalls"),
    ("table page 2 (_next)", "/{db}/recalls?_next={next}"),
    ("filtered: country=JP", "/{db}/recalls?country=JP"),
    ("filtered: maker=HONDA", "/{db}/recalls?manufacturer_key=HONDA"),
    ("facet selection: model year 2012", "/{db}/recalls?_bcf_model_year=2012"),
    ("search: #12345 (one record)", "/{db}/recalls?_search=" + urllib.parse.quote("#12345")),
    ("search: brake (every record)", "/{db}/recalls?_search=brake"),
    ("search: 燃料ポンプ (Japanese)", "/{db}/recalls?_search=" + urllib.parse.quote("燃料ポンプ")),
    ("search: 燃料 (2 characters)", "/{db}/recalls?_search=" + urllib.parse.quote("燃料")),
    ("search: Q7 (2 characters, none)", "/{db}/recalls?_search=Q7"),
    ("search + filter: brake, JP", "/{db}/recalls?_search=brake&country=JP"),
    ("card", "/{db}/recalls/1"),
]
ALERT_PAGES = [
    ("alerts: table page", "/{db}/product_alerts"),
    ("alerts: filtered country=CA", "/{db}/product_alerts?country=CA"),
    ("alerts: search choking", "/{db}/product_alerts?_search=choking"),
    ("alerts: search 유아 (2 characters)", "/{db}/product_alerts?_search=" + urllib.parse.quote("유아")),
    ("alerts: card", "/{db}/product_alerts/1"),
]
HANGUL = "가나다라마바사아자차카타파하"
WARM_UP_S = 240.0


COMMON = {"recalls": "brake", "product_alerts": "choking"}   # a term in most records of each table


def attacks(db: str, rng: random.Random, tables=("recalls",), common: bool = False):
    """The heaviest query strings a client can build with SQL off, each new (no cache helps).
    `common`: also an ordinary-looking search no estimate can call cheap, a common term with a
    new rare one (its page finds nothing, its summary reads every record holding the first)."""
    q = urllib.parse.quote
    for n in itertools.count():
        two = rng.choice(HANGUL) + rng.choice(HANGUL)
        for table in tables:
            text = ("summary_original", "remedy_original") if table == "recalls" else ("title_original", "hazard_original")
            if common:
                yield "common-term search", f"/{db}/{table}?_search=" + q(f"{COMMON[table]} {two}{n}")
            yield from [
                ("_where randomblob", f"/{db}/{table}.json?_where=" + q("length(randomblob(1000000000))")),
                ("sql recursive", f"/{db}.json?sql=" + q("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
                                                         "SELECT count(*) FROM c")),
                ("2-char rare search", f"/{db}/{table}?_search=" + q(two)),
                ("many-term search", f"/{db}/{table}?_search=" + q(" ".join(f"x{n}{i}" for i in range(40)))),
                ("long search string", f"/{db}/{table}?_search=" + q(("브레이크" + str(n)) * 60)),
                ("pattern-like search", f"/{db}/{table}?_search=" + q(f"%_%{n}.*[a-z]+(a|b)*%")),
                ("sort unindexed, max size", f"/{db}/{table}.json?_sort={text[0]}&_size=max&_bc_all=1"),
                ("huge _size", f"/{db}/{table}.json?_size=100000&_bc_all=1"),
                ("deep _next", f"/{db}/{table}?_next={rng.randint(1, 10**6)}&_sort={text[1]}"),
                ("plain filter, unindexed", f"/{db}/{table}?{text[1]}=nothing{n}"),
                ("contains filters", f"/{db}/{table}?{text[0]}__contains={n}zz&{text[1]}__contains=q{n}"),
                ("facet every column", f"/{db}/{table}?" + "&".join(f"_facet={c}" for c in (*text, "source_url", "extra"))
                 + "&_facet_size=max"),
                ("csv max", f"/{db}/{table}.csv?_size=max&_bc_all=1&_sort={text[1]}"),
                ("like glob", f"/{db}/{table}?{text[0]}__glob=" + q("*a*b*c*d*e*f*g*h*" + str(n))),
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


def visit(url: str, timeout: float = 60) -> tuple[int, float, str]:
    """`fetch`, and the answer's Server-Timing header (its lane, admission and slot wait)."""
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read()
            status, timing = response.status, response.headers.get("server-timing", "")
    except urllib.error.HTTPError as error:
        error.read()
        status, timing = error.code, error.headers.get("server-timing", "")
    except (urllib.error.URLError, TimeoutError, ConnectionError):
        status, timing = 0, ""
    return status, time.perf_counter() - started, timing


SLOW_VISIT_S = 0.5   # a reader's visit this slow is listed with its Server-Timing


def rss_mb(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(text.split("VmRSS:")[1].split()[0]) // 1024


def quantile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__().replace("'", "")


def next_token(url: str) -> str:
    with urllib.request.urlopen(url + "&_size=50" if "?" in url else url + "?_size=50", timeout=60) as response:
        return urllib.parse.quote(json.loads(response.read())["next"] or "")


SUMMARY_PATH = "/-/bc-summary"   # the page's script asks here whether a search's counts are ready
COMPLETE_WAIT_S = 30.0


def complete(base: str, path: str, first: tuple[int, float]) -> float | None:
    """Seconds until a search page is complete (its count and facets, filled in by the page's
    script when the page answered without them): the page, then the script's polls until the
    counts are ready, then the page read again. None when not a search-only page."""
    url = urllib.parse.urlsplit(path)
    args = urllib.parse.parse_qsl(url.query)
    if [k for k, _ in args] != ["_search"] or first[0] != 200:
        return None
    started = time.perf_counter()
    poll = f"{base}{SUMMARY_PATH}{url.path}?{url.query}"
    while time.perf_counter() - started < COMPLETE_WAIT_S:
        try:
            with urllib.request.urlopen(poll, timeout=60) as response:
                ready = json.loads(response.read()).get("ready")
        except (urllib.error.URLError, TimeoutError, ConnectionError, ValueError):
            ready = False
        if ready:
            break
    else:
        return first[1] + COMPLETE_WAIT_S
    if time.perf_counter() - started < 0.05:   # ready at once: the page was complete
        return first[1]
    return first[1] + (time.perf_counter() - started) + fetch(base + path)[1]


def summary_check(db_path: str) -> None:
    """Each reader search's summary (reading/summary.py) on a thread of its own, as the web view
    runs it, while this thread asks for Python's lock every millisecond: how long the summary
    took, and the longest this thread waited (what a page's rendering would have waited)."""
    import sqlite3

    from basecrawler.reading.browse import types_by_table
    from basecrawler.reading.search import RecallFilter
    from basecrawler.reading.summary import summarise

    types = types_by_table()
    for name, path in PAGES + ALERT_PAGES:
        url = urllib.parse.urlsplit(path)
        args = urllib.parse.parse_qsl(url.query)
        if [k for k, _ in args] != ["_search"]:
            continue
        table, took = url.path.rsplit("/", 1)[-1], []

        def run():
            conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
            started = time.perf_counter()
            summarise(conn, RecallFilter(text=args[0][1], record_type=types[table].name), parts=2)
            took.append(time.perf_counter() - started)
        thread = threading.Thread(target=run)
        thread.start()
        worst = 0.0
        while thread.is_alive():
            started = time.perf_counter()
            time.sleep(0.001)
            worst = max(worst, time.perf_counter() - started - 0.001)
        print(f"{name:<38} summary {took[0]:6.2f} s, longest wait for Python's lock meanwhile {worst * 1000:5.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--alerts", type=int, default=0, help="product alerts to generate besides (0: none)")
    parser.add_argument("--db", help="database file to create (or reuse when it exists)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the attack lasts")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--common", action="store_true",
                        help="attackers also send new searches of a common term (ordinary-looking, expensive)")
    parser.add_argument("--summary-check", action="store_true",
                        help="only time each reader search's summary and how long it kept Python's lock from others")
    parser.add_argument("--complete", action="store_true",
                        help="also time each search page until its counts and facets are filled in")
    args = parser.parse_args()

    from read_data import generate_sqlite
    from basecrawler.reading.browse import BrowseServer

    db_path = args.db or os.path.join(benchkit.scratch_folder("bench-web-attack-"), "attack.db")
    if not Path(db_path).exists():
        print(f"generated {args.rows:,} recalls in {generate_sqlite(db_path, args.rows):.0f} s", flush=True)
    if args.alerts:
        from web_attack_data import alert_rows, generate_alerts
        if alert_rows(db_path) < args.alerts:
            print(f"generated {args.alerts:,} product alerts in {generate_alerts(db_path, args.alerts):.0f} s", flush=True)
    if args.summary_check:
        summary_check(db_path)
        return
    db = Path(db_path).stem
    pages = PAGES + (ALERT_PAGES if args.alerts else [])
    tables = ("recalls", "product_alerts") if args.alerts else ("recalls",)
    os.environ["BASECRAWLER_WEB_SERVER_TIMING"] = "1"   # each answer's lane and waits (slow visits list them)
    with BrowseServer(db_path, port=free_port()) as server:
        pid = server.process.pid
        token = next_token(f"{server.url}/{db}/recalls.json?_col=id")
        pages = [(name, path.replace("{next}", token)) for name, path in pages]
        for _, path in pages:   # once each before: a first visit's one-time work is not the attack's
            fetch(server.url + path.format(db=db))
        time.sleep(3.0)     # … and the counts those visits started in the background
        # … and the start-up's count of every table's facets (once per run): until each table's
        # page answers within the target twice in a row, at most WARM_UP_S.
        ready_by = time.monotonic() + WARM_UP_S
        for table in tables:
            quick = 0
            while quick < 2 and time.monotonic() < ready_by:
                quick = quick + 1 if fetch(f"{server.url}/{db}/{table}")[1] < 1.0 else 0
                time.sleep(1.0)
        print(f"warmed up in {WARM_UP_S - max(0.0, ready_by - time.monotonic()):.0f} s (at most {WARM_UP_S:.0f})",
              flush=True)
        load_before = load()
        stop = time.monotonic() + args.seconds
        answers: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        attack_times: dict[str, list[float]] = collections.defaultdict(list)
        peak = [rss_mb(pid)]

        def attacker(seed: int) -> None:
            for name, path in attacks(db, random.Random(seed), tables, args.common):
                if time.monotonic() >= stop:
                    return
                status, seconds = fetch(server.url + path)
                answers[name][status] += 1
                attack_times[name].append(seconds)

        def sampler() -> None:
            while time.monotonic() < stop:
                peak[0] = max(peak[0], rss_mb(pid))
                time.sleep(0.2)

        threads = [threading.Thread(target=attacker, args=(n,)) for n in range(args.clients)]
        threads.append(threading.Thread(target=sampler))
        for thread in threads:
            thread.start()
        time.sleep(1.0 if args.clients else 0)
        visits: dict[str, list[tuple[int, float]]] = collections.defaultdict(list)
        completes: dict[str, list[float]] = collections.defaultdict(list)
        slow: list[tuple[float, str, float, int, str]] = []   # (when, page, seconds, status, Server-Timing)
        while time.monotonic() < stop - 2:
            for name, path in pages:
                status, took, timing = visit(server.url + path.format(db=db))
                seen = (status, took)
                visits[name].append(seen)
                if took > SLOW_VISIT_S:
                    slow.append((args.seconds - (stop - time.monotonic()), name, took, status, timing))
                done = complete(server.url, path.format(db=db), seen) if args.complete else None
                if done is not None:
                    completes[name].append(done)
        for thread in threads:
            thread.join()
        print(f"{args.clients} attackers for {args.seconds:.0f} s over {args.rows:,} recalls"
              f"{f' and {args.alerts:,} product alerts' if args.alerts else ''}; server peak RSS {peak[0]} MB; "
              f"load average (1, 5, 15 min) before {load_before}, after {load()}")
        print(f"{'page':<38} {'visits':>6} {'p50 s':>6} {'p95 s':>6} {'max s':>6}  answers")
        worst = 0.0
        for name, _ in pages:
            seen = visits[name]
            times = [t for _, t in seen]
            statuses = collections.Counter(s for s, _ in seen)
            worst = max(worst, max(times))
            print(f"{name:<38} {len(seen):>6} {statistics.median(times):>6.2f} {quantile(times, 0.95):>6.2f} "
                  f"{max(times):>6.2f}  {dict(statuses)}")
        every = [t for seen in visits.values() for _, t in seen]
        print(f"slowest reader page: {worst:.2f} s (target ≤ 1 s); visits over 1 s: "
              f"{sum(t > 1.0 for t in every)} of {len(every)}")
        for at, name, took, status, timing in slow:   # what each slow visit waited for, by the server's word
            print(f"    at {at:5.1f} s  {took:5.2f} s  {status}  {name}  [{timing}]")
        if completes:
            print(f"{'search page until complete (counts, facets)':<44} {'p50 s':>6} {'max s':>6}")
            for name, times in completes.items():
                print(f"  {name:<42} {statistics.median(times):>6.2f} {max(times):>6.2f}")
        print(f"{'attack':<28} {'sent':>5} {'p50 s':>6} {'max s':>6}  answers")
        for name, counter in answers.items():
            times = attack_times[name]
            print(f"  {name:<26} {len(times):>5} {statistics.median(times):>6.2f} {max(times):>6.2f}  {dict(counter)}")


if __name__ == "__main__":
    main()
