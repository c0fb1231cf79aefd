"""The watches table (migration 11): add, find, list, remove, and the matching cursor. Plain
SQL that runs on both engines (the store's PostgreSQL adapter takes the same statements)."""
from __future__ import annotations

from basecrawler.formats.dates import utc_now_iso
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
    store.write(lambda db: db.conn.execute(
        f"INSERT INTO watches ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", [row[n] for n in names]))
    return find(store, watch.name)


def find(store, name: str) -> Watch | None:
    rows = store.query(f"SELECT {_COLUMNS} FROM watches WHERE name = ?", [name])
    return from_row(rows[0]) if rows else None


def get(store, name: str) -> Watch:
    watch = find(store, name)
    if watch is None:
        known = ", ".join(w.name for w in all_watches(store)) or "none"
        raise WatchError(f"no watch named {name!r} (watches: {known})")
    return watch


def all_watches(store) -> list[Watch]:
    return [from_row(r) for r in store.query(f"SELECT {_COLUMNS} FROM watches ORDER BY name")]


def any_watch(store) -> bool:
    """Cheap: whether there is anything to match or deliver (a store from before migration 11
    on PostgreSQL without the table counts as none)."""
    try:
        return store.scalar("SELECT 1 FROM watches LIMIT 1") is not None
    except Exception:
        return False


def remove(store, name: str) -> int:
    """Remove the watch and its outbox rows; how many outbox rows went with it."""
    watch = get(store, name)

    def op(db):
        gone = db.conn.execute("DELETE FROM watch_outbox WHERE watch_id = ?", [watch.id]).rowcount
        db.conn.execute("DELETE FROM watches WHERE id = ?", [watch.id])
        return gone
    return store.write(op)


def set_checked(db, watch_ids, until: str) -> None:
    """Inside the matching transaction: these watches have seen every change up to `until`."""
    ids = list(watch_ids)
    for start in range(0, len(ids), 500):   # one statement per 500 watches, not one a watch
        chunk = ids[start:start + 500]
        db.conn.execute(f"UPDATE watches SET checked_until = ? WHERE id IN ({','.join('?' * len(chunk))})",
                        [until, *chunk])
