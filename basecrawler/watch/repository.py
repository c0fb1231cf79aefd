"""The watches table (migration 11): add, find, list, remove, and the matching cursor, each
statement stated for the store's engine (engines/dialect.py)."""
from __future__ import annotations

from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines.dialect import dialect_of
from basecrawler.watch.model import Watch, WatchError, check, from_row, to_row

_COLUMNS = "id, name, record_type, facets, text, sources, countries, channel, target, options, created_at, checked_until"


def add(store, watch: Watch, *, now: str | None = None, backlog: bool = False) -> Watch:
    """Store a new watch (WatchError if the name is taken). It sees records changed from now
    on; with `backlog`, every stored record once."""
    check(watch)
    if find(store, watch.name) is not None:
        raise WatchError(f"a watch named {watch.name!r} exists already (remove it first)")
    now = now or utc_now_iso()
    row = {**to_row(watch), "created_at": now, "updated_at": now, "checked_until": None if backlog else now}
    names = list(row)
    d = dialect_of(store)
    sql = d.write(f"INSERT INTO watches ({', '.join(names)}) VALUES ({d.params(len(names))})")
    store.write(lambda db: db.conn.execute(sql, [row[n] for n in names]))
    return find(store, watch.name)


def find(store, name: str) -> Watch | None:
    d = dialect_of(store)
    rows = store.query(d.query(f"SELECT {_COLUMNS} FROM watches WHERE name = {d.p}"), [name])
    return from_row(rows[0]) if rows else None


def get(store, name: str) -> Watch:
    watch = find(store, name)
    if watch is None:
        known = ", ".join(w.name for w in all_watches(store)) or "none"
        raise WatchError(f"no watch named {name!r} (watches: {known})")
    return watch


def all_watches(store) -> list[Watch]:
    return [from_row(r) for r in store.query(dialect_of(store).query(f"SELECT {_COLUMNS} FROM watches ORDER BY name"))]


def any_watch(store) -> bool:
    """Cheap: whether there is anything to match or deliver (a store from before migration 11
    on PostgreSQL without the table counts as none)."""
    try:
        return store.scalar(dialect_of(store).query("SELECT 1 FROM watches LIMIT 1")) is not None
    except Exception:
        return False


def remove(store, name: str) -> int:
    """Remove the watch and its outbox rows; how many outbox rows went with it."""
    watch = get(store, name)
    d = dialect_of(store)

    def op(db):
        gone = db.conn.execute(d.write(f"DELETE FROM watch_outbox WHERE watch_id = {d.p}"), [watch.id]).rowcount
        db.conn.execute(d.write(f"DELETE FROM watches WHERE id = {d.p}"), [watch.id])
        return gone
    return store.write(op)


def set_checked(db, watch_ids, until: str) -> None:
    """Inside the matching transaction: these watches have seen every change up to `until`."""
    ids = list(watch_ids)
    d = dialect_of(db.conn)
    for start in range(0, len(ids), 500):   # one statement per 500 watches, not one a watch
        chunk = ids[start:start + 500]
        db.conn.execute(d.write(f"UPDATE watches SET checked_until = {d.p} WHERE id IN ({d.params(len(chunk))})"),
                        [until, *chunk])
