"""The part of sqlite3's cursor the project uses, over a psycopg cursor, and the values on the
way in and out: booleans are bound as 0/1 (as SQLite stores them) and numeric results (SUM, AVG
of integers) come back as int or float rather than Decimal, as SQLite returns them. Timestamps
and JSON are ISO / JSON text on both engines."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

import psycopg
from psycopg.adapt import Loader


def bind(params: Any) -> tuple[Any, bool]:
    """(params for psycopg, named?) with booleans as 0/1 like SQLite stores them."""
    if params is None:
        return [], False
    if isinstance(params, dict):
        return {k: int(v) if isinstance(v, bool) else v for k, v in params.items()}, True
    return [int(v) if isinstance(v, bool) else v for v in params], False


class NumericLoader(Loader):
    """numeric (SUM, AVG of integers) as int or float, the types SQLite hands back."""

    def load(self, data):
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


class Cursor:
    """The part of sqlite3.Cursor the project uses."""

    def __init__(self, cursor: psycopg.Cursor):
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def description(self):
        return [(c.name, None, None, None, None, None, None) for c in self._cursor.description or ()]

    @property
    def lastrowid(self):
        raise NotImplementedError("PostgreSQL has no lastrowid: use INSERT … RETURNING id")

    def fetchone(self):
        return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self) -> list:
        return self._cursor.fetchall() if self._cursor.description else []

    def __iter__(self):
        return iter(self._cursor) if self._cursor.description else iter(())


class NoRows:
    """The cursor of a statement that did not need to run (ROLLBACK of a lost transaction)."""

    rowcount = 0
    description: list = []

    def fetchone(self):
        return None

    def fetchall(self) -> list:
        return []

    def __iter__(self):
        return iter(())


EMPTY = NoRows()

__all__ = ["Cursor", "NoRows", "EMPTY", "NumericLoader", "bind"]
