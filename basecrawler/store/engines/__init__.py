"""Database engines behind the one store contract (basecrawler/store/core.py).

SQLite (a path; the default, no server) is used through the standard library as before.
PostgreSQL (`postgresql://…`, through psycopg 3) goes through `pg.PgConnection`, an adapter with
the sqlite3 connection's surface (`execute`, `executemany`, `fetchone`, `rowcount`,
`description`), so every store method and every module writing through
`store.write(lambda db: db.conn.execute(…))` runs on both engines. Each statement is spelled
for its engine with the engine's dialect (`dialect`: `dialect_of(store or conn)`, SQLITE or
POSTGRES) and says whether it only reads. PostgreSQL runs only statements so stated, as
written; plain SQL is refused there (`pg.MisspeltStatement`), never rewritten (issue #35).

Modules: `dialect` (what differs between the engines' SQL), `pg` (the adapter: transactions,
reconnecting), `pg_connect` (connecting with timeouts, the watchdog, lost-connection errors),
`pg_cursor` (the cursor and value conversions), `pg_upsert` and
`pg_lookup` (the batch write and keyed reads), `pg_migrations` (the step-wise PostgreSQL schema
migrations), `transfer` (`migrate --to`: every table from one engine to the other, and
read-only SQLite snapshots of a PostgreSQL store).
"""
from __future__ import annotations

import re
from urllib.parse import unquote

_PASSWORD_PARAM = re.compile(r"(?i)(\bpassword=)[^&\s]*")


def is_postgres_url(target) -> bool:
    """Whether a --db / BASECRAWLER_DB value names a PostgreSQL server rather than a file."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def redact(url: str) -> str:
    """The URL without its password, for logs and messages, whatever the URL holds.

    No URL parser is trusted here: a password with `#`, `/`, `?` or a raw `%` makes urlsplit
    find no password at all (and print it whole). Everything before the last `@` is the user
    part, so an odd URL is over-redacted rather than leaked; `password=` parameters go too."""
    if not isinstance(url, str):
        return url
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _PASSWORD_PARAM.sub(r"\1***", url)
    if "@" in rest:
        userinfo, _, hostpart = rest.rpartition("@")
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        rest = f"{userinfo}@{hostpart}"
    return scheme + sep + _PASSWORD_PARAM.sub(r"\1***", rest)


def url_secrets(url: str) -> list[str]:
    """The password of a database URL as written and percent-decoded (longest first), for
    scrubbing error texts that may quote it (libpq's "invalid percent-encoded token: …")."""
    if not isinstance(url, str):
        return []
    found = []
    _, sep, rest = url.partition("://")
    if sep and "@" in rest:
        userinfo = rest.rpartition("@")[0]
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    found += [m.group(0).split("=", 1)[1] for m in _PASSWORD_PARAM.finditer(url)]
    secrets = set()
    for secret in found:
        if secret:
            secrets.add(secret)
            try:
                secrets.add(unquote(secret, errors="strict"))
            except UnicodeDecodeError:
                pass
    return sorted((s for s in secrets if s), key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` with the URL's password replaced by *** (and the URL itself redacted)."""
    text = str(text)
    if isinstance(url, str) and url:
        text = text.replace(url, redact(url))
    for secret in url_secrets(url):
        text = text.replace(secret, "***")
    return text


__all__ = ["is_postgres_url", "redact", "scrub", "url_secrets"]
