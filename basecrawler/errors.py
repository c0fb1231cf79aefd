"""The one exception tree of the project: every error basecrawler, translate or a source raises.

Every class has a distinct `.kind`, a short stable name: dead letters store it, logs and the
translation report show it (tests/test_errors.py walks all packages to keep it so). Every class
also carries the `.exit_code` a command ends with when it reaches the command line: 1 (failed)
from the root unless a class says otherwise; `basecrawler.cli` maps an exception to its code
from the class, and its docstring's table is checked against these classes (tests/test_cli_exit.py).
The one exit that is no error, `EXIT_OK`, is declared here too.

    CrawlerError (error)                                  root of everything below: exit code 1
    ├── ConfigError (config)                              bad configuration or usage: exit code 2
    │   ├── UnknownSource (unknown_source)                `--source xx` names no registered source
    │   └── NoBackendConfigured (no_backend)              translate.errors: no translation backend
    ├── Skip (skipped)                                    parse() says: not a recall by design (counted, not lost)
    ├── Interrupted (interrupted)                         a stop was requested (SIGINT/SIGTERM): never a dead letter; exit 130
    ├── Undecodable (undecodable)                         no charset decodes a text body without loss
    ├── ListUnreadable (unreadable_list)                  not one item of a list document could be read
    ├── NotAList (not_a_list)                             a list document whose top level is not an array
    ├── OverLimit (over_limit)                            an item over a structural limit: its dead letter; also a ValueError
    │   ├── TooDeep (too_deep)                            containers nested deeper than the limit
    │   ├── TooMany (too_many)                            more keys / items in one container than the limit
    │   └── TooLong (too_long)                            one string longer than the limit
    ├── DuplicateSource (duplicate_source)                two classes claim the same `source` id
    ├── SourceFailed (source_failed)                      a whole source run failed (wraps the cause)
    ├── ReplayMiss (replay_miss)                          --replay has no recorded exchange for a request
    ├── UnusablePath (unusable_path)                      a file, folder or port cannot be used: exit code 3; also an OSError
    ├── RunLockTimeout (run_lock_timeout)                 another crawl kept the run lock; also a TimeoutError; exit 3
    ├── SchedulerAlreadyRunning (scheduler_running)       another `schedule` holds the daemon lock; also a RuntimeError
    ├── UnsafeXml (unsafe_xml)                            a document declaring a DTD, refused; also a ValueError
    ├── ArtifactError (artifact)                          basecrawler.fetch.artifacts: a document never became complete
    ├── PdfError (pdf_unreadable)                         basecrawler.formats.pdfpage: not a readable PDF
    │   ├── OcrUnavailable (ocr_unavailable)              a scanned page but no tesseract / Japanese data
    │   ├── PdfEncrypted (encrypted)                      the document needs a password
    │   └── PdfTooBig (too_big)                           over BASECRAWLER_PDF_MAX_PAGES or _OCR_MAX_SECONDS
    │       └── OcrTimedOut (ocr_timeout)                 internal: tesseract's own timeout hit inside a page
    ├── RangeMismatch (range_mismatch)                    internal (partials): a 206 that does not continue the copy
    ├── FetchError (fetch_error)                          an HTTP exchange failed; http.py's table is built
    │   │                                                 from the `statuses` each subclass declares
    │   ├── RateLimited (rate_limited)        429         the host is paused, never the item's fault
    │   ├── Blocked (blocked)                 401, 403    block page: pause, then fail the source
    │   ├── Transient (transient)             408, 5xx    and timeouts / resets: retried, stays retryable
    │   ├── NotFound (not_found)              404, 410    not retried; for a detail it means "not yet"
    │   ├── CredentialsRejected (credentials) 401         only when the request carried credentials
    │   ├── UnexpectedContent (unexpected)    any other   or a 200 with the wrong kind of body; raw kept
    │   ├── ForeignHost (foreign_host)                    a URL outside the source's declared hosts: never sent
    │   ├── TooLarge (too_large)                          a body over the size or decompression-ratio limit
    │   ├── TooSlow (too_slow)                            past the request deadline or under the minimum rate
    │   └── RedirectLoop (too_many_redirects)             more redirects than httpx follows (a loop)
    └── TranslationError (translation)                    translate.errors: the worker's backend failures
        ├── BackendUnavailable (backend_unavailable)      nothing can be translated now: stop, rows stay pending
        │   ├── BackendDown (backend_down)
        │   ├── BackendRateLimited (backend_rate_limited)
        │   ├── BackendQuotaExhausted (backend_quota)
        │   ├── BackendCredentialsRejected (backend_credentials)
        │   └── BackendUnexpected (backend_unexpected)
        └── BackendItemError (backend_item)               only this request's texts failed

`parse_error`, `validation`, `store_error` and `item_error` are dead-letter kinds, not exception
classes: the pipeline records whatever `parse()` raises, a record the model refuses, a row the
database refuses, or an unexpected exception inside `SourceAPI.item()` under those names.
"""
from __future__ import annotations

import signal

EXIT_OK = 0   # the command did what was asked (also: output piped into `head` and closed early)


class CrawlerError(Exception):
    """Root of every error the project raises."""

    kind = "error"
    exit_code = 1   # failed: a source failed or is suspect, a job failed, the database cannot be opened


class ConfigError(CrawlerError):
    """Configuration or command-line usage that cannot work."""

    kind = "config"
    exit_code = 2   # argparse's own code for a usage error, so both kinds of usage error agree


class UnusablePath(CrawlerError, OSError):
    """A file, folder or port the user chose cannot be used (unwritable or missing folder,
    output is a directory, port in use). The command line gives any other OSError this class's
    exit code too."""

    kind = "unusable_path"
    exit_code = 3


class UnknownSource(ConfigError):
    kind = "unknown_source"

    def __init__(self, source_id: str, known: list[str]):
        self.source_id = source_id
        self.known = known
        super().__init__(f"unknown source {source_id!r}; known sources: {', '.join(known) or '(none)'}")


class DuplicateSource(CrawlerError):
    kind = "duplicate_source"


class SourceFailed(CrawlerError):
    kind = "source_failed"


class ReplayMiss(CrawlerError):
    kind = "replay_miss"


# The three below also keep their old built-in base, so existing `except TimeoutError` /
# `except ValueError` / `except RuntimeError` handlers keep catching them.
class RunLockTimeout(CrawlerError, TimeoutError):
    """Another crawl held the run lock longer than BASECRAWLER_LOCK_TIMEOUT."""

    kind = "run_lock_timeout"
    exit_code = UnusablePath.exit_code   # the database is in use elsewhere: like a path that cannot be used


class SchedulerAlreadyRunning(CrawlerError, RuntimeError):
    """Another `schedule` process holds the scheduler lock of this database."""

    kind = "scheduler_running"


class UnsafeXml(CrawlerError, ValueError):
    """A document that declares a DTD or entities: refused before anything is resolved."""

    kind = "unsafe_xml"


class FetchError(CrawlerError):
    """An HTTP exchange that did not give the caller what it asked for.

    Subclasses declare the HTTP `statuses` they stand for; `basecrawler.fetch.http` builds its
    classification table from them. `with_credentials` marks a class that claims its statuses
    only when the request carried credentials (and then wins over the class without)."""

    kind = "fetch_error"
    statuses: frozenset[int] = frozenset()
    with_credentials = False

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None,
                 body: bytes | None = None, response_sha256: str | None = None):
        self.url = url
        self.status = status
        self.body = body
        self.response_sha256 = response_sha256
        super().__init__(message)


class RateLimited(FetchError):
    kind = "rate_limited"
    statuses = frozenset({429})


class Blocked(FetchError):
    kind = "blocked"
    statuses = frozenset({401, 403})


class Transient(FetchError):
    """Also what a timeout, reset or other network failure becomes."""

    kind = "transient"
    # 408 and every 5xx, which includes the CDN-specific 520-524.
    statuses = frozenset({408, *range(500, 600)})


class NotFound(FetchError):
    """The thing asked for does not exist (yet). Sources may raise it from fetch_detail()."""

    kind = "not_found"
    statuses = frozenset({404, 410})

    def __init__(self, message: str = "not found", **kw):
        super().__init__(message, **kw)


class CredentialsRejected(FetchError):
    kind = "credentials"
    statuses = frozenset({401})
    with_credentials = True


class UnexpectedContent(FetchError):
    """Every other non-2xx status, and a 2xx whose body is not what was asked for."""

    kind = "unexpected"


class UnsafePath(UnexpectedContent):
    """Publisher data that would choose which path is fetched (`..`, `.`, an empty segment):
    the item is refused, never requested."""

    kind = "unsafe_path"


class ForeignHost(FetchError):
    """A request (or a redirect) to a host the source did not declare; nothing was sent."""

    kind = "foreign_host"


class TooLarge(FetchError):
    """A body over the size limit (bytes on the wire or decompressed) or whose decompression
    ratio says it is a bomb; stopped while streaming, never read whole. Not retried: it would
    be as large again."""

    kind = "too_large"


class TooSlow(FetchError):
    """An exchange past its total deadline, or slower than the minimum transfer rate once its
    grace period is over (a slowloris). Not retried within the run; the next run tries again."""

    kind = "too_slow"


class RedirectLoop(FetchError):
    """More redirects than the client follows: a loop, or a chain that leads nowhere."""

    kind = "too_many_redirects"


class Interrupted(CrawlerError):
    """A stop was requested (SIGINT/SIGTERM). Never a dead letter: `dead_letter()` re-raises it
    when a source's own `except Exception` around an item catches it."""

    kind = "interrupted"
    exit_code = 128 + signal.SIGINT   # 130: what a shell reports for a Ctrl-C


class Skip(CrawlerError):
    """Raised (or returned) by parse() for an item that is not a recall by design, with a short
    reason that the run line counts ("not a vehicle", "no recall number"). Not a failure."""

    kind = "skipped"

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Undecodable(CrawlerError, ValueError):
    """No declared or fallback charset decodes a text body without loss (basecrawler.formats.textcodec)."""

    kind = "undecodable"


class ListUnreadable(CrawlerError, ValueError):
    """Not one item of a list document could be read; the caller keeps the raw body (xmlsafe)."""

    kind = "unreadable_list"


class NotAList(CrawlerError, ValueError):
    """A list document whose top level is not an array (jsonlimits); a caller makes it
    UnexpectedContent with the URL."""

    kind = "not_a_list"


class OverLimit(CrawlerError, ValueError):
    """A parsed item over a structural limit (basecrawler.formats.jsonlimits, xmlsafe): that
    item is a dead letter of this kind, the other items of its document are read."""

    kind = "over_limit"


class TooDeep(OverLimit):
    """Containers (JSON arrays / objects, XML or HTML elements) nested deeper than the limit."""

    kind = "too_deep"


class TooMany(OverLimit):
    """More keys or items in one container than the limit."""

    kind = "too_many"


class TooLong(OverLimit):
    """One string (a value, a key, an element's text) longer than the limit."""

    kind = "too_long"


def subclasses(root: type) -> list[type]:
    """Every class below `root`, depth first, each once."""
    found: list[type] = []
    for cls in root.__subclasses__():
        if cls not in found:
            found.append(cls)
            found.extend(c for c in subclasses(cls) if c not in found)
    return found
