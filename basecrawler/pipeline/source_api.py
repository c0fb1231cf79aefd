"""Everything a source may touch, all on `self`: the HTTP client, URLs on its endpoints, the
date window, the stored facts it needs, downloaded documents, the list ledger, and the per-item
plumbing (dead letters with provenance, warnings). A source reaches nothing else: not the
store, not the archive, not the artifact manifest.

`BaseCrawler` (crawler.py) is this plus the pipeline.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import logging
import time
import traceback
from typing import Any, Callable, Iterator

import httpx
from pydantic import BaseModel

from basecrawler.pipeline import deadletters
from basecrawler.pipeline import records
from basecrawler.config import Settings, endpoint_override
from basecrawler.errors import (Blocked, ConfigError, CredentialsRejected, FetchError, ForeignHost, Interrupted, ListUnreadable,
                     NotFound, RateLimited, RedirectLoop, SourceFailed, TooLarge, TooSlow, Transient, Undecodable,
                     UnexpectedContent, UnsafeXml)
from basecrawler.pipeline.records import Raw, Window, as_date, origin, rebase
from basecrawler.recordtypes import RecordType, get_record_type
from basecrawler.pipeline.results import RunCounts
from basecrawler.store.core import Store

log = logging.getLogger("basecrawler")

MODES = ("incremental", "full")
# What `item()` turns into a dead letter by default: failures of one item, classified.
ITEM_FAILURES = (NotFound, UnexpectedContent, Transient, ForeignHost, TooLarge, TooSlow, RedirectLoop, Undecodable)
# What never is one item's failure and ends the run instead: a stop, the host refusing us (a
# block, a rate limit, rejected credentials), bad configuration. Anything else inside `item()`
# that is not in its `failures` is an unexpected error of that item: a dead letter too.
RUN_FAILURES = (Interrupted, Blocked, RateLimited, CredentialsRejected, ConfigError, SourceFailed)
_DISK_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


class ItemScope:
    """What `with self.item(...) as scope:` tells afterwards: whether the item failed."""

    failed: bool = False


class SourceAPI:
    # A source that reads one document (a CSV export, a JSON list) declares its URL instead of
    # `endpoints`: the endpoint `data` (its scheme + host) is derived from it, so the override
    # BASECRAWLER_<SOURCE>_DATA_URL, doctor's probe and the allowed hosts work as for any
    # endpoint. Fetch it with `self.http.get(self.resolved(self.data_url))`. A source reading
    # a local file declares neither (see README, Adding a source).
    data_url: str | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("data_url") and "endpoints" not in cls.__dict__:
            cls.endpoints = {"data": origin(cls.data_url)}

    def __init__(self, store: Store | str | None = None, *, mode: str = "incremental",
                 since: dt.date | str | None = None, until: dt.date | str | None = None,
                 settings: Settings | None = None, transport=None, clock=None, sleep=None, progress=None,
                 stop=None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.settings = settings or Settings.from_env()
        if store is None:
            store = self.settings.db_path
        self.store = store if isinstance(store, Store) else Store(store)
        self.mode = mode
        self._explicit_since = as_date(since)
        self.since: dt.date | None = self._explicit_since
        self.until: dt.date | None = as_date(until)
        self._transport = transport
        self._clock = clock or time.time
        # `stop` (a threading.Event) ends the run at the next item boundary, or at once during
        # an HTTP back-off wait: a scheduler asked to stop must not sit out a retry ladder.
        self._stop = stop
        self._sleep = sleep or (time.sleep if stop is None else self._stoppable_sleep)
        self._http = None
        self.run_id: int | None = None
        self.counts = RunCounts()
        self._transport_bases: list[tuple[str, str]] | None = None
        self.warnings: list[str] = []
        self._progress = progress  # callable(fetched, None) for a terminal display, or None
        self._ledger = None
        self._context = None

    # ---- URLs -------------------------------------------------------------------------
    def endpoint(self, name: str) -> str:
        """Base URL (scheme+host[+port]) of an endpoint, after the environment override."""
        return origin(endpoint_override(self.source, name) or self.endpoints[name])

    def url(self, endpoint: str, path: str = "") -> str:
        """Absolute URL on an endpoint: only scheme+host change with an override, paths stay."""
        if path and not path.startswith("/"):
            path = "/" + path
        return self.endpoint(endpoint) + path

    def public_url(self, url: str) -> str:
        """A URL on an overridden endpoint (mirror, proxy, test server) written back on the
        source's declared public host: the override is transport, never what a record links to."""
        return rebase(url, self._overridden_bases())

    def resolved(self, url: str) -> str:
        """A URL on a declared endpoint (e.g. `data_url`) moved to that endpoint's override,
        if one is set: the inverse of `public_url`."""
        return rebase(url, [(public, transport) for transport, public in self._overridden_bases()])

    def _overridden_bases(self) -> list[tuple[str, str]]:
        if self._transport_bases is None:
            self._transport_bases = [(origin(override), origin(declared)) for name, declared in self.endpoints.items()
                                     if (override := endpoint_override(self.source, name))]
        return self._transport_bases

    def download_hosts(self) -> set[str]:
        """Where this source's requests may go: every endpoint's host (declared and
        overridden), `allowed_hosts`, and BASECRAWLER_<SOURCE>_ALLOWED_HOSTS (comma-separated)."""
        from basecrawler.fetch.http import host_key

        hosts = set()
        for name, declared in self.endpoints.items():
            hosts.add(host_key(declared))
            override = endpoint_override(self.source, name)
            if override:
                hosts.add(host_key(override))
        extra = self.settings.source_setting(self.source, "allowed_hosts") or ""
        for host in [*self.allowed_hosts, *extra.split(",")]:
            if host.strip():
                hosts.add(host_key(host.strip() if "//" in host else "//" + host.strip()))
        return hosts

    # ---- HTTP, documents, the ledger --------------------------------------------------
    @property
    def http(self):
        """The run's HTTP client: retries, pacing, archive, failure classes, allowed hosts.
        `self.http.download_to_file(url)` used in a `with` owns its temp file."""
        if self._http is None:
            from basecrawler.fetch.http import HttpClient

            settings, transport = self.settings, self._transport
            if transport is None and self._overridden_bases() and (settings.record_dir or settings.replay_dir):
                # Behind an override (a local server, a mirror) exchanges are recorded under the
                # declared public host, so the recording replays against the real URLs, and a
                # replay looks there first.
                from basecrawler.fetch.replay import RecordingTransport, ReplayTransport

                if settings.replay_dir:
                    transport = ReplayTransport(settings.replay_dir, rewrite=self.public_url)
                if settings.record_dir:
                    transport = RecordingTransport(transport or httpx.HTTPTransport(), settings.record_dir,
                                                   rewrite=self.public_url)
                settings = dataclasses.replace(settings, record_dir=None, replay_dir=None)
            self._http = HttpClient(
                settings=settings, store=self.store, transport=transport,
                rate_per_s=self.rate_per_s, concurrency=self.concurrency,
                clock=self._clock, sleep=self._sleep, source=self.source, stop=self._stop,
                allowed_hosts=self.download_hosts() if self.endpoints else None,
            )
            if self.settings.replay_dir:
                self._http.rate_per_s = 0.0   # files, not a host: no spacing (as HttpClient's own replay)
        return self._http

    @property
    def documents(self):
        """Downloaded documents (PDFs) through the artifact manifest (see `artifacts.Documents`)."""
        from basecrawler.fetch.artifacts import Documents

        return Documents(lambda: self.http, self.store, source=self.source)

    @property
    def ledger(self):
        """The list ledger (see `ledger.py`) for sources that read a list before its items."""
        if self._ledger is None:
            from basecrawler.pipeline.ledger import Ledger

            self._ledger = Ledger(self.store, self.source, max_attempts=self.settings.ledger_max_attempts,
                                  retries=self._explicit_since is None and self.until is None or self.mode == "full",
                                  requeue=self.mode == "full")
        return self._ledger

    def read_list_document(self, url: str, reader: Callable, *, name: str, label: str, key: str) -> list:
        """Fetch a list document (feed, index) and read it with `reader(body, header=charset)`,
        which returns (entries, `xmlsafe.ListRead`). Repairs are warnings (`label: note`), lost
        items dead letters ({key: url, "item": chunk}); a list that cannot be read at all is an
        `UnexpectedContent` the pipeline keeps whole, and the run fails without a traceback."""
        response = self.http.get(url, expect="xml")
        sha = self.http.last_sha256
        try:
            entries, listed = reader(response.content, header=response.charset_encoding)
        except (ListUnreadable, UnsafeXml) as exc:
            raise UnexpectedContent(f"the {name} cannot be read: {type(exc).__name__}: {exc}", url=url,
                                    status=response.status_code, body=response.content, response_sha256=sha) from None
        for note in listed.repairs:
            self.warn(f"{label}: {note}")
        for chunk, reason in listed.lost:
            self.dead_letter({key: url, "item": chunk}, reason, stage="fetch", kind="unreadable_item",
                             url=url, response_sha256=sha)
        return entries

    # ---- the window and stored facts --------------------------------------------------
    def in_window(self, date: dt.date | None) -> bool:
        """Whether a listed item's date is inside this run's window (no date: always)."""
        return Window(self.since, self.until).holds(date)

    def known_date(self, number: str, record_type: str | None = None) -> str | None:
        """The stored date (ISO) of one of this source's records of `record_type` (default: the
        source's own type), by the last field of the type's key (the publisher's number); None
        when it is not stored or its date is unknown."""
        return self.known_dates([number], record_type).get(number)

    def known_dates(self, numbers, record_type: str | None = None) -> dict[str, str]:
        """The stored dates of many numbers at once: {number: stored date (ISO)} for those stored
        with a known date; a number not stored, or stored with its date unknown, is left out
        (`known_date` is `.get(number)` of it). One keyed query per 500 numbers instead
        of one per number: a source that looks up every item of a page or report asks here."""
        rt = get_record_type(record_type) if record_type else self.default_type()
        if rt.date_field is None:
            return {}
        keys = [self._key(number, rt) for number in dict.fromkeys(numbers)]
        columns = [rt.date_field, *(["date_unknown"] if rt.has_date_unknown else [])]
        rows = self.store.lookup.rows_by_key(rt, keys, columns)
        return {key[-1]: row[rt.date_field] for key, row in rows.items()
                if not row.get("date_unknown") and row[rt.date_field] is not None}

    def known_keys(self, numbers) -> set[str]:
        """Which of these numbers (the last field of the type's key) this source has stored."""
        keys = [self._key(number) for number in numbers]
        return {key[-1] for key in self.store.lookup.existing_keys(self.default_type(), keys)}

    def _key(self, number: str, rt: RecordType | None = None) -> tuple:
        """A stored key of a type (default: this source's) from its last field: the source
        first, the other fields from the source's defaults (its country)."""
        defaults = self.record_defaults()
        rt = rt or self.default_type()
        return (self.source, *(defaults.get(name) for name in rt.key[:-1]), number)

    # ---- records ----------------------------------------------------------------------
    def default_type(self) -> RecordType:
        """The declaration of this source's `record_type`."""
        return get_record_type(self.record_type)

    def record_defaults(self) -> dict:
        """What a record of this source gets unless parse() says otherwise."""
        return {"country": self.country, "source_lang": self.source_lang}

    def records_from(self, raw) -> list[tuple[RecordType, BaseModel]]:
        """parse() output as validated records with their types (raises on any failure)."""
        return records.make(self.parse_raw(raw), default_type=self.default_type(), defaults=self.record_defaults())

    def prepare_record(self, record: BaseModel, record_type: RecordType | None = None) -> BaseModel:
        """What every record goes through before the window and the store (also records from
        the enrichment ladder and dead-letter retries): see `records.prepare`."""
        bases = self._overridden_bases()
        return records.prepare(record_type or self.default_type(), record, source=self.source, today=self.today(),
                               public_url=self.public_url if bases else None,
                               moved_from=tuple(transport for transport, _ in bases))

    def clock(self) -> float:
        """The run's clock (seconds since the epoch; injected in tests)."""
        return self._clock()

    def today(self) -> dt.date:
        """Today (UTC) by the injected clock, so "after tomorrow" is testable."""
        return dt.datetime.fromtimestamp(self._clock(), dt.timezone.utc).date()

    # ---- per-item plumbing ------------------------------------------------------------
    @contextlib.contextmanager
    def item(self, raw: Any, url: str | None = None, *, failures: tuple = ITEM_FAILURES,
             key: str | None = None, passes: tuple = ()) -> Iterator[ItemScope]:
        """One item fetched or read on its own: a failure in `failures` inside the block becomes
        a fetch dead letter keeping `raw`, with provenance from the error or the last response,
        and fails the ledger's current list item (the next run fetches it again); the crawl
        goes on. An unexpected exception (a bug, an odd body) is a dead letter too, with its
        traceback in the letter (and the DEBUG log), one line on the terminal. What is not the
        item's (RUN_FAILURES: a block, a stop…; a database or a full disk) passes.
        `key`: the last field of the record key the item was to become (the publisher's number),
        kept in the letter so `dead-letters list` names it. `passes`: failures that are the
        source's rather than this item's (a host unreachable for a source that asks it once per
        date window). `scope.failed` says what happened."""
        scope = ItemScope()
        try:
            yield scope
        except RUN_FAILURES + tuple(passes):
            raise
        except failures as exc:
            scope.failed = True
            # Provenance: the item's own response, else the error's, else (a parse failure of a
            # body) the last response; never the last one for a failed request, which is not it.
            last = None if isinstance(exc, FetchError) or isinstance(raw, Raw) or self._http is None \
                else self._http.last_sha256
            self.dead_letter(raw, exc, stage="fetch", url=url, key=key, response_sha256=last)
            if self._ledger is not None:
                self._ledger.fail_current(exc)
        except Exception as exc:
            if _not_the_items(exc):
                raise
            scope.failed = True
            log.debug("%s: unexpected error in one item", self.source, exc_info=True)
            message = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
            self.dead_letter(raw, message, stage="fetch", kind="item_error", url=url, key=key)
            if self._ledger is not None:
                self._ledger.fail_current(exc)

    def dead_letter(self, raw: Any, error: BaseException | str, *, stage: str = "fetch", kind: str | None = None,
                    url: str | None = None, key: str | None = None,
                    response_sha256: str | None = None, record_type: str | None = None) -> None:
        """Keep an item the source could not turn into records (and count it), for a failure
        that needs its own kind or stage (see `deadletters.record`); `item()` covers the rest."""
        deadletters.record(self, raw, error, stage=stage, kind=kind, url=url, key=key,
                           response_sha256=response_sha256, record_type=record_type)

    def warn(self, message: str) -> None:
        """An input problem handled with nothing lost (a repaired list, a lying charset, a list
        with no recall in it): a WARNING, and counted in the run line."""
        self.warnings.append(message)
        log.warning("%s: %s", self.source, message)

    # ---- what the pipeline's stages ask of a run (never a source's business) --------
    def last_response_sha256(self) -> str | None:
        """The body the HTTP client last received (None before any request): the provenance
        of an item that came from it."""
        return None if self._http is None else self._http.last_sha256

    def ledger_in_use(self):
        """The list ledger if this run has used it, else None (a source without a list)."""
        return self._ledger

    def overridden_bases(self) -> list[tuple[str, str]]:
        """(transport origin, declared public origin) of every endpoint with an override."""
        return self._overridden_bases()

    def check_stop(self) -> None:
        """Raise Interrupted when the run was asked to stop (an item boundary)."""
        if self._stop is not None and self._stop.is_set():
            raise Interrupted()

    def _stoppable_sleep(self, seconds: float) -> None:
        if self._stop.wait(seconds):
            raise Interrupted()



def _not_the_items(exc: BaseException) -> bool:
    """A database error or a full disk: the run's trouble, not one item's."""
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL:
        return True
    return type(exc).__module__.split(".")[0] in ("sqlite3", "psycopg")


__all__ = ["SourceAPI", "ItemScope", "ITEM_FAILURES", "RUN_FAILURES", "MODES"]
