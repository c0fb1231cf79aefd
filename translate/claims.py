"""Claims: which translator is working on which row, so no two send the same row to a backend.

A claim is a row of `translation_claims` (table, row id, claimer, claimed_at), apart from the
record tables so every record type shares one mechanism. The claimer names its worker:
`"<host> <pid> <random>"`. While the worker works, a lease thread renews `claimed_at` every
quarter lease. Any running translator, before each batch, takes back the claims of a worker
that is gone:
- its process no longer exists on this host (killed), or
- its lease is older than BASECRAWLER_TRANSLATE_LEASE seconds (default 120): a worker on
  another machine that died, hung or lost its connection.
A worker taken back from by mistake (stalled longer than a lease) loses nothing: a row is
written only while it is still untranslated with the originals that were sent.

Claiming is one statement on both engines: `INSERT … SELECT … ON CONFLICT DO NOTHING
RETURNING`; on PostgreSQL the SELECT skips rows another claimer's statement holds
(FOR UPDATE SKIP LOCKED), and the primary key makes a row claimable by one worker only.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from basecrawler.errors import ConfigError
from basecrawler.store.core import pid_alive
from basecrawler.store.engines.dialect import dialect_of

from .targets import Target

log = logging.getLogger(__name__)

DEFAULT_LEASE_S = 120.0
TABLE = "translation_claims"
_CLAIM_ATTEMPTS = 3


def lease_from_env(environ=None) -> float:
    environ = os.environ if environ is None else environ
    text = environ.get("BASECRAWLER_TRANSLATE_LEASE")
    try:
        value = float(text) if text else DEFAULT_LEASE_S
    except ValueError:
        value = -1
    if value <= 0:
        raise ConfigError(f"BASECRAWLER_TRANSLATE_LEASE must be a positive number of seconds, not {text!r}")
    return value


def _host() -> str:
    return socket.gethostname()[:40].replace(" ", "_")


class Claims:
    """One worker's claims in one store."""

    def __init__(self, store, *, lease_s: float | None = None):
        self.store = store
        self.lease_s = lease_from_env() if lease_s is None else lease_s
        self.host = _host()
        self.claimer = f"{self.host} {os.getpid()} {uuid.uuid4().hex[:12]}"
        self._keeper: threading.Thread | None = None
        self._halt = threading.Event()
        self.sql = dialect_of(store)

    # ---- taking rows -------------------------------------------------------------------
    def claim(self, target: Target, position, size: int) -> list[dict]:
        """Claim up to `size` pending rows of `target` that nobody holds, after `position`
        (the last row's (sort_key, id)) newest first; returns them with their originals."""
        for _ in range(_CLAIM_ATTEMPTS):
            ids = self._claim_ids(target, position, size)
            # On PostgreSQL a claimer racing another can come back empty although rows are
            # left (its snapshot did not see the other's claims yet): look again before
            # calling the queue empty.
            if ids or not self._claimable(target, position):
                break
        if not ids:
            return []
        d = self.sql
        rows = self.store.query(d.query(f"SELECT {target.select_columns()} FROM {target.table} "
                                        f"WHERE id IN ({d.params(len(ids))})"), ids)
        rows.sort(key=lambda r: (r["sort_key"], r["id"]), reverse=True)   # RETURNING has no order
        return rows

    def _where_pending(self, target: Target, position) -> tuple[str, list]:
        p = self.sql.p
        where = (f"t.translated_at IS NULL AND NOT EXISTS "
                 f"(SELECT 1 FROM {TABLE} c WHERE c.tbl = {p} AND c.row_id = t.id)")
        params: list = [target.table]
        if position is not None:
            where += f" AND ({target.order} < {p} OR ({target.order} = {p} AND t.id < {p}))"
            params += [position[0], position[0], position[1]]
        return where, params

    def _claim_ids(self, target: Target, position, size: int) -> list[int]:
        where, params = self._where_pending(target, position)
        lock = " FOR UPDATE OF t SKIP LOCKED" if self.store.engine == "postgresql" else ""
        d = self.sql
        sql = d.write(f"INSERT INTO {TABLE} (tbl, row_id, claimed_by, claimed_at) "
                      f"SELECT {d.p}, t.id, {d.p}, {d.p} FROM {target.table} t WHERE {where} "
                      f"ORDER BY {target.order} DESC, t.id DESC LIMIT {d.p}{lock} "
                      f"ON CONFLICT (tbl, row_id) DO NOTHING RETURNING row_id")
        rows = self.store.write_returning(sql, [target.table, self.claimer, time.time(), *params, size])
        return [row["row_id"] for row in rows]

    def _claimable(self, target: Target, position) -> bool:
        where, params = self._where_pending(target, position)
        return bool(self.store.scalar(self.sql.query(f"SELECT 1 FROM {target.table} t WHERE {where} LIMIT 1"), params))

    # ---- giving rows back ----------------------------------------------------------------
    @property
    def _delete_by_claimer(self):
        return self.sql.write(f"DELETE FROM {TABLE} WHERE claimed_by = {self.sql.p}")

    def done(self, db, target: Target, ids) -> None:
        """Inside the worker's write transaction: these rows are finished (or skipped)."""
        ids = list(ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            db.conn.execute(self.sql.write(f"DELETE FROM {TABLE} WHERE tbl = {self.sql.p} "
                                           f"AND row_id IN ({self.sql.params(len(chunk))})"), [target.table, *chunk])

    def release(self) -> None:
        """Give back every row this worker claimed and did not write (a stop, a limit, a down
        backend); on failure the claims return when the lease runs out."""
        try:
            self.store.write(lambda db: db.conn.execute(self._delete_by_claimer, [self.claimer]))
        except Exception as exc:
            log.warning("translate: could not release claimed rows (they return after the %.0fs lease): %s",
                        self.lease_s, exc)

    def reclaim_dead(self) -> int:
        """Take back the claims of workers that are gone; returns how many rows came back."""
        cutoff = time.time() - self.lease_s
        d = self.sql
        claimers = [row["claimed_by"] for row in self.store.query(d.query(f"SELECT DISTINCT claimed_by FROM {TABLE}"))]
        dead = [c for c in claimers if c != self.claimer and self._process_gone(c)]
        stale = self.store.scalar(d.query(f"SELECT COUNT(*) FROM {TABLE} WHERE claimed_at < {d.p} AND claimed_by <> {d.p}"),
                                  [cutoff, self.claimer])
        if not dead and not stale:
            return 0

        def op(db):
            taken = sum(db.conn.execute(self._delete_by_claimer, [c]).rowcount for c in dead)
            # Re-checked in the DELETE: a worker that renewed since the count keeps its rows.
            return taken + db.conn.execute(d.write(f"DELETE FROM {TABLE} WHERE claimed_at < {d.p} AND claimed_by <> {d.p}"),
                                           [cutoff, self.claimer]).rowcount
        taken = self.store.write(op)
        if taken:
            log.warning("translate: took back %d rows claimed by workers that died (%s) or let their %.0fs lease "
                        "run out", taken, ", ".join(dead) or "none on this host", self.lease_s)
        return taken

    def _process_gone(self, claimer: str) -> bool:
        host, _, rest = claimer.partition(" ")
        pid = rest.partition(" ")[0]
        return host == self.host and pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid))

    # ---- the lease -----------------------------------------------------------------------
    def renew(self) -> None:
        d = self.sql
        self.store.write(lambda db: db.conn.execute(
            d.write(f"UPDATE {TABLE} SET claimed_at = {d.p} WHERE claimed_by = {d.p}"), [time.time(), self.claimer]))

    def keep_alive(self) -> None:
        """Start renewing the lease every quarter lease, until `stop_keeping`."""
        def loop():
            while not self._halt.wait(self.lease_s / 4):
                try:
                    self.renew()
                except Exception as exc:   # the next renewal may work; others wait for the lease
                    log.warning("translate: could not renew the claims' lease: %s", exc)
        self._halt.clear()
        self._keeper = threading.Thread(target=loop, name="translate-lease", daemon=True)
        self._keeper.start()

    def stop_keeping(self) -> None:
        self._halt.set()
        if self._keeper is not None:
            self._keeper.join(timeout=5)
            self._keeper = None
