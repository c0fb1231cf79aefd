"""The `basecrawler watch add …` command for a table page's search and filters (issue #33): the
web view reads a read-only file, so a watch is made on the command line; the page shows the
exact command to copy. No Datasette hooks here (plugins/basecrawler_watch.py shows it).

What a watch can hold (basecrawler/watch/model.py): the record type, free text, declared facet
filters, sources and countries. A page condition it cannot hold (a date range, a column that
is no facet, `_where`) is named beside the command, never dropped silently.
"""
from __future__ import annotations

import hashlib
import re
import shlex

from basecrawler.recordtypes import RecordType

FACET_PREFIX = "_bcf_"        # plugins/basecrawler_facets.py's facet selection
EXACT = "__exact"             # Datasette's `column__exact=value`
NAME_LIMIT = 64               # watch names (basecrawler/watch/model.py)


def _facet_field(record_type: RecordType, key: str) -> str | None:
    """The declared facet a page argument selects a value of, or None."""
    field = key[len(FACET_PREFIX):] if key.startswith(FACET_PREFIX) else key
    field = field[: -len(EXACT)] if field.endswith(EXACT) else field
    return field if record_type.facet(field) is not None else None


def suggested_name(record_type: RecordType, words: list[str]) -> str:
    """A valid watch name for the search: the type and its ASCII words ("product_alert-listeria"),
    else the type and a short digest of the search (Korean or Japanese text)."""
    slug = "-".join(w for w in (re.sub(r"[^a-z0-9]+", "-", w.lower()).strip("-") for w in words) if w)
    if not slug and words:
        slug = hashlib.sha1("\0".join(words).encode("utf-8")).hexdigest()[:8]
    return f"{record_type.name}-{slug}"[:NAME_LIMIT].rstrip("-_.") if slug else record_type.name


def watch_command(record_type: RecordType, pairs) -> tuple[str, list[str]]:
    """(the `basecrawler watch add` command for the page's arguments `pairs`, the page's
    conditions a watch cannot hold as `key=value`)."""
    text, filters, sources, countries, left_out = None, [], [], [], []
    for key, value in pairs:
        value = (value or "").strip()
        if key == "_search":
            text = value or None
            continue
        field = _facet_field(record_type, key)
        if field is not None and value:
            target = sources if field == "source" else countries if field == "country" else None
            if target is not None:
                target.append(value)
            else:
                filters.append(f"{field}={value}")
        elif key == "_where" or not key.startswith("_"):
            left_out.append(f"{key}={value}")
        # any other `_` argument (columns, sort, size, page, language) only changes how rows show
    words = ["basecrawler", "watch", "add",
             suggested_name(record_type, [*(text or "").split(), *(f.split("=", 1)[1] for f in filters)]),
             "--type", record_type.name]
    if text:
        words += ["--text", text]
    for item in filters:
        words += ["--filter", item]
    for source in dict.fromkeys(sources):
        words += ["--source", source]
    for country in dict.fromkeys(countries):
        words += ["--country", country]
    words.append("--feed")
    return " ".join(shlex.quote(w) for w in words), left_out


__all__ = ["watch_command", "suggested_name"]
