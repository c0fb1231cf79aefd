"""Declared links between publishers: a source that republishes other publishers' recalls says
so, and after each run the framework groups each republished record with the original one.

    class OecdCrawler(BaseCrawler):
        republishes = (Republishes("hc", country="CA", field="alert_id"),)

reads: an `oecd` record of country CA whose `same_as_field` (its type's declared shared number)
is N is the same recall as the `hc` record of country CA whose `alert_id` is N. Each keeps its
own row; readers show the group once (store/groups.py).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from basecrawler.recordtypes import get_record_type
from basecrawler.store import groups

log = logging.getLogger("basecrawler")


@dataclass(frozen=True)
class Republishes:
    """This source's records of `country` republish `source`'s records whose `field` equals
    their own shared number (the record type's `same_as_field`). `record_type`: the type both
    are stored as (default: the declaring source's)."""

    source: str
    country: str
    field: str
    record_type: str | None = None


def links_touching(source_id: str, sources: dict[str, type]) -> list[tuple[str, Republishes]]:
    """(member source, link) for every declared link in which `source_id` is either side: a run
    of either may add records the other's group needs."""
    found = []
    for member_id, cls in sources.items():
        for link in getattr(cls, "republishes", ()) or ():
            if source_id in (member_id, link.source):
                found.append((member_id, link if link.record_type else
                              Republishes(link.source, link.country, link.field, cls.record_type)))
    return found


def relink_after_run(store, source_id: str, sources: dict[str, type]) -> int:
    """Re-make the groups of every link that touches `source_id`; returns the links now held."""
    total = 0
    for member_id, link in links_touching(source_id, sources):
        record_type = get_record_type(link.record_type)
        if not record_type.same_as_field:
            log.warning("%s: cannot link to %s: %s declares no same_as_field", member_id, link.source,
                        record_type.name)
            continue
        total += groups.relink(store, record_type, member_source=member_id, primary_source=link.source,
                               country=link.country, primary_field=link.field)
    return total


def regroup_after_run(store, source_cls: type) -> str | None:
    """After a run of `source_cls`: the groups of every discovered source's links that touch it,
    made again. A derived view: a failure is returned as a warning (no record is lost by it)."""
    from basecrawler.errors import CrawlerError
    from basecrawler.pipeline.registry import discover

    try:
        sources = {**discover(), source_cls.source: source_cls}
    except CrawlerError:   # a broken neighbour (two classes with one id) is reported by its own run
        sources = {source_cls.source: source_cls}
    try:
        linked = relink_after_run(store, source_cls.source, sources)
    except Exception as exc:
        return f"records of other publishers could not be grouped: {type(exc).__name__}: {exc}"
    if linked:
        log.info("%s: %d records grouped with another publisher's copy of the same recall", source_cls.source, linked)
    return None


__all__ = ["Republishes", "links_touching", "relink_after_run", "regroup_after_run"]
