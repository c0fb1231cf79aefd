"""The `record_groups` table: which stored record is another publisher's copy of which.

A source that republishes other publishers' recalls (the OECD portal republishes the
Government of Canada's, Korea's KATS', CPSC's) declares it (`pipeline/linking.Republishes`);
after a run the framework links each of its records to the original publisher's record with
the same number (`relink`). Both records stay as they were published — nothing is merged or
overwritten — and readers show the group once, the original first, unless asked for every
copy (`--all-copies`). Rows name records by their `id`, which `migrate` copies as it is.

Readers hide copies by a column of the record itself, `is_copy` (1 on a copy, NULL otherwise),
which `relink` sets from this table in the same transaction (`flag_copies`). A copy test on each
row read was a lookup in this table, several times what a count of a million records costs
without one (bench/README.md, #31). The flag's indexes (`copy_indexes`) are partial: the shown
records alone (`WHERE is_copy IS NULL`), in the orders a search reads them — storage order, by
each column a count walks, newest first — so a query that says `is_copy IS NULL` and walks one
of them has no copy test left at all (SQLite drops a term the index's own WHERE implies, and
the flag is no leading column it could seek on, entry by entry), and reads no copy — the web
view's grouped table page counts its facets from them as the whole table's are counted; and
the copies alone (`flag_copies` finds them by it). They are made when a type first has
copies, so a type nobody republishes pays nothing for them.

Every statement is spelled for the engine it runs on (store/engines/dialect.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from basecrawler.recordtypes import RecordType
from basecrawler.recordtypes.tables import index_name
from basecrawler.recordtypes.statistics import analyse_indexes
from basecrawler.store.engines.dialect import dialect_of

TABLE = "record_groups"
FLAG = "is_copy"   # the record's own column (recordtypes/declaration.py BOOKKEEPING_COLUMNS)
SHOWN = f'"{FLAG}" IS NULL'   # the records readers show: the WHERE of the shown records' indexes
COPIES = f'"{FLAG}" IS NOT NULL'


def relink(store, record_type: RecordType, *, member_source: str, primary_source: str, country: str,
           primary_field: str) -> int:
    """Link every record of `member_source` in `country` whose `same_as_field` equals the
    `primary_field` of a `primary_source` record of the same country; links of that pair made
    before are replaced (a record that changed its number is linked anew). Returns the links."""
    member_field = record_type.same_as_field
    table = record_type.table
    params = (record_type.name, member_source, primary_source)

    def op(db):
        d = dialect_of(db)
        pair = f"record_type = {d.p} AND member_source = {d.p} AND primary_source = {d.p}"
        db.execute(d.write(f'DELETE FROM "{TABLE}" WHERE {pair}'), params)
        db.execute(d.write(
            f'INSERT INTO "{TABLE}" (record_type, member_id, member_source, primary_id, primary_source) '
            f'SELECT {d.p}, m.id, m.source, MIN(p.id), p.source FROM "{table}" m '
            f'JOIN "{table}" p ON p.source = {d.p} AND p.country = m.country '
            f'AND p."{primary_field}" = m."{member_field}" '
            f'WHERE m.source = {d.p} AND m.country = {d.p} AND m."{member_field}" IS NOT NULL '
            f'GROUP BY m.id, m.source, p.source'),
            (record_type.name, primary_source, member_source, country))
        flag_copies(db, record_type)
        return db.execute(d.query(f'SELECT COUNT(*) FROM "{TABLE}" WHERE {pair}'), params).fetchone()[0]
    return store.write(op)


@dataclass(frozen=True)
class CopyIndex:
    name: str
    columns: tuple[str, ...]
    where: str


def copy_indexes(record_type: RecordType) -> list[CopyIndex]:
    """The indexes of a type with copies. The shown records (`SHOWN`): by id (a count of
    everything: storage order), by the source and by each single-valued facet (a count of one
    value), each with the flag as a trailing column after the id, so the index covers the test
    and the flag cannot be sought on (a seek compares every entry with the flag: the term the
    index's WHERE implies is dropped only when nothing else reads it); and newest first (a
    page), by the type's date and id. The copies (`COPIES`): few."""
    fields = dict.fromkeys(["source", *(f.field for f in record_type.facets if not f.multi)])
    shown = [("id", FLAG), *((field, "id", FLAG) for field in fields)]
    if record_type.date_field is not None:
        shown.append((record_type.date_field, "id"))
    indexes = [CopyIndex(index_name(record_type, ("shown", *columns)), columns, SHOWN) for columns in shown]
    return [*indexes, CopyIndex(index_name(record_type, ("copies", FLAG)), (FLAG,), COPIES)]


def _replaced_indexes(record_type: RecordType) -> list[str]:
    """The flag's indexes of an older version (whole, flag-led): a planner given both kept
    seeking on the flag."""
    fields = dict.fromkeys(["source", *(f.field for f in record_type.facets if not f.multi)])
    return [index_name(record_type, (FLAG,)), *(index_name(record_type, (field, FLAG)) for field in fields)]


def _index_exists(db, name: str) -> bool:
    d = dialect_of(db)
    if d.name == "postgresql":
        return db.execute(d.query(f"SELECT to_regclass({d.p})"), [d.quote(name)]).fetchone()[0] is not None
    return db.execute(d.query(f"SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = {d.p}"),
                      [name]).fetchone() is not None


def ensure_copy_indexes(db, record_type: RecordType) -> list[str]:
    """Make the type's flag indexes (`copy_indexes`) and drop those they replace. Returns the
    indexes made."""
    d = dialect_of(db)
    table = record_type.table
    for name in _replaced_indexes(record_type):
        db.execute(d.write(f"DROP INDEX IF EXISTS {d.quote(name)}"))
    made = []
    for index in copy_indexes(record_type):
        if _index_exists(db, index.name):
            continue
        columns = ", ".join(d.quote(c) for c in index.columns)
        db.execute(d.write(f"CREATE INDEX IF NOT EXISTS {d.quote(index.name)} ON {d.quote(table)} ({columns}) "
                           f"WHERE {index.where}"))
        made.append(index.name)
    if made and d.name == "sqlite":   # (PostgreSQL's autovacuum measures its own)
        analyse_indexes(db, table, set(made))
    return made


def flag_copies(db, record_type: RecordType) -> int:
    """Make the type's `is_copy` column say what the group table says (inside the caller's write
    transaction: readers never see one without the other), and its indexes exist. Only rows whose
    flag changes are written. Returns the records flagged as copies."""
    d = dialect_of(db)
    table = d.quote(record_type.table)
    ensure_copy_indexes(db, record_type)
    members = f'SELECT member_id FROM "{TABLE}" WHERE record_type = {d.p}'
    db.execute(d.write(f'UPDATE {table} SET "{FLAG}" = NULL WHERE {COPIES} AND id NOT IN ({members})'),
               (record_type.name,))
    db.execute(d.write(f'UPDATE {table} SET "{FLAG}" = 1 WHERE id IN ({members}) AND {SHOWN}'), (record_type.name,))
    return db.execute(d.query(f"SELECT COUNT(*) FROM {table} WHERE {COPIES}")).fetchone()[0]


def has_copies(conn, record_type: RecordType) -> bool:
    """Whether any record of this type is linked as a copy (then readers hide the copies)."""
    d = dialect_of(conn)
    try:
        return conn.execute(d.query(f'SELECT 1 FROM "{TABLE}" WHERE record_type = {d.p} LIMIT 1'),
                            (record_type.name,)).fetchone() is not None
    except Exception as exc:   # a store made before the table existed, read without migrating
        if "record_groups" in str(exc):
            return False
        raise


def hidden_copies_condition(record_type: RecordType, alias: str = "r") -> str:
    """A WHERE condition keeping only records that are not another publisher's copy: a test of
    the row's own flag, written as the shown records' indexes say it (`SHOWN`), so a query
    walking one of them drops it."""
    return f"{alias}.{SHOWN}"


def copies_of(store, record_type: RecordType, primary_ids: Iterable[int]) -> dict[int, list[dict]]:
    """{primary id: [{source, id}, …]}: who else published each of these records."""
    d = dialect_of(store)
    ids = list(dict.fromkeys(int(i) for i in primary_ids))
    found: dict[int, list[dict]] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows = store.query(d.query(f'SELECT primary_id, member_id, member_source FROM "{TABLE}" '
                                   f'WHERE record_type = {d.p} AND primary_id IN ({d.params(len(chunk))}) '
                                   'ORDER BY member_source, member_id'), [record_type.name, *chunk])
        for row in rows:
            found.setdefault(row["primary_id"], []).append({"source": row["member_source"], "id": row["member_id"]})
    return found


def primary_of(store, record_type: RecordType, member_id: int) -> dict | None:
    """The original publisher's record a copy is linked to: {source, id}, or None."""
    d = dialect_of(store)
    rows = store.query(d.query(f'SELECT primary_id, primary_source FROM "{TABLE}" WHERE record_type = {d.p} '
                               f'AND member_id = {d.p}'), [record_type.name, int(member_id)])
    return {"source": rows[0]["primary_source"], "id": rows[0]["primary_id"]} if rows else None


def group_counts(store) -> dict[str, int]:
    """{record type: records shown inside another publisher's group} (for status)."""
    d = dialect_of(store)
    rows = store.query(d.query(f'SELECT record_type, COUNT(*) AS n FROM "{TABLE}" GROUP BY record_type'))
    return {row["record_type"]: row["n"] for row in rows}


__all__ = ["TABLE", "FLAG", "SHOWN", "COPIES", "CopyIndex", "relink", "flag_copies", "copy_indexes",
           "ensure_copy_indexes", "has_copies", "hidden_copies_condition", "copies_of", "primary_of", "group_counts"]
