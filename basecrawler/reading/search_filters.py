"""What a search asks for (`RecallFilter`) and the limits every query is held to
(basecrawler/reading/search.py runs it; search_query.py turns it into SQL).

A query has at most `MAX_QUERY_TERMS` words and `MAX_QUERY_CHARS` characters (`QueryTooLarge`,
a usage error): every word adds a level to SQLite's expression tree, which refuses more than
1,000 ("Expression tree is too large"); 64 words with every filter set answer in milliseconds.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from basecrawler.errors import ConfigError
from basecrawler.recordtypes import RecordType, get_record_type
from basecrawler.recordtypes.registry import DEFAULT_RECORD_TYPE

MAX_QUERY_TERMS = 64
MAX_QUERY_CHARS = 1_000
DEFAULT_TYPE = DEFAULT_RECORD_TYPE


@dataclass(frozen=True)
class RecallFilter:
    """What to look for, in records of `record_type`. Every field is optional and they
    combine with AND. `facets`: (field, value) pairs, each a declared facet of the type."""

    text: str | None = None
    countries: tuple[str, ...] = ()
    manufacturer: str | None = None
    model: str | None = None
    year: int | None = None
    since: dt.date | None = None
    until: dt.date | None = None
    source: str | None = None
    record_type: str = DEFAULT_TYPE
    facets: tuple[tuple[str, str], ...] = ()
    # Another publisher's copy of a recall (store/groups.py) is shown inside its group, not as a
    # record of its own, unless every copy is asked for (`--all-copies`).
    all_copies: bool = False

    def terms(self) -> list[str]:
        return (self.text or "").split()

    def declaration(self) -> RecordType:
        return get_record_type(self.record_type)


RecordFilter = RecallFilter   # the same thing under a name that does not say "recall"


class QueryTooLarge(ConfigError):
    """More words or characters than the search engine safely answers."""

    kind = "query_too_large"


class UnknownFilter(ConfigError):
    """A filter the record type cannot answer: an undeclared facet, or an option reading a
    column the type does not have."""

    kind = "unknown_filter"


def check_query_size(text: str | None) -> None:
    """Raise QueryTooLarge (naming the limit) for a query over MAX_QUERY_TERMS words or
    MAX_QUERY_CHARS characters."""
    text = text or ""
    words = len(text.split())
    if words > MAX_QUERY_TERMS:
        raise QueryTooLarge(f"search text has {words:,} words; the limit is {MAX_QUERY_TERMS}")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryTooLarge(f"search text too long: {len(text):,} characters; the limit is {MAX_QUERY_CHARS:,}")


def check_facets(record_type: RecordType, facets) -> None:
    """Every (field, value) must name a declared facet of the type (UnknownFilter lists them)."""
    for field, _ in facets:
        if record_type.facet(field) is None:
            known = ", ".join(f.field for f in record_type.facets) or "none"
            raise UnknownFilter(f"{record_type.name} has no facet {field!r}; facets: {known}")


def columns_of(record_type: RecordType) -> set[str]:
    """The columns of the type's table (the data, the Korean beside each original)."""
    return {"id", *record_type.data_columns, *record_type.korean_columns}



__all__ = ["RecallFilter", "RecordFilter", "QueryTooLarge", "UnknownFilter", "check_query_size", "check_facets",
           "columns_of", "MAX_QUERY_TERMS", "MAX_QUERY_CHARS", "DEFAULT_TYPE"]
