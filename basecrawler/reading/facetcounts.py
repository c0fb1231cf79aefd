"""A type's facet counts over its whole table, the ones the web view's table page shows, and
the data version they were counted at (#23.5).

The table page of a million records shows a count per value of every declared facet and per
month. Those change only when a run stores records, so the web view keeps them per data
version (`data_marker`), and a run that changed data counts them as it ends
(`store_whole_table_counts`, called by the pipeline) into `meta`, where the first visitor's page
finds them ready instead of counting them (1–2 s at a million records, bench/README.md).

SQLite only (a PostgreSQL store is browsed as a SQLite snapshot): the statements are
SQLITE's (engines/dialect.py). The SQL here is the web facets' own
(basecrawler/reading/web/plugins/basecrawler_facets.py builds its queries with these
functions), so counts read from `meta` are the ones the page would have counted. The
month facet over a whole table is counted from the date index, less the months of the
records whose date is unknown (a partial index holds those few): the straight query read
every row for its `date_unknown` flag (1.3 s at a million). A type with other publishers'
copies keeps the same queries over its shown records too (`shown_table`), the table page a
visitor sees by default.
"""
from __future__ import annotations

import json
import logging
import time

from basecrawler.recordtypes import RecordType
from basecrawler.recordtypes.declaration import DATE_UNKNOWN
from basecrawler.store import groups
from basecrawler.store.engines.dialect import SQLITE

log = logging.getLogger(__name__)

SENTINEL_FLOOR = "1970-01-01"    # a sentinel date (vehicle recalls) is never a month
RUNNING_TTL_S = 60               # while a run is going, the data version changes every minute
META_PREFIX = "facet_counts:"    # meta key per table: {"marker": [...], "rows": {sql: rows}}


def whole_table(table: str) -> str:
    """The facet queries' source for a page showing the whole table, whatever its columns."""
    return f"SELECT * FROM [{table}]"


def shown_table(table: str) -> str:
    """The source of a page showing the whole table once per group (other publishers' copies
    left out, store/groups.py). Its facets are counted straight from the shown records' partial
    indexes, which cover a single-valued facet's count as the whole table's own indexes do; the
    whole table's counts less the copies' read each copy's wide row, once per facet, seconds at
    a million (bench/README.md, w13-groups)."""
    return f"SELECT * FROM [{table}] WHERE {groups.SHOWN}"


def values_sql(column: str, multi: bool, source: str, *, filtered: bool = False) -> str:
    """Each stored value of `column` in `source` with its record count (a JSON list's elements
    one by one for a multi-valued field). `filtered`: `source` narrows the table by an index
    (a page's filter); the `+` keeps SQLite from grouping along the column's own index, which
    tests the filter on every row of the table (seconds at a million, bench/README.md) instead
    of reading the filtered rows and grouping them."""
    if multi:
        return (f"SELECT element.value AS value, count(*) AS count FROM ({source}) AS t, json_each("
                f"CASE WHEN json_valid(t.[{column}]) THEN t.[{column}] ELSE json_array(t.[{column}]) END) AS element "
                f"WHERE t.[{column}] IS NOT NULL AND element.value IS NOT NULL GROUP BY element.value")
    return f"SELECT [{column}] AS value, count(*) AS count FROM ({source}) GROUP BY {'+' if filtered else ''}[{column}]"


def months_sql(column: str, source: str, *, known_only: bool, undated_only: bool = False,
               filtered: bool = False) -> str:
    """Records per month (YYYY-MM) of `column` in `source`, newest first: with `known_only`
    the records whose date is known; with `undated_only` those whose date is unknown.
    `filtered`: as in `values_sql` (the date index would be read whole, each row tested)."""
    condition, date = "", f"+[{column}]" if filtered else f"[{column}]"
    if known_only:
        condition = f" AND COALESCE([{DATE_UNKNOWN}], 0) = 0"
    if undated_only:
        # `+` keeps the date index out, so the few undated records come from their partial index.
        condition, date = f" AND [{DATE_UNKNOWN}] = 1", f"+[{column}]"
    return (f"SELECT substr([{column}], 1, 7) AS value, count(*) AS count FROM ({source}) "
            f"WHERE {date} IS NOT NULL AND {date} > '{SENTINEL_FLOOR}'{condition} "
            f"GROUP BY value ORDER BY value DESC")


def unknown_sql(source: str) -> str:
    return f"SELECT count(*) AS n FROM ({source}) WHERE [{DATE_UNKNOWN}] = 1"


def whole_table_queries(record_type: RecordType, source: str | None = None) -> list[str]:
    """Every query the table page's facets run over the whole table (or over `source`: the
    whole table once per group, `shown_table`)."""
    source = source or whole_table(record_type.table)
    queries = [values_sql(f.field, f.multi, source) for f in record_type.facets]
    if record_type.date_field:
        if record_type.date_optional:
            # `date_unknown` is a 0/1 flag: all months less the undated records' months.
            queries += [months_sql(record_type.date_field, source, known_only=False),
                        months_sql(record_type.date_field, source, known_only=False, undated_only=True),
                        unknown_sql(source)]
        else:
            queries.append(months_sql(record_type.date_field, source, known_only=False))
    return queries


def known_months(all_rows: list[dict], undated_rows: list[dict]) -> list[dict]:
    """Month rows of the records with a known date: every record's months less the undated ones'."""
    undated = {row["value"]: row["count"] for row in undated_rows}
    rows = [{"value": row["value"], "count": row["count"] - undated.get(row["value"], 0)} for row in all_rows]
    return [row for row in rows if row["count"] > 0]


def data_marker(conn, table: str, now: float | None = None) -> list:
    """Changes whenever a run may have changed the table's counts: a run started or finished,
    a record added; the current minute while a run is going (SQLite or the snapshot of one)."""
    now = time.time() if now is None else now
    try:
        run_id, finished, running = conn.execute(SQLITE.query(
            "SELECT max(id), max(finished_at), sum(status = 'running') FROM crawl_runs")).fetchone()
        marker = [run_id, finished, int(now // RUNNING_TTL_S) if running else None]
    except Exception:   # a database without the runs table: the minute
        marker = [int(now // RUNNING_TTL_S)]
    top = conn.execute(SQLITE.query(f"SELECT max(rowid) FROM [{table}]")).fetchone()[0]
    return [*marker, top]


def _rows(conn, sql: str) -> list[dict]:
    cursor = conn.execute(SQLITE.query(sql))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def count_whole_table(conn, record_type: RecordType) -> dict:
    """{"marker": the data version, "rows": {query: its rows}} for every whole-table facet query,
    and when the type has copies every query of the table shown once per group too (the page a
    visitor sees by default: its first visitor then waits for none of them either)."""
    marker = data_marker(conn, record_type.table)
    queries = whole_table_queries(record_type)
    if groups.has_copies(conn, record_type):
        queries += whole_table_queries(record_type, shown_table(record_type.table))
    return {"marker": marker, "rows": {sql: _rows(conn, sql) for sql in queries}}


def stored_counts(conn, table: str, marker: list) -> dict[str, list[dict]] | None:
    """The counts a run stored for `table` at data version `marker` (None: none, or older)."""
    try:
        found = conn.execute(SQLITE.query("SELECT value FROM meta WHERE key = ?"), [META_PREFIX + table]).fetchone()
    except Exception:   # a database without meta
        return None
    if not found:
        return None
    try:
        stored = json.loads(found[0])
    except ValueError:
        return None
    return stored["rows"] if stored.get("marker") == list(marker) else None


def store_whole_table_counts(store) -> None:
    """Count every record type's whole-table facets and keep them in `meta` for the web view's
    first visitor (the pipeline calls this when a run that stored records has ended, after its
    run row is closed). SQLite only: on PostgreSQL `browse` serves a snapshot, which counts
    its own when it is made (browse.snapshot_to_sqlite). Best effort: a failure costs the
    first visitor time, never the run."""
    from basecrawler.recordtypes import record_types

    if getattr(store.db.conn, "dialect", "sqlite") != "sqlite":
        return
    write_counts(store.db.conn, store.set_meta, record_types().values())


def keep_counts_in_snapshot(path) -> None:
    """The same counts, kept in a SQLite snapshot of a PostgreSQL store before `browse` serves it."""
    import sqlite3

    from basecrawler.recordtypes import record_types

    conn = sqlite3.connect(path)
    try:
        def set_meta(key: str, value: str) -> None:
            conn.execute(SQLITE.write("INSERT OR REPLACE INTO meta (key, value, updated_at) "
                                      "VALUES (?, ?, datetime('now'))"), [key, value])
        write_counts(conn, set_meta, record_types().values())
        conn.commit()
    finally:
        conn.close()


def write_counts(conn, set_meta, types) -> None:
    present = {row[0] for row in conn.execute(SQLITE.query("SELECT name FROM sqlite_master WHERE type = 'table'"))}
    for record_type in types:
        if record_type.table not in present:
            continue
        started = time.perf_counter()
        try:
            counted = count_whole_table(conn, record_type)
            set_meta(META_PREFIX + record_type.table, json.dumps(counted, ensure_ascii=False, default=str))
        except Exception as exc:   # noqa: BLE001 — a cache: the web view counts for itself
            log.warning("facet counts of %s not kept for the web view: %s", record_type.table, exc)
            continue
        log.debug("facet counts of %s kept in %.2f s", record_type.table, time.perf_counter() - started)


__all__ = ["whole_table", "shown_table", "values_sql", "months_sql", "unknown_sql", "whole_table_queries", "known_months",
           "data_marker", "count_whole_table", "stored_counts", "store_whole_table_counts", "write_counts",
           "keep_counts_in_snapshot",
           "META_PREFIX"]
