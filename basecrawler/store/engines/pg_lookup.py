"""Stored rows by their keys on PostgreSQL (issue #23): what `Store.rows_by_key` (and through it
`known_inputs` and `existing_keys`) reads, in one query per 1,000 keys of any sources.

Each key is looked up through the unique key's index by a LATERAL subquery (`LIMIT 1`: at most
one row per key, and the subquery cannot be flattened into a join). That plan does not depend
on statistics. `col = ANY(array)` under an equality on the other key columns did: on a table
filled minutes ago (no ANALYZE yet; the second run of a day often is one) the planner took the
array as a filter over every row of the source and country, 4-5 ms per 500 keys instead of
~1.5. The keys travel as one JSON text (json.dumps is C; psycopg builds an array parameter in
Python, value by value, which was a fifth of a re-run's client time), and the rows come back
with one fetchall. The statement text is the same for every chunk of a type, so psycopg
prepares it after a few executions (parsed and planned once per connection); the plan stays a
nested loop of index probes, generic or not.
"""
from __future__ import annotations

import functools
import json
from operator import itemgetter
from typing import Iterable

from basecrawler.recordtypes.declaration import RecordType

CHUNK = 1000
# A key column's SQL type by its Python type (engines/pg.py stores booleans as 0/1).
_TYPES = {int: "bigint", bool: "bigint", float: "float8"}


@functools.lru_cache(maxsize=None)
def lookup_sql(table: str, key_columns: tuple[str, ...], key_types: tuple[type, ...],
               columns: tuple[str | None, ...] | None, one_prefix: bool = False, lock: bool = False) -> str:
    """The lookup of a chunk of keys sent as one JSON array: of key tuples, or with
    `one_prefix` (every key of the chunk has the same values but for the last column, as a
    crawl's keys do) of the last column's values, the others as parameters. `lock`: each row
    found is locked (FOR UPDATE) as it is read, in the order of the keys sent."""
    def typed(text: str, kind: type) -> str:
        return f"({text})::{_TYPES[kind]}" if kind in _TYPES else text
    last = len(key_columns) - 1
    if one_prefix:
        source = "json_array_elements_text(%s::json) AS k(v)"
        values = [typed("%s", kind) for kind in key_types[:-1]] + [typed("k.v", key_types[-1])]
    else:
        source = "json_array_elements(%s::json) AS k(v)"
        values = [typed(f"k.v ->> {i}", kind) for i, kind in enumerate(key_types)]
    match = [f't."{column}" = {value}' for column, value in zip(key_columns, values)]
    if one_prefix:   # the prefix's parameters come after the array (placeholders in text order)
        match = match[last:] + match[:last]
    select = "*" if columns is None else ", ".join(f't."{column}"' if column else "NULL" for column in columns)
    return (f"SELECT r.* FROM {source} CROSS JOIN LATERAL "
            f'(SELECT {select} FROM "{table}" AS t WHERE {" AND ".join(match)} LIMIT 1{" FOR UPDATE" if lock else ""}) AS r')


def _storable(keys: list[tuple]) -> list[tuple]:
    """The keys PostgreSQL text can hold (no NUL, no lone surrogate): the others are never stored."""
    def fits(value) -> bool:
        if not isinstance(value, str):
            return True
        try:
            value.encode()
        except UnicodeEncodeError:
            return False
        return "\x00" not in value
    return [key for key in keys if all(map(fits, key))]


def _sent(chunk: list[tuple]) -> tuple[bool, list] | None:
    """(one prefix?, the parameters) for a chunk of keys, or None when a key holds text
    PostgreSQL cannot (NUL, a lone surrogate). A value JSON has no type for goes as its text."""
    if any(isinstance(value, str) and "\x00" in value for key in chunk for value in key):
        return None   # (asked of the values: in the JSON text a backslash before "u0000" looks alike)
    prefixes = {key[:-1] for key in chunk}
    one_prefix = len(prefixes) == 1
    text = json.dumps([key[-1] for key in chunk] if one_prefix else chunk, ensure_ascii=False, default=str)
    try:
        text.encode()
    except UnicodeEncodeError:
        return None
    return one_prefix, [text, *next(iter(prefixes))] if one_prefix else [text]


def _chunks(keys: Iterable[tuple]):
    """The distinct keys in chunks of `CHUNK`, each with (one prefix?, its parameters); a key
    PostgreSQL text cannot hold is never stored, so the chunk is asked without it."""
    unique = list(dict.fromkeys(tuple(key) for key in keys))
    for start in range(0, len(unique), CHUNK):
        chunk = unique[start:start + CHUNK]
        sent = _sent(chunk)
        if sent is None:
            chunk = _storable(chunk)
            sent = _sent(chunk) if chunk else None
            if sent is None:
                continue
        yield chunk, sent


def rows_by_key(conn, record_type: RecordType, keys: Iterable[tuple],
                columns: Iterable[str] | None = None, lock: bool = False) -> dict[tuple, dict]:
    """Stored rows of a type by their keys (tuples in `key_columns` order, source first):
    {key: row with the key columns and `columns` (every column when None)}. `conn` is the
    store's PgConnection. A number given for a text column finds its digits, as SQLite
    compares a number with a TEXT column. `lock`: the rows are locked for this transaction
    (FOR UPDATE), in the order of `keys`."""
    key_columns = tuple(record_type.key_columns)
    kinds = tuple(record_type.column_types.get(c, str) for c in key_columns)
    wanted = None if columns is None else tuple(dict.fromkeys([*key_columns, *columns]))
    key_of = itemgetter(*key_columns)
    found: dict[tuple, dict] = {}
    for _, (one_prefix, params) in _chunks(keys):
        sql = lookup_sql(record_type.table, key_columns, kinds, wanted, one_prefix, lock)
        cursor = conn.run_statement(sql, lambda raw: raw.execute(sql, params), read_only=not lock)   # FOR UPDATE locks
        names = [d.name for d in cursor.description]
        for values in cursor.fetchall():
            row = dict(zip(names, values))
            found[key_of(row)] = row
    return found


def values_by_key(conn, record_type: RecordType, keys: Iterable[tuple],
                  columns: tuple[str | None, ...]) -> dict[tuple, tuple]:
    """{key: tuple of `columns`} of the stored rows with these keys (`Store.known_inputs`: a
    re-run reads one per record, so no dict per row; a column None reads NULL). A chunk of one prefix whose values have
    their columns' types reads back only the last key column and `columns`, the key completed
    from the prefix asked; any other reads the whole key, so a key is always the stored one."""
    key_columns = tuple(record_type.key_columns)
    kinds = tuple(record_type.column_types.get(c, str) for c in key_columns)
    width = len(key_columns)
    found: dict[tuple, tuple] = {}
    for chunk, (one_prefix, params) in _chunks(keys):
        prefix = chunk[0][:-1]
        short = one_prefix and all(value.__class__ is kind for value, kind in zip(prefix, kinds))
        selected = (key_columns[-1], *columns) if short else (*key_columns, *columns)
        sql = lookup_sql(record_type.table, key_columns, kinds, selected, one_prefix)
        rows = conn.run_statement(sql, lambda raw: raw.execute(sql, params), read_only=True).fetchall()
        if short:
            found.update((prefix + row[:1], row[1:]) for row in rows)
        else:
            found.update((row[:width], row[width:]) for row in rows)
    return found


__all__ = ["rows_by_key", "values_by_key", "lookup_sql", "CHUNK"]
