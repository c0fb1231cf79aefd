"""Counts `status` shows, per source, each read from the partial index made for it
(recordtypes/tables.py `partial_read_indexes`) instead of counted over the table (#23.5).

The answers are those of `store.lookup.translation_counts` (store/lookup.py): records of every translated type per
state — `pending` (no translation yet), else the status the worker set, `translated` when it
set none.
"""
from __future__ import annotations

from basecrawler.recordtypes import record_types
from basecrawler.store.engines.dialect import dialect_of


def translation_by_source(conn) -> dict[str, dict[str, int]]:
    """Source → state → records, over every type that declares translated fields."""
    found: dict[str, dict[str, int]] = {}
    d = dialect_of(conn)

    def add(source: str, state: str, n: int) -> None:
        states = found.setdefault(source, {})
        states[state] = states.get(state, 0) + n

    for record_type in record_types().values():
        if not record_type.translated:
            continue
        table = d.quote(record_type.table)
        for source, n in conn.execute(d.query(f"SELECT source, COUNT(*) FROM {table} WHERE translated_at IS NULL "
                                              "GROUP BY source")).fetchall():
            add(source, "pending", n)
        for source, status, n in conn.execute(d.query(
                f"SELECT source, translation_status, COUNT(*) FROM {table} WHERE translated_at IS NOT NULL "
                "GROUP BY source, translation_status")).fetchall():
            add(source, status or "translated", n)
    return {source: dict(sorted(states.items())) for source, states in found.items()}


def copies_by_type_and_source(conn) -> dict[str, dict[str, int]]:
    """{type: {source: records linked as another publisher's copy}} (store/groups.py): a
    republished recall is one group, counted once, under its original publisher."""
    from basecrawler.store import groups

    found: dict[str, dict[str, int]] = {}
    for record_type, source, n in conn.execute(dialect_of(conn).query(
            f'SELECT record_type, member_source, COUNT(DISTINCT member_id) FROM "{groups.TABLE}" '
            'GROUP BY record_type, member_source')).fetchall():
        found.setdefault(record_type, {})[source] = n
    return found


__all__ = ["translation_by_source", "copies_by_type_and_source"]
