"""The second layer of the HTTP policy: what to do after a failed attempt. Pure, no I/O.

`decide(failure, tries, budget, now=…, jitter=…)` answers with an `Action`:

    rate_limited (429)   pause the host (Retry-After, else back-off); give up past budget.rate_limited
    blocked (401, 403)   pause the host (Retry-After, else a longer back-off); give up past budget.blocked
    transient (5xx, 408, timeouts, resets)
                         this request waits (back-off) and tries again; past budget.retries give up
      … unreachable      (no such host, connection refused) one quick retry, then give up
    anything else        give up at once with the kind's error class (not_found, credentials,
                         unexpected, too_many_redirects, too_slow…): trying again would repeat it

A `deadline` (clock seconds) gives up instead of waiting past it. `tries` counts the failures
of this kind for this request, this one included; `jitter` in [0, 1) spreads back-offs.
"""
from __future__ import annotations

from dataclasses import dataclass

from basecrawler.errors import (Blocked, CredentialsRejected, FetchError, RateLimited, RedirectLoop, Transient,
                                UnexpectedContent)
from basecrawler.fetch.classify import Failure, error_class, parse_retry_after


@dataclass(frozen=True)
class Budget:
    """How much failure one request tolerates, and how long it waits between tries."""
    retries: int = 4                  # transient failures retried (Settings.max_retries)
    rate_limited: int = 8             # 429s, each pausing the host
    blocked: int = 2                  # block pages, each pausing the host (Settings.blocked_budget)
    unreachable: int = 1              # a host that does not resolve or refuses connections
    unreachable_wait_s: float = 1.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 60.0

    @classmethod
    def from_settings(cls, settings) -> "Budget":
        return cls(retries=settings.max_retries, blocked=settings.blocked_budget,
                   backoff_base_s=settings.backoff_base_s, backoff_cap_s=settings.backoff_cap_s)

    def backoff(self, attempt: int, jitter: float) -> float:
        """Exponential, capped, and spread over its upper half by `jitter`."""
        base = self.backoff_base_s * (2 ** (attempt - 1))
        return min(self.backoff_cap_s, base) * (0.5 + jitter / 2)


@dataclass(frozen=True)
class Action:
    """Wait `sleep_s` and try again; or pause the host for `pause_host_s` (nothing is sent to
    it meanwhile) and try again; or, with `give_up` set, raise that class with `message`."""
    sleep_s: float = 0.0
    pause_host_s: float = 0.0
    give_up: type[FetchError] | None = None
    message: str = ""
    counts: tuple[str, ...] = ()      # the client's stats to add one to
    warning: str | None = None        # a handled failure, logged as a WARNING
    with_body: bool = False           # the error carries the body that came
    archive_body: bool = False        # and the body is archived, so its dead letter shows it

    @property
    def retry(self) -> bool:
        return self.give_up is None


def decide(failure: Failure, tries: int, budget: Budget, *, now: float, jitter: float = 0.5,
           method: str = "GET", url: str = "", expect: str | None = None, deadline: float | None = None) -> Action:
    where = failure.where(method, url)
    if failure.kind == RateLimited.kind:
        action = _rate_limited(failure, tries, budget, now, jitter, where)
    elif failure.kind == Blocked.kind:
        action = _blocked(failure, tries, budget, now, jitter, where)
    elif failure.kind == Transient.kind:
        action = _transient(failure, tries, budget, jitter, where)
    else:
        return _final(failure, where, method, url, expect)
    wait = action.sleep_s + action.pause_host_s
    if action.retry and deadline is not None and now + wait > deadline:
        # The host's pause still holds for the other requests: only this one stops waiting.
        return Action(pause_host_s=action.pause_host_s, give_up=error_class(failure.kind), counts=("gave_up/deadline",),
                      message=f"{failure.kind}: a retry in {wait:.1f}s would pass the request's deadline: {where}")
    return action


def _rate_limited(failure: Failure, tries: int, budget: Budget, now: float, jitter: float, where: str) -> Action:
    wait = parse_retry_after(failure.retry_after, now)
    if wait is None:
        wait = budget.backoff(tries, jitter)
    counts = ("retries/rate_limited", "pauses")
    warning = f"{where}: 429, pausing host for {wait:.1f}s"
    if tries > budget.rate_limited:   # the host stays paused for the other requests
        return Action(pause_host_s=wait, give_up=RateLimited, counts=counts, warning=warning,
                      message=f"still rate limited after {budget.rate_limited} pauses: {where}")
    return Action(pause_host_s=wait, counts=counts, warning=warning)


def _blocked(failure: Failure, tries: int, budget: Budget, now: float, jitter: float, where: str) -> Action:
    if tries > budget.blocked:
        return Action(give_up=Blocked, counts=("blocked",), with_body=True,
                      message=f"blocked by the server ({failure.status}) after {tries} tries: {where}; "
                              "check the User-Agent / app token or slow the source down")
    # A block page is slower to lift than a 429: the back-off starts two steps up.
    wait = parse_retry_after(failure.retry_after, now) or budget.backoff(tries + 2, jitter)
    return Action(pause_host_s=wait, counts=("blocked", "pauses"), warning=f"{where}: blocked, pausing host for {wait:.1f}s")


def _transient(failure: Failure, tries: int, budget: Budget, jitter: float, where: str) -> Action:
    # A host that cannot be resolved or refuses connections (offline, a wrong name) will not
    # come back within a back-off ladder: one quick retry, then give up.
    retries = budget.unreachable if failure.unreachable else budget.retries
    if tries > retries:
        cause = f" ({failure.error})" if failure.error else ""
        return Action(give_up=Transient, counts=("gave_up/unreachable" if failure.unreachable else "gave_up/transient",),
                      message=f"{'host unreachable' if failure.unreachable else 'gave up'} after {retries} "
                              f"{'retry' if retries == 1 else 'retries'}: {where}{cause}")
    if failure.unreachable:
        wait = min(budget.unreachable_wait_s, budget.backoff(1, jitter))
    else:
        wait = budget.backoff(tries, jitter)
    what = "host unreachable" if failure.unreachable else "transient failure"
    return Action(sleep_s=wait, counts=("retries/transient",),
                  warning=f"{where}: {what}, retry {tries}/{retries} in {wait:.1f}s")


_DETAIL = {
    CredentialsRejected.kind: "credentials rejected — check the configured key or token (not retried)",
}


def _final(failure: Failure, where: str, method: str, url: str, expect: str | None) -> Action:
    """A failure that trying again would repeat."""
    counts = (f"failed/{failure.kind}",)
    if failure.status is None and failure.kind == RedirectLoop.kind:
        return Action(give_up=RedirectLoop, counts=counts, message=f"too many redirects ({failure.error}): {method} {url}")
    if failure.status is None and failure.error_type:   # not a network blip: a protocol violation, a bad scheme…
        return Action(give_up=error_class(failure.kind), counts=counts,
                      message=f"{failure.error_type}: {failure.error}: {method} {url}")
    if failure.kind == UnexpectedContent.kind:
        detail = f"unexpected content (expected {expect or 'a usable body'})"
    else:
        detail = _DETAIL.get(failure.kind, failure.kind)
    return Action(give_up=error_class(failure.kind), counts=counts, message=f"{detail}: {where}",
                  with_body=True, archive_body=True)


__all__ = ["Action", "Budget", "decide"]
