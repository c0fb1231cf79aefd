"""What a watch is: a saved search (record type or all types, declared facet filters, free
text, sources, countries) and one delivery channel. Checked when it is made, so a watch in
the store always names things that exist; secrets are never part of it (secrets.py)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from basecrawler.errors import ConfigError

CHANNELS = ("feed", "mail", "webhook")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ADDRESS = re.compile(r"^[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+$")


class WatchError(ConfigError):
    """A watch that cannot be made as asked (a usage error: exit 2)."""

    kind = "watch_invalid"


@dataclass(frozen=True)
class Watch:
    name: str
    channel: str                      # feed | mail | webhook
    target: str | None = None         # the webhook URL or the mail address; None for a feed
    record_type: str | None = None    # None: every declared type
    facets: tuple[tuple[str, str], ...] = ()
    text: str | None = None
    sources: tuple[str, ...] = ()
    countries: tuple[str, ...] = ()
    # as_soon_as_seen: deliver before the Korean translation; digest: one mail a day;
    # secret_env / secret_file: where the webhook key is (a name, never the key).
    options: dict = field(default_factory=dict, compare=False)
    id: int | None = None
    created_at: str | None = None
    checked_until: str | None = None

    @property
    def as_soon_as_seen(self) -> bool:
        return bool(self.options.get("as_soon_as_seen"))

    @property
    def digest(self) -> bool:
        return bool(self.options.get("digest"))

    def describe(self) -> str:
        """One line for `watch list`: the search and where it goes (a URL's query, which may
        hold a token, left out)."""
        parts = [f"type={self.record_type or '*'}"]
        parts += [f"{f}={v}" for f, v in self.facets]
        if self.text:
            parts.append(f"text={self.text!r}")
        if self.sources:
            parts.append("source=" + ",".join(self.sources))
        if self.countries:
            parts.append("country=" + ",".join(self.countries))
        return " ".join(parts) + f" → {self.channel}" + (f" {shown_target(self)}" if self.target else "")


def shown_target(watch: Watch) -> str:
    if watch.channel != "webhook" or not watch.target:
        return watch.target or ""
    parts = urlsplit(watch.target)
    return f"{parts.scheme}://{parts.hostname}{':' + str(parts.port) if parts.port else ''}{parts.path}" + (
        "?…" if parts.query else "")


def check(watch: Watch) -> Watch:
    """The watch, or WatchError naming what is wrong with it."""
    from basecrawler.reading.search import UnknownFilter, check_facets, check_query_size
    from basecrawler.recordtypes import get_record_type, record_types

    if not _NAME.match(watch.name or ""):
        raise WatchError(f"watch name {watch.name!r}: letters, digits, '.', '_' or '-', at most 64")
    if watch.channel not in CHANNELS:
        raise WatchError(f"channel {watch.channel!r}: use one of {', '.join(CHANNELS)}")
    if watch.channel == "webhook":
        parts = urlsplit(watch.target or "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise WatchError(f"--webhook needs an http(s) URL, not {watch.target!r}")
        if parts.username or parts.password:
            raise WatchError("--webhook URL must not carry a user or password: the signing key comes from "
                             "the environment (--secret-env) or a file (--secret-file)")
    if watch.channel == "mail" and not _ADDRESS.match(watch.target or ""):
        raise WatchError(f"--mail needs an address, not {watch.target!r}")
    check_query_size(watch.text)
    try:
        types = [get_record_type(watch.record_type)] if watch.record_type else list(record_types().values())
    except Exception as exc:
        raise WatchError(f"unknown record type {watch.record_type!r}: {exc}") from None
    fitting = []
    for record_type in types:
        try:
            check_facets(record_type, watch.facets)
            fitting.append(record_type)
        except UnknownFilter as exc:
            if watch.record_type:
                raise WatchError(str(exc)) from None
    if not fitting:
        raise WatchError("no record type has every facet of " + ", ".join(f for f, _ in watch.facets))
    return watch


def to_row(watch: Watch) -> dict:
    return {
        "name": watch.name, "record_type": watch.record_type, "channel": watch.channel, "target": watch.target,
        "facets": json.dumps([list(p) for p in watch.facets], ensure_ascii=False),
        "text": watch.text, "sources": json.dumps(list(watch.sources)),
        "countries": json.dumps([c.upper() for c in watch.countries]),
        "options": json.dumps(watch.options, ensure_ascii=False, sort_keys=True),
    }


def from_row(row: dict) -> Watch:
    return Watch(
        name=row["name"], channel=row["channel"], target=row.get("target"), record_type=row.get("record_type"),
        facets=tuple(tuple(p) for p in json.loads(row.get("facets") or "[]")), text=row.get("text"),
        sources=tuple(json.loads(row.get("sources") or "[]")), countries=tuple(json.loads(row.get("countries") or "[]")),
        options=json.loads(row.get("options") or "{}"), id=row.get("id"), created_at=row.get("created_at"),
        checked_until=row.get("checked_until"),
    )
