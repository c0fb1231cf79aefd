"""Reading the records of any type: stored rows by key (what an upsert and the enrichment queue
ask), the input hashes the pipeline recognises an unchanged input by, a row, counts, the same
thing published elsewhere, the newest date, translation states. Reached as `store.lookup`;
nothing here writes. PostgreSQL's lookups by key are engines/pg_lookup.py's (index probes); the
rest is spelled with the store's dialect."""
from __future__ import annotations

import json
import sqlite3
from itertools import compress
from operator import itemgetter
from typing import Any, Iterable

from basecrawler.formats.dates import EARLIEST_PLAUSIBLE_DATE, latest_plausible_date
from basecrawler.recordtypes import RecordType, get_record_type, record_types
from basecrawler.recordtypes.declaration import DATE_UNKNOWN
from basecrawler.recordtypes.tables import input_index
from basecrawler.recordtypes.upsert import INPUT_HASH, plan_for
from basecrawler.store.engines.dialect import SQLITE, dialect_of

quote = SQLITE.quote   # an identifier as both engines read it


class Lookup:
    """The record reads of one store (its connection, under its lock)."""

    def __init__(self, store):
        self.store = store
        # (table, key prefix) → rounds of input-hash lookups left to probe key by key
        # (`_in_key_range`): this store's keys of that prefix came scattered lately.
        self._range_pauses: dict[tuple, int] = {}

    def rows_by_key(self, record_type: RecordType | str, keys: Iterable[tuple],
                    columns: Iterable[str] | None = None, *, lock: bool = False) -> dict[tuple, dict]:
        """Stored rows of a type by their keys (tuples in `key_columns` order, source first),
        in chunks of 500 values of the last key column per query. `lock` (PostgreSQL, inside a
        write): the rows stay locked until the transaction ends (SQLite's write transaction
        already holds the whole database)."""
        rt = record_type_of(record_type)
        if self.store.engine == "postgresql":   # engines/pg_lookup.py: index probes, 1,000 keys a query
            from basecrawler.store.engines.pg_lookup import rows_by_key
            with self.store.lock:
                return rows_by_key(self.store.db.conn, rt, keys, columns, lock=lock)
        with self.store.lock:
            return sqlite_rows_by_key(self.store.db.conn, rt, keys, columns)

    def known_inputs(self, record_type: RecordType | str, keys: Iterable[tuple],
                     dates: bool = True) -> dict[tuple, tuple]:
        """What the pipeline needs of the stored rows with these keys (tuples in `key_columns`
        order) to count a record made from the same input as unchanged without validating
        it: {key: (the row's `input_hash`, its date)} (the date None for a type without one,
        and when `dates` is false: a run without a window has no use for it). On SQLite read
        from the covering index of the key and these columns (`tables.input_index`), never
        the table: a re-run of unchanged data reads nothing else of the stored rows (an index
        on the hash alone had doubled the insert cost of a large store, every insert landing
        on a random page; this one is ordered by key like the unique index). Tuples, not
        rows: a re-run reads one per record."""
        rt = record_type_of(record_type)
        # None: a NULL read in the date's place, so every value has one shape (hash, date).
        columns = (INPUT_HASH, rt.date_field if dates else None)
        if self.store.engine == "sqlite":
            # Named, as the planner otherwise may take the unique key index and read the table
            # row by row (it did for a four-column key): the covering one answers from itself.
            with self.store.lock:
                if self.store.finisher.busy:
                    return self._known_inputs_meanwhile(rt, keys, columns)
                return sqlite_rows_by_key(self.store.db.conn, rt, keys, columns, indexed_by=input_index(rt)[0],
                                          as_values=True, range_pauses=self._range_pauses)
        from basecrawler.store.engines.pg_lookup import values_by_key
        with self.store.lock:
            return values_by_key(self.store.db.conn, rt, keys, columns)

    def _known_inputs_meanwhile(self, rt: RecordType, keys: Iterable[tuple], columns: tuple) -> dict[tuple, tuple]:
        """`known_inputs` while a batch is finishing behind, without waiting for it: the
        committed file read through a second connection (WAL), less the keys that batch holds,
        whose rows are about to change (their records go the whole way, and the store sees
        them after the batch). A lookup every 500 records would otherwise wait for each batch
        and leave nothing to overlap."""
        table, held = self.store.finisher.held
        found = sqlite_rows_by_key(self.store.reader(), rt, keys, columns, indexed_by=input_index(rt)[0],
                                   as_values=True, range_pauses=self._range_pauses)
        if table == rt.table:
            for key in [key for key in found if key in held]:
                del found[key]
        return found

    def existing_keys(self, record_type: RecordType | str, keys: Iterable[tuple]) -> set[tuple]:
        """Which of these keys (source first) are stored already."""
        rt = record_type_of(record_type)
        return set(self.rows_by_key(rt, keys, rt.key_columns))

    def count(self, record_type: RecordType | str, source: str | None = None) -> int:
        d, table = dialect_of(self.store), quote(record_type_of(record_type).table)
        if source is None:
            return self.store.scalar(d.query(f"SELECT COUNT(*) FROM {table}"))
        return self.store.scalar(d.query(f"SELECT COUNT(*) FROM {table} WHERE source = {d.p}"), [source])

    def get(self, record_type: RecordType | str, key: dict) -> dict | None:
        """The stored row with these key values (JSON columns decoded); without `source` in
        `key`, the oldest such row of any source."""
        rt = record_type_of(record_type)
        unknown = [name for name in key if name not in rt.key_columns]
        if unknown:
            raise ValueError(f"{', '.join(unknown)} not in the key of {rt.name} ({', '.join(rt.key_columns)})")
        d = dialect_of(self.store)
        where = " AND ".join(f"{quote(name)} = {d.p}" for name in key) or "1 = 1"
        rows = self.store.query(d.query(f"SELECT * FROM {quote(rt.table)} WHERE {where} ORDER BY id LIMIT 1"),
                                list(key.values()))
        return decode_row(rt, rows[0]) if rows else None

    def same_as(self, record_type: RecordType | str, row: dict) -> list[dict]:
        """Records of any type that are the same thing as `row` published elsewhere: the same
        value in their declared `same_as_field` (a Transport Canada recall number in `ca` and
        in the Canada-wide alerts) and the same country when both have one; `row` itself left
        out. Linked for a reader, never merged: each source keeps its own record. Each match
        carries its `record_type`."""
        rt = record_type_of(record_type)
        value = row.get(rt.same_as_field) if rt.same_as_field else None
        if value is None or value == "":
            return []
        country = row.get("country") if "country" in rt.column_types else None
        d = dialect_of(self.store)
        found = []
        for other in record_types().values():
            if not other.same_as_field:
                continue
            where, params = [f"{quote(other.same_as_field)} = {d.p}"], [value]
            if country and "country" in other.column_types:
                where.append(f"(country = {d.p} OR country IS NULL)")
                params.append(country)
            if other.table == rt.table:   # not the row itself
                if row.get("id") is not None:
                    where.append(f"id <> {d.p}")
                    params.append(row["id"])
                else:
                    where.append("NOT (" + " AND ".join(f"{quote(c)} {d.is_} {d.p}" for c in rt.key_columns) + ")")
                    params += [row.get(c) for c in rt.key_columns]
            for match in self.store.query(d.query(f"SELECT * FROM {quote(other.table)} WHERE {' AND '.join(where)} "
                                                  "ORDER BY id"), params):
                found.append({"record_type": other.name, **decode_row(other, match)})
        return found

    def newest_date(self, record_type: RecordType | str, source: str, today) -> str | None:
        """Newest plausible date of a source's records of a type (the incremental watermark): a
        date outside `dates.is_plausible_date` (a 9999-12-31 stored before dates were checked)
        does not count."""
        rt = record_type_of(record_type)
        if rt.date_field is None:
            return None
        known = f" AND {DATE_UNKNOWN} = 0" if rt.has_date_unknown else ""
        d, date = dialect_of(self.store), quote(rt.date_field)
        return self.store.scalar(d.query(
            f"SELECT MAX({date}) FROM {quote(rt.table)} WHERE source = {d.p}{known} "
            f"AND {date} >= {d.p} AND {date} <= {d.p}"),
            [source, EARLIEST_PLAUSIBLE_DATE.isoformat(), latest_plausible_date(today).isoformat()])

    # ---- what `status` shows of the records (reading/counts.py reads the same from indexes) ----
    def translation_counts(self, source: str) -> dict[str, int]:
        """Records of every type by translation state: pending, translated, or the status the
        worker set."""
        counts: dict[str, int] = {}
        d = dialect_of(self.store)
        for rt in _types_translated():
            for row in self.store.query(d.query(
                    "SELECT CASE WHEN translated_at IS NULL THEN 'pending' ELSE COALESCE(translation_status, 'translated') "
                    f"END AS s, COUNT(*) AS n FROM {quote(rt.table)} WHERE source = {d.p} GROUP BY s"), [source]):
                counts[row["s"] or "pending"] = counts.get(row["s"] or "pending", 0) + row["n"]
        return dict(sorted(counts.items()))

    def translation_backlog(self) -> int:
        """Records of every translated type not translated yet."""
        d = dialect_of(self.store)
        return sum(self.store.scalar(d.query(f"SELECT COUNT(*) FROM {quote(rt.table)} WHERE translated_at IS NULL"))
                   for rt in _types_translated())


def sqlite_rows_by_key(conn: sqlite3.Connection, rt: RecordType, keys: Iterable[tuple], columns: Iterable[str] | None,
                       indexed_by: str | None = None, as_values: bool = False,
                       range_pauses: dict | None = None) -> dict[tuple, Any]:
    """`rows_by_key` on SQLite, through `conn` (the caller holds what guards it); with
    `as_values`, {key: tuple of `columns`} instead of rows (no dict per row; a column None
    reads NULL). The keys returned hold the stored values: a key asked with a number for a
    text column (or text for a number) is found under the stored form, as a row's is. Given
    `range_pauses` (the caller's memory of scattered prefixes), keys lying together are read
    as one range of the index (`_in_key_range`)."""
    key_columns = rt.key_columns
    key_of = plan_for(rt).key
    *prefix_columns, last = key_columns
    by_prefix: dict[tuple, list] = {}
    for key in keys:
        by_prefix.setdefault(tuple(key[:-1]), []).append(key[-1])
    prefix_sql = "".join(f"{quote(c)} = ? AND " for c in prefix_columns)
    index = f" INDEXED BY {quote(indexed_by)}" if indexed_by else ""
    prefix_kinds = [rt.column_types.get(c, str) for c in prefix_columns]
    found: dict[tuple, Any] = {}
    for prefix, values in by_prefix.items():
        # As values: the stored last key column and the columns; the prefix as asked when
        # each of its values has its column's type (compared as it is stored), else as stored.
        short = as_values and all(value.__class__ is kind for value, kind in zip(prefix, prefix_kinds))
        if columns is None:
            cols = "*"
        elif as_values:   # the key, then the columns (one may be a key column too)
            cols = ", ".join(quote(c) if c else "NULL" for c in ([last, *columns] if short else [*key_columns, *columns]))
        else:
            cols = ", ".join(quote(c) for c in dict.fromkeys([*key_columns, *columns]))
        width = len(key_columns)
        if (range_pauses is not None and short and len(values) >= RANGE_AT_LEAST
                and rt.column_types.get(last, str) is str):
            rows = _in_key_range(conn, f"SELECT {cols} FROM {quote(rt.table)}{index} WHERE {prefix_sql}{quote(last)}",
                                 range_pauses, (rt.table, prefix), prefix, values)
            if rows is not None:
                found.update(zip(map(prefix.__add__, map(_FIRST, rows)), map(_AFTER_FIRST, rows)))
                continue
        for start in range(0, len(values), 500):
            chunk = values[start:start + 500]
            where, params = f"{quote(last)} IN ({SQLITE.params(len(chunk))})", [*prefix, *chunk]
            cursor = conn.execute(SQLITE.query(f"SELECT {cols} FROM {quote(rt.table)}{index} WHERE {prefix_sql}{where}"),
                                  params)
            # (Keys and values cut out of each row in C: a re-run asks this for every record.)
            if short:
                rows = cursor.fetchall()
                found.update(zip(map(prefix.__add__, map(_FIRST, rows)), map(_AFTER_FIRST, rows)))
            elif as_values:
                rows = cursor.fetchall()
                found.update(zip(map(itemgetter(slice(width)), rows), map(itemgetter(slice(width, None)), rows)))
            else:
                names = [d[0] for d in cursor.description]
                for values_ in cursor:
                    row = dict(zip(names, values_))
                    found[key_of(row)] = row
    return found


_FIRST, _AFTER_FIRST, _LEADING = itemgetter(slice(1)), itemgetter(slice(1, None)), itemgetter(0)

# The input hashes of a round of keys (a re-run asks them every 500 records) are read as one
# range of the covering index where the round's keys lie together in key order, as a source
# publishing in key order gives them: one scan of adjacent entries costs SQLite less than
# probing each key (bench/README.md, wave 24). A range holding more than RANGE_SPREAD stored
# keys per key asked is scattered: that round probes each key, and so do the next
# RANGE_PAUSE rounds of the same table and key prefix before a range is tried again.
RANGE_AT_LEAST, RANGE_SPREAD, RANGE_PAUSE = 32, 2, 16
_TEXT = {str}


def _in_key_range(conn, select: str, pauses: dict, pause_key: tuple, prefix: tuple, values: list) -> list | None:
    """The rows of `select` (its WHERE ending in the last key column) with the last key
    column between the least and the greatest of `values`, those of `values` only; None when
    that range is scattered (or lately was: `pauses`), for the caller to probe each."""
    paused = pauses.get(pause_key)
    if paused:
        pauses[pause_key] = paused - 1
        return None
    if not {*map(type, values)} <= _TEXT:   # (text compares in the index's order; a number may not)
        return None
    limit = RANGE_SPREAD * len(values)
    rows = conn.execute(SQLITE.query(f"{select} BETWEEN ? AND ? LIMIT {limit + 1}"),
                        [*prefix, min(values), max(values)]).fetchall()
    if len(rows) > limit:
        if len(pauses) >= 4096:   # (a heuristic's memory: bounded, lost at no cost)
            pauses.clear()
        pauses[pause_key] = RANGE_PAUSE
        return None
    asked = set(values)
    return [*compress(rows, map(asked.__contains__, map(_LEADING, rows)))]


def decode_row(record_type: RecordType, row: dict) -> dict:
    """A stored row with its JSON columns decoded: `extra` a dict, multi-valued fields lists
    (empty when the column is NULL: an empty list is stored as NULL, so a blank never erases)."""
    for column in record_type.json_columns:
        if column not in row:
            continue
        value = row[column]
        if isinstance(value, str):
            value = json.loads(value) if value else None
        if value is None:
            value = {} if column == "extra" else []
        row[column] = value
    return row


def record_type_of(record_type: RecordType | str) -> RecordType:
    """A record type, given it or its name."""
    return record_type if isinstance(record_type, RecordType) else get_record_type(record_type)


def _types_translated() -> list[RecordType]:
    return [rt for rt in record_types().values() if rt.translated]


__all__ = ["Lookup", "decode_row", "record_type_of", "sqlite_rows_by_key"]
