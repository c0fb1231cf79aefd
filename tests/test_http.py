"""The HTTP layer: classification table, retries, pauses, conditional requests, archive."""
import threading
import time

import pytest

from basecrawler import NotFound, Transient, UnexpectedContent
from basecrawler.fetch.http import HostThrottle, HttpClient, classify, parse_retry_after
from basecrawler.testing import LoopbackServer, Reply

from support import FakeClock, JsonFeedCrawler


@pytest.mark.parametrize("status, body, ctype, expect, creds, network, kind", [
    (200, b'{"a": 1}', "application/json", "json", False, False, None),
    (200, b"<!DOCTYPE html><html>maintenance</html>", "text/html", "json", False, False, "unexpected"),
    (200, b"", "application/json", "json", False, False, "unexpected"),
    (200, b"   ", "text/xml", "xml", False, False, "unexpected"),
    (200, b"<html><body>Error</body></html>", "text/html", "xml", False, False, "unexpected"),
    (200, b"<?xml version='1.0'?><a/>", "text/xml", "xml", False, False, None),
    (200, b"%PDF-1.7 ...", "application/pdf", "pdf", False, False, None),
    (200, b"<html>not found</html>", "text/html", "pdf", False, False, "unexpected"),
    (200, b"", "", None, False, False, None),
    (304, b"", "", "json", False, False, None),
    (429, b"", "", "json", False, False, "rate_limited"),
    (403, b"<html>Access denied</html>", "text/html", None, False, False, "blocked"),
    (401, b"", "", None, True, False, "credentials"),
    (401, b"", "", None, False, False, "blocked"),
    (404, b"", "", None, False, False, "not_found"),
    (410, b"", "", None, False, False, "not_found"),
    (500, b"", "", None, False, False, "transient"),
    (503, b"", "", None, False, False, "transient"),
    (504, b"", "", None, False, False, "transient"),
    (400, b"bad request", "", None, False, False, "unexpected"),
    (None, b"", "", None, False, True, "transient"),
])
def test_classify_table(status, body, ctype, expect, creds, network, kind):
    assert classify(status, body=body, content_type=ctype, expect=expect, has_credentials=creds,
                    network_error=network) == kind


def test_retry_after_accepts_seconds_and_http_dates():
    now = 1_700_000_000.0
    assert parse_retry_after("2", now) == 2.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:30 GMT", now) == pytest.approx(10.0, abs=1)
    assert parse_retry_after("soon", now) is None


def client(settings, store, **kw):
    return HttpClient(settings=settings, store=store, **kw)


def test_429_pauses_the_whole_host_for_retry_after(settings, store):
    served_429 = threading.Event()

    def handler(req):
        if req.path == "/limited" and not served_429.is_set():
            served_429.set()
            return Reply(429, headers={"Retry-After": "2"})
        return Reply(200, body=b'{"ok": true}', headers={"Content-Type": "application/json"})

    with LoopbackServer(handler) as server:
        http = client(settings, store)
        other_result = {}

        def other_thread():
            served_429.wait(5)
            time.sleep(0.2)  # the pause is in force now
            other_result["data"] = http.get_json(server.url + "/other")

        thread = threading.Thread(target=other_thread)
        thread.start()
        started = time.monotonic()
        assert http.get_json(server.url + "/limited") == {"ok": True}
        elapsed = time.monotonic() - started
        thread.join(10)
        assert other_result["data"] == {"ok": True}
        first_429 = server.requests[0].time
        later = [r.time - first_429 for r in server.requests[1:]]
        assert elapsed >= 1.9
        assert len(later) == 2 and all(gap >= 1.9 for gap in later), later  # nothing sent during the pause
        assert http.stats()["retries/rate_limited"] == 1


def test_503_three_times_then_200_succeeds_with_three_retries(settings, store):
    calls = []

    def handler(req):
        calls.append(req.path)
        return Reply(503) if len(calls) <= 3 else Reply(200, body=b"[]", headers={"Content-Type": "application/json"})

    with LoopbackServer(handler) as server:
        http = client(settings.with_(max_retries=4), store)
        assert http.get_json(server.url + "/list") == []
        assert http.stats()["retries/transient"] == 3
        assert len(calls) == 4


def test_503_forever_gives_up_with_transient_error_naming_the_url(settings, store):
    with LoopbackServer(lambda req: Reply(503)) as server:
        http = client(settings.with_(max_retries=3), store)
        with pytest.raises(Transient) as info:
            http.get(server.url + "/down")
        assert server.url + "/down" in str(info.value)
        assert len(server.requests) == 4


def test_connection_reset_is_retried(settings, store):
    calls = []

    def handler(req):
        calls.append(1)
        return Reply(drop_connection=True) if len(calls) == 1 else Reply(200, body=b"ok")

    with LoopbackServer(handler) as server:
        http = client(settings, store)
        assert http.get_bytes(server.url + "/x") == b"ok"
        assert http.stats()["retries/transient"] == 1


def test_404_is_not_retried(settings, store):
    with LoopbackServer(lambda req: Reply(404)) as server:
        http = client(settings, store)
        with pytest.raises(NotFound):
            http.get(server.url + "/missing")
        assert len(server.requests) == 1


def test_html_for_json_is_unexpected_with_raw_body_archived(settings, store):
    page = b"<!DOCTYPE html><html><body>Service unavailable</body></html>"
    with LoopbackServer(lambda req: Reply(200, body=page, headers={"Content-Type": "text/html"})) as server:
        http = client(settings, store)
        with pytest.raises(UnexpectedContent) as info:
            http.get_json(server.url + "/api")
        assert info.value.body == page
        assert http.archive.get_bytes(info.value.response_sha256) == page


def test_user_agent_is_descriptive(settings, store):
    with LoopbackServer(lambda req: Reply(200, body=b"x")) as server:
        client(settings, store).get(server.url + "/")
        assert server.requests[0].headers["user-agent"].startswith("basecrawler/")


def test_get_text_honours_declared_charset(settings, store):
    body = "リコールの届出について".encode("shift_jis")
    with LoopbackServer(lambda req: Reply(200, body=body, headers={"Content-Type": "text/html; charset=Shift_JIS"})) as server:
        assert client(settings, store).get_text(server.url + "/feed") == "リコールの届出について"


def test_body_invalid_in_declared_charset_is_unexpected(settings, store):
    body = "リコール".encode("shift_jis")
    with LoopbackServer(lambda req: Reply(200, body=body, headers={"Content-Type": "text/html; charset=utf-8"})) as server:
        with pytest.raises(UnexpectedContent):
            client(settings, store).get_text(server.url + "/feed")


def test_stream_reads_body_from_disk_and_archives_it(settings, store):
    rows = b"".join(b"%d,row\n" % i for i in range(50_000))
    with LoopbackServer(lambda req: Reply(200, body=rows, headers={"Content-Type": "text/csv"})) as server:
        http = client(settings, store)
        with http.stream(server.url + "/big.csv") as response:
            lines = list(response.iter_lines())
        assert len(lines) == 50_000 and lines[-1] == "49999,row"
        assert http.archive.get_bytes(http.last_sha256) == rows


def test_rate_limit_spaces_requests_on_a_fake_clock():
    clock = FakeClock(start=1000.0)
    throttle = HostThrottle(rate_per_s=10, concurrency=4, clock=clock.time, sleep=clock.sleep)
    start = clock.time()
    for _ in range(50):
        with throttle.turn():
            pass
    assert clock.time() - start >= 4.9


def test_throttle_pause_blocks_new_requests_until_it_ends():
    clock = FakeClock(start=1000.0)
    throttle = HostThrottle(rate_per_s=1000, concurrency=1, clock=clock.time, sleep=clock.sleep)
    throttle.pause(30)
    with throttle.turn():
        assert clock.time() >= 1030.0


# ---- conditional requests through the whole pipeline ------------------------------------
class JsonListCrawler(JsonFeedCrawler):
    source = "jl"
    feed_path = "/recalls.json"

    def parse(self, raw):
        return {"recall_number": raw["id"], "recall_date": raw["date"], "summary_original": raw["text"]}


def test_etag_round_trip_second_run_gets_304_and_same_data(store, settings, monkeypatch):
    body = b'[{"id": "A1", "date": "2024-03-01", "text": "Brake hose"}]'

    def handler(req):
        if req.headers.get("if-none-match") == '"v1"':
            return Reply(304, headers={"ETag": '"v1"'})
        return Reply(200, body=body, headers={"ETag": '"v1"', "Content-Type": "application/json"})

    with LoopbackServer(handler) as server:
        monkeypatch.setenv("BASECRAWLER_JL_API_URL", server.url)
        first = JsonListCrawler(store, settings=settings, mode="full").run()
        second = JsonListCrawler(store, settings=settings, mode="full").run()
    assert first.counts.new == 1
    assert second.http_stats.get("not_modified") == 1 and second.http_stats.get("status/304") == 1
    assert second.counts.parsed == 1 and second.counts.unchanged == 1
    assert server.requests[1].headers.get("if-none-match") == '"v1"'


def test_html_instead_of_json_fails_the_fetch_with_raw_kept(store, settings, monkeypatch):
    page = b"<html><body>We are down for maintenance</body></html>"
    with LoopbackServer(lambda req: Reply(200, body=page, headers={"Content-Type": "text/html"})) as server:
        monkeypatch.setenv("BASECRAWLER_JL_API_URL", server.url)
        result = JsonListCrawler(store, settings=settings).run()
    assert result.status == "failed" and "unexpected" in result.error
    letter = store.dead_letters.open_dead_letters("jl")[0]
    assert letter["kind"] == "unexpected" and letter["raw_bytes"] == page
    sha = store.query("SELECT sha256 FROM responses WHERE status = 200")[0]["sha256"]
    assert letter["response_sha256"] == sha
    from basecrawler.fetch.archive import Archive
    assert Archive(store).get_bytes(sha) == page


def test_archive_retention_prunes_old_bodies_but_keeps_those_of_open_dead_letters(store):
    from basecrawler.fetch.archive import Archive
    archive = Archive(store)
    old_sha, kept_sha, fresh_sha = (archive.put_bytes(b) for b in (b"old body", b"dead letter body", b"fresh body"))
    for sha, when in ((old_sha, "2020-01-01T00:00:00+00:00"), (kept_sha, "2020-01-01T00:00:00+00:00")):
        store.write(lambda db: db.conn.execute(
            "INSERT INTO responses (url, status, sha256, fetched_at) VALUES ('u', 200, ?, ?)", [sha, when]))
    archive.record(url="u2", method="GET", status=200, content_type=None, etag=None, last_modified=None,
                   sha256=fresh_sha, size=10)
    store.dead_letters.add_dead_letter(source="x", run_id=None, stage="fetch", kind="unexpected", error="e", raw=None,
                          response_sha256=kept_sha)
    assert archive.prune(retention_days=30) == 1
    assert not archive.has(old_sha) and archive.has(kept_sha) and archive.has(fresh_sha)


def test_401_with_credentials_is_not_retried_and_says_so(settings, store):
    from basecrawler import CredentialsRejected
    with LoopbackServer(lambda req: Reply(401, body=b'{"error": "bad token"}')) as server:
        http = client(settings, store)
        with pytest.raises(CredentialsRejected, match="credentials rejected") as info:
            http.get(server.url + "/data.json", headers={"X-App-Token": "secret-value"})
        assert len(server.requests) == 1
        assert "secret-value" not in str(info.value)


def test_401_without_credentials_is_treated_as_blocked(settings, store):
    from basecrawler import Blocked
    with LoopbackServer(lambda req: Reply(401)) as server:
        with pytest.raises(Blocked):
            client(settings.with_(blocked_budget=1, backoff_cap_s=0.01), store).get(server.url + "/x")
        assert len(server.requests) == 2


def test_304_without_a_stored_copy_is_unexpected_not_an_empty_body(settings, store):
    with LoopbackServer(lambda req: Reply(304)) as server:
        with pytest.raises(UnexpectedContent, match="no stored copy"):
            client(settings, store).get(server.url + "/x", headers={"If-None-Match": '"abc"'})
