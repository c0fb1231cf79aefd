"""The web view against a hostile client (issue #34.6): declared views only, a time limit that
stops every query, size limits that keep memory bounded, a bound on concurrent heavy requests,
no absolute path in any answer, limits explained Korean first. Loopback only, bounded count
and time; the server with SQL turned on runs under an address-space cap (resource.setrlimit).
"""
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

from basecrawler.reading.browse import BrowseServer, build_metadata, datasette_command  # noqa: E402
from basecrawler.reading.web import limits  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from web_fixture import fill, free_port  # noqa: E402

MEMORY_CAP = 1024 * 1024 * 1024   # address space of the server with SQL on (RSS target: < 300 MB)
RSS_TARGET_MB = 300
SLOW_SQL = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
            "SELECT count(*) FROM c")   # runs until something stops it
HUGE_BLOB = "length(randomblob(1000000000))"   # the reproduction: 1 GB in one step


def get(url: str, method: str = "GET", timeout: float = 30) -> tuple[int, str, float]:
    started = time.perf_counter()
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    return status, body.decode("utf-8", "replace"), time.perf_counter() - started


def q(sql: str) -> str:
    return urllib.parse.quote(sql)


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    return fill(tmp_path_factory.mktemp("guard-db") / "guarddb.db", extra=True)


@pytest.fixture(scope="module")
def server(db_path):
    with BrowseServer(db_path, port=free_port()) as running:
        yield running


def _cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


@pytest.fixture(scope="module")
def capped_server(db_path):
    """The view with SQL turned on (`browse --allow-sql`), its process capped in memory: a
    memory attack that got through would end it (then the test fails), not the machine."""
    yield from _open_server(db_path, capped=True)


@pytest.fixture(scope="module")
def open_server(db_path):
    """The view with SQL turned on, uncapped as it runs (the cap starves glibc's per-thread
    arenas, which would time the threads' malloc lock instead of the view)."""
    yield from _open_server(db_path, capped=False)


def _open_server(db_path, *, capped: bool):
    port = free_port()
    metadata = build_metadata(db_path)
    metadata["plugins"]["basecrawler_guard"] = {"allow_sql": True}
    with tempfile.TemporaryDirectory() as folder:
        metadata_path = Path(folder) / "metadata.json"
        metadata_path.write_text(json.dumps(metadata), "utf-8")
        process = subprocess.Popen(datasette_command(db_path, metadata_path, port=port),
                                   preexec_fn=_cap_memory if capped else None, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(150):
                if process.poll() is not None:
                    pytest.fail(f"datasette exited with {process.returncode}")
                try:
                    urllib.request.urlopen(url + "/-/versions.json", timeout=2).close()
                    break
                except (urllib.error.URLError, ConnectionError):
                    time.sleep(0.2)
            yield url, process
        finally:
            process.terminate()
            process.wait(timeout=10)


def rss_mb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) // 1024


# ---- declared views only ---------------------------------------------------------------------
HOSTILE_QUERIES = [
    "/guarddb.json?sql=" + q("SELECT * FROM sqlite_master"),
    "/guarddb?sql=" + q("SELECT 1"),
    "/guarddb.csv?sql=" + q("SELECT 1"),
    "/guarddb/recalls?_where=" + q(HUGE_BLOB),
    "/guarddb/recalls.json?_where=" + q("1=1"),
    "/guarddb/recalls.json?_through=" + q(json.dumps({"table": "meta", "column": "key", "value": "x"})),
    "/guarddb/recalls.json?_search_summary_original=" + q("a* OR b*"),
    "/guarddb/recalls.json?_search=x&_searchmode=raw",
    "/guarddb/recall_per_month.json?sql=" + q("SELECT 1"),   # a canned query's name, SQL of its own
    "/-/dashboards/records?sql=" + q("SELECT 1"),
]


@pytest.mark.parametrize("path", HOSTILE_QUERIES)
def test_sql_of_the_clients_own_is_refused_korean_first(server, path):
    status, body, _ = get(server.url + path)
    assert status == 403, body[:300]
    assert body.index("임의 SQL") < body.index("arbitrary SQL")


@pytest.mark.parametrize("arg", ["_sort", "_sort_desc", "_col", "_nocol", "_facet", "_facet_array"])
def test_a_column_is_named_by_its_name_only(server, arg):
    status, body, _ = get(server.url + f"/guarddb/recalls.json?{arg}=" + q("length(randomblob(1000000000))"))
    assert status == 400 and "열 이름" in body


def test_writes_are_refused(server):
    status, body, _ = get(server.url + "/guarddb/recalls", method="POST")
    assert status == 405 and "읽기 전용" in body


def test_the_declared_pages_and_the_charts_sql_are_served(server, db_path):
    chart = next(iter(build_metadata(db_path)["plugins"]["datasette-dashboards"]["records"]["charts"].values()))
    status, body, _ = get(server.url + "/guarddb.json?sql=" + q(chart["query"]) + "&_shape=objects")
    assert status == 200 and json.loads(body)["rows"]
    for path in ("/guarddb/recalls", "/guarddb/recalls?_search=brake", "/guarddb/recalls/1", "/-/dashboards/records"):
        assert get(server.url + path)[0] == 200, path


# ---- no absolute path -------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/-/databases.json", "/-/metadata.json", "/", "/guarddb", "/guarddb/recalls",
                                  "/-/settings.json", "/-/plugins.json", "/guarddb/nosuchtable",
                                  "/guarddb.json?sql=" + q("SELECT 1")])
def test_the_databases_absolute_path_is_never_shown(server, db_path, path):
    _, body, _ = get(server.url + path)
    assert str(Path(db_path).parent) not in body and str(Path(db_path).resolve().parent) not in body


def test_databases_json_names_the_file_only(server):
    _, body, _ = get(server.url + "/-/databases.json")
    assert json.loads(body)[0]["path"] == "guarddb.db"


# ---- SQL turned on: still bounded ------------------------------------------------------------
def test_a_gigabyte_blob_fails_at_once_in_bounded_memory(capped_server):
    url, process = capped_server
    status, body, took = get(url + "/guarddb/recalls.json?_where=" + q(HUGE_BLOB))
    assert status == 400 and took < 2.0, (status, took, body[:200])
    assert "메모리" in json.loads(body)["error"]
    for expression in ("length(zeroblob(2000000000))", "length(replace(hex(zeroblob(4000000)), '0', '0000000000'))"):
        status, body, took = get(url + "/guarddb.json?sql=" + q(f"SELECT {expression}"))
        assert status == 400 and took < 2.0, (expression, status, body[:200])
    assert process.poll() is None and rss_mb(process.pid) < RSS_TARGET_MB


def test_four_gigabyte_blobs_at_once_leave_every_page_answering(capped_server):
    url, process = capped_server
    results: list[tuple[int, float]] = []
    threads = [threading.Thread(target=lambda: results.append(
        get(url + "/guarddb/recalls.json?_where=" + q(HUGE_BLOB))[::2])) for _ in range(4)]
    for thread in threads:
        thread.start()
    page = get(url + "/guarddb/recalls")
    for thread in threads:
        thread.join(timeout=30)
    assert page[0] == 200 and page[2] < 1.0
    assert len(results) == 4 and all(status in (400, 503) for status, _ in results), results
    assert process.poll() is None and rss_mb(process.pid) < RSS_TARGET_MB


def test_a_query_without_end_is_stopped_and_explained(open_server):
    url, process = open_server
    status, body, took = get(url + "/guarddb.json?sql=" + q(SLOW_SQL))
    assert status == 400 and took < 5.0
    # In the interface's language (the catalogue): Korean by default, English on request.
    assert "시간 제한" in json.loads(body)["error"]
    status, body, _ = get(url + "/guarddb.json?_lang=en&sql=" + q(SLOW_SQL))
    assert status == 400 and "time limit" in json.loads(body)["error"]


def test_heavy_requests_share_a_few_slots_and_light_pages_keep_answering(open_server):
    url, process = open_server
    attackers = 2 * limits.HEAVY_SLOTS + 2
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(get(url + "/guarddb.json?sql=" + q(SLOW_SQL))[0]))
               for _ in range(attackers)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    light = [get(url + "/guarddb/recalls/1") for _ in range(3)]
    for thread in threads:
        thread.join(timeout=30)
    assert all(status == 200 and took < 1.0 for status, _, took in light), [(s, t) for s, _, t in light]
    assert results.count(503) >= attackers - limits.HEAVY_SLOTS, results
    assert rss_mb(process.pid) < RSS_TARGET_MB


def test_busy_is_said_korean_first(open_server):
    url, _ = open_server
    threads = [threading.Thread(target=get, args=(url + "/guarddb.json?sql=" + q(SLOW_SQL),))
               for _ in range(limits.HEAVY_SLOTS)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    # Another request of the heavy lane is told so; a reader's search has a lane of its own.
    status, body, took = get(url + "/guarddb/recalls?_sort=remedy_original")
    search_status, _, _ = get(url + "/guarddb/recalls?_search=brake")
    for thread in threads:
        thread.join(timeout=30)
    assert status == 503 and took < 1.5
    assert body.index("잠시 뒤에") < body.index("Busy")
    assert search_status == 200


# ---- in-process: the plugins' own SQL work is timed too ----------------------------------------
def test_plugin_work_outside_datasettes_limit_is_stopped(db_path, monkeypatch):
    import asyncio
    import sqlite3

    from datasette.app import Datasette

    import importlib.util
    plugin = Path(limits.__file__).parent / "plugins" / "basecrawler_guard.py"
    spec = importlib.util.spec_from_file_location("guard_under_test", plugin)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(limits, "BACKGROUND_LIMIT_S", 0.3)

    async def run():
        db = Datasette([str(db_path)]).get_database("guarddb")
        started = time.perf_counter()
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):
            await db.execute_fn(lambda conn: conn.execute(SLOW_SQL).fetchall())
        return time.perf_counter() - started
    try:
        assert asyncio.run(run()) < 2.0
    finally:
        from datasette.database import Database
        Database.execute_fn = module._datasette_execute_fn


def test_every_connection_gets_the_size_limits(tmp_path):
    import sqlite3

    conn = sqlite3.connect(tmp_path / "x.db")
    limits.harden(conn)
    with pytest.raises(sqlite3.DataError):
        conn.execute("SELECT length(randomblob(100000000))").fetchone()
    assert conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == limits.MAX_VALUE_BYTES
