"""What differs between the two engines' SQL, stated once per engine.

A module that runs SQL on either engine asks the connection (or store) for its dialect and
spells the statement with it, instead of writing SQLite's spelling and having the PostgreSQL
adapter rewrite it:

    d = dialect_of(db.conn)
    db.conn.execute(d.write(f"{d.insert_ignore} INTO t (a, b) VALUES ({d.params(2)}){d.on_conflict_ignore}"), row)
    rows = store.query(d.query(f"SELECT id FROM t WHERE a {d.is_} {d.p} AND name {d.ilike} {d.p}"), [a, name])

`query()` and `write()` wrap the text in a `Statement`, a `str` (so sqlite3, sqlite-utils and
the store take it as it is) that also says which engine it is spelled for and whether it only
reads. The PostgreSQL connection runs a Statement as written and uses that intent to decide
whether the statement may simply run again after a lost connection (engines/pg.py). Every
statement run on PostgreSQL is stated so: SQL given there as a plain string is refused
(`MisspeltStatement`), never rewritten; on SQLite it runs as it is (tests/test_sql_dialect.py
counts the SQLite-only sites left).

Everything else the project writes (ON CONFLICT … DO UPDATE, excluded.*, RETURNING, SAVEPOINT,
COALESCE, CASE, double-quoted identifiers) is spelled the same on both engines. On PostgreSQL
psycopg reads `%` as the start of a placeholder, so a literal `%` in a statement is `d.percent`.
"""
from __future__ import annotations

from dataclasses import dataclass


class Statement(str):
    """SQL spelled for one engine (`dialect`), with what the caller means by it (`read_only`).
    Made by `Dialect.query` / `Dialect.write`; each dialect has its two subclasses, so making
    one costs no more than a str."""

    dialect: "Dialect"
    read_only: bool


@dataclass(frozen=True)
class Dialect:
    name: str                  # "sqlite" or "postgresql", as `Store.engine` and `conn.dialect` say
    p: str                     # a positional placeholder
    is_: str                   # null-safe equality: NULL = NULL is true
    is_not: str                # its negation
    ilike: str                 # LIKE ignoring (ASCII) case, as SQLite's LIKE does
    begin: str                 # opening a write transaction (SQLite takes the write lock up front)
    insert_ignore: str         # the head of an insert that skips rows already there …
    on_conflict_ignore: str    # … and what ends it (before any RETURNING)
    insert_undone_whole: str   # the head of an insert whose failure the caller undoes with its
    #                            whole transaction: SQLite then keeps no statement journal
    percent: str               # a literal % inside a statement

    def __post_init__(self):
        for read_only in (True, False):
            kind = type(f"{self.name.title()}{'Query' if read_only else 'Write'}", (Statement,),
                        {"dialect": self, "read_only": read_only, "__module__": __name__})
            object.__setattr__(self, "_query" if read_only else "_write", kind)

    def query(self, sql: str) -> Statement:
        """A statement that only reads: on PostgreSQL it runs again after a lost connection."""
        return self._query(sql)

    def write(self, sql: str) -> Statement:
        """A statement that may change something (or takes a lock, or calls nextval)."""
        return self._write(sql)

    def params(self, count: int) -> str:
        """`count` positional placeholders, comma-separated (for VALUES and IN lists)."""
        return ", ".join([self.p] * count)

    def named(self, name: str) -> str:
        """The placeholder of the parameter `name` of a dict of parameters."""
        return f":{name}" if self.name == "sqlite" else f"%({name})s"

    @staticmethod
    def quote(identifier: str) -> str:
        """An identifier as both engines read it (SQL's double quotes)."""
        return '"' + identifier.replace('"', '""') + '"'

    def __repr__(self) -> str:
        return f"Dialect({self.name})"


SQLITE = Dialect(name="sqlite", p="?", is_="IS", is_not="IS NOT", ilike="LIKE", begin="BEGIN IMMEDIATE",
                 insert_ignore="INSERT OR IGNORE", on_conflict_ignore="", insert_undone_whole="INSERT OR FAIL",
                 percent="%")
POSTGRES = Dialect(name="postgresql", p="%s", is_="IS NOT DISTINCT FROM", is_not="IS DISTINCT FROM", ilike="ILIKE",
                   begin="BEGIN", insert_ignore="INSERT", on_conflict_ignore=" ON CONFLICT DO NOTHING",
                   insert_undone_whole="INSERT", percent="%%")
DIALECTS = {d.name: d for d in (SQLITE, POSTGRES)}


def dialect_of(target) -> Dialect:
    """The dialect of a store (`Store.engine`), a database or connection (`.dialect`, which the
    PostgreSQL adapter sets and sqlite3 / sqlite-utils lack), or a dialect's name."""
    if isinstance(target, Dialect):
        return target
    if isinstance(target, str):
        return DIALECTS[target]
    name = getattr(target, "engine", None) or getattr(target, "dialect", None) or "sqlite"
    return name if isinstance(name, Dialect) else DIALECTS.get(name, SQLITE)


__all__ = ["Dialect", "Statement", "SQLITE", "POSTGRES", "DIALECTS", "dialect_of"]
