"""The web view's side of record groups (basecrawler/store/groups.py: the same recall from two
publishers is one group, each keeping its own record). No Datasette hooks here
(plugins/basecrawler_groups.py hides the copies, plugins/basecrawler_cards.py shows a group).

- A type's table shows each group once (its primary record) like `basecrawler search`;
  `?_bc_copies=1` shows every publisher's copy (`--all-copies`).
- A row says how many other publishers carry it; a card lists the group's other records
  (publisher, number, a link to its card) and a copy's card links back to the primary.

The store's own helpers (`copies_of`, `primary_of`) are used as they are, over the page's
read connection (`_Reader` gives them the `query` they call). The pages read SQLite (a
PostgreSQL store is browsed as a snapshot): the statements here are SQLITE's.
"""
from __future__ import annotations

from basecrawler.reading.facetcounts import shown_table
from basecrawler.recordtypes import RecordType
from basecrawler.store import groups
from basecrawler.store.engines.dialect import SQLITE

COPIES_ARG = "_bc_copies"   # ?_bc_copies=1: every publisher's copy (Datasette ignores unknown _ arguments)
SHOWN = ("1", "on", "true", "yes")


class _Reader:
    """`store.query` over a sqlite3 connection: rows as dicts (the statement is the caller's,
    spelled for SQLite: `dialect_of(reader)` is SQLITE)."""

    def __init__(self, conn):
        self.conn = conn

    def query(self, statement: str, params=()) -> list[dict]:
        cursor = self.conn.execute(statement, list(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]


def shows_copies(args) -> bool:
    """Whether the page asked for every copy (`?_bc_copies=1`)."""
    return (args.get(COPIES_ARG) or "").lower() in SHOWN


def hides_copies(conn, record_type: RecordType, args) -> bool:
    """A page leaves other publishers' copies out unless it asks for them, when the type has
    any (a store without groups keeps its plain whole-table queries)."""
    return not shows_copies(args) and groups.has_copies(conn, record_type)


def copies_condition(record_type: RecordType, table: str) -> str:
    """The WHERE condition of a page of `table` that shows each group once."""
    return groups.hidden_copies_condition(record_type, alias=f"[{table}]")


def shown_source(record_type: RecordType, table: str) -> str:
    """The records of `table` a page that shows each group once shows: its facets count them
    straight, as the whole table's are counted (reading/facetcounts.py `shown_table`)."""
    return shown_table(table)


def _number(record_type: RecordType, row: dict) -> str:
    """A record's own number as its card's number line writes it (the key without the country)."""
    parts = [str(row.get(k)) for k in record_type.key if k != "country" and row.get(k) not in (None, "")]
    return " · ".join(parts) or str(row.get("id"))


def group_of(conn, record_type: RecordType, row_id: int) -> dict:
    """{"primary": the record this one is a copy of, or None; "others": every other record of
    its group}; each {"id", "source", "number"}. Empty for a record in no group."""
    if not groups.has_copies(conn, record_type):
        return {"primary": None, "others": []}
    reader = _Reader(conn)
    primary = groups.primary_of(reader, record_type, row_id)
    head = primary["id"] if primary else row_id
    members = groups.copies_of(reader, record_type, [head]).get(head, [])
    ids = [m["id"] for m in ([primary] if primary else []) + members if m["id"] != row_id]
    if not ids:
        return {"primary": None, "others": []}
    columns = ", ".join(f"[{k}]" for k in dict.fromkeys(("id", "source", *record_type.key)))
    rows = {r["id"]: r for r in reader.query(SQLITE.query(
        f"SELECT {columns} FROM [{record_type.table}] WHERE id IN ({SQLITE.params(len(ids))})"), ids)}
    described = [{"id": i, "source": rows[i]["source"], "number": _number(record_type, rows[i])}
                 for i in ids if i in rows]
    first = next((d for d in described if primary and d["id"] == primary["id"]), None)
    return {"primary": first, "others": described}


def other_publishers(conn, record_type: RecordType, row_id: int) -> int:
    """How many other publishers carry the recall of this row (0 outside a group): one query
    over the group table's two indexes (a table page asks it for each of its rows)."""
    if not groups.has_copies(conn, record_type):
        return 0
    table = f'"{groups.TABLE}"'
    counted = SQLITE.query(
        "SELECT count(DISTINCT source) FROM ("
        f"SELECT member_source AS source FROM {table} WHERE record_type = :t AND primary_id = :id "
        f"UNION ALL SELECT primary_source FROM {table} WHERE record_type = :t AND member_id = :id "
        f"UNION ALL SELECT o.member_source FROM {table} g JOIN {table} o ON o.record_type = g.record_type "
        "AND o.primary_id = g.primary_id AND o.member_id != g.member_id "
        "WHERE g.record_type = :t AND g.member_id = :id)")
    return conn.execute(counted, {"t": record_type.name, "id": int(row_id)}).fetchone()[0]


__all__ = ["COPIES_ARG", "shows_copies", "hides_copies", "copies_condition", "shown_source", "group_of", "other_publishers"]
