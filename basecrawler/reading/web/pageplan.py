"""How a filtered table page reads its rows (issue #34.6): pure rules, used by
plugins/basecrawler_pageplan.py.

Datasette reads a filtered page in the table's default order (newest first) as
`select … from T where "col" = :p0 order by date desc limit 51`. SQLite answers it
through the filter's index and sorts every matching record, even with its statistics: for a
value a fifth of a million records hold, 200,000 wide rows read and sorted for 51 of them
(0.27–0.46 s alone, seconds under load). Walked along the sort column's own index instead,
testing the filter per row, the same 51 rows are found within about 51 / share rows. Which way
is cheaper depends on how many records hold the value: `walk_limit` (the crossover, where the
walk's expected rows equal the matching rows) decides, counted through the filter's index
but never beyond that many (`decision_sql`), so the decision costs at most a few thousand
index entries. A rare value keeps SQLite's own plan (its index, then a small sort).

Only pages whose every condition is a plain `column = value` on an indexed column, plus
Datasette's own "next page" condition on the sort column and a search tested per row (the
web view's `LIKE`s of a term many records hold), are considered: any other condition (a
rare term's sub-query, an operator filter, a plugin's) may make the walk read the whole index.
"""
from __future__ import annotations

import math
import re

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
PAGE = re.compile(rf"select (?P<columns>.+?) from (?P<table>{NAME}|\[{NAME}\]) where (?P<where>.+) "
                  rf"order by (?P<sort>{NAME}) desc(?P<tie>, {NAME}( desc)?)? limit (?P<limit>\d+)(?P<offset> offset \d+)?",
                  re.S)
EQUALS = re.compile(rf'"(?P<column>{NAME})" = :(?P<param>p\d+)')
PER_ROW_MATCH = re.compile(rf"EXISTS \(SELECT 1 FROM \[{NAME}\] WHERE \[{NAME}\] MATCH :{NAME} "
                           rf"AND rowid = \[{NAME}\]\.id\)")
MIN_WALK = 1_000   # below this many matching records the filter's index and a sort are cheap anyway


def split_and(where: str) -> list[str]:
    """The top-level ` and `-joined terms of a WHERE clause (not those inside parentheses)."""
    terms, depth, start, i = [], 0, 0, 0
    while i < len(where):
        char = where[i]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif depth == 0 and where.startswith(" and ", i):
            terms.append(where[start:i])
            start = i = i + 5
            continue
        i += 1
    terms.append(where[start:])
    return [t.strip() for t in terms]


def filtered_page(sql: str, sort_index: dict[str, tuple[str, str]],
                  indexed: dict[str, frozenset[str]]) -> dict | None:
    """The parts of a table page's SQL this plan may change, or None to leave it alone.
    `sort_index`: table → (default sort column, an index that column leads);
    `indexed`: table → the columns an index holds (limits.indexed_columns)."""
    found = PAGE.fullmatch(sql.strip())
    if found is None:
        return None
    table = found["table"].strip("[]")
    if table not in sort_index or sort_index[table][0] != found["sort"]:
        return None
    sort, index = sort_index[table]
    columns = indexed.get(table, frozenset())
    equalities = []
    for term in split_and(found["where"]):
        equal = EQUALS.fullmatch(term)
        if equal is not None and equal["column"] in columns and equal["column"] != sort:
            equalities.append(term)
        elif term.startswith(f"({sort} ") and term.endswith(")"):   # Datasette's next-page condition
            continue
        elif not _row_test(term):
            return None
    if not equalities:
        return None
    return {"table": table, "index": index, "equalities": equalities, "limit": int(found["limit"])}


def _row_test(term: str) -> bool:
    """A search's condition tested on each row (`LIKE`s only, the web view's search of a term
    many records hold): walked, the page stops at its 51st match; no sub-query (a rare term's
    `id IN (SELECT …)` is better read from its own index), nothing else but the full-text
    index asked about this one row (`EXISTS (… MATCH … AND rowid = T.id)`)."""
    rest = PER_ROW_MATCH.sub("", term)   # a full-text test of this one row is a per-row test too
    return term.startswith("(") and term.endswith(")") and " LIKE " in term and "select" not in rest.lower()


def walk_limit(rows: int, page: int) -> int:
    """Matching records from which walking the sort index is cheaper: it reads about
    `page * rows / matching` rows, the filter's index `matching` rows (and sorts them)."""
    return max(MIN_WALK, math.isqrt(max(0, page * rows)))


def decision_sql(plan: dict, enough: int) -> str:
    """How many records the equality conditions select, counted to at most `enough`."""
    return (f"SELECT count(*) FROM (SELECT 1 FROM [{plan['table']}] WHERE {' AND '.join(plan['equalities'])} "
            f"LIMIT {int(enough)})")


def walked(sql: str, plan: dict) -> str:
    """The page's SQL read along the sort column's index."""
    table = plan["table"]
    for written in (f" from {table} where ", f" from [{table}] where "):
        if sql.count(written) == 1:
            return sql.replace(written, f" from [{table}] INDEXED BY [{plan['index']}] where ")
    return sql


def sort_indexes(conn, default_sort: dict[str, str]) -> dict[str, tuple[str, str]]:
    """table → (its default sort column, the narrowest index that column leads)."""
    found = {}
    for table, column in default_sort.items():
        best = None
        for index in conn.execute(f"PRAGMA index_list([{table}])").fetchall():
            if index[4]:   # partial: it does not hold every row
                continue
            names = [row[2] for row in conn.execute(f"PRAGMA index_info([{index[1]}])")]
            if names and names[0] == column and (best is None or len(names) < best[0]):
                best = (len(names), index[1])
        if best is not None:
            found[table] = (column, best[1])
    return found
