"""What a table page's query string says about its rows. A page decides from its arguments,
never from the SQL Datasette built for it, whether it shows the whole table (its facets are then
the table's own, counted once per run) or a part of it.

Datasette's rule: an argument that starts with "_" and has no "__" is not a column filter. Of
those, the ones below only choose how the rows show (columns, order, size, which page, the
format, the language, whether copies show); every other one (`_search`, `_where`, `_through`,
`_filter_column`, `_bcf_<field>`, …) narrows the rows, and so does one this list does not know:
such a page is counted as a part of the table, slower but never wrong.
"""
from __future__ import annotations

from collections.abc import Iterable

SHOWING_ONLY = frozenset({
    "_sort", "_sort_desc", "_size", "_next", "_col", "_nocol", "_labels", "_nolabels", "_nocount",
    "_nofacet", "_nosuggest", "_shape", "_extra", "_json", "_json_infinity", "_nl", "_trace",
    "_timelimit", "_ttl", "_stream", "_dl", "_header", "_lang",
    "_bc_copies", "_bc_all",   # ours: every publisher's copy (web/groups.py), every column (basecrawler_web)
})
FACET_PREFIX = "_facet"   # `_facet=`, `_facet_size=`, `_facet_<type>=`: which counts show


def narrows(keys: Iterable[str]) -> bool:
    """Whether a page with these query-string keys shows fewer rows than its whole table."""
    return any(not (key in SHOWING_ONLY or key.startswith(FACET_PREFIX)) for key in keys)


def whole_table(args) -> bool:
    """Whether a page with these arguments (a request's `args`) shows its whole table."""
    return not narrows(args.keys())


def search_only(args) -> bool:
    """Whether a page's arguments search (`_search`) and do nothing else that narrows its rows."""
    return bool((args.get("_search") or "").strip()) and not narrows(k for k in args.keys() if k != "_search")
