"""Turning a `RecallFilter` into SQL (`build_query`, shared by search — a page of results — and
export — a cursor over everything): the text terms (search_text.py) and the filters, the same
SQL on both engines, spelled with the engine's dialect (engines/dialect.py: its placeholder,
its quoting, LIKE or ILIKE) and returned as that dialect's read-only `Statement`, which both
engines run as written. On SQLite declared names stay in brackets (`column`), so a column a
type lacks is an error there, not a quoted string.

Filters: `--filter FIELD=VALUE` on any declared facet (case-insensitive equality; a
multi-valued facet, stored as a JSON list, matches when any of its values does); the options
people already use (`--country`, `--manufacturer`, `--model`, `--year`, `--since/--until`)
apply to any type that has the columns they read, and are a usage error on one that has not.
"""
from __future__ import annotations

from basecrawler.reading.search_filters import RecallFilter, UnknownFilter, check_facets, check_query_size, columns_of
from basecrawler.reading.search_text import (TRIGRAM, column, fts_phrase, fts_table, gram_indexed, like_pattern,
                                             text_condition)
from basecrawler.recordtypes import RecordType
from basecrawler.store import groups
from basecrawler.store.engines.dialect import POSTGRES, SQLITE, Dialect, Statement
from basecrawler.store.engines.dialect import dialect_of as engine_dialect


def order_by(record_type: RecordType, dialect: str | Dialect = SQLITE) -> str:
    """Newest first; id breaks ties so the order is stable between pages and exports. Records
    without a date (NULL) come after every dated one."""
    if record_type.date_field is None:
        return "r.id DESC"
    nulls = " NULLS LAST" if record_type.date_sentinel is None else ""
    return f"r.{column(engine_dialect(dialect), record_type.date_field)} DESC{nulls}, r.id DESC"



def _either_language(d: Dialect, base: str, value: str, params: list) -> str:
    pattern = like_pattern(value)
    params.extend([pattern, pattern])
    return (f"(r.{column(d, base + '_original')} {d.ilike} {d.p} ESCAPE '\\' OR "
            f"r.{column(d, base + '_ko')} {d.ilike} {d.p} ESCAPE '\\')")


def facet_condition(record_type: RecordType, field: str, value: str, params: list, dialect: str | Dialect,
                     as_set: bool = False) -> str:
    """The facet filter `field = value`, spelled for `dialect` (a Dialect or its name)."""
    d = engine_dialect(dialect)
    facet = record_type.facet(field)
    value = facet.filter_value(value)
    if facet.ranged:
        return _ranged_condition(d, field, value, params)
    params.append(value)
    if facet.multi:   # a JSON list: any of its values
        if d is POSTGRES:
            return (f"EXISTS (SELECT 1 FROM jsonb_array_elements_text(NULLIF(r.{d.quote(field)}::text, '')::jsonb) "
                    f"AS v(value) WHERE LOWER(v.value) = LOWER({d.p}))")
        return f"EXISTS (SELECT 1 FROM json_each(r.[{field}]) WHERE LOWER(json_each.value) = LOWER(?))"
    if d is POSTGRES:
        # Its planner sorted the whole match for the IN form (first row 0.7 → 1.2 s at a
        # million); the plain test walks the date index as SQLite's IN form does.
        return f"LOWER(CAST(r.{d.quote(field)} AS TEXT)) = LOWER({d.p})"
    return _stored_values_condition(record_type, field, params, as_set)


def _stored_values_condition(record_type: RecordType, field: str, params: list, as_set: bool = False) -> str:
    """Case-insensitive equality (`LOWER(CAST(field AS TEXT)) = LOWER(value)`, the value last in
    `params`) written so the column's index answers it: the column compared with the stored
    values that are equal to the value that way, found by walking the index one distinct value
    at a time (a seek each: a facet holds few). Comparing LOWER(...) on every row read the
    whole table for a rare value, and cost 0.7 s per million rows read for a common one.

    A text column holds only text (or bytes), and two stored values equal under `=` are then
    the same text, so `IN` selects exactly the rows the LOWER test does. A column of another
    affinity may hold 5 and 5.0, equal under `=` and not as text: the LOWER test stays there.
    (SQLite only, and in its spelling.)

    `as_set` (an export of every match): the ids the column's index holds for those values,
    which SQLite reads before sorting them; without it SQLite walks the newest-first index
    testing each row, best for a page but a pass over the table for a rare value."""
    value = params.pop()
    table = record_type.table
    stored = (f"(WITH RECURSIVE bc_distinct(v) AS (SELECT min([{field}]) FROM [{table}] UNION ALL "
              f"SELECT (SELECT min([{field}]) FROM [{table}] WHERE [{field}] > bc_distinct.v) FROM bc_distinct "
              f"WHERE bc_distinct.v IS NOT NULL) "
              f"SELECT v FROM bc_distinct WHERE LOWER(CAST(v AS TEXT)) = LOWER(?))")
    params.append(value)
    condition = f"r.[{field}] IN {stored}"
    if as_set:
        condition = f"r.id IN (SELECT id FROM [{table}] WHERE [{field}] IN {stored})"
    if record_type.column_types.get(field) is not str:
        params.append(value)
        condition = f"({condition} AND LOWER(CAST(r.[{field}] AS TEXT)) = LOWER(?))"
    return condition


def _ranged_condition(d: Dialect, field: str, value, params: list) -> str:
    """The value itself, or a stored range `low-high` of values as wide as it that holds it
    (equal widths compare correctly as text: "2019" <= "2020" <= "2021")."""
    name, p = f"r.{column(d, field)}", d.p
    dash = f"strpos({name}, '-')" if d is POSTGRES else f"instr({name}, '-')"
    params.extend([value, value, value, value])
    return (f"({name} = {p} OR (length({name}) = 2 * length({p}) + 1 AND {dash} = length({p}) + 1 "
            f"AND {p} BETWEEN substr({name}, 1, {dash} - 1) AND substr({name}, {dash} + 1)))")


def _option_condition(record_type: RecordType, option: str, value: str, params: list, dialect: Dialect) -> str:
    """A named option (`--manufacturer X`) through the facet declared for it: the normalised
    value on the facet's column (every spelling of a maker finds its key), or a substring of
    the facet's `also_text` in either language."""
    facet = record_type.facet_for_option(option)
    if facet is None:
        raise UnknownFilter(f"--{option} does not apply to {record_type.name} (it declares no facet for --{option})")
    condition = facet_condition(record_type, facet.field, value, params, dialect)
    if facet.also_text is None:
        return condition
    return f"({condition} OR {_either_language(dialect, facet.also_text, value, params)})"


def _pair(base: str) -> tuple[str, str]:
    return f"{base}_original", f"{base}_ko"


def _needs(record_type: RecordType, option: str, *columns: str) -> None:
    missing = [c for c in columns if c not in columns_of(record_type)]
    if missing:
        raise UnknownFilter(f"{option} does not apply to {record_type.name} (it has no {', '.join(missing)})")


def build_query(filters: RecallFilter, *, columns: str = "r.*", limit: int | None = None,
                offset: int = 0, ordered: bool = True, dialect: str | Dialect = "sqlite",
                walk: frozenset[str] = frozenset(), driven: bool = False, grams: bool = False,
                facet_sets: bool = False, hide_copies: bool = False,
                short_driver: tuple[str, str] | None = None) -> tuple[Statement, list]:
    """The statement (a read-only `Statement` of `dialect`, the dialect or its name of the
    connection it will run on) and parameters selecting the records that match `filters`,
    newest first. A caller that wraps it states the result with `statement.dialect`.

    How, never which rows: `walk` names terms tested row by row (`plan_terms`); `driven`
    (SQLite) reads the first term of 3+ characters as a join from its FTS5 index, so a query
    with a LIMIT and no order stops after that many index entries (`count_upto`; on PostgreSQL
    a term is tested on its windows index's rows without collecting their ids first); `grams`
    (`short_index`): a 1–2 character term is read from the padded index's vocabulary (SQLite),
    any term from the windows index (PostgreSQL, `_pg_text_condition`); `facet_sets`: a facet
    filter reads its rows' ids from the column's index (an export); `hide_copies`: records that
    are another publisher's copy are left out (`hides_copies`). `short_driver` (SQLite, with
    `driven` and no term of 3+ characters): (a 1–2 character term, the FTS5 query of its
    trigrams, search_text.py `gram_match`) drives the query from the index as such a term does,
    without a LIKE (only for a term `gram_drivable` says it answers exactly)."""
    check_query_size(filters.text)
    record_type = filters.declaration()
    check_facets(record_type, filters.facets)
    d = engine_dialect(dialect)
    where: list[str] = []
    params: list = []
    driver = None
    if driven and d is SQLITE and record_type.text_index_columns:
        driver = next((t for t in filters.terms() if len(t) >= TRIGRAM), None)
    match = fts_phrase(driver) if driver is not None else None
    if driven and d is SQLITE and driver is None and short_driver is not None and short_driver[0] in filters.terms():
        driver, match = short_driver
    joined = False
    for term in filters.terms():
        if term == driver and not joined:
            params.append(match)
            where.append(f"[{fts_table(record_type)}] MATCH ?")
            joined = True
            continue
        where.append(text_condition(record_type, term, params, d, walk=term in walk, grams=grams,
                                     pg_ids=not driven))
    if filters.countries:
        _needs(record_type, "--country", "country")
        where.append(f"r.country IN ({','.join([d.p] * len(filters.countries))})")
        params.extend(c.upper() for c in filters.countries)
    if filters.manufacturer:
        where.append(_option_condition(record_type, "manufacturer", filters.manufacturer, params, d))
    if filters.model:
        _needs(record_type, "--model", *_pair("model"))
        where.append(_either_language(d, "model", filters.model, params))
    if filters.year is not None:
        where.append(_option_condition(record_type, "year", str(int(filters.year)), params, d))
    if filters.since or filters.until:
        if record_type.date_field is None:
            raise UnknownFilter(f"--since/--until do not apply to {record_type.name} (it has no date)")
        date = f"r.{column(d, record_type.date_field)}"
        if filters.since:
            where.append(f"{date} >= {d.p}")
            params.append(filters.since.isoformat())
        if filters.until:
            where.append(f"{date} <= {d.p}")
            params.append(filters.until.isoformat())
    if filters.source:
        where.append(f"r.source = {d.p}")
        params.append(filters.source)
    for field, value in filters.facets:
        where.append(facet_condition(record_type, field, value, params, d, as_set=facet_sets))
    if hide_copies:
        condition = groups.hidden_copies_condition(record_type)
        terms = set(filters.terms())
        if terms and d is SQLITE and not joined and not (ordered and terms <= walk):
            # A term read from its index, or a count in storage order, reads each candidate row
            # anyway: its flag is tested there first (a copy then costs no text test). The `+`
            # keeps SQLite from reading the shown records' indexes (store/groups.py) instead.
            where.insert(0, "+" + condition)
        else:
            # As the shown records' indexes say it, so the query walks one of them: a count
            # reads one without a test, a page the newest shown records (a term tested on each
            # row while walking, too), a count driven by the full-text index looks each id up
            # in the shown records' id index instead of the table; none reads a copy.
            where.insert(0, condition)
    sql = f"SELECT {columns} FROM {record_type.table} AS r"   # a declared identifier; the web plugin looks for this form
    if joined:
        sql = (f"SELECT {columns} FROM [{fts_table(record_type)}] JOIN {record_type.table} AS r "
               f"ON r.id = [{fts_table(record_type)}].rowid")
    if where:
        sql += " WHERE " + " AND ".join(where)
    if ordered:
        sql += f" ORDER BY {order_by(record_type, d)}"
    if limit is not None:
        sql += f" LIMIT {d.p} OFFSET {d.p}"
        params.extend([int(limit), int(offset)])
    return d.query(sql), params



def text_conditions(filters: RecallFilter, *, walk: frozenset[str], alias: str, grams: bool = False,
                    dialect: str | Dialect = "sqlite") -> tuple[str, list]:
    """The text terms of `filters` alone as one condition on table `alias`, spelled for
    `dialect` (SQLite unless said), for a statement the caller writes and states with that
    dialect (the web view's page walks its own table)."""
    check_query_size(filters.text)
    record_type = filters.declaration()
    d = engine_dialect(dialect)
    params: list = []
    where = [text_condition(record_type, t, params, d, walk=t in walk, alias=alias, grams=grams)
             for t in filters.terms()]
    return " AND ".join(where) or "1 = 1", params


def short_terms(filters: RecallFilter, grams: bool = False) -> frozenset[str]:
    """Terms no index can answer: a query that reads the table in storage order anyway (a
    count, a summary) tests them on each row it reads. With `grams` (the padded index) only
    the 1–2 character terms its vocabulary cannot list (`gram_indexed`)."""
    return frozenset(t for t in filters.terms() if len(t) < TRIGRAM and not (grams and gram_indexed(t)))



__all__ = ["order_by", "build_query", "text_conditions", "short_terms"]
