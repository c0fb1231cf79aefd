"""Hostile servers (issue 22.1): every response is bounded while it streams — bytes on the wire
and decoded, the decompression ratio, a total deadline, a minimum rate — and an exceeded bound
is a classified failure (`too_large`, `too_slow`), never gigabytes of memory or a run that
never ends. Memory is measured in a child process (peak RSS), against real loopback sockets."""
from __future__ import annotations

import time

import httpx
import pytest

from basecrawler.fetch.bounded import DECODED_STEP, Limits, decoder_for, iter_decoded
from basecrawler.config import Settings
from basecrawler.errors import TooLarge, TooSlow, UnexpectedContent
from basecrawler.fetch.http import HttpClient
from conftest import subprocess_env
from hostile_support import RawServer, endless_body, fetch_in_child, gzip_bomb, slow_headers, slowloris

PEAK_RSS_LIMIT_MB = 500


def _client(**overrides) -> HttpClient:
    return HttpClient(settings=Settings(max_retries=0, backoff_base_s=0.01, **overrides))


# ---- size: the gzip bomb and the endless body ---------------------------------------------------
def test_gzip_bomb_is_refused_by_its_ratio_with_flat_memory(tmp_path):
    with RawServer(gzip_bomb(1200)) as server:
        outcome = fetch_in_child(server.url + "/list.json", "get_bytes", tmp_path, subprocess_env())
    print(f"gzip bomb, default limits: {outcome}")
    assert outcome["outcome"].startswith("too_large:") and "decompression ratio" in outcome["outcome"]
    assert outcome["peak_mb"] < PEAK_RSS_LIMIT_MB


def test_gzip_bomb_without_a_ratio_limit_still_stops_at_the_document_size(tmp_path):
    with RawServer(gzip_bomb(1200)) as server:
        outcome = fetch_in_child(server.url + "/list.json", "get_bytes", tmp_path, subprocess_env(),
                                 max_decompression_ratio=1e9)
    print(f"gzip bomb, ratio limit off: {outcome}")
    assert outcome["outcome"].startswith("too_large:") and "decoded" in outcome["outcome"]
    assert outcome["peak_mb"] < PEAK_RSS_LIMIT_MB


def test_gzip_bomb_streamed_to_disk_stops_before_filling_it(tmp_path):
    with RawServer(gzip_bomb(1200, "application/xml")) as server:
        outcome = fetch_in_child(server.url + "/report.xml", "download", tmp_path, subprocess_env())
    print(f"gzip bomb, download: {outcome}")
    assert outcome["outcome"].startswith("too_large:")
    assert outcome["left"] == []                      # the partial file went with the failure
    assert outcome["peak_mb"] < PEAK_RSS_LIMIT_MB


def test_body_without_content_length_stops_at_the_document_limit_with_flat_memory(tmp_path):
    with RawServer(endless_body(2048)) as server:
        outcome = fetch_in_child(server.url + "/page.json", "get_json", tmp_path, subprocess_env())
    print(f"2 GB without Content-Length, default limits: {outcome}")
    assert outcome["outcome"].startswith("too_large:") and str(Settings().max_document_bytes) in outcome["outcome"]
    assert outcome["peak_mb"] < PEAK_RSS_LIMIT_MB


def test_download_without_content_length_stops_at_the_download_limit(tmp_path):
    with RawServer(endless_body(2048)) as server:
        outcome = fetch_in_child(server.url + "/big.csv", "download", tmp_path, subprocess_env(),
                                 max_download_bytes=96 << 20)
    print(f"2 GB without Content-Length, download: {outcome}")
    assert outcome["outcome"].startswith("too_large:") and outcome["left"] == []
    assert outcome["peak_mb"] < PEAK_RSS_LIMIT_MB


def test_declared_length_over_the_limit_is_refused_before_reading():
    def huge(h):
        h.send_response(200)
        h.send_header("Content-Length", str(10 << 30))
        h.end_headers()
        h.wfile.write(b"x" * 1000)
    with RawServer(huge) as server:
        with pytest.raises(TooLarge, match="Content-Length"):
            _client().get_bytes(server.url + "/x")


def test_documents_are_bounded_far_lower_than_downloads(tmp_path):
    with RawServer(endless_body(40)) as server:
        client = _client(max_document_bytes=8 << 20, max_download_bytes=64 << 20)
        with pytest.raises(TooLarge, match="document limit"):
            client.get_bytes(server.url + "/a")
        with client.download_to_file(server.url + "/b", directory=tmp_path) as download:
            assert download.size == 40 << 20


def test_per_source_override_of_a_bound(monkeypatch):
    monkeypatch.setenv("BASECRAWLER_CA_MAX_DOWNLOAD_BYTES", "1234")
    client = HttpClient(settings=Settings(), source="ca")
    assert client.limits["download"].max_bytes == 1234
    assert client.limits["document"].max_bytes == Settings().max_document_bytes
    assert HttpClient(settings=Settings(), source="eu").limits["download"].max_bytes == Settings().max_download_bytes


def test_defaults_leave_room_for_the_real_sources():
    defaults = Settings()
    assert defaults.max_download_bytes >= 1 << 30        # Canada's CSV is 200 MB and grows
    assert defaults.max_document_bytes >= 32 << 20       # a list page or JSON page is a few MB
    assert defaults.max_decompression_ratio >= 100       # XML and CSV compress 5-30x


def test_inflating_is_done_in_bounded_steps():
    import zlib
    bomb = zlib.compress(bytes(64 << 20), 9)   # 64 MB of zeros in ~64 KB
    pieces = list(decoder_for("deflate").feed(bomb))
    assert sum(map(len, pieces)) == 64 << 20
    assert max(map(len, pieces)) <= DECODED_STEP


def test_an_encoding_not_asked_for_is_refused_unread():
    transport = httpx.MockTransport(lambda request: httpx.Response(
        200, headers={"Content-Encoding": "br"}, stream=httpx.ByteStream(b"\x1b\x00\x00")))
    client = HttpClient(settings=Settings(max_retries=0), transport=transport)
    with pytest.raises(UnexpectedContent, match="not asked for"):
        client.get_bytes("http://example.test/x")
    assert client._client.headers["accept-encoding"] == "gzip, deflate"


def test_a_body_that_does_not_inflate_is_unexpected_not_a_traceback():
    transport = httpx.MockTransport(lambda request: httpx.Response(
        200, headers={"Content-Encoding": "gzip"}, stream=httpx.ByteStream(b"not gzip at all")))
    with pytest.raises(UnexpectedContent, match="does not decode"):
        HttpClient(settings=Settings(max_retries=0), transport=transport).get_bytes("http://example.test/x")


# ---- time: slowloris, slow headers, the total deadline -----------------------------------------
def test_slowloris_body_ends_by_the_minimum_rate():
    with RawServer(slowloris(seconds=30)) as server:
        started = time.monotonic()
        with pytest.raises(TooSlow, match="minimum rate"):
            _client(min_rate_grace_s=1.0, min_rate_bps=100).get_bytes(server.url + "/slow")
        took = time.monotonic() - started
    print(f"slowloris ended by the rate after {took:.1f}s")
    assert took < 5


def test_slowloris_body_ends_by_the_total_deadline():
    with RawServer(slowloris(seconds=30, byte_every_s=0.2)) as server:
        started = time.monotonic()
        with pytest.raises(TooSlow, match="deadline"):
            _client(request_deadline_s=1.5, min_rate_bps=0).get_bytes(server.url + "/slow")
        took = time.monotonic() - started
    assert took < 5


def test_headers_dribbled_byte_by_byte_end_by_the_total_deadline():
    # httpx's own timeout is per read: each byte resets it, so only a total deadline ends this.
    with RawServer(slow_headers(seconds=30, byte_every_s=0.2)) as server:
        started = time.monotonic()
        with pytest.raises(TooSlow, match="deadline"):
            _client(request_deadline_s=1.5).get_bytes(server.url + "/slow")
        took = time.monotonic() - started
    assert took < 5


def test_a_download_has_its_own_deadline(tmp_path):
    with RawServer(slowloris(seconds=30, byte_every_s=0.2)) as server:
        started = time.monotonic()
        with pytest.raises(TooSlow, match="DOWNLOAD_DEADLINE"):
            _client(download_deadline_s=1.5, min_rate_bps=0).download_to_file(server.url + "/slow", directory=tmp_path)
        assert time.monotonic() - started < 5
    assert list(tmp_path.iterdir()) == []


def test_iter_decoded_judges_the_rate_only_after_the_grace():
    limits = Limits(max_bytes=1 << 20, max_ratio=200, deadline_s=100, min_rate_bps=1000, grace_s=10)
    ticks = iter([0.0, 5.0, 11.0, 12.0])
    response = httpx.Response(200, stream=httpx.ByteStream(b""), request=httpx.Request("GET", "http://x.test/"))

    class Dribble(httpx.SyncByteStream):
        def __iter__(self):
            yield b"a"       # at 5 s: within the grace, slow is fine
            yield b"b"       # at 11 s: 2 bytes in 11 s, under 1000 bytes/s
    response = httpx.Response(200, stream=Dribble(), request=httpx.Request("GET", "http://x.test/"))
    reader = iter_decoded(response, limits, until=100.0, clock=lambda: next(ticks))
    assert next(reader) == b"a"
    assert next(reader) == b"b"
    with pytest.raises(TooSlow):
        next(reader)


def test_the_transport_caps_every_socket_read_at_the_threads_deadline():
    # httpx's read timeout (30 s here) restarts with each byte; the transport's backend ends
    # the exchange at the deadline however the bytes dribble, and says so as an httpx error.
    from basecrawler.fetch.transport import DeadlineTransport

    transport = DeadlineTransport()
    with RawServer(slow_headers(seconds=30, byte_every_s=0.2)) as server, \
            httpx.Client(transport=transport, timeout=30) as client:
        started = time.monotonic()
        with transport.backend.deadline(started + 1.0), pytest.raises(httpx.ReadTimeout):
            client.get(server.url + "/slow")
        assert time.monotonic() - started < 4


def test_the_transports_abort_wakes_a_blocked_read_in_another_thread():
    import threading

    from basecrawler.fetch.transport import DeadlineTransport

    transport, outcome = DeadlineTransport(), {}
    with RawServer(slowloris(seconds=30, byte_every_s=5)) as server, httpx.Client(transport=transport, timeout=30) as client:
        def read():
            try:
                with client.stream("GET", server.url + "/slow") as response:
                    outcome["body"] = b"".join(response.iter_raw())
            except httpx.HTTPError as exc:
                outcome["error"] = type(exc).__name__
        thread = threading.Thread(target=read)
        thread.start()
        time.sleep(0.5)   # the headers came; the read of the body is blocked now
        started = time.monotonic()
        transport.backend.abort()
        thread.join(5)
        assert not thread.is_alive() and time.monotonic() - started < 2
    assert outcome   # ended (a short body or an httpx error), not still waiting on the socket
    with pytest.raises(httpx.ReadError):   # and no new connection after a stop
        httpx.Client(transport=transport).get("http://127.0.0.1:9/")


def test_the_transport_maps_httpcore_errors_onto_httpx_ones():
    import httpcore

    from basecrawler.fetch.transport import httpx_error

    assert httpx_error(httpcore.ConnectTimeout("x")) is httpx.ConnectTimeout
    assert httpx_error(httpcore.ReadTimeout("x")) is httpx.ReadTimeout
    assert httpx_error(httpcore.ConnectError("x")) is httpx.ConnectError
    assert httpx_error(httpcore.RemoteProtocolError("x")) is httpx.RemoteProtocolError
    assert httpx_error(ValueError("x")) is None


def test_bounds_are_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("BASECRAWLER_MAX_DOCUMENT_BYTES", "1000")
    monkeypatch.setenv("BASECRAWLER_MIN_RATE_BPS", "2.5")
    monkeypatch.setenv("BASECRAWLER_REQUEST_DEADLINE_S", "9")
    settings = Settings.from_env()
    assert (settings.max_document_bytes, settings.min_rate_bps, settings.request_deadline_s) == (1000, 2.5, 9.0)
    limits = HttpClient(settings=settings).limits["document"]
    assert (limits.max_bytes, limits.min_rate_bps, limits.deadline_s) == (1000, 2.5, 9.0)
