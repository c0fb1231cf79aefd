"""The merge rule of a type, generated from its declaration (pure: SQL text and row arithmetic;
the store runs it). See docs/DETAILS.md, "The store".

`UpsertPlan.merge` is the one place that decides what a stored row becomes; both engines write
the row it returns as it is (`insert_sql_for`, `update_sql_for` a dialect: plain assignments,
no COALESCE), and
`decide` gives the count (new / updated / unchanged) from the same verdict:

- a NULL or blank never erases a stored value (inside `extra` too);
- a row whose merged values equal the stored ones is not written (`column_values`), so a
  re-run over the same data writes nothing and `updated_at` does not move;
- an unknown date never replaces a known one (the `date_unknown` flag);
- a changed `X_original` clears `X_ko` and the translation state, so the row is translated again.

Hot path: `row_of` and `params` run once per record; they do per column only what the old
hand-written vehicle upsert did (a comprehension, then the few columns needing a conversion).
"""
from __future__ import annotations

import base64
import functools
import hashlib
import itertools
import json
from operator import itemgetter
from typing import Any, Iterable, Sequence

from basecrawler.recordtypes.declaration import DATE_UNKNOWN, RecordType
from basecrawler.store.engines.dialect import DIALECTS, SQLITE, Dialect, Statement

EXTRA = "extra"
INPUT_HASH = "input_hash"
# A row flag: its input hash came from the pipeline (names the input it was made from), so an
# unchanged stored row may be pointed at it.
GIVEN_HASH = "_input_hash_given"
# A merged row's verdict on its translation: per translated pair, whether its `X_ko` is cleared,
# then whether the translation state is (any pair's original changed).
RETRANSLATE = "_retranslate"
# A row's INSERT parameters made ahead of the write (`rows_of` given `now`).
PARAMS = "_params"
# The translation state a changed original clears with the Korean text.
TRANSLATION_STATE = ("translated_at", "translation_status", "translation_note")
NEW, UPDATED, UNCHANGED = "new", "updated", "unchanged"


def json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes_b64__": base64.b64encode(bytes(value)).decode("ascii")}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


# Made once: `json.dumps` with options builds an encoder per call, paid for every record written.
_EXTRA_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=json_default)
_LIST_ENCODER = json.JSONEncoder(ensure_ascii=False)
# `JSONEncoder.encode` still makes its C encoder anew on every call (`iterencode`); this one is
# made once, with the same options and no circular-reference markers (a shared markers dict
# would keep the entries of a call that raised). A circular or too deeply nested value then
# ends in a RecursionError, raised as the ValueError the markers would have given.
_C_ENCODER = (json.encoder.c_make_encoder(None, json_default, json.encoder.encode_basestring, None, ": ", ", ",
                                          True, False, True)
              if json.encoder.c_make_encoder is not None else None)


def extra_json(value: Any) -> str | None:
    """A dict (or list) as stored JSON text; empty → None (a blank never erases)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if not value:
        return None
    if _C_ENCODER is None or not isinstance(value, (dict, list)):
        return _EXTRA_ENCODER.encode(value)
    try:
        return "".join(_C_ENCODER(value, 0))
    except RecursionError:
        raise ValueError("a value nested too deeply or referring to itself cannot be written as JSON") from None


class UpsertPlan:
    """Everything the store needs to upsert records of one type."""

    def __init__(self, record_type: RecordType):
        rt = self.record_type = record_type
        self.table = rt.table
        self.key_columns = rt.key_columns
        self.data_columns = rt.data_columns
        self.written = tuple(c for c in rt.data_columns if c not in rt.derived_columns)
        self.derived = tuple(rt.derived_columns)
        self.json_columns = rt.json_columns
        self.has_extra = EXTRA in rt.json_columns
        self.dated = rt.has_date_unknown
        self.date_field = rt.date_field
        self.model_has_date_unknown = DATE_UNKNOWN in rt.model.model_fields
        self.date_columns = rt.date_columns
        self.sentinel = rt.date_sentinel.isoformat() if rt.date_sentinel is not None else None
        self.other_json = tuple(c for c in rt.json_columns if c != EXTRA)
        # `column_values`: the compared columns, the flag and JSON ones converted to stored form.
        self.compared = rt.compared_columns
        self._flag = DATE_UNKNOWN if DATE_UNKNOWN in self.compared else None
        self._compared_json = tuple(c for c in self.json_columns if c in self.compared)
        self._compared_plain = tuple(c for c in self.compared if c != DATE_UNKNOWN and c not in self.json_columns)
        # A key as a tuple (source first); at least two columns, so itemgetter gives a tuple.
        self.key = itemgetter(*self.key_columns)
        # The written columns' values of a row (a row always holds them: `row_of` copies every field).
        self._written_values = _values_getter(self.written)
        self._written_getter = itemgetter(*self.written) if len(self.written) > 1 else _values_getter(self.written)
        # `params`: positions of the columns converted on the way into SQL.
        self._param_json_at = tuple(self.written.index(c) for c in self.json_columns)
        self._param_flag_at = self.written.index(DATE_UNKNOWN) if self.dated else None
        self._merge_plain = tuple(c for c in self.written if c not in (EXTRA, DATE_UNKNOWN)
                                  and not (self.dated and c == self.date_field))
        self.originals = rt.original_columns
        self.koreans = rt.korean_columns
        # `update_params`: the positions in `params` of the columns an update sets (not the key).
        self._update_at = tuple(i for i, c in enumerate((*self.written, *self.derived)) if c not in self.key_columns)
        # A new row: a plain INSERT (on PostgreSQL, engines/pg_upsert.py COPYs the keys no row
        # holds and skips keys another writer holds). A changed row: the update, which writes
        # the merged row as `merge` made it. Each spelled by each engine's dialect, made once.
        self._insert = {name: self._build_insert_sql(d) for name, d in DIALECTS.items()}
        self._update = {name: self._build_update_sql(d) for name, d in DIALECTS.items()}
        self._insert_rows: dict[tuple[str, int], Statement] = {}
        self.insert_sql = self._insert[SQLITE.name]   # (SQLite's: what the bench's engine side runs)
        self.update_sql = self._update[SQLITE.name]

    def insert_sql_for(self, dialect: Dialect) -> Statement:
        """The INSERT of a new row (`params` order), spelled for `dialect`."""
        return self._insert[dialect.name]

    def insert_rows_sql_for(self, dialect: Dialect, count: int) -> Statement:
        """The INSERT of `count` new rows in one statement (their `params` one after the
        other), spelled for `dialect`; made once per count. For a caller that undoes a failure
        with its whole transaction (store/records.py rolls the batch back and writes it again,
        bisected): an INSERT of many rows that might fail half-way otherwise has SQLite copy
        every page it changes to a statement journal (a temporary file) to undo just itself,
        and that journal was most of what a first import wrote to disk."""
        key = (dialect.name, count)
        sql = self._insert_rows.get(key)
        if sql is None:
            d, cols = dialect, self._insert_columns()
            row = f"({d.params(len(cols))})"
            sql = self._insert_rows[key] = d.write(
                f"{d.insert_undone_whole} INTO {d.quote(self.table)} ({', '.join(map(d.quote, cols))}) "
                f"VALUES {', '.join([row] * count)}")
        return sql

    @property
    def insert_width(self) -> int:
        """How many parameters one new row's INSERT takes."""
        return len(self._insert_columns())

    def update_sql_for(self, dialect: Dialect) -> Statement:
        """The UPDATE of a merged row (`update_params` order), spelled for `dialect`."""
        return self._update[dialect.name]

    # ---- rows ---------------------------------------------------------------------------
    def rows_of(self, records: Iterable, source: str, raws: Sequence | None, input_hashes: Sequence | None,
                now: str | None = None) -> list[dict]:
        """`row_of` of each record, with what the store keeps beside it: the input it was made
        from (`_raw`; without `raws`, the row itself) and its input hash where the caller gave
        one (GIVEN_HASH: it names an input). Given `now`, a row with a given hash also gets its
        INSERT parameters (`params`, kept under PARAMS), made in the same pass: a batch's rows
        are read once while they are at hand, not again in a loop of their own."""
        row_of, params, rows = self.row_of, self.params, []
        for record, raw, given in zip(records, _SELF_EACH if raws is None else raws,
                                      _NONE_EACH if input_hashes is None else input_hashes):
            row = row_of(record, source)
            row["_raw"] = row if raw is _SELF else raw
            row[INPUT_HASH] = given
            row[GIVEN_HASH] = given is not None
            if now is not None and given is not None:
                try:
                    row[PARAMS] = params(row, now)
                except Exception:   # made again, and failing, where the write can tell which row it was
                    pass
            rows.append(row)
        return rows

    def row_of(self, record, source: str) -> dict:
        """A validated model instance as store columns: dates ISO text, `extra` a dict, other
        JSON fields (multi-valued facets) JSON text."""
        # The fields are plain values, so a shallow copy of the instance dict does what
        # model_dump does at a fraction of the cost.
        row = dict(record.__dict__)
        for column in self.date_columns:
            value = row[column]
            if value is not None:
                row[column] = value.isoformat()
        for column in self.other_json:
            value = row.get(column)
            row[column] = _LIST_ENCODER.encode(list(value)) if value else None
        if self.dated and not self.model_has_date_unknown:
            unknown = row[self.date_field] is None
            row[DATE_UNKNOWN] = unknown
            if unknown and self.sentinel is not None:
                row[self.date_field] = self.sentinel
        row["source"] = source
        return row

    def input_hash(self, row: dict) -> str:
        """A digest of an incoming row's written values. Merging the same incoming row into
        the row it produced changes nothing (the COALESCE rule is idempotent), so a stored
        row whose `input_hash` equals it is unchanged without a merge or a comparison. Any
        representation works as long as it is stable for equal input: `repr` of plain values
        (str, int, float, None, a dict in the source's own key order) is, and is cheaper than JSON."""
        # (`_written_values`: one C call; `repr` of the list as before, so stored hashes stay valid)
        return hashlib.blake2b(repr(list(self._written_values(row))).encode(), digest_size=12).hexdigest()

    def column_values(self, row: dict) -> tuple:
        """The compared columns in their stored types (what the database holds after a write)."""
        get = row.get
        flag = int(bool(get(self._flag))) if self._flag else None
        return (flag, *[value if value is None or isinstance(value, str) else extra_json(value)
                        for value in map(get, self._compared_json)], *map(get, self._compared_plain))

    def merge(self, old: dict, new: dict) -> dict:
        """The row the COALESCE rule makes of a stored row and an incoming one."""
        merged = dict(old)
        for column in self._merge_plain:
            value = new.get(column)
            if value is not None:
                merged[column] = value
        if self.has_extra:
            incoming = new.get(EXTRA) or {}
            if isinstance(incoming, str):
                incoming = json.loads(incoming)
            # Inside extra too, a blank never erases a stored value.
            incoming = {k: v for k, v in incoming.items() if v is not None and v != "" and v != [] and v != {}}
            if incoming:
                old_extra = json.loads(old[EXTRA]) if old.get(EXTRA) else {}
                combined = {**old_extra, **incoming}
                merged[EXTRA] = old.get(EXTRA) if combined == old_extra else extra_json(combined)
        if self.dated:
            # An unknown date never replaces a known stored one.
            if not (new.get(DATE_UNKNOWN) and not old.get(DATE_UNKNOWN)):
                merged[self.date_field] = new.get(self.date_field)
                merged[DATE_UNKNOWN] = int(bool(new.get(DATE_UNKNOWN)))
        if self.originals:
            # A changed original clears its Korean text, and any one the translation state.
            cleared = tuple(merged.get(o) is not None and merged.get(o) != old.get(o) for o in self.originals)
            merged[RETRANSLATE] = (*cleared, any(cleared))
        return merged

    def decide(self, old: dict | None, new: dict) -> tuple[str, dict | None]:
        """The verdict on an incoming row (folded, `input_hash` set) against the stored row of
        its key (None: there is none), which is both what is written and what is counted:
        (NEW, the row), (UNCHANGED, None) or (UPDATED, the merged row to write)."""
        if old is None:
            return NEW, new
        if old.get(INPUT_HASH) == new[INPUT_HASH]:
            # The same input as the write that made the stored row: merging it changes nothing.
            return UNCHANGED, None
        merged = self.merge(old, new)
        if self.column_values(merged) == self.column_values(old):
            return UNCHANGED, None
        merged["_raw"], merged[INPUT_HASH] = new["_raw"], new[INPUT_HASH]
        return UPDATED, merged

    def fold(self, rows: list[dict]) -> list[dict]:
        """Two rows with one key in a batch (an addendum repeating an alert) fold into one."""
        if len({*map(self.key, rows)}) == len(rows):   # the usual batch, every key once: told in C
            return rows
        by_key: dict[tuple, dict] = {}
        for row in rows:
            key = self.key(row)
            first = by_key.get(key)
            if first is None:
                by_key[key] = row
                continue
            stored = {**first, EXTRA: extra_json(first.get(EXTRA))} if self.has_extra else first
            merged = self.merge(stored, row)
            if self.has_extra:
                merged[EXTRA] = json.loads(merged[EXTRA]) if merged.get(EXTRA) else {}
            merged["_raw"] = row["_raw"]
            merged[INPUT_HASH] = None   # made of several inputs: the store hashes its values
            merged.pop(GIVEN_HASH, None)
            merged.pop(PARAMS, None)   # (the first row's, made ahead: not this merged row's)
            by_key[key] = merged
        return list(by_key.values())

    def params_ahead(self, row: dict, now: str) -> list:
        """`params`, as made ahead of the write where they were (`rows_of`, kept under PARAMS)."""
        return row.get(PARAMS) or self.params(row, now)

    def params(self, row: dict, now: str) -> list:
        try:   # (`_values_getter` without its call: a row always holds every written column)
            params = [*self._written_getter(row)]
        except KeyError:   # a row lacking a column (a hand-made one)
            params = [*map(row.get, self.written)]
        for at in self._param_json_at:
            params[at] = extra_json(params[at])
        if self._param_flag_at is not None:
            params[self._param_flag_at] = int(bool(params[self._param_flag_at]))
        if self.derived:
            # Derived columns (a normalised maker key) come from the row, never from a source.
            derived = self.record_type.derived(row) if self.record_type.derived else {}
            params.extend(map(derived.get, self.derived))
        params += (row.get(INPUT_HASH), now, now)
        return params

    def update_params(self, row: dict, now: str) -> list:
        """`update_sql`'s parameters for a merged row (`decide`'s UPDATED row, with its `id`)."""
        values = self.params(row, now)
        flags = []
        if self.originals:
            *cleared, any_cleared = row.get(RETRANSLATE) or (False,) * (len(self.koreans) + 1)
            flags = [*map(int, cleared), *[int(any_cleared)] * len(TRANSLATION_STATE)]
        return [*map(values.__getitem__, self._update_at), *flags, row.get(INPUT_HASH), now, row["id"]]

    # ---- SQL ----------------------------------------------------------------------------
    def _insert_columns(self) -> list[str]:
        return [*self.written, *self.derived, INPUT_HASH, "first_seen_at", "updated_at"]

    def _build_insert_sql(self, d: Dialect) -> Statement:
        cols = self._insert_columns()
        return d.write(f"INSERT INTO {d.quote(self.table)} ({', '.join(map(d.quote, cols))}) VALUES ({d.params(len(cols))})")

    def _build_update_sql(self, d: Dialect) -> Statement:
        """The merged row written as it is: every column an update sets, the Korean texts and
        the translation state cleared where `merge` said so (`RETRANSLATE`), by the row's id."""
        q, p = d.quote, d.p
        cols = [(*self.written, *self.derived)[i] for i in self._update_at]
        sets = [f"{q(c)} = {p}" for c in cols]
        if self.originals:
            # (one flag per Korean column, then the "any" flag once per state column)
            sets += [f"{q(c)} = CASE WHEN {p} = 1 THEN NULL ELSE {q(c)} END" for c in (*self.koreans, *TRANSLATION_STATE)]
        sets += [f"{q(INPUT_HASH)} = {p}", f"{q('updated_at')} = {p}"]
        return d.write(f"UPDATE {q(self.table)} SET {', '.join(sets)} WHERE {q('id')} = {p}")


# `rows_of` without raws or input hashes: each row is its own raw and has no given hash.
_SELF = object()
_SELF_EACH, _NONE_EACH = itertools.repeat(_SELF), itertools.repeat(None)


def _values_getter(columns: tuple[str, ...]):
    """A row's values of `columns` as a tuple (missing ones None), by one itemgetter when the
    row has them all."""
    if len(columns) < 2:   # (itemgetter of one column gives the value, not a tuple)
        return lambda row: tuple(row.get(c) for c in columns)
    getter = itemgetter(*columns)

    def values(row: dict) -> tuple:
        try:
            return getter(row)
        except KeyError:   # a row lacking a column (a hand-made one)
            return tuple(row.get(c) for c in columns)
    return values


@functools.lru_cache(maxsize=None)
def plan_for(record_type: RecordType) -> UpsertPlan:
    return UpsertPlan(record_type)


__all__ = ["UpsertPlan", "plan_for", "extra_json", "json_default", "INPUT_HASH", "GIVEN_HASH", "PARAMS", "NEW", "UPDATED",
           "UNCHANGED"]
