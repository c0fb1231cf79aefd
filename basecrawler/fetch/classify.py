"""The first layer of the HTTP policy: what one attempt's outcome means. Pure functions, no I/O.

- `classify(status, body=…, …)`: a response → a FetchError kind, or None for a usable answer.
  The status table is read from the `statuses` each FetchError class declares (errors.py): the
  classes are the only place a status is given a meaning.
- `classify_exception(exc)`: an httpx exception → a `Failure` (transient, unreachable, a
  redirect loop, or not a network blip at all).
- `failure_of(status, headers)`: a classified response → the `Failure` decide.py reads.
- `parse_retry_after(value, now)`: a Retry-After header (seconds or an HTTP date) in seconds.
"""
from __future__ import annotations

import email.utils
import socket
from dataclasses import dataclass

import httpx

from basecrawler.errors import FetchError, RedirectLoop, Transient, UnexpectedContent, subclasses

# A request carrying one of these headers has credentials: a 401 then means "rejected", not
# "blocked", and is never retried.
CREDENTIAL_HEADERS = frozenset({"authorization", "x-app-token", "x-api-key", "api-key"})


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the decision needs it."""
    kind: str                       # a FetchError kind
    status: int | None = None       # None: no response came (a network failure)
    retry_after: str | None = None  # the Retry-After header, as sent
    unreachable: bool = False       # name resolution failed / connection refused
    error_type: str = ""            # for a failure without a response: the exception's class
    error: str = ""                 # and its text

    def where(self, method: str, url: str) -> str:
        """"GET url → 503" / "GET url → ReadTimeout": how messages name the attempt."""
        outcome = str(self.status) if self.status else self.error_type
        return f"{method} {url}" + (f" → {outcome}" if outcome else "")


def _classification_table() -> tuple[dict[str, type[FetchError]], dict[tuple[int, bool], type[FetchError]]]:
    """(kind → class, (status, has credentials) → class), read from the FetchError subclasses.
    A class marked `with_credentials` claims its statuses only for requests with credentials,
    and wins there."""
    by_kind: dict[str, type[FetchError]] = {}
    by_status: dict[tuple[int, bool], type[FetchError]] = {}
    for cls in sorted(subclasses(FetchError), key=lambda c: not c.with_credentials):
        by_kind.setdefault(cls.kind, cls)   # a subclass inheriting its parent's kind never shadows it
        for status in cls.statuses:
            for credentials in ((True,) if cls.with_credentials else (False, True)):
                by_status.setdefault((status, credentials), cls)
    return by_kind, by_status


_BY_KIND, _BY_STATUS = _classification_table()


def error_class(kind: str) -> type[FetchError]:
    """The FetchError class of a kind."""
    return _BY_KIND[kind]


def classify(status: int | None, *, body: bytes = b"", content_type: str = "", expect: str | None = None,
             has_credentials: bool = False, network_error: bool = False) -> str | None:
    """What a response (or a network failure) means; None when it is a usable answer.

    `expect` is what the caller asked for: "json", "xml", "html", "text", "bytes", "pdf" or
    None (anything).
    """
    if network_error:
        return Transient.kind
    by_status = _BY_STATUS.get((status, has_credentials)) if status is not None else None
    if by_status is not None:
        return by_status.kind
    if status == 304:
        return None
    if status is None or status >= 400 or status < 200:
        return UnexpectedContent.kind
    if expect in (None, "bytes"):
        return None
    stripped = body.lstrip()
    if stripped.startswith(b"\xef\xbb\xbf"):   # a UTF-8 BOM is not content (textcodec drops it)
        stripped = stripped[3:].lstrip()
    unexpected = UnexpectedContent.kind
    if not stripped:
        return unexpected
    ctype = (content_type or "").lower()
    head = stripped[:512].lower()
    looks_html = head.startswith(b"<!doctype html") or head.startswith(b"<html") or b"<html" in head[:256]
    if expect == "json":
        if looks_html or stripped[:1] not in (b"{", b"[", b'"') and not stripped[:1].isdigit():
            return unexpected
        return None
    if expect == "xml":
        return unexpected if looks_html and "xml" not in ctype else None
    if expect == "pdf":
        return None if stripped.startswith(b"%PDF") else unexpected
    return None


def failure_of(kind: str, status: int | None, headers=None) -> Failure:
    """The Failure of a response `classify` gave `kind`."""
    return Failure(kind, status=status, retry_after=(headers or {}).get("retry-after"))


def classify_exception(exc: BaseException) -> Failure:
    """What an httpx exception raised by an attempt means. Timeouts, resets and protocol
    breaks mid-answer are transient; a host that cannot be resolved or refuses connections
    is transient but `unreachable`; a redirect loop and anything else (an unsupported scheme,
    a local protocol violation) would fail the same way again."""
    named = {"error_type": type(exc).__name__, "error": str(exc)}
    if isinstance(exc, httpx.TooManyRedirects):
        return Failure(RedirectLoop.kind, **named)
    if isinstance(exc, (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)):
        return Failure(Transient.kind, unreachable=_unreachable(exc), **named)
    return Failure(UnexpectedContent.kind, **named)


def _unreachable(exc: BaseException) -> bool:
    """httpx.ConnectError wrapping a socket.gaierror / ConnectionRefusedError somewhere down
    its cause chain."""
    if not isinstance(exc, httpx.ConnectError):
        return False
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (socket.gaierror, ConnectionRefusedError)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)


def has_credentials(headers) -> bool:
    return any(str(name).lower() in CREDENTIAL_HEADERS for name in (headers or {}))


__all__ = ["Failure", "classify", "classify_exception", "failure_of", "error_class", "parse_retry_after",
           "has_credentials", "CREDENTIAL_HEADERS"]
