"""A type's table, derived from its declaration: the columns, the unique key (source first),
the indexes, and the full-text index — SQLite FTS5 with the trigram tokenizer over an external
content table, PostgreSQL one GIN index over the same text: the windows index, which answers
terms of every length (`pg_windows_document`), or pg_trgm in a store made with it or switched
to it (`pg_search_index_statements`).

`ensure_sqlite` creates the table when a type first appears and evolves it additively when the
declaration grows (a new model field becomes ALTER TABLE ADD COLUMN; a changed set of indexed
text columns rebuilds the full-text index). PostgreSQL gets the same tables through the
reference schema (basecrawler/store/schema.py), plus `pg_statements`.

New rows reach the SQLite full-text index with one statement per upsert batch
(`feed_fts_sql`, run by the store): a per-row insert trigger cost about three times as much
(bench/README.md). Updates and deletes, from any writer, go through the triggers made here.

Each indexed value is indexed with `PAD` (two U+0001) after it, so that every occurrence of
every 1–2 character string is the start of some trigram of the index — at the end of a value
too, and in a value shorter than three characters. A 1–2 character term is then found by
reading the index's vocabulary (`<table>_fts_vocab`, a temporary fts5vocab) for the trigrams that start
with it, a range of sorted terms, instead of a pass over the table (#23.5,
basecrawler/reading/search.py). No query of 3+ characters holds U+0001, so the padding never
changes what one matches. The index reads its content through the view `<table>_fts_padded`
(the table's text with the padding), so FTS5's own `rebuild` and `delete` see what was indexed.
"""
from __future__ import annotations

import hashlib
import logging

from basecrawler.recordtypes.declaration import DATE_UNKNOWN, RecordType
from basecrawler.recordtypes.statistics import analyse_indexes, index_names
from basecrawler.store.engines.dialect import SQLITE

# Everything above the PostgreSQL section runs on SQLite only: its own spelling ([name] quoting).
query, write = SQLITE.query, SQLITE.write

log = logging.getLogger(__name__)


PAD = "\x01\x01"   # after every indexed value (see the module's docstring)
PAD_SQL = "char(1, 1)"


def fts_table(record_type: RecordType) -> str:
    return f"{record_type.table}_fts"


def fts_content_view(record_type: RecordType) -> str:
    """The view the full-text index reads its content from: the indexed text, padded."""
    return f"{record_type.table}_fts_padded"


def fts_vocab_table(record_type: RecordType) -> str:
    """The full-text index's vocabulary, one row per trigram occurrence (fts5vocab `instance`):
    a temporary table of the reading connection (`attach_fts_vocab`), so the database holds no
    table that a copy or a viewer would have to know about."""
    return f"{record_type.table}_fts_vocab"


def attach_fts_vocab(conn, record_type: RecordType) -> None:
    """Make the connection's temporary vocabulary table of the type's index (once)."""
    conn.execute(write(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.[{fts_vocab_table(record_type)}] "
                       f"USING fts5vocab(main, [{fts_table(record_type)}], instance)"))


def _padded(column: str, prefix: str = "") -> str:
    return f"{prefix}[{column}] || {PAD_SQL}"


def fts_insert_trigger(record_type: RecordType) -> str:
    """A per-row insert trigger (stores made before batch feeding still have it for `recalls`)."""
    return f"{record_type.table}_fts_ai"


def key_index(record_type: RecordType) -> str:
    return f"{record_type.table}_key"


def feed_fts_sql(record_type: RecordType) -> str | None:
    """Index every row above a given id (the rows one upsert batch inserted)."""
    columns = record_type.text_index_columns
    if not columns:
        return None
    cols = ", ".join(f"[{c}]" for c in columns)
    padded = ", ".join(_padded(c) for c in columns)
    return write(f"INSERT INTO [{fts_table(record_type)}](rowid, {cols}) "
                 f"SELECT id, {padded} FROM [{record_type.table}] WHERE id > ?")


def needs_ensure(conn, record_type: RecordType) -> bool:
    """Whether the table, a column, the key or the full-text index is missing (read only, so
    opening a store that is up to date takes no write lock)."""
    columns = {row[1] for row in conn.execute(query(f"PRAGMA table_info([{record_type.table}])"))}
    if not columns or any(name not in columns for name in record_type.column_types):
        return True
    if _unique_key_index(conn, record_type) is None:
        return True
    present = {row[1] for row in conn.execute(query(f"PRAGMA index_list([{record_type.table}])"))}
    if any(index_name(record_type, columns) not in present for columns in read_indexes(record_type)):
        return True
    if any(name not in present for name, _, _ in partial_read_indexes(record_type)):
        return True
    if input_index(record_type)[0] not in present or any(name in present for name in superseded_indexes(record_type)):
        return True
    return bool(record_type.text_index_columns) and (
        _fts_columns(conn, record_type) != list(record_type.text_index_columns) or not fts_padded(conn, record_type))


def fts_padded(conn, record_type: RecordType) -> bool:
    """Whether the type's full-text index is the padded one with its vocabulary (a store made
    before #23.5 has the plain one until it is opened by this version)."""
    if not conn.execute(query("SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = ?"),
                        [fts_content_view(record_type)]).fetchone():
        return False
    sql = conn.execute(query("SELECT sql FROM sqlite_master WHERE name = ?"), [fts_table(record_type)]).fetchone()
    if not sql or f"content='{fts_content_view(record_type)}'" not in sql[0]:
        return False
    # Every trigger writing the index writes padded text (an older writer's insert trigger
    # would index bare text beside it).
    name = fts_table(record_type)
    triggers = conn.execute(query("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name IN (?, ?, ?)"),
                            [f"{name}_ai", f"{name}_ad", f"{name}_au"]).fetchall()
    return all(PAD_SQL in (row[0] or "") for row in triggers)


def ensure_sqlite(db, record_type: RecordType) -> None:
    """Create or evolve the type's table and indexes, inside the caller's transaction."""
    table = db[record_type.table]
    level = logging.DEBUG   # (a new table, or one a new store's early migrations made, is no news)
    if not table.exists():
        not_null = set(record_type.key_columns)
        if record_type.date_field and (not record_type.date_optional or record_type.date_sentinel is not None):
            not_null.add(record_type.date_field)
        table.create({"id": int, **record_type.column_types}, pk="id", not_null=not_null)
        log.info("record type %s: created table %s", record_type.name, record_type.table)
    else:
        existing = table.columns_dict
        # An upgrade is news only for a table holding records: a new store's core migrations
        # make the tables of old versions (empty) and this brings them up to date at once.
        level = logging.INFO if _has_rows(db.conn, record_type.table) else logging.DEBUG
        for name, kind in record_type.column_types.items():
            if name not in existing:
                table.add_column(name, kind)
                log.log(level, "record type %s: added column %s.%s", record_type.name, record_type.table, name)
    before = index_names(db.conn, record_type.table)
    if _unique_key_index(db.conn, record_type) is None:
        # A key index of another shape (the declaration's key changed) goes; duplicates under
        # the new key make the CREATE fail loudly rather than lose a row.
        db.execute(write(f"DROP INDEX IF EXISTS [{key_index(record_type)}]"))
        table.create_index(list(record_type.key_columns), unique=True, index_name=key_index(record_type))
    for name in superseded_indexes(record_type):
        if name in before:
            db.execute(write(f"DROP INDEX [{name}]"))
            log.log(level, "record type %s: index %s replaced by one that also holds the date", record_type.name, name)
    for columns in read_indexes(record_type):
        table.create_index(list(columns), index_name=index_name(record_type, columns), if_not_exists=True)
    for name, columns, where in partial_read_indexes(record_type):
        cols = ", ".join(f"[{c}]" for c in columns)
        db.execute(write(f"CREATE INDEX IF NOT EXISTS [{name}] ON [{record_type.table}] ({cols}) WHERE {where}"))
    name, columns = input_index(record_type)
    db.execute(write(f"CREATE INDEX IF NOT EXISTS [{name}] ON [{record_type.table}] "
                     f"({', '.join(f'[{c}]' for c in columns)})"))
    analyse_indexes(db.conn, record_type.table, index_names(db.conn, record_type.table) - before)
    _ensure_fts(db, record_type)


def read_indexes(record_type: RecordType) -> list[tuple[str, ...]]:
    """The indexes the reading side needs (besides the unique key): the incremental watermark
    per source, the default sort (newest first) and the translation backlog, and one per
    single-valued facet so a facet count or filter reads an index instead of the table, and the
    number other publishers share (`same_as_field`).
    Multi-valued facets hold JSON lists, which an index on the column does not serve."""
    wanted: list[tuple[str, ...]] = []
    if record_type.date_field:
        wanted += [("source", record_type.date_field), (record_type.date_field,)]
    wanted.append(("translated_at",))
    for facet in record_type.facets:
        if not facet.multi and facet.field != "source":   # source leads the key and the watermark index
            wanted.append(facet_filter_index(record_type, facet.field))
    if record_type.facets:
        wanted.append(facet_index_columns(record_type))
    if record_type.same_as_field:
        # A card asks every type for the same number in the same country (store/lookup.py
        # `same_as`, reading/web/card.py): without it, a read of every record of that country.
        # `source` last: where the number is also the key's, a key probe finds every column in
        # this index too, so PostgreSQL's choice between the two cannot leave it a filter.
        wanted.append(("country", record_type.same_as_field, "source"))
    return list(dict.fromkeys(wanted))


def facet_filter_index(record_type: RecordType, field: str) -> tuple[str, ...]:
    """A single-valued facet's index: the facet, then the type's date. A page filtered to one
    value lists it newest first, which this index holds in order, so the page reads its fifty
    entries; led by the facet alone it sorted every record of the value first (a maker with a
    seventh of a million records: bench/README.md). Counts per value read its leading column."""
    return (field, record_type.date_field) if record_type.date_field else (field,)


def superseded_indexes(record_type: RecordType) -> list[str]:
    """The facet indexes of an older version (the facet alone), which `facet_filter_index`
    replaced: kept beside it they cost every write and lead the planner to the sort."""
    return [index_name(record_type, (facet.field,)) for facet in record_type.facets
            if not facet.multi and facet.field != "source"
            and facet_filter_index(record_type, facet.field) != (facet.field,)]


def facet_index_columns(record_type: RecordType) -> tuple[str, ...]:
    """The narrow covering index a search summary reads (reading/summary.py): the id, then
    every facet column, the date and its flag, so the matching records' facet values come
    from about 45 bytes a record instead of the wide row (at a million records: 0.22 → 0.11 s
    for a term in 200,000 of them, bench/README.md). Led by the id, it is written in id order,
    at the end, like the table itself."""
    columns = ["id", *(f.field for f in record_type.facets)]
    if record_type.date_field:
        columns.append(record_type.date_field)
        if record_type.has_date_unknown:
            columns.append(DATE_UNKNOWN)
    return tuple(dict.fromkeys(columns))


def partial_read_indexes(record_type: RecordType) -> list[tuple[str, tuple[str, ...], str]]:
    """(name, columns, condition) of the indexes `status` counts from, each over only the rows
    its count is about, so a row costs at most one of them: records without a known date per
    source (few), and records per source waiting for translation or translated, by status (each
    record in exactly one of the two). Counting these over the table took 9 of status's 10 s at
    a million records (bench/README.md, #23.5)."""
    table = record_type.table
    wanted = []
    if record_type.has_date_unknown:
        wanted.append((f"idx_{table}_undated_source", ("source",), f"[{DATE_UNKNOWN}] = 1"))
    if record_type.translated:
        wanted.append((f"idx_{table}_pending_source", ("source",), "translated_at IS NULL"))
        wanted.append((f"idx_{table}_translated_source", ("source", "translation_status"), "translated_at IS NOT NULL"))
    return wanted


def input_index(record_type: RecordType) -> tuple[str, tuple[str, ...]]:
    """(name, columns) of the index that answers the pipeline's lookup of stored rows by key
    (`Store.known_inputs`: the input hash and the date) without reading the table: the key,
    then those columns. Ordered by key like the unique index, so an insert lands where that
    one's does (an index on the hash alone, tried in wave 4, put each insert on a random page
    and doubled the insert cost). A re-run of unchanged data reads only this index."""
    columns = [*record_type.key_columns, "input_hash"]
    if record_type.date_field:
        columns.append(record_type.date_field)
    if record_type.has_date_unknown:
        columns.append(DATE_UNKNOWN)
    return f"idx_{record_type.table}_inputs", tuple(columns)


NAME_BYTES = 63   # PostgreSQL cuts a longer identifier, and then never finds the index by its name


def index_name(record_type: RecordType, columns: tuple[str, ...]) -> str:
    name = f"idx_{record_type.table}_{'_'.join(columns)}"   # sqlite-utils' own naming, so old stores match
    if len(name.encode("utf-8")) <= NAME_BYTES:
        return name
    digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:8]
    return name.encode("utf-8")[:NAME_BYTES - 9].decode("utf-8", "ignore") + "_" + digest


def _unique_key_index(conn, record_type: RecordType) -> str | None:
    wanted = list(record_type.key_columns)
    for _, name, unique, *_ in conn.execute(query(f"PRAGMA index_list([{record_type.table}])")).fetchall():
        if unique and [r[2] for r in conn.execute(query(f"PRAGMA index_info([{name}])"))] == wanted:
            return name
    return None


def _has_rows(conn, table: str) -> bool:
    return conn.execute(query(f"SELECT 1 FROM [{table}] LIMIT 1")).fetchone() is not None


def _fts_columns(conn, record_type: RecordType) -> list[str]:
    return [row[1] for row in conn.execute(query(f"PRAGMA table_info([{fts_table(record_type)}])"))]


def _ensure_fts(db, record_type: RecordType) -> None:
    """Create the padded full-text index, its content view and vocabulary, or make them again
    when the indexed columns changed or the index is a plain one from before #23.5 (a
    rebuild: about a minute per million records, once)."""
    columns = list(record_type.text_index_columns)
    name = fts_table(record_type)
    current = _fts_columns(db.conn, record_type)
    if current == columns and (not columns or fts_padded(db.conn, record_type)):
        return
    for suffix in ("ai", "ad", "au"):
        db.execute(write(f"DROP TRIGGER IF EXISTS [{name}_{suffix}]"))
    if current:
        db.execute(write(f"DROP TABLE [{name}]"))
    db.execute(write(f"DROP VIEW IF EXISTS [{fts_content_view(record_type)}]"))
    if not columns:
        return
    if current and _has_rows(db.conn, record_type.table):   # an empty table's index is made at once
        log.info("record type %s: rebuilding the full-text index of %s for 1–2 character search (once; about two "
                 "minutes per million records)", record_type.name, record_type.table)
    cols = ", ".join(columns)
    new_vals = ", ".join(_padded(c, "new.") for c in columns)
    old_vals = ", ".join(_padded(c, "old.") for c in columns)
    table = record_type.table
    view = fts_content_view(record_type)
    db.execute(write(f"CREATE VIEW [{view}] AS SELECT id, {', '.join(f'{_padded(c)} AS [{c}]' for c in columns)} "
                     f"FROM [{table}]"))
    db.execute(write(f"CREATE VIRTUAL TABLE [{name}] USING fts5({cols}, content='{view}', content_rowid='id', "
                     "tokenize='trigram')"))
    db.execute(write(f"""CREATE TRIGGER [{name}_ad] AFTER DELETE ON [{table}] BEGIN
          INSERT INTO [{name}]([{name}], rowid, {cols}) VALUES ('delete', old.id, {old_vals});
        END"""))
    # Only a change of indexed text rewrites the entry (a translation claim does not).
    db.execute(write(f"""CREATE TRIGGER [{name}_au] AFTER UPDATE OF {cols} ON [{table}] BEGIN
          INSERT INTO [{name}]([{name}], rowid, {cols}) VALUES ('delete', old.id, {old_vals});
          INSERT INTO [{name}](rowid, {cols}) VALUES (new.id, {new_vals});
        END"""))
    db.execute(write(f"INSERT INTO [{name}]([{name}]) VALUES ('rebuild')"))


# ---- PostgreSQL ---------------------------------------------------------------------------
def pg_search_document(record_type: RecordType) -> str:
    """The text PostgreSQL searches, one expression with `{t}` for a table alias (search terms
    never hold whitespace, so joining the columns with a space cannot match across two)."""
    return " || ' ' || ".join(f"COALESCE({{t}}{c}, '')" for c in record_type.text_index_columns)


PG_WINDOWS_CAP = 40_000     # characters of a record's searched text the windows index holds
PG_LONG_TEXT = " >cap"      # the lexeme of a record whose text is longer (no window has 4 characters)


def pg_windows_document(record_type: RecordType) -> str:
    """The searched text as a tsvector of its 3-character windows, with `{t}` for a table alias.

    The text is lower-cased (PostgreSQL's `lower`, as ILIKE folds it), `'` and `\\` become `?`
    (the only characters tsvector input treats specially inside quotes), and is cut into
    pieces of three from its first, second and third character, each piece one quoted lexeme:
    every 3-character string of the text is then a lexeme, and every 1–2 character string the
    start of one (at the end of the text the last pieces are shorter). No parser is involved,
    so tags, hosts, numbers and hyphens are plain characters. Only the first PG_WINDOWS_CAP
    characters are cut (a tsvector holds at most 1 MB of lexemes; 40,000 characters make at
    most 480 KB); a longer text adds the lexeme PG_LONG_TEXT, which every query also accepts."""
    document = pg_search_document(record_type)
    text = f"translate(lower(left({document}, {PG_WINDOWS_CAP})), '''\\', '??')"
    pieces = " || ".join(f"regexp_replace({part}, '.{{{{1,3}}}}', '''\\&'' ', 'g')"
                         for part in (text, f"substr({text}, 2)", f"substr({text}, 3)"))
    return (f"(({pieces}) || CASE WHEN length({document}) > {PG_WINDOWS_CAP} "
            f"THEN '''{PG_LONG_TEXT}''' ELSE '' END)::tsvector")


def pg_trgm_index_name(record_type: RecordType) -> str:
    return f"{record_type.table}_search_trgm"


def pg_windows_index_name(record_type: RecordType) -> str:
    return f"{record_type.table}_search_windows"


PG_SEARCH_INDEXES = ("trgm", "windows")


def pg_search_index_statements(record_type: RecordType, kind: str) -> list[str]:
    """DDL making `kind` ("trgm" or "windows") the type's one search index: it is built, the
    other dropped. The trigram index answers terms of 3+ characters; the windows index every
    length, at about twice the index cost of each stored record (bench/README.md)."""
    document = pg_search_document(record_type).format(t="")
    build = {"trgm": f'CREATE INDEX IF NOT EXISTS "{pg_trgm_index_name(record_type)}" ON "{record_type.table}" '
                     f"USING gin (({document}) gin_trgm_ops)",
             "windows": f'CREATE INDEX IF NOT EXISTS "{pg_windows_index_name(record_type)}" ON "{record_type.table}" '
                        f"USING gin (({pg_windows_document(record_type).format(t='')}))"}
    other = pg_windows_index_name(record_type) if kind == "trgm" else pg_trgm_index_name(record_type)
    return [build[kind], f'DROP INDEX IF EXISTS "{other}"']


def pg_statements(record_type: RecordType) -> list[str]:
    """What SQLite does with FTS5 and triggers: one GIN index over the searched text — the
    windows index, so a 1–2 character term (a Korean or Japanese word: 화재, 火災) is read
    from an index on both engines, unless the table has the pg_trgm index (a store made before
    the windows index, or switched back, `pg_search_index_statements`: kept from then on);
    and the translation queue (pending rows newest first)."""
    table = record_type.table
    statements = []
    if record_type.text_index_columns:
        windows = pg_search_index_statements(record_type, "windows")[0]
        statements.append(f"DO $bc$ BEGIN IF to_regclass('\"{pg_trgm_index_name(record_type)}\"') IS NULL "
                          f"THEN {windows}; END IF; END $bc$")
    order = f"{record_type.date_field} DESC, id DESC" if record_type.date_field else "id DESC"
    statements.append(f'CREATE INDEX IF NOT EXISTS "{table}_pending" ON "{table}" ({order}) WHERE translated_at IS NULL')
    statements += [f'DROP INDEX IF EXISTS "{name}"' for name in superseded_indexes(record_type)]
    for name, columns, where in partial_read_indexes(record_type):
        statements.append(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ({", ".join(columns)}) '
                          f'WHERE {where.replace("[", "").replace("]", "")}')
    return statements


__all__ = ["ensure_sqlite", "needs_ensure", "partial_read_indexes", "read_indexes", "facet_filter_index", "superseded_indexes", "facet_index_columns", "input_index", "feed_fts_sql", "fts_table", "fts_insert_trigger", "key_index",
           "fts_padded", "fts_content_view", "fts_vocab_table", "attach_fts_vocab", "PAD",
           "pg_search_document", "pg_statements", "pg_windows_document", "pg_search_index_statements",
           "pg_trgm_index_name", "pg_windows_index_name", "PG_SEARCH_INDEXES", "PG_WINDOWS_CAP", "PG_LONG_TEXT"]
