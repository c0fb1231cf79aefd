"""The web view while four clients send the heaviest query strings they can build (issue #34.6,
its last done-when line, bounded: 30,000 records, a few seconds, loopback only). Each attacker
is a child process capped in memory and CPU (resource.setrlimit), hammering sorts on
unindexed columns, facets on every column, CSV, huge pages, unindexed filters, searches of
many and of long words; meanwhile a reader's pages — the table, a filter, a search, a card —
answer within the bound, the search answered (not "busy"): it has a lane of its own.
bench/bench_web_attack.py measures the same at a million records.
"""
import json
import os
import resource
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

from basecrawler import Store  # noqa: E402
from basecrawler.reading.browse import BrowseServer  # noqa: E402
from basecrawler.reading.web import limits  # noqa: E402
from web_fixture import free_port

ROWS = 30_000
ATTACKERS = 4
ATTACK_S = 8.0
PAGE_BOUND_S = 1.0         # the page target (#34.6) …
LOAD_FACTOR = 3.0          # … or, on a machine so loaded that the quiet page is slow already, this many times it
WORST_S = 6.0              # no visit, however loaded the machine, takes longer
ATTACKER_MEMORY = 256 * 1024 * 1024
ATTACKER_CPU_S = 30

COLUMNS = ["source", "country", "recall_number", "recall_date", "date_unknown", "manufacturer_original",
           "manufacturer_key", "model_original", "component_original", "summary_original", "remedy_original",
           "model_year", "source_lang", "source_url", "first_seen_at", "updated_at"]
SOURCES = [("us", "US"), ("jp", "JP"), ("ca", "CA"), ("eu", "EU"), ("au", "AU")]
MAKERS = [("Ford Motor Company", "FORD"), ("本田技研工業株式会社", "HONDA"), ("マツダ株式会社", "MAZDA")]

# The attacker's loop: every shape the heavy lane takes, each new so that no cache helps.
ATTACKER = textwrap.dedent('''
    import itertools, sys, time, urllib.error, urllib.parse, urllib.request
    base, seconds = sys.argv[1], float(sys.argv[2])
    q = urllib.parse.quote
    shapes = lambda n: [
        "/attackdb/recalls?" + "&".join(f"_facet={c}" for c in ("summary_original", "remedy_original",
                                        "source_url", "model_original", "recall_number")) + "&_facet_size=max",
        f"/attackdb/recalls.json?_sort=summary_original&_size=max&_bc_all=1&n={n}",
        f"/attackdb/recalls.csv?_size=max&_bc_all=1&_sort=remedy_original&n={n}",
        f"/attackdb/recalls?remedy_original=nothing{n}",
        f"/attackdb/recalls?summary_original__contains={n}zz&remedy_original__contains=q{n}",
        "/attackdb/recalls?_search=" + q(" ".join(f"x{n}{i}" for i in range(40))),
        "/attackdb/recalls?_search=" + q(("brake" + str(n)) * 40),
        "/attackdb/recalls.json?_where=" + q("length(randomblob(1000000000))"),
    ]
    stop = time.monotonic() + seconds
    for n in itertools.count():
        for path in shapes(n):
            if time.monotonic() >= stop:
                sys.exit(0)
            try:
                urllib.request.urlopen(base + path, timeout=30).read()
            except urllib.error.HTTPError as error:
                error.read()
            except OSError:
                pass
''')


def get(url: str) -> tuple[int, float, str]:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    return status, time.perf_counter() - started, body.decode("utf-8", "replace")


def rows(count: int):
    now = "2026-12-01T00:00:00+00:00"
    for n in range(count):
        source, country = SOURCES[n % len(SOURCES)]
        maker, key = MAKERS[n % len(MAKERS)]
        yield (source, country, f"R{n:08d}", f"{2000 + n % 25}-{1 + n % 12:02d}-{1 + n % 28:02d}", 0, maker, key,
               f"Model {n % 97}", "Brakes / ブレーキ", f"The brake hose may leak; the vehicle may not stop. (#{n})",
               "Dealers will replace the hose free of charge.", str(2000 + n % 25), "en",
               f"https://example.gov/recalls/{n}", now, now)


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("attack-db") / "attackdb.db"
    store = Store(path)
    sql = f"INSERT INTO recalls ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
    store.write(lambda db: db.conn.executemany(sql, rows(ROWS)))
    store.write(lambda db: db.conn.execute("INSERT INTO recalls_fts(recalls_fts) VALUES ('rebuild')"))
    store.write(lambda db: db.conn.execute("ANALYZE"))
    store.close()
    return path


def _cap_attacker():
    resource.setrlimit(resource.RLIMIT_AS, (ATTACKER_MEMORY, ATTACKER_MEMORY))
    resource.setrlimit(resource.RLIMIT_CPU, (ATTACKER_CPU_S, ATTACKER_CPU_S))


@pytest.fixture(scope="module")
def server(db_path):
    # One heavy slot: four attackers keep it taken the whole time, so a reader's search that
    # had to wait for it would be told "busy".
    os.environ["BASECRAWLER_WEB_HEAVY_SLOTS"] = "1"
    try:
        with BrowseServer(db_path, port=free_port()) as running:
            yield running
    finally:
        os.environ.pop("BASECRAWLER_WEB_HEAVY_SLOTS", None)


READER_PAGES = {
    "table": "/attackdb/recalls",
    "filtered": "/attackdb/recalls?country=JP",
    "search": "/attackdb/recalls?_search=brake",
    "search 2 characters": "/attackdb/recalls?_search=" + urllib.parse.quote("ブレ"),
    "card": "/attackdb/recalls/1",
}


def test_reader_pages_answer_while_four_clients_send_the_heaviest_queries(server):
    for path in READER_PAGES.values():   # a first visit's one-time work is not the attack's
        get(server.url + path)
    # The same pages without attack: what this machine takes for them now (CI runners are shared).
    quiet = {name: sorted(get(server.url + path)[1] for _ in range(3)) for name, path in READER_PAGES.items()}
    attackers = [subprocess.Popen([sys.executable, "-c", ATTACKER, server.url, str(ATTACK_S)],
                                  preexec_fn=_cap_attacker, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for _ in range(ATTACKERS)]
    seen: dict[str, list[tuple[int, float, str]]] = {name: [] for name in READER_PAGES}
    try:
        time.sleep(1.0)
        stop = time.monotonic() + ATTACK_S - 2.0
        while time.monotonic() < stop:
            for name, path in READER_PAGES.items():
                seen[name].append(get(server.url + path))
        heavy_status, heavy_took, heavy_body = get(
            server.url + "/attackdb/recalls?_sort=model_original&_facet=summary_original")
    finally:
        for attacker in attackers:
            try:
                attacker.wait(timeout=ATTACK_S + 30)
            except subprocess.TimeoutExpired:
                attacker.kill()
                attacker.wait()
    summary = {name: [(status, round(took, 2)) for status, took, _ in visits] for name, visits in seen.items()}
    summary["quiet medians"] = {name: round(times[1], 2) for name, times in quiet.items()}
    for name, visits in seen.items():
        assert visits, summary
        # Every page answered, the search too: not "busy" (503), not stopped (400).
        assert all(status == 200 for status, _, _ in visits), (name, summary)
        times = sorted(took for _, took, _ in visits)
        assert times[len(times) // 2] <= max(PAGE_BOUND_S, LOAD_FACTOR * quiet[name][1]), (name, summary)
        assert times[-1] <= WORST_S, (name, summary)
    # Meanwhile the heavy lane is full: another heavy request is told so at once, Korean first.
    if heavy_status == 503:
        assert heavy_took < PAGE_BOUND_S + 0.5 and heavy_body.index("잠시 뒤에") < heavy_body.index("Busy")
    assert heavy_status in (200, 400, 503)


def test_the_lanes():
    sort = {"recalls": "recall_date"}
    indexed = {"recalls": frozenset({"id", "rowid", "country", "recall_date"})}
    lane = lambda query: limits.lane("/db/recalls", limits.arguments(query), sort, indexed)  # noqa: E731
    assert lane("") is None and lane("country=JP") is None and lane("_sort_desc=recall_date") is None
    assert lane("_search=brake") == "search" and lane("_search=燃料&country=JP") == "search"
    assert lane("remedy_original=x") == "heavy"                       # no index holds it: every row read
    assert lane("_search=" + " ".join(["x"] * 7)) == "heavy"          # many words
    assert lane("_search=" + "x" * 200) == "heavy"                    # a long one
    assert lane("_search=" + urllib.parse.quote("%_%1.*[a-z]+(a|b)*%")) == "heavy"   # a pattern
    assert lane("_search=" + urllib.parse.quote("#12345")) == "search"
    assert lane("_search=brake&_sort=remedy_original") == "heavy"
    assert lane("_search=brake&_facet=summary_original") == "heavy"
    assert lane("_size=max") == "heavy" and lane("_facet=country") == "heavy"
    assert limits.lane("/db/recalls.csv", limits.arguments("_search=brake"), sort, indexed) == "heavy"
    assert limits.lane_time_limit_ms("heavy", 20_000, 3000) == limits.HEAVY_TIME_LIMIT_MS
    assert limits.lane_time_limit_ms("search", 3000, 3000) == limits.SEARCH_TIME_LIMIT_MS
    assert limits.lane_time_limit_ms("search", 10_000, 3000) == 10_000   # a background count
    assert limits.lane_time_limit_ms(None, 3000, 3000) == 3000


def test_indexed_columns_are_read_from_the_store(db_path):
    import sqlite3

    conn = sqlite3.connect(db_path)
    try:
        found = limits.indexed_columns(conn)
    finally:
        conn.close()
    assert {"id", "country", "recall_date", "manufacturer_key"} <= found["recalls"]
    assert "remedy_original" not in found["recalls"] and "summary_original" not in found["recalls"]
    assert json.dumps(sorted(found["recalls"]))
