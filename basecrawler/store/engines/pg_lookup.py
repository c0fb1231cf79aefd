"""Stored rows by their keys on PostgreSQL (issue #23): what `Store.rows_by_key` (and through it
`known_inputs` and `existing_keys`) reads, in one query per 1,000 keys of any sources.

The keys travel as one array per key column and each is looked up through the unique key's
index by a LATERAL subquery (`LIMIT 1`: at most one row per key, and the subquery cannot be
flattened into a join). That plan does not depend on statistics. `col = ANY(array)` under an
equality on the other key columns did: on a table filled minutes ago (no ANALYZE yet; the
second run of a day often is one) the planner took the array as a filter over every row of
the source and country, 4-5 ms per 500 keys instead of ~1.5. The statement text is the same
for every chunk of a type, so psycopg prepares it after a few executions (parsed and planned
once per connection); the plan stays a nested loop of index probes, generic or not.
"""
from __future__ import annotations

import functools
from operator import itemgetter
from typing import Iterable

from basecrawler.recordtypes.declaration import RecordType

CHUNK = 1000
# A key column's array type by its Python type (engines/pg.py stores booleans as 0/1).
_ARRAYS = {int: "bigint[]", bool: "bigint[]", float: "float8[]"}


@functools.lru_cache(maxsize=None)
def lookup_sql(table: str, key_columns: tuple[str, ...], key_types: tuple[type, ...],
               columns: tuple[str, ...] | None, one_prefix: bool = False) -> str:
    """The lookup of a chunk of keys: an array per key column, or with `one_prefix` (every key
    of the chunk has the same values but for the last column, as a crawl's keys do) those
    values as parameters and only the last column's array (a third of the client's work)."""
    arrays = [(i, f"%s::{_ARRAYS.get(kind, 'text[]')}") for i, kind in enumerate(key_types)]
    if one_prefix:
        arrays = arrays[-1:]
    matches = [f't."{column}" = ' + (f"k.k{i}" if not one_prefix or i == len(key_columns) - 1 else "%s")
               for i, column in enumerate(key_columns)]
    if one_prefix:   # the prefix's parameters come after the array (placeholders in text order)
        matches = matches[-1:] + matches[:-1]
    select = "*" if columns is None else ", ".join(f't."{column}"' for column in columns)
    return (f"SELECT r.* FROM unnest({', '.join(a for _, a in arrays)}) AS k({', '.join(f'k{i}' for i, _ in arrays)}) "
            f'CROSS JOIN LATERAL (SELECT {select} FROM "{table}" AS t WHERE {" AND ".join(matches)} LIMIT 1) AS r')


def rows_by_key(conn, record_type: RecordType, keys: Iterable[tuple],
                columns: Iterable[str] | None = None) -> dict[tuple, dict]:
    """Stored rows of a type by their keys (tuples in `key_columns` order, source first):
    {key: row with the key columns and `columns` (every column when None)}. `conn` is the
    store's PgConnection."""
    key_columns = tuple(record_type.key_columns)
    kinds = tuple(record_type.column_types.get(c, str) for c in key_columns)
    wanted = None if columns is None else tuple(dict.fromkeys([*key_columns, *columns]))
    key_of = itemgetter(*key_columns)
    # A text column holds a number's digits, as SQLite compares a number with a TEXT column.
    text_at = [i for i, kind in enumerate(kinds) if kind not in _ARRAYS]
    unique = list(dict.fromkeys(tuple(key) for key in keys))
    found: dict[tuple, dict] = {}
    for start in range(0, len(unique), CHUNK):
        chunk = unique[start:start + CHUNK]
        columns_ = [list(values) for values in zip(*chunk)]
        for i in text_at:
            columns_[i] = [v if v is None or isinstance(v, str) else str(v) for v in columns_[i]]
        one_prefix = len({key[:-1] for key in chunk}) == 1
        sql = lookup_sql(record_type.table, key_columns, kinds, wanted, one_prefix)
        params = [columns_[-1], *(values[0] for values in columns_[:-1])] if one_prefix else columns_
        cursor = conn._run(sql, lambda raw: raw.execute(sql, params))
        names = [d.name for d in cursor.description]
        for values in cursor:
            row = dict(zip(names, values))
            found[key_of(row)] = row
    return found


__all__ = ["rows_by_key", "lookup_sql", "CHUNK"]
