"""Fairness within a lane (issue #34.6 last line, basecrawler/reading/web/admission.py): a shape
of new pages that ran long again and again gets a shorter time limit, a page asked again keeps
its lane's; a client of another address holds at most all but one of a lane's slots, loopback
clients (all one address) are not capped. A small generated store with Datasette's test
client, and the guard's ASGI wrapper around an app that answers slowly."""
import asyncio
import sys
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")

from basecrawler.reading.browse import WEB_DIR, build_metadata  # noqa: E402
from basecrawler.reading.web import admission, limits  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import read_data  # noqa: E402

RECALLS = 3_000


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fairness") / "fair.db")
    read_data.generate_sqlite(path, RECALLS)
    return path


@pytest.fixture(autouse=True)
def _fresh():
    for kept in (admission.estimates, admission.served):
        kept.clear()
    admission.ledger.runs.clear()
    yield
    for kept in (admission.estimates, admission.served):
        kept.clear()
    admission.ledger.runs.clear()


def test_the_ledger_shortens_only_a_new_shape_that_ran_long_repeatedly():
    now = [100.0]
    ledger = admission.Ledger(clock=lambda: now[0])
    new = ("127.0.0.1", "search", "recalls", ("_search",), True)
    seen = new[:-1] + (False,)
    for key in (new, seen):
        ledger.note(key, admission.LONG_RUN_S / 2)   # quick: not counted
        assert ledger.limit_ms(key) is None
        for _ in range(admission.REPEATS):
            ledger.note(key, admission.LONG_RUN_S + 1)
    assert ledger.limit_ms(new) == admission.REPEAT_LIMIT_MS["search"]
    assert ledger.limit_ms(seen) is None   # a page asked again is answered from its kept counts
    now[0] += admission.WINDOW_S + 1
    assert ledger.limit_ms(new) is None    # long ago


def test_new_searches_of_a_shape_that_keeps_running_long_get_a_shorter_limit(store_path, monkeypatch):
    """Every page counts as long here (LONG_RUN_S 0): from the REPEATS + 1-th new page of the
    same shape on, its queries run under REPEAT_LIMIT_MS; the first page asked again keeps the
    search lane's own limit."""
    from datasette.app import Datasette

    monkeypatch.setattr(admission, "LONG_RUN_S", 0.0)
    monkeypatch.setitem(admission.REPEAT_LIMIT_MS, "search", 777)
    limits_seen: list[int] = []
    original = limits.datasette_timelimit

    def recording(conn, ms, *args, **kwargs):
        limits_seen.append(ms)
        return original(conn, ms, *args, **kwargs)
    monkeypatch.setattr(limits, "datasette_timelimit", recording)
    db = Path(store_path).stem
    paths = [f"/{db}/recalls.json?_search=" + urllib.parse.quote(f"brake zz{n}") for n in range(admission.REPEATS + 1)]

    async def visit():
        ds = Datasette([store_path], metadata=build_metadata(store_path), plugins_dir=str(WEB_DIR / "plugins"),
                       template_dir=str(WEB_DIR / "templates"))
        out = []
        for path in [*paths, paths[0]]:
            limits_seen.clear()
            response = await ds.client.get(path)
            # … and what the page left to finish after it (its facets' counts, in its context)
            for _ in range(50):
                before = len(limits_seen)
                await asyncio.sleep(0.1)
                if len(limits_seen) == before:
                    break
            out.append((response.status_code, set(limits_seen)))
        return out
    pages = asyncio.run(visit())
    assert all(seen for _, seen in pages), pages
    for status, seen in pages[:admission.REPEATS]:
        assert status == 200 and 777 not in seen, pages
    assert 777 in pages[admission.REPEATS][1], pages      # the new page after the long ones
    assert 777 not in pages[-1][1] and pages[-1][0] == 200, pages   # asked again: its lane's limit


@pytest.fixture
def guard(monkeypatch):
    monkeypatch.syspath_prepend(str(WEB_DIR / "plugins"))
    import basecrawler_guard
    return basecrawler_guard


class _Datasette:
    def plugin_config(self, name):
        return {}


def _answers(guard, clients: list[tuple[str, int]], hold_s: float = 0.4) -> list[int]:
    """The statuses of heavy requests (an unindexed sort) sent at once from `clients` through
    the guard's ASGI wrapper, around an app that takes `hold_s` to answer."""
    async def slow_app(scope, receive, send):
        await asyncio.sleep(hold_s)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})

    app = guard.asgi_wrapper(_Datasette())(slow_app)

    async def one(client, delay):
        await asyncio.sleep(delay)
        sent = []

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}
        await app({"type": "http", "method": "GET", "path": "/db/recalls", "client": client, "headers": [],
                   "query_string": b"_sort=summary_original"}, receive, send)
        return next(m["status"] for m in sent if m["type"] == "http.response.start")

    async def run():
        return list(await asyncio.gather(*(one(client, 0.05 * n) for n, client in enumerate(clients))))
    return asyncio.run(run())


def test_a_remote_client_holds_all_but_one_of_a_lanes_slots(guard, monkeypatch):
    monkeypatch.setitem(limits.SLOTS, "heavy", 2)
    remote, other = ("198.51.100.7", 40001), ("203.0.113.9", 40002)
    # The same remote client twice at once: its second is told "busy" at once (the last slot
    # stays for somebody else), which another client then takes.
    assert _answers(guard, [remote, remote, other]) == [200, 503, 200]


def test_loopback_clients_are_not_capped(guard, monkeypatch):
    monkeypatch.setitem(limits.SLOTS, "heavy", 2)
    assert _answers(guard, [("127.0.0.1", 40003), ("127.0.0.1", 40004)]) == [200, 200]
