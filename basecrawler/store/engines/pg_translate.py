"""The fallback for SQL still written in SQLite's spelling only: rewritten for PostgreSQL by
regular expressions, and its read-only intent guessed. Every module of the project states its
statements through its dialect (engines/dialect.py), the search's `build_query` last; what
still comes here is SQL the tests write in place. Each use is counted by the module the
statement came from (`unstated`), and tests/test_sql_dialect.py lists the modules whose source
still holds such statements (the project's: SQLite-only web code). Delete the module when the
tests state theirs too, and have engines/pg.py refuse plain SQL.

The rewriting (cached per statement; string literals untouched except for `%`, which psycopg
reads as a placeholder): `?` → `%s`, `:name` → `%(name)s`, `[column]` → `"column"`,
`a IS [NOT] b` → `IS [NOT] DISTINCT FROM`, `INSERT OR IGNORE` → `… ON CONFLICT DO NOTHING`,
`LIKE` → `ILIKE`, `BEGIN IMMEDIATE` → `BEGIN`, `IFNULL(` → `COALESCE(`.
"""
from __future__ import annotations

import collections
import functools
import re
import inspect

_STRING = re.compile(r"('(?:[^']|'')*')")
_BRACKET = re.compile(r"\[(\w+)\]")
_NAMED = re.compile(r"(?<![:\w]):(\w+)")
_IS_NOT = re.compile(r"\bIS\s+NOT\s+(?!NULL\b|DISTINCT\b|TRUE\b|FALSE\b)", re.I)
_IS = re.compile(r"\bIS\s+(?!NOT\b|NULL\b|DISTINCT\b|TRUE\b|FALSE\b)", re.I)
_LIKE = re.compile(r"\bLIKE\b", re.I)
_BEGIN = re.compile(r"\bBEGIN\s+IMMEDIATE\b", re.I)
_OR_IGNORE = re.compile(r"\bINSERT\s+OR\s+IGNORE\b", re.I)
_IFNULL = re.compile(r"\bIFNULL\s*\(", re.I)
_RETURNING = re.compile(r"\sRETURNING\s", re.I)
_READ_ONLY = re.compile(r"^\s*(SELECT|SHOW|WITH|VALUES|EXPLAIN)\b(?!.*\b(INSERT|UPDATE|DELETE|FOR\s+UPDATE|nextval|setval|"
                        r"pg_advisory)\b)", re.I | re.S)

# module → statements it ran through the fallback in this process
unstated: collections.Counter = collections.Counter()
# Functions that only pass a caller's SQL on: the statement is the caller's.
_ADAPTER = {__name__, "basecrawler.store.engines.pg"}
_PASSING = {("basecrawler.store.core", name) for name in ("query", "scalar", "write_returning")}


@functools.lru_cache(maxsize=4096)
def translate(sql: str, named: bool = False) -> str:
    """The PostgreSQL spelling of one statement written for SQLite."""
    parts = _STRING.split(sql)
    ignore = False
    for index, part in enumerate(parts):
        part = part.replace("%", "%%")
        if index % 2 == 0:   # outside string literals
            part = _BRACKET.sub(r'"\1"', part)
            part = _NAMED.sub(r"%(\1)s", part) if named else part.replace("?", "%s")
            part = _IS_NOT.sub("IS DISTINCT FROM ", part)
            part = _IS.sub("IS NOT DISTINCT FROM ", part)
            part = _LIKE.sub("ILIKE", part)
            part = _BEGIN.sub("BEGIN", part)
            part = _IFNULL.sub("COALESCE(", part)
            if _OR_IGNORE.search(part):
                part = _OR_IGNORE.sub("INSERT", part)
                ignore = True
        parts[index] = part
    out = "".join(parts)
    if ignore:
        match = _RETURNING.search(out)
        at = match.start() if match else len(out.rstrip().rstrip(";"))
        out = out[:at] + " ON CONFLICT DO NOTHING" + out[at:]
    return out


def guess_read_only(sql: str) -> bool:
    """Whether a statement that did not say so looks like it only reads."""
    return bool(_READ_ONLY.match(sql))


def count_caller() -> None:
    """Count one fallback statement for the module it came from (the first frame outside the
    adapter and the store's pass-through methods)."""
    frame = inspect.currentframe().f_back
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module not in _ADAPTER and (module, frame.f_code.co_name) not in _PASSING:
            unstated[module] += 1
            return
        frame = frame.f_back


__all__ = ["translate", "guess_read_only", "count_caller", "unstated"]
