"""The run context: everything one run gives a source, passed in explicitly.

A source written on it implements `fetch(self, ctx)`, `parse(self, ctx, raw)` (and optionally
`fetch_detail(self, ctx, recall)`); its class holds only what describes the publisher (id,
country, language, endpoints, record types, politeness). What a run needs — HTTP, URLs on the
endpoints, the date window, stored facts, documents, the list ledger, warnings, dead letters,
the clock — comes in through `ctx`, so a source cannot reach the store, the archive or the
counts: there is nothing on `ctx` that leads there.

    class ExampleCrawler(BaseCrawler):
        source, country, endpoints = "xx", "XX", {"site": "https://www.example.gov"}

        def fetch(self, ctx):
            yield from ctx.http.get_json(ctx.url("site", "/api/recalls"))

        def parse(self, ctx, raw):
            return {...}   # the fields of the source's record type, from one raw item

A source of the first API (`fetch(self)`, `parse(self, raw)`, everything on `self`) keeps
working unchanged: `BaseCrawler` tells the two apart by the methods' signatures (`takes_context`).
"""
from __future__ import annotations

import datetime as dt
from typing import Any, Iterator

from basecrawler.fetch.urls import path_segment
from basecrawler.recordtypes import Record


class RunContext:
    """One run of one source, as the source sees it. Made by the pipeline, never by a source."""

    def __init__(self, run):
        # `run` is the crawler's public source API (source_api.SourceAPI); the context hands on
        # the parts a source may use and nothing else.
        self._run = run

    # ---- who and when -----------------------------------------------------------------
    @property
    def source(self) -> str:
        """The source id this run is for (`jp`, `oecd` …)."""
        return self._run.source

    @property
    def mode(self) -> str:
        """`incremental` or `full`."""
        return self._run.mode

    @property
    def since(self) -> dt.date | None:
        """The window's lower bound (None: no lower bound)."""
        return self._run.since

    @property
    def until(self) -> dt.date | None:
        """The window's upper bound (None: up to today)."""
        return self._run.until

    def today(self) -> dt.date:
        """Today (UTC) by the run's clock, so "the last 7 days" is testable."""
        return self._run.today()

    def now(self) -> float:
        """The run's clock (seconds since the epoch)."""
        return self._run.clock()

    def in_window(self, date: dt.date | None) -> bool:
        """Whether a listed item's date is inside this run's window (no date: always)."""
        return self._run.in_window(date)

    def setting(self, name: str, default: str | None = None) -> str | None:
        """BASECRAWLER_<SOURCE>_<NAME> (a source's own knob: an API key, a local path)."""
        value = self._run.settings.source_setting(self.source, name)
        return default if value in (None, "") else value

    # ---- HTTP and URLs ----------------------------------------------------------------
    @property
    def http(self):
        """The run's HTTP client: retries, pacing, archive, failure classes, allowed hosts."""
        return self._run.http

    def url(self, endpoint: str, path: str = "", *segments: Any) -> str:
        """An absolute URL on an endpoint (after its override). `segments` fill the `{}` of
        `path`, each encoded as one path segment: publisher data never chooses the path
        (`/`, `?`, `#` are escaped; `.`, `..` and empty values are refused)."""
        if segments:
            path = path.format(*(path_segment(value) for value in segments))
        return self._run.url(endpoint, path)

    def endpoint(self, name: str) -> str:
        """Base URL (scheme+host[+port]) of an endpoint, after the environment override."""
        return self._run.endpoint(name)

    def public_url(self, url: str) -> str:
        """A URL on an overridden endpoint written back on the declared public host."""
        return self._run.public_url(url)

    def resolved(self, url: str) -> str:
        """A declared URL moved to its endpoint's override (the inverse of `public_url`)."""
        return self._run.resolved(url)

    # ---- stored facts -----------------------------------------------------------------
    def known_keys(self, numbers) -> set[str]:
        """Which of these numbers (the last field of the type's key) this source has stored."""
        return self._run.known_keys(numbers)

    def known_date(self, number: str, record_type: str | None = None) -> str | None:
        """The stored date (ISO) of one record of this source, None if unknown or absent."""
        return self._run.known_date(number, record_type)

    def known_dates(self, numbers, record_type: str | None = None) -> dict[str, str]:
        """{number: stored ISO date} for many numbers at once (one query per 500)."""
        return self._run.known_dates(numbers, record_type)

    # ---- documents and lists ----------------------------------------------------------
    @property
    def documents(self):
        """Downloaded documents (PDFs) through the artifact manifest."""
        return self._run.documents

    @property
    def ledger(self):
        """The list ledger, for a source that reads a list before its items."""
        return self._run.ledger

    def read_list_document(self, url: str, reader, *, name: str, label: str, key: str) -> list:
        """A list document (feed, index) read with repair: see SourceAPI.read_list_document."""
        return self._run.read_list_document(url, reader, name=name, label=label, key=key)

    # ---- per item ---------------------------------------------------------------------
    def item(self, raw: Any, url: str | None = None, **options) -> Iterator:
        """`with ctx.item(raw, url, key=number) as scope:` — a failure of one item inside becomes
        its dead letter and the crawl goes on (see SourceAPI.item)."""
        return self._run.item(raw, url, **options)

    def dead_letter(self, raw: Any, error: BaseException | str, **options) -> None:
        """Keep an item that could not become records, for a failure of its own kind or stage."""
        self._run.dead_letter(raw, error, **options)

    def warn(self, message: str) -> None:
        """A problem handled with nothing lost: a WARNING, counted in the run line."""
        self._run.warn(message)

    @staticmethod
    def record(record_type: str, fields: dict) -> Record:
        """A record of another type than the source's own (parse() returns it beside the rest)."""
        return Record(record_type, fields)


__all__ = ["RunContext"]
