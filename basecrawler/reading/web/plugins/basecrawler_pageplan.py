"""Datasette plugin: a filtered table page in the default order reads along the order's index
when many records hold the filter's value (rules and reasons: basecrawler/reading/web/pageplan.py).

Datasette builds the page's SQL itself; `Database.execute` is wrapped so that SQL of exactly the
page's shape is decided on (one bounded count through the filter's index) and, when the walk
is cheaper, read with `INDEXED BY` the sort column's index. Anything else passes unchanged.
"""
from __future__ import annotations

from datasette import hookimpl
from datasette.database import Database

from basecrawler.reading.web import limits, pageplan

_sort_index: dict[str, dict[str, tuple[str, str]]] = {}   # database → table → (sort column, its index)
_indexed: dict[str, dict[str, frozenset[str]]] = {}        # database → table → indexed columns
_rows: dict[str, dict[str, int]] = {}                      # database → table → its last rowid
_datasette_execute = Database.execute


async def _planned_execute(self, sql, params=None, *args, **kwargs):
    tables = _sort_index.get(self.name)
    plan = pageplan.filtered_page(sql, tables, _indexed.get(self.name, {})) if tables and isinstance(sql, str) else None
    if plan is not None and isinstance(params, dict):
        enough = pageplan.walk_limit(_rows.get(self.name, {}).get(plan["table"], 0), plan["limit"])
        counting = pageplan.decision_sql(plan, enough)

        def matching(conn):
            with limits.deadline(conn, 0.2):
                return conn.execute(counting, params).fetchone()[0]
        try:
            many = await self.execute_fn(matching) >= enough
        except Exception:   # stopped or refused: SQLite's own plan, as without this plugin
            many = False
        if many:
            sql = pageplan.walked(sql, plan)
    return await _datasette_execute(self, sql, params, *args, **kwargs)


Database.execute = _planned_execute


@hookimpl
def startup(datasette):
    async def collect():
        metadata = datasette.metadata() or {}
        for name, database in datasette.databases.items():
            if name == "_internal":
                continue
            tables = (metadata.get("databases") or {}).get(name, {}).get("tables") or {}
            sorts = {t: c["sort_desc"] for t, c in tables.items() if isinstance(c, dict) and c.get("sort_desc")}

            def read(conn, sorts=sorts):
                indexes = pageplan.sort_indexes(conn, sorts)
                rows = {t: conn.execute(f"SELECT max(rowid) FROM [{t}]").fetchone()[0] or 0 for t in indexes}
                return indexes, limits.indexed_columns(conn), rows
            try:
                _sort_index[name], _indexed[name], _rows[name] = await database.execute_fn(read)
            except Exception:   # a table this plan cannot read: Datasette's own plans
                continue
    return collect
