"""Each engine states its statements (basecrawler/store/engines/dialect.py, issue #35 item 3).

PostgreSQL runs only statements stated with its dialect and refuses plain SQL (no regex
rewrites SQL text any more). What is left in SQLite's spelling only (code that runs on SQLite
alone) is counted here by parsing the code: a statement site is a call of `execute`,
`executemany`, `query`, `scalar` or `write_returning` whose SQL is a string written in place
(a literal, an f-string, a concatenation, or a name bound to one) rather than a dialect's
`query(…)` / `write(…)`. The converted modules hold none; the others are listed with their
count, and the total may only go down. The read-only intent a statement states is what
decides a retry after a lost connection.
"""
from __future__ import annotations

import ast
import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from basecrawler.store.engines.dialect import POSTGRES, SQLITE, Statement, dialect_of

ROOT = Path(__file__).resolve().parent.parent
SITES = {"execute", "executemany", "query", "scalar", "write_returning"}
# Receivers that are a dialect (`d.query(…)` states a statement, it does not run one).
DIALECT_NAMES = {"d", "s", "sql", "dialect", "SQLITE", "POSTGRES"}
CONVERTED = [
    "basecrawler/store/engines/__init__.py", "basecrawler/store/engines/dialect.py", "basecrawler/store/engines/pg.py",
    "basecrawler/store/engines/pg_connect.py", "basecrawler/store/engines/pg_cursor.py",
    "basecrawler/store/engines/pg_lookup.py", "basecrawler/store/engines/pg_migrations.py",
    "basecrawler/store/engines/pg_upsert.py", "basecrawler/store/engines/transfer.py",
    "basecrawler/recordtypes/tables.py", "basecrawler/recordtypes/derived.py", "basecrawler/pipeline/runlock.py",
    "basecrawler/fetch/archive.py", "basecrawler/operations/offline.py", "basecrawler/operations/coverage.py",
    "basecrawler/store/dbfile.py", "translate/claims.py", "translate/memory.py", "translate/targets.py",
    "translate/originals.py", "translate/testing.py",
    "basecrawler/reading/search_query.py", "basecrawler/reading/search_text.py", "basecrawler/reading/search.py",
    "basecrawler/reading/search_filters.py", "basecrawler/reading/export.py", "basecrawler/watch/selection.py",
]
# Statement sites still written in SQLite's spelling only (they run on SQLite alone: PostgreSQL
# refuses plain SQL).
CEILING = 7   # the web view's SQLite-only code (reading/web/limits.py, plugins/basecrawler_web.py)


def _is_text(node: ast.AST, texts: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _is_text(node.left, texts) or _is_text(node.right, texts)
    return isinstance(node, ast.Name) and node.id in texts


def _receiver(node: ast.AST) -> str:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dialect_of":
        return "dialect"
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def unstated_sites(path: Path) -> list[int]:
    """Line numbers of the statement sites of one module whose SQL is written in place."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    texts = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and _is_text(node.value, set())
             for target in node.targets if isinstance(target, ast.Name)}
    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SITES
                and node.args):
            continue
        if _receiver(node.func.value) in DIALECT_NAMES:
            continue
        if _is_text(node.args[0], texts):
            lines.append(node.lineno)
    return lines


def count_unstated() -> dict[str, int]:
    counts = {}
    for folder in ("basecrawler", "translate"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found = unstated_sites(path)
            if found:
                counts[str(path.relative_to(ROOT))] = len(found)
    return counts


def test_the_converted_modules_state_every_statement():
    left = {name: unstated_sites(ROOT / name) for name in CONVERTED}
    assert {name: lines for name, lines in left.items() if lines} == {}


def test_what_is_still_spelled_for_sqlite_only_is_counted_and_only_shrinks():
    counts = count_unstated()
    table = "\n".join(f"{n:4d}  {name}" for name, n in sorted(counts.items(), key=lambda item: -item[1]))
    total = sum(counts.values())
    assert total <= CEILING, (f"{total} statement sites in SQLite's spelling only (ceiling {CEILING}): state new "
                              f"statements with the dialect (engines/dialect.py)\n{table}")
    print(f"\n{total} statement sites in {len(counts)} modules are still spelled for SQLite only:\n{table}")


def test_the_census_sees_a_statement_written_in_place(tmp_path):
    """The counter itself: literal, f-string, concatenation and a name bound to one count; a
    dialect-stated statement does not."""
    module = tmp_path / "m.py"
    module.write_text(
        "SQL = 'SELECT 1'\n"
        "def f(conn, store, d, t):\n"
        "    conn.execute('SELECT 1')\n"
        "    store.query(f'SELECT * FROM {t}')\n"
        "    conn.executemany('INSERT ' + t, [])\n"
        "    store.scalar(SQL)\n"
        "    conn.execute(d.query('SELECT 1'))\n"
        "    store.query(d.write(f'DELETE FROM {t}'))\n"
        "    conn.execute(SQLITE.query(SQL))\n", encoding="utf-8")
    assert unstated_sites(module) == [3, 4, 5, 6]


def test_a_statement_says_its_engine_and_intent_and_runs_on_sqlite_as_a_str():
    d = SQLITE
    read, change = d.query("SELECT ?"), d.write("CREATE TABLE t (a)")
    assert isinstance(read, Statement) and isinstance(read, str)
    assert (read.dialect, read.read_only, change.read_only) == (SQLITE, True, False)
    conn = sqlite3.connect(":memory:")
    conn.execute(change)
    conn.execute(d.write(f"{d.insert_ignore} INTO t (a) VALUES ({d.p}){d.on_conflict_ignore}"), [None])
    assert conn.execute(d.query(f"SELECT COUNT(*) FROM t WHERE a {d.is_} {d.p}"), [None]).fetchone() == (1,)
    assert conn.execute(d.query(f"SELECT 'Ab' {d.ilike} {d.p}"), ["ab"]).fetchone() == (1,)
    assert dialect_of(conn) is SQLITE and dialect_of("postgresql") is POSTGRES


def test_each_engine_spells_what_differs():
    assert (SQLITE.p, POSTGRES.p) == ("?", "%s")
    assert (SQLITE.named("a"), POSTGRES.named("a")) == (":a", "%(a)s")
    assert POSTGRES.is_ == "IS NOT DISTINCT FROM" and POSTGRES.ilike == "ILIKE" and POSTGRES.begin == "BEGIN"
    assert POSTGRES.params(3) == "%s, %s, %s" and SQLITE.quote('a"b') == '"a""b"'


# ---- on PostgreSQL ----------------------------------------------------------------------
pg = pytest.importorskip("psycopg")
from pgcluster import pg_cluster, pg_url  # noqa: E402,F401  (fixtures)


def _cut(conn) -> None:
    """End the connection's server session from another one (what a server restart does to it)."""
    import psycopg

    pid = conn.execute(POSTGRES.query("SELECT pg_backend_pid()")).fetchone()[0]
    with psycopg.connect(conn.url, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_postgres_runs_a_stated_statement_as_written_and_refuses_any_other(pg_url):  # noqa: F811
    from basecrawler.store.engines.pg import MisspeltStatement, PgConnection

    conn = PgConnection(pg_url)
    try:
        # As written: a `?` would be a syntax error, and `a IS b` between values is not PostgreSQL's.
        d = POSTGRES
        assert conn.execute(d.query(f"SELECT 1 WHERE CAST(NULL AS text) {d.is_} CAST({d.p} AS text) "
                                    f"AND 'Ab' {d.ilike} {d.p}"),
                            [None, "ab"]).fetchone() == (1,)
        assert conn.execute(d.query("SELECT '100%%' WHERE 1 = %(one)s"), {"one": 1}).fetchone() == ("100%",)
        with pytest.raises(MisspeltStatement):
            conn.execute(SQLITE.query("SELECT ?"), [1])
        # Plain SQL is refused, not rewritten: even text PostgreSQL could run as it is.
        for run in (lambda: conn.execute("SELECT ?", [1]), lambda: conn.execute("SELECT 1"),
                    lambda: conn.executemany("SELECT %s", [[1]])):
            with pytest.raises(MisspeltStatement, match="plain SQL reached PostgreSQL"):
                run()
        assert conn.execute(POSTGRES.query("SELECT 2")).fetchone() == (2,)   # the connection still serves
    finally:
        conn.close()


def test_the_stated_intent_decides_whether_a_statement_runs_again_after_a_lost_connection(pg_url):  # noqa: F811
    from basecrawler.store.engines.pg import ConnectionLost, PgConnection

    conn = PgConnection(pg_url)
    try:
        _cut(conn)
        # A read runs again on a new connection.
        assert conn.execute(POSTGRES.query("SELECT 7")).fetchone() == (7,)
        _cut(conn)
        # The same text stated as a write (it could have changed something): not run twice.
        with pytest.raises(ConnectionLost):
            conn.execute(POSTGRES.write("SELECT 7"))
        assert conn.execute(POSTGRES.query("SELECT 8")).fetchone() == (8,)   # reconnected at the next statement
        _cut(conn)
        # `read_only=` said by the caller wins over the statement's own.
        assert conn.execute(POSTGRES.write("SELECT 9"), read_only=True).fetchone() == (9,)
    finally:
        conn.close()


def test_the_converted_modules_run_on_postgres_where_plain_sql_is_refused(pg_url, tmp_path):  # noqa: F811
    from basecrawler import Store
    from basecrawler.fetch.archive import Archive
    from basecrawler.operations import coverage
    from translate.claims import Claims
    from translate.memory import TranslationMemory
    from translate.originals import settle_originals
    from translate.targets import translation_targets
    from translate.testing import seed, statuses

    from basecrawler.store.engines.transfer import copy_store
    source = Store(str(tmp_path / "source.db"))
    seed(source, 3)
    store = Store(pg_url)   # migrate_pg, the type tables: plain SQL anywhere would be refused
    try:
        assert copy_store(source, store)["recalls"].ok   # `migrate --to` PostgreSQL
        archive = Archive(store, tmp_path / "archive")
        archive.record(url="https://example.test/a", method="GET", status=200, content_type="text/plain",
                       etag='"e"', last_modified=None, sha256=None, size=1)
        archive.validators_for("https://example.test/a")
        archive.prune(1)
        claims = Claims(store, lease_s=60)
        target = next(t for t in translation_targets(store) if t.table == "recalls")
        rows = claims.claim(target, None, 2)
        assert len(rows) == 2
        store.write(lambda db: claims.done(db, target, [r["id"] for r in rows]))
        claims.renew()
        claims.reclaim_dead()
        claims.release()
        memory = TranslationMemory(store)
        store.write(lambda db: memory.remember(db, "en", {"Brake": "브레이크"}, "fake"))
        store.write(lambda db: memory.count_uses(db, "en", {"Brake": 2}))
        assert memory.lookup("en", ["Brake"]) == {"Brake": "브레이크"}
        settle_originals(store)
        statuses(store)
        coverage.coverage(store.query, "us", 30, dt.datetime.now(dt.timezone.utc))
    finally:
        store.close()
        source.close()
