"""Database engines behind the one store contract (basecrawler/store.py).

SQLite (a path; the default, no server) is used through the standard library as before.
PostgreSQL (`postgresql://…`, through psycopg 3) goes through `pg.PgConnection`, an adapter with
the sqlite3 connection's surface (`execute`, `executemany`, `fetchone`, `rowcount`,
`description`) that rewrites the SQLite spelling of the project's SQL into PostgreSQL's, so every
store method and every module writing through `store.write(lambda db: db.conn.execute(…))`
runs unchanged on both engines.
"""
from __future__ import annotations


def is_postgres_url(target) -> bool:
    """Whether a --db / BASECRAWLER_DB value names a PostgreSQL server rather than a file."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def redact(url: str) -> str:
    """The URL without its password, for logs and messages."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


__all__ = ["is_postgres_url", "redact"]
