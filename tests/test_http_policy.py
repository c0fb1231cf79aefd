"""The HTTP policy's layers, each alone: classify (pure), decide (pure), the host throttles, and
the loop that joins them (with a fake send, clock and sleep: no sockets, no waiting)."""
from __future__ import annotations

import email.utils
import socket

import httpx
import pytest

from basecrawler.errors import (Blocked, CredentialsRejected, Interrupted, NotFound, RateLimited, RedirectLoop, TooSlow,
                                Transient, UnexpectedContent)
from basecrawler.fetch.classify import Failure, classify, classify_exception, failure_of, has_credentials
from basecrawler.fetch.decide import Budget, decide
from basecrawler.fetch.hosts import HostThrottles
from basecrawler.fetch.policy import Policy, Stats

NOW = 1_700_000_000.0
BUDGET = Budget(retries=4, rate_limited=8, blocked=2, unreachable=1, unreachable_wait_s=1.0,
                backoff_base_s=1.0, backoff_cap_s=60.0)
URL = "https://example.test/list"


def http_date(seconds_from_now: float) -> str:
    return email.utils.formatdate(NOW + seconds_from_now, usegmt=True)


def outcome(status, headers=None, *, tries=1, credentials=False, expect=None, body=b"x", deadline=None, jitter=0.0):
    """classify → failure_of → decide, as the loop runs them for a response."""
    kind = classify(status, body=body, expect=expect, has_credentials=credentials)
    assert kind is not None, "a usable answer has no decision"
    return decide(failure_of(kind, status, httpx.Headers(headers or {})), tries, BUDGET, now=NOW, jitter=jitter,
                  url=URL, expect=expect, deadline=deadline)


# ---- classify + decide for responses: one table ---------------------------------------------
# (status, headers, tries, credentials) → (sleep this request, pause the host, give up with)
@pytest.mark.parametrize("status, headers, tries, credentials, sleep_s, pause_s, gives_up", [
    (429, {"Retry-After": "7"}, 1, False, 0, 7.0, None),                     # seconds
    (429, {"Retry-After": http_date(30)}, 1, False, 0, 30.0, None),          # an HTTP date
    (429, {"Retry-After": http_date(-30)}, 1, False, 0, 0.0, None),          # a date gone by: no wait
    (429, {}, 3, False, 0, 2.0, None),                                        # no header: back-off 4 s × (0.5 + 0)
    (429, {"Retry-After": "soon"}, 1, False, 0, 0.5, None),                  # unreadable: back-off
    (429, {"Retry-After": "5"}, 9, False, 0, 5.0, RateLimited),              # budget spent: still pauses the host
    (503, {}, 1, False, 0.5, 0, None),
    (503, {"Retry-After": "120"}, 1, False, 0.5, 0, None),                   # a 503 waits its own back-off
    (500, {}, 4, False, 4.0, 0, None),
    (502, {}, 5, False, 0, 0, Transient),                                     # 4 retries spent
    (408, {}, 1, False, 0.5, 0, None),
    (403, {}, 1, False, 0, 2.0, None),                                        # a block page: back-off 2 steps up (4 s × 0.5)
    (403, {"Retry-After": "9"}, 2, False, 0, 9.0, None),
    (403, {}, 3, False, 0, 0, Blocked),                                       # blocked budget of 2 spent
    (401, {}, 1, False, 0, 2.0, None),                                        # no credentials sent: a block
    (401, {}, 1, True, 0, 0, CredentialsRejected),                           # credentials sent: rejected at once
    (404, {}, 1, False, 0, 0, NotFound),
    (410, {}, 1, True, 0, 0, NotFound),
    (400, {}, 1, False, 0, 0, UnexpectedContent),
])
def test_a_response_is_classified_and_decided(status, headers, tries, credentials, sleep_s, pause_s, gives_up):
    action = outcome(status, headers, tries=tries, credentials=credentials)
    assert (action.sleep_s, action.pause_host_s, action.give_up) == (pytest.approx(sleep_s), pytest.approx(pause_s, abs=0.01), gives_up)


def test_messages_say_what_happened_and_where():
    assert outcome(429, {"Retry-After": "1"}, tries=9).message == f"still rate limited after 8 pauses: GET {URL} → 429"
    assert outcome(503, tries=5).message == f"gave up after 4 retries: GET {URL} → 503"
    assert outcome(503, tries=2).warning == f"GET {URL} → 503: transient failure, retry 2/4 in 1.0s"
    assert outcome(401, credentials=True).message.startswith("credentials rejected")
    assert outcome(200, expect="json", body=b"<html>").message == f"unexpected content (expected json): GET {URL} → 200"
    assert outcome(403, tries=3).message.startswith("blocked by the server (403) after 3 tries")


def test_what_is_counted_and_what_the_error_carries():
    assert outcome(429, {"Retry-After": "1"}).counts == ("retries/rate_limited", "pauses")
    assert outcome(403).counts == ("blocked", "pauses")
    assert outcome(403, tries=3).counts == ("blocked",) and outcome(403, tries=3).with_body
    assert outcome(503).counts == ("retries/transient",)
    assert outcome(503, tries=5).counts == ("gave_up/transient",) and not outcome(503, tries=5).with_body
    not_found = outcome(404)
    assert not_found.counts == ("failed/not_found",) and not_found.with_body and not_found.archive_body


def test_a_200_with_the_wrong_body_is_unexpected_and_not_retried():
    action = outcome(200, {"Content-Type": "text/html"}, expect="json", body=b"<!DOCTYPE html><html>")
    assert action.give_up is UnexpectedContent and action.archive_body


# ---- exceptions: classify_exception + decide --------------------------------------------------
def _caused(outer: httpx.HTTPError, cause: BaseException) -> httpx.HTTPError:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize("exc, kind, unreachable", [
    (httpx.ReadTimeout("timed out"), "transient", False),
    (httpx.ConnectTimeout("timed out"), "transient", False),
    (httpx.PoolTimeout("no connection free"), "transient", False),
    (_caused(httpx.ReadError("reset"), ConnectionResetError(104, "Connection reset by peer")), "transient", False),
    (httpx.RemoteProtocolError("Server disconnected without sending a response."), "transient", False),
    (_caused(httpx.ConnectError("refused"), ConnectionRefusedError(111, "Connection refused")), "transient", True),
    (_caused(httpx.ConnectError("no name"), socket.gaierror(-2, "Name or service not known")), "transient", True),
    (httpx.ConnectError("tls handshake failed"), "transient", False),
    (httpx.TooManyRedirects("Exceeded maximum allowed redirects."), "too_many_redirects", False),
    (httpx.UnsupportedProtocol("Request URL has an unsupported protocol 'ftp://'."), "unexpected", False),
    (httpx.LocalProtocolError("illegal header"), "unexpected", False),
])
def test_an_exception_is_classified(exc, kind, unreachable):
    failure = classify_exception(exc)
    assert (failure.kind, failure.unreachable, failure.status) == (kind, unreachable, None)
    assert failure.error_type == type(exc).__name__


@pytest.mark.parametrize("exc, tries, sleep_s, gives_up, message", [
    (httpx.ReadTimeout("timed out"), 1, 0.5, None, None),
    (httpx.ReadTimeout("timed out"), 5, 0, Transient, f"gave up after 4 retries: GET {URL} → ReadTimeout (timed out)"),
    (_caused(httpx.ReadError("reset"), ConnectionResetError()), 3, 2.0, None, None),
    (_caused(httpx.ConnectError("refused"), ConnectionRefusedError()), 1, 0.5, None, None),
    (_caused(httpx.ConnectError("refused"), ConnectionRefusedError()), 2, 0, Transient,
     f"host unreachable after 1 retry: GET {URL} → ConnectError (refused)"),
    (httpx.TooManyRedirects("loop"), 1, 0, RedirectLoop, f"too many redirects (loop): GET {URL}"),
    (httpx.UnsupportedProtocol("ftp"), 1, 0, UnexpectedContent, f"UnsupportedProtocol: ftp: GET {URL}"),
])
def test_an_exception_is_decided(exc, tries, sleep_s, gives_up, message):
    action = decide(classify_exception(exc), tries, BUDGET, now=NOW, jitter=0.0, url=URL)
    assert (action.sleep_s, action.give_up) == (sleep_s, gives_up)
    if message:
        assert action.message == message
    assert action.pause_host_s == 0   # a network failure never pauses the host


def test_an_unreachable_host_waits_at_most_its_short_wait():
    budget = Budget(backoff_base_s=30.0, unreachable_wait_s=1.0)
    failure = Failure("transient", unreachable=True, error_type="ConnectError")
    assert decide(failure, 1, budget, now=NOW, jitter=0.99).sleep_s == 1.0


# ---- the deadline, the budget ----------------------------------------------------------------
def test_a_wait_past_the_deadline_gives_up_now():
    action = outcome(503, deadline=NOW + 0.1)       # a back-off of 0.5 s would end past it
    assert action.give_up is Transient and action.counts == ("gave_up/deadline",)
    assert "deadline" in action.message
    limited = outcome(429, {"Retry-After": "60"}, deadline=NOW + 10)
    assert limited.give_up is RateLimited and limited.pause_host_s == 60.0   # the host stays paused for the others
    assert outcome(503, deadline=NOW + 5).give_up is None          # a wait within it is taken
    assert outcome(404, deadline=NOW - 1).give_up is NotFound       # and a final failure keeps its class


def test_an_exchange_past_its_deadline_is_not_retried():
    action = decide(Failure(TooSlow.kind), 1, BUDGET, now=NOW, url=URL)
    assert action.give_up is TooSlow and action.counts == ("failed/too_slow",)


def test_the_back_off_doubles_up_to_its_cap_and_spreads_by_jitter():
    budget = Budget(backoff_base_s=1.0, backoff_cap_s=10.0)
    assert [budget.backoff(n, 1.0) for n in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 8.0, 10.0]
    assert budget.backoff(3, 0.0) == 2.0


def test_the_budget_comes_from_the_settings():
    from basecrawler.config import Settings

    budget = Budget.from_settings(Settings(max_retries=7, blocked_budget=5, backoff_base_s=0.25, backoff_cap_s=3.0))
    assert (budget.retries, budget.blocked, budget.backoff_base_s, budget.backoff_cap_s) == (7, 5, 0.25, 3.0)


def test_credential_headers_are_recognised_by_name_in_any_case():
    assert has_credentials({"X-App-Token": "t"}) and has_credentials({"authorization": "Bearer x"})
    assert not has_credentials({"Accept": "*/*"}) and not has_credentials(None)


# ---- the host throttles ------------------------------------------------------------------------
def test_one_throttle_per_host_and_port():
    throttles = HostThrottles(1.0, 2, clock=lambda: 0.0, sleep=lambda s: None)
    assert throttles.for_url("https://a.test/x") is throttles.for_url("https://A.test/y?z")
    assert throttles.for_url("https://a.test/x") is not throttles.for_url("https://a.test:8443/x")
    assert throttles.for_url("https://a.test/x") is not throttles.for_url("https://b.test/x")


def test_a_paused_host_waits_out_the_pause_and_the_rate():
    now, waits = [100.0], []

    def sleep(seconds):
        waits.append(seconds)
        now[0] += seconds
    throttles = HostThrottles(2.0, 1, clock=lambda: now[0], sleep=sleep)
    throttle = throttles.for_url(URL)
    with throttle.turn():
        pass
    throttle.pause(3.0)
    with throttle.turn():
        pass
    assert now[0] == pytest.approx(103.0) and all(w <= 1.0 for w in waits)
    with throttle.turn():     # the next rate slot: 0.5 s later
        pass
    assert now[0] == pytest.approx(103.5)


# ---- the loop that joins them ----------------------------------------------------------------
class FakeSend:
    """Answers each attempt with the next item: a status (a response) or an exception."""

    def __init__(self, *outcomes):
        self.outcomes, self.calls = list(outcomes), 0

    def __call__(self):
        self.calls += 1
        item = self.outcomes.pop(0)
        if isinstance(item, BaseException):
            raise item
        status, headers = item if isinstance(item, tuple) else (item, {})
        return httpx.Response(status, headers=headers, content=b'{"ok": true}', request=httpx.Request("GET", URL))


def policy(*, stopped=lambda: False, budget=BUDGET):
    now, sleeps, kept = [NOW], [], []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds
    stats = Stats()
    runner = Policy(budget=budget, throttles=HostThrottles(0.0, 1, lambda: now[0], sleep), stats=stats,
                    clock=lambda: now[0], sleep=sleep, stopped=stopped, credentials=lambda: False,
                    keep_refused=lambda url, response, body: kept.append(body) or "sha", jitter=lambda: 0.0)
    return runner, stats, sleeps, kept


def test_the_loop_retries_a_transient_failure_then_returns_the_answer():
    runner, stats, sleeps, _ = policy()
    send = FakeSend(503, httpx.ReadTimeout("slow"), 200)
    response = runner.run("GET", URL, send, expect="json")
    assert response.status_code == 200 and send.calls == 3 and sleeps == [0.5, 1.0]
    assert stats.snapshot() == {"requests": 3, "retries/transient": 2, "status/200": 1}


def test_the_loop_pauses_the_host_on_429_then_goes_on():
    runner, stats, sleeps, _ = policy()
    send = FakeSend((429, {"Retry-After": "3"}), 200)
    assert runner.run("GET", URL, send, expect=None).status_code == 200
    assert sum(sleeps) == pytest.approx(3.0)      # waited out in the throttle, not by this request alone
    assert stats.snapshot()["pauses"] == 1


def test_the_loop_raises_the_decided_error_with_the_body_archived():
    runner, stats, _, kept = policy()
    with pytest.raises(NotFound) as info:
        runner.run("GET", URL, FakeSend(404), expect="json")
    assert info.value.status == 404 and info.value.body == b'{"ok": true}' and info.value.response_sha256 == "sha"
    assert kept == [b'{"ok": true}'] and stats.snapshot()["failed/not_found"] == 1


def test_the_loop_gives_up_at_its_deadline():
    runner, stats, sleeps, _ = policy()
    with pytest.raises(Transient, match="deadline"):
        runner.run("GET", URL, FakeSend(503, 503, 503), expect=None, deadline=NOW + 1.0)
    assert sleeps == [0.5] and stats.snapshot()["gave_up/deadline"] == 1


def test_a_stop_ends_the_loop_before_the_next_attempt():
    stop = {"now": False}
    runner, _, _, _ = policy(stopped=lambda: stop["now"])
    send = FakeSend(503, 200)
    original = send.__call__

    def send_then_stop():
        stop["now"] = True
        return original()
    with pytest.raises(Interrupted):
        runner.run("GET", URL, send_then_stop, expect=None)
    assert send.calls == 1


def test_the_clients_with_policy_gives_up_at_the_callers_deadline():
    # Through HttpClient: a caller-built exchange answered 503 every time stops at its deadline
    # (the client's clock), not after the whole retry budget.
    from basecrawler.config import Settings
    from basecrawler.fetch.http import HttpClient

    now, sleeps = [NOW], []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds
    client = HttpClient(settings=Settings(max_retries=10, backoff_base_s=1.0), clock=lambda: now[0], sleep=sleep,
                        transport=httpx.MockTransport(lambda request: httpx.Response(503)))
    send = FakeSend(*[503] * 11)
    with pytest.raises(Transient, match="deadline"):
        client.with_policy(URL, send, deadline=NOW + 3.0)
    assert 1 < send.calls < 5 and sum(sleeps) <= 3.0
    assert client.stats()["gave_up/deadline"] == 1
