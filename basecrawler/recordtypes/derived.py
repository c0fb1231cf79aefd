"""Refilling a type's derived columns (`RecordType.derived`) for rows already stored: after the
rules behind them changed (a maker added to the vehicle_recall name table), or in the
migration that added the column. SQLite; the store writes derived columns with every upsert.
"""
from __future__ import annotations

from basecrawler.recordtypes.declaration import RecordType
from basecrawler.store.engines.dialect import SQLITE

query, write = SQLITE.query, SQLITE.write


def refill_derived(conn, record_type: RecordType, columns: tuple[str, ...] | None = None) -> int:
    """Recompute `columns` (default: every derived column) of every row of the type's table
    from the row itself; returns the number of rows where any of them changed.

    One transaction (a savepoint, so it nests inside a migration). The full-text index's
    AFTER UPDATE trigger is dropped for its duration and put back as it was: it would rewrite
    every row's index entry although derived columns are not indexed (56 s instead of ~1 s for
    30,000 rows), and inside the transaction no other connection can see it missing.
    """
    if record_type.derived is None:
        return 0
    columns = tuple(columns or record_type.derived_columns)
    table = record_type.table
    conn.execute(write("SAVEPOINT refill_derived"))
    try:
        suspended = conn.execute(query(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ? "
            "AND sql LIKE ? AND sql LIKE ?"), [table, f"%AFTER UPDATE%ON {table}%", f"%{table}_fts%"]).fetchall()
        for name, _ in suspended:
            conn.execute(write(f"DROP TRIGGER {SQLITE.quote(name)}"))
        cursor = conn.execute(query(f"SELECT * FROM {SQLITE.quote(table)}"))
        names = [d[0] for d in cursor.description]
        updates = []
        for values in cursor.fetchall():
            row = dict(zip(names, values))
            fresh = record_type.derived(row)
            if any(fresh.get(c) != row.get(c) for c in columns):
                updates.append([*(fresh.get(c) for c in columns), row["id"]])
        assignments = ", ".join(f"{SQLITE.quote(c)} = ?" for c in columns)
        update = write(f"UPDATE {SQLITE.quote(table)} SET {assignments} WHERE id = ?")
        for start in range(0, len(updates), 1000):
            conn.executemany(update, updates[start:start + 1000])
        for _, sql in suspended:
            conn.execute(write(sql))
        conn.execute(write("RELEASE refill_derived"))
    except BaseException:
        conn.execute(write("ROLLBACK TO refill_derived"))
        conn.execute(write("RELEASE refill_derived"))
        raise
    return len(updates)


__all__ = ["refill_derived"]
