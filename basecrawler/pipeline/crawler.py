"""BaseCrawler: the fixed pipeline fetch → parse → date filter → COALESCE upsert →
enrichment → run log, for records of any type. A source implements `fetch(ctx)` and
`parse(ctx, raw)` (and optionally `fetch_detail(ctx, recall)`); `run()` is final and owns
everything else.

What a source may use comes in through the run context (`ctx`, context.py); a source of the
first API (`fetch(self)`, `parse(self, raw)`, everything on `self`, source_api.py) is told apart
by its methods' signatures and keeps working unchanged. The counts and the run line are in
results.py, dead letters in deadletters.py, making and preparing records and the window in
records.py, what happens between parse() and the store (recognising unchanged input, batching,
counting) in intake.py, the types themselves in recordtypes/.
"""
from __future__ import annotations

import abc
import datetime as dt
import inspect
import logging
import os
import time
from typing import Any, ClassVar, Iterable, final

from pydantic import BaseModel

from basecrawler.pipeline import deadletters
from basecrawler.pipeline import upkeep
from basecrawler.errors import CrawlerError, FetchError, Interrupted, NotFound, Skip, SourceFailed
from basecrawler.pipeline.collector import fewer_collections
from basecrawler.pipeline.context import RunContext
from basecrawler.pipeline.intake import Intake, raw_parser
from basecrawler.pipeline.linking import regroup_after_run
from basecrawler.pipeline.records import Raw, Window
from basecrawler.recordtypes import Record
from basecrawler.recordtypes.registry import DEFAULT_RECORD_TYPE
from basecrawler.pipeline.results import RunCounts, RunResult, describe, judge, not_started, record_run
from basecrawler.pipeline.runlock import RunLock
from basecrawler.pipeline.source_api import MODES, SourceAPI

log = logging.getLogger("basecrawler")
# A commit per full batch (Intake.batch_full) or per this many seconds, whichever comes first:
# few commits on a fast source, and a kill -9 of a slow one loses (and its resumed run redoes) little.
COMMIT_EVERY_S = 2.0


class BaseCrawler(SourceAPI, abc.ABC):
    """Subclass this in `sources/<id>.py`. Set the class attributes, implement fetch/parse."""

    source: ClassVar[str] = ""
    # The type of the records a plain dict from parse() makes; another type: `Record(name, {...})`.
    record_type: ClassVar[str] = DEFAULT_RECORD_TYPE
    country: ClassVar[str] = ""
    many_countries: ClassVar[bool] = False   # a portal of many jurisdictions: each record its own country
    source_lang: ClassVar[str] = "en"
    endpoints: ClassVar[dict[str, str]] = {}
    # Politeness: a source may declare a slower rate / fewer concurrent requests per host.
    rate_per_s: ClassVar[float | None] = None
    concurrency: ClassVar[int | None] = None
    # A source whose records are dated well before they are published (a monthly list of
    # last month's recalls) needs a longer incremental look-back than the default overlap.
    min_overlap_days: ClassVar[int] = 0
    # Hosts besides the endpoints' (and their overrides') that downloads may reach, e.g. a
    # CDN the agency links its documents on: "host" or "host:port". Anything else is a
    # `foreign_host` dead letter (enforced by the HTTP client).
    allowed_hosts: ClassVar[frozenset[str]] = frozenset()

    # ---- what a source implements -----------------------------------------------------
    @abc.abstractmethod
    def fetch(self, ctx: RunContext) -> Iterable[Any]:
        """Yield raw items (dicts, strings, bytes, or `Raw`). Use ctx.http and ctx.url()."""

    @abc.abstractmethod
    def parse(self, ctx: RunContext, raw: Any) -> dict | BaseModel | Record | Iterable[dict | BaseModel | Record] | None:
        """Map one raw item to records: a dict of fields (a record of `record_type`), a model
        instance, a `Record(type, fields)` of another type, several of these, or None to skip."""

    def fetch_detail(self, ctx: RunContext, recall: dict) -> dict | None:
        """Optional second phase. Return fields to add (COALESCE), None for "nothing to add",
        or raise NotFound for "not there yet" (the enrichment ladder retries with backoff)."""
        raise NotImplementedError

    # ---- calling the source: the run context, or the first API's `self` ---------------
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Asked once per class, not per item: which methods are written on the run context.
        cls._on_context = frozenset(name for name, first_api_arity in (("fetch", 0), ("parse", 1), ("fetch_detail", 1))
                                    if _positional_arity(getattr(cls, name)) > first_api_arity)

    @classmethod
    def takes_context(cls, method: str) -> bool:
        """Whether the source's `fetch` / `parse` / `fetch_detail` is written on the run context
        (`fetch(self, ctx)`) rather than the first API (`fetch(self)`): told by its arity."""
        return method in cls._on_context

    @property
    def context(self) -> RunContext:
        """The run context this crawler hands its source methods."""
        if self._context is None:
            self._context = RunContext(self)
        return self._context

    @final
    def fetch_items(self) -> Iterable[Any]:
        """The source's fetch(), called the way it is written."""
        return self.fetch(self.context) if self.takes_context("fetch") else self.fetch()

    @final
    def parse_raw(self, raw: Any):
        """The source's parse() of one raw item, called the way it is written."""
        return raw_parser(self)(raw)

    @final
    def detail_of(self, recall: dict) -> dict | None:
        """The source's fetch_detail() of one stored record, called the way it is written."""
        return self.fetch_detail(self.context, recall) if self.takes_context("fetch_detail") else self.fetch_detail(recall)

    def needs_detail(self, record: BaseModel) -> bool:
        """Which stored records the ladder should enrich; default: the type's `needs_detail`
        (a vehicle recall whose model is missing), else every record."""
        wanted = self.default_type().needs_detail
        return True if wanted is None else wanted(record)

    @classmethod
    def has_detail_phase(cls) -> bool:
        return cls.fetch_detail is not BaseCrawler.fetch_detail

    # ---- the pipeline -----------------------------------------------------------------
    @final
    def run(self) -> RunResult:
        started = time.monotonic()
        self.counts, self.warnings = RunCounts(), []
        self._intake = None
        self._transport_bases = None
        lock = RunLock(self.store.path, self.settings.lock_timeout_s, scope=self.source)
        result = RunResult(source=self.source, run_id=None, status="failed", counts=self.counts)
        try:   # a database unreachable from the start fails the run here too: run() never raises
            waiting = not lock.try_acquire()
            self.run_id = result.run_id = self.store.runs.start_run(self.source, self.mode, "waiting" if waiting else "running",
                                                               os.getpid())
        except Exception as exc:
            return not_started(result, exc, lock)
        try:
            if waiting:
                log.info("%s: waiting for the run lock held by pid %s", self.source, lock.holder_pid())
                lock.acquire()  # may time out (BASECRAWLER_LOCK_TIMEOUT): a failed run, not a stuck row
                self.store.runs.update_run(self.run_id, status="running")
            upkeep.recover_after_crash(self.store, self.source, self.run_id)
            self._resolve_window()
            self.store.runs.update_run(self.run_id, since=self.since and self.since.isoformat(),
                                  until=self.until and self.until.isoformat())
            with fewer_collections():
                self._pipeline(result)
            self._regroup()
        except Interrupted:
            result.status = "interrupted"
        except Exception as exc:  # a failing source never escapes run(); it is a failed run
            if self._intake is not None:   # a batch lost with the failure is not counted stored
                self._intake.confirm(raise_failure=False)
            result.status, result.error = "failed", describe(exc)
            log.error("%s: source failed: %s", self.source, result.error, exc_info=not isinstance(exc, CrawlerError))
        except BaseException as exc:  # Ctrl-C / SystemExit: recorded as such, then passed on
            result.status, result.error = "interrupted", type(exc).__name__
            raise
        finally:
            if self._progress is not None and hasattr(self._progress, "close"):
                self._progress.close()
            if self._http is not None:
                result.http_stats = self._http.stats()
                self._http.close()
                self._http = None
            upkeep.prune_archive(self.store, self.settings, self.source)
            result.duration_s = time.monotonic() - started
            result.warnings = list(self.warnings)
            record_run(self.store, self.run_id, result)
            lock.release()
        return result

    @final
    def retry_dead_letters(self) -> dict:
        """Re-parse open parse/store dead letters from their kept raw input (deadletters.retry)."""
        return deadletters.retry(self)

    def _pipeline(self, result: RunResult) -> None:
        fetch_error: Exception | None = None
        interrupted = False
        intake = self._intake = Intake(self, Window(self.since, self.until))
        self._commit_due = time.monotonic() + COMMIT_EVERY_S
        try:
            self.check_stop()
            for item in self.fetch_items():
                self.counts.fetched += 1
                if not isinstance(item, Raw) and self._http is not None:  # it came from the last response
                    item = Raw(item, url=self._http.last_url, response_sha256=self._http.last_sha256)
                if self._progress is not None:
                    self._progress(self.counts.fetched, None)
                intake.parse_item(item)
                if intake.batch_full(self.settings) or time.monotonic() >= self._commit_due:
                    # Every type's batch goes, in one commit each: the ledger then marks
                    # done only items whose records of every type are stored.
                    self._flush_all()
                self.check_stop()  # item boundary: everything parsed so far is kept
        except Interrupted:
            interrupted = True
        except Exception as exc:
            fetch_error = exc  # keep what was fetched so far, then report the failure
        self._flush_all()   # and the ledger's items whose records are all stored now (or had none)
        intake.confirm()   # the last batch committed (or its failure raised here, as the source's)
        if interrupted:
            raise Interrupted()
        if fetch_error is not None:
            if isinstance(fetch_error, FetchError) and fetch_error.kind == "unexpected":
                # The wrong kind of body (an HTML error page for JSON…): keep it as a dead letter.
                self.dead_letter(fetch_error.body, fetch_error, stage="fetch")
            raise fetch_error
        if self.has_detail_phase():
            from basecrawler.pipeline import enrichment

            self.check_stop()
            result.enrichment_stats = enrichment.run_ladder(self)
        result.status = judge(self.source, self.mode, self.counts)

    def _flush_all(self) -> None:
        self._commit_due = time.monotonic() + COMMIT_EVERY_S
        self._intake.flush()
        if self._ledger is not None:
            self._ledger.commit()  # the list items these records came from are collected

    def _regroup(self) -> None:
        """Declared links touching this source, re-made from what is stored now (linking.py)."""
        if problem := regroup_after_run(self.store, type(self)):
            self.warn(problem)

    def _resolve_window(self) -> None:
        if self._explicit_since is None and self.mode == "incremental":
            # Only plausible dates count: one stored 9999-12-31 must not filter out every new record.
            newest = self.store.lookup.newest_date(self.default_type(), self.source, self.today())
            if newest:
                overlap = max(self.settings.overlap_days, self.min_overlap_days)
                self.since = dt.date.fromisoformat(newest) - dt.timedelta(days=overlap)
        elif self._explicit_since is None:
            self.since = None


def _positional_arity(method) -> int:
    """How many positional parameters a method takes besides `self`."""
    parameters = [p for p in inspect.signature(method).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(parameters) - 1


__all__ = ["BaseCrawler", "Interrupted", "Raw", "RunCounts", "RunResult", "Skip", "MODES", "NotFound", "SourceFailed"]
