"""The `record_groups` table: which stored record is another publisher's copy of which.

A source that republishes other publishers' recalls (the OECD portal republishes the
Government of Canada's, Korea's KATS', CPSC's) declares it (`pipeline/linking.Republishes`);
after a run the framework links each of its records to the original publisher's record with
the same number (`relink`). Both records stay as they were published — nothing is merged or
overwritten — and readers show the group once, the original first, unless asked for every
copy (`--all-copies`). Rows name records by their `id`, which `migrate` copies as it is.

The SQL here is plain enough for both engines (double-quoted declared identifiers, `?`
parameters that the PostgreSQL adapter binds).
"""
from __future__ import annotations

from typing import Iterable

from basecrawler.recordtypes import RecordType

TABLE = "record_groups"


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
        return db.execute(f'SELECT COUNT(*) FROM "{TABLE}" WHERE record_type = ? AND member_source = ? '
                          f'AND primary_source = ?', params).fetchone()[0]
    return store.write(op)


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
    """A WHERE condition keeping only records that are not another publisher's copy."""
    return (f'NOT EXISTS (SELECT 1 FROM "{TABLE}" g WHERE g.member_id = {alias}.id '
            f"AND g.record_type = '{record_type.name}')")


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


__all__ = ["TABLE", "relink", "has_copies", "hidden_copies_condition", "copies_of", "primary_of", "group_counts"]
