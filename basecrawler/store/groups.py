"""The `record_groups` table: which stored record is another publisher's copy of which.

A source that republishes other publishers' recalls (the OECD portal republishes the
Government of Canada's, Korea's KATS', CPSC's) declares it (`pipeline/linking.Republishes`);
after a run the framework links each of its records to the original publisher's record with
the same number (`relink`). Both records stay as they were published — nothing is merged or
overwritten — and readers show the group once, the original first, unless asked for every
copy (`--all-copies`). Rows name records by their `id`, which `migrate` copies as it is.

Readers hide copies by a column of the record itself, `is_copy` (1 on a copy, NULL otherwise),
which `relink` sets from this table in the same transaction (`flag_copies`), with indexes that
hold it beside each column a count walks (`copy_index_columns`): a copy test on each row read
was a lookup in this table, several times what a count of a million records costs without one
(bench/README.md, #31). The indexes are made when a type first has copies, so a type nobody
republishes pays nothing for them.

The SQL here is plain enough for both engines (double-quoted declared identifiers, `?`
parameters that the PostgreSQL adapter binds).
"""
from __future__ import annotations

from typing import Iterable

from basecrawler.recordtypes import RecordType
from basecrawler.recordtypes.tables import index_name

TABLE = "record_groups"
FLAG = "is_copy"   # the record's own column (recordtypes/declaration.py BOOKKEEPING_COLUMNS)


def relink(store, record_type: RecordType, *, member_source: str, primary_source: str, country: str,
           primary_field: str) -> int:
    """Link every record of `member_source` in `country` whose `same_as_field` equals the
    `primary_field` of a `primary_source` record of the same country; links of that pair made
    before are replaced (a record that changed its number is linked anew). Returns the links."""
    member_field = record_type.same_as_field
    table = record_type.table
    params = (record_type.name, member_source, primary_source)

    def op(db):
        db.execute(f'DELETE FROM "{TABLE}" WHERE record_type = ? AND member_source = ? AND primary_source = ?',
                   params)
        db.execute(
            f'INSERT INTO "{TABLE}" (record_type, member_id, member_source, primary_id, primary_source) '
            f'SELECT ?, m.id, m.source, MIN(p.id), p.source FROM "{table}" m '
            f'JOIN "{table}" p ON p.source = ? AND p.country = m.country AND p."{primary_field}" = m."{member_field}" '
            f'WHERE m.source = ? AND m.country = ? AND m."{member_field}" IS NOT NULL '
            f'GROUP BY m.id, m.source, p.source',
            (record_type.name, primary_source, member_source, country))
        flag_copies(db, record_type)
        return db.execute(f'SELECT COUNT(*) FROM "{TABLE}" WHERE record_type = ? AND member_source = ? '
                          f'AND primary_source = ?', params).fetchone()[0]
    return store.write(op)


def copy_index_columns(record_type: RecordType) -> list[tuple[str, ...]]:
    """The columns of the indexes a type with copies is read through: the flag alone (a count of
    everything), and each column a count of one value walks (the source, every single-valued
    facet) with the flag beside it, so such a count reads the index alone, as without groups."""
    fields = dict.fromkeys(["source", *(f.field for f in record_type.facets if not f.multi)])
    return [(FLAG,), *((field, FLAG) for field in fields)]


def flag_copies(db, record_type: RecordType) -> int:
    """Make the type's `is_copy` column say what the group table says (inside the caller's write
    transaction: readers never see one without the other), and its indexes exist. Only rows whose
    flag changes are written. Returns the records flagged as copies."""
    table = record_type.table
    for columns in copy_index_columns(record_type):
        cols = ", ".join(f'"{c}"' for c in columns)
        db.execute(f'CREATE INDEX IF NOT EXISTS "{index_name(record_type, columns)}" ON "{table}" ({cols})')
    members = f'SELECT member_id FROM "{TABLE}" WHERE record_type = ?'
    db.execute(f'UPDATE "{table}" SET "{FLAG}" = NULL WHERE "{FLAG}" IS NOT NULL AND id NOT IN ({members})',
               (record_type.name,))
    db.execute(f'UPDATE "{table}" SET "{FLAG}" = 1 WHERE id IN ({members}) AND "{FLAG}" IS NULL', (record_type.name,))
    return db.execute(f'SELECT COUNT(*) FROM "{table}" WHERE "{FLAG}" IS NOT NULL').fetchone()[0]


def has_copies(conn, record_type: RecordType) -> bool:
    """Whether any record of this type is linked as a copy (then readers hide the copies)."""
    try:
        return conn.execute(f'SELECT 1 FROM "{TABLE}" WHERE record_type = ? LIMIT 1',
                            (record_type.name,)).fetchone() is not None
    except Exception as exc:   # a store made before the table existed, read without migrating
        if "record_groups" in str(exc):
            return False
        raise


def hidden_copies_condition(record_type: RecordType, alias: str = "r") -> str:
    """A WHERE condition keeping only records that are not another publisher's copy: a test of
    the row's own flag, which the indexes of `copy_index_columns` hold too."""
    return f'{alias}."{FLAG}" IS NULL'


def copies_of(store, record_type: RecordType, primary_ids: Iterable[int]) -> dict[int, list[dict]]:
    """{primary id: [{source, id}, …]}: who else published each of these records."""
    ids = list(dict.fromkeys(int(i) for i in primary_ids))
    found: dict[int, list[dict]] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows = store.query(f'SELECT primary_id, member_id, member_source FROM "{TABLE}" WHERE record_type = ? '
                           f'AND primary_id IN ({",".join("?" * len(chunk))}) ORDER BY member_source, member_id',
                           [record_type.name, *chunk])
        for row in rows:
            found.setdefault(row["primary_id"], []).append({"source": row["member_source"], "id": row["member_id"]})
    return found


def primary_of(store, record_type: RecordType, member_id: int) -> dict | None:
    """The original publisher's record a copy is linked to: {source, id}, or None."""
    rows = store.query(f'SELECT primary_id, primary_source FROM "{TABLE}" WHERE record_type = ? AND member_id = ?',
                       [record_type.name, int(member_id)])
    return {"source": rows[0]["primary_source"], "id": rows[0]["primary_id"]} if rows else None


def group_counts(store) -> dict[str, int]:
    """{record type: records shown inside another publisher's group} (for status)."""
    rows = store.query(f'SELECT record_type, COUNT(*) AS n FROM "{TABLE}" GROUP BY record_type')
    return {row["record_type"]: row["n"] for row in rows}


__all__ = ["TABLE", "FLAG", "relink", "flag_copies", "copy_index_columns", "has_copies", "hidden_copies_condition", "copies_of", "primary_of", "group_counts"]
