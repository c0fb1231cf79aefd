"""The one exception tree of basecrawler: every failure a source or the framework can raise.

    CrawlerError
    ├── ConfigError                  bad configuration or usage (exit code 2)
    │   └── UnknownSource            `--source xx` names no registered source
    ├── DuplicateSource              two classes claim the same `source` id
    ├── SourceFailed                 a whole source run failed (wraps the cause)
    ├── ReplayMiss                   --replay has no recorded exchange for a request
    └── FetchError                   an HTTP exchange failed; `.kind` is its class
        ├── RateLimited     (rate_limited)  429: the host is paused, never the item's fault
        ├── Blocked         (blocked)       403 block page: pause, then fail the source
        ├── Transient       (transient)     5xx, timeout, reset: retried; stays retryable
        ├── NotFound        (not_found)     404: not retried; for a detail it means "not yet"
        ├── CredentialsRejected (credentials) 401 with credentials: no retry
        ├── UnexpectedContent (unexpected)  200 with the wrong kind of body; raw kept
        └── ForeignHost     (foreign_host)  a URL outside the source's declared hosts: never sent

`parse_error` is not an exception class: any exception raised by `parse()` is caught by
the pipeline and recorded as a dead letter of kind `parse_error`.
"""
from __future__ import annotations


class CrawlerError(Exception):
    """Root of every basecrawler error."""


class ConfigError(CrawlerError):
    """Configuration or command-line usage that cannot work."""


class UnknownSource(ConfigError):
    def __init__(self, source_id: str, known: list[str]):
        self.source_id = source_id
        self.known = known
        super().__init__(f"unknown source {source_id!r}; known sources: {', '.join(known) or '(none)'}")


class DuplicateSource(CrawlerError):
    pass


class SourceFailed(CrawlerError):
    pass


class ReplayMiss(CrawlerError):
    pass


class FetchError(CrawlerError):
    """An HTTP exchange that did not give the caller what it asked for."""

    kind = "fetch_error"

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None,
                 body: bytes | None = None, response_sha256: str | None = None):
        self.url = url
        self.status = status
        self.body = body
        self.response_sha256 = response_sha256
        super().__init__(message)


class RateLimited(FetchError):
    kind = "rate_limited"


class Blocked(FetchError):
    kind = "blocked"


class Transient(FetchError):
    kind = "transient"


class NotFound(FetchError):
    """The thing asked for does not exist (yet). Sources may raise it from fetch_detail()."""

    kind = "not_found"

    def __init__(self, message: str = "not found", **kw):
        super().__init__(message, **kw)


class CredentialsRejected(FetchError):
    kind = "credentials"


class UnexpectedContent(FetchError):
    kind = "unexpected"


class ForeignHost(FetchError):
    """A request (or a redirect) to a host the source did not declare; nothing was sent."""

    kind = "foreign_host"
