"""The `crawl_runs` table: a run's row from start to its counts, runs whose process died, and
what `status` asks of them (`store.runs`); each statement is spelled with the store's dialect
(engines/dialect.py)."""
from __future__ import annotations

import json
import os
from typing import Any

from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines.dialect import dialect_of


class Runs:
    """The runs of one store (its `write`, `query` and `scalar`)."""

    def __init__(self, store):
        self.store = store

    def start_run(self, source: str, mode: str, status: str, pid: int, since=None, until=None) -> int:
        d = dialect_of(self.store)

        def op(db):
            # RETURNING rather than lastrowid: the one spelling both engines answer.
            return db.conn.execute(d.write(
                f"INSERT INTO crawl_runs (source, mode, status, pid, started_at, since, until) VALUES ({d.params(7)}) "
                "RETURNING id"), [source, mode, status, pid, utc_now_iso(), since, until],
            ).fetchone()[0]
        return self.store.write(op)

    def update_run(self, run_id: int, **fields: Any) -> None:
        if not fields:
            return
        fields = {k: (json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v) for k, v in fields.items()}
        d = dialect_of(self.store)
        assignments = ", ".join(f"{d.quote(k)} = {d.p}" for k in fields)
        self.store.write(lambda db: db.conn.execute(d.write(f"UPDATE crawl_runs SET {assignments} WHERE id = {d.p}"),
                                                    [*fields.values(), run_id]))

    def close_dead_runs(self, *, exclude_run_id: int | None = None, lock_held: bool = False) -> list[int]:
        """Mark `running` / `waiting` rows whose process is gone as `crashed` (kill -9, power
        loss: the process never wrote its end). Returns their ids.

        A row is dead when its pid no longer exists; a `running` row is also dead when the
        caller holds the run lock (`lock_held`) and the row is not this process's: the lock
        is an flock the kernel releases when its holder dies, so nobody else can be running,
        whatever process now carries a reused pid.

        On PostgreSQL crawls run on several machines under per-source advisory locks: a pid is
        alive while a connection named for it exists (pg_stat_activity), and a held lock speaks
        for its own source only."""
        d = dialect_of(self.store)
        rows = self.store.query(d.query("SELECT id, pid, status, source FROM crawl_runs "
                                        "WHERE status IN ('running', 'waiting')"))
        own = next((row["source"] for row in rows if row["id"] == exclude_run_id), None)
        alive = self._process_alive

        def lock_says_dead(row) -> bool:
            if not lock_held or row["status"] != "running" or row["pid"] == os.getpid():
                return False
            return self.store.engine == "sqlite" or row["source"] == own
        dead = [row["id"] for row in rows if row["id"] != exclude_run_id and (
            not alive(row["pid"]) or lock_says_dead(row))]
        if dead:
            now = utc_now_iso()
            self.store.write(lambda db: db.conn.execute(d.write(
                f"UPDATE crawl_runs SET status = 'crashed', finished_at = COALESCE(finished_at, {d.p}), "
                f"error = COALESCE(error, 'the process ended without closing its run (killed or crashed)') "
                f"WHERE id IN ({d.params(len(dead))}) AND status IN ('running', 'waiting')"), [now, *dead]))
        return dead

    def _process_alive(self, pid: int | None) -> bool:
        if self.store.engine == "sqlite":
            return pid_alive(pid)
        if pid == os.getpid():
            return True
        from basecrawler.store.engines.pg import APPLICATION_PREFIX
        d = dialect_of(self.store)
        return bool(self.store.scalar(
            d.query(f"SELECT COUNT(*) FROM pg_stat_activity WHERE application_name {d.ilike} {d.p}"),
            [f"{APPLICATION_PREFIX} % {int(pid or 0)}"]))

    def session(self) -> str:
        """A token for whoever writes through this store, whose liveness any other process can
        check with `session_alive`: this process's pid (SQLite, one machine), or the server
        process of this connection (PostgreSQL, any machine)."""
        if self.store.engine == "sqlite":
            return str(os.getpid())
        return f"pg{self.store.scalar(dialect_of(self.store).query('SELECT pg_backend_pid()'))}"

    def session_alive(self, token: str) -> bool:
        if token.startswith("pg"):
            if self.store.engine != "postgresql" or not token[2:].isdigit():
                return False
            d = dialect_of(self.store)
            return bool(self.store.scalar(d.query(f"SELECT COUNT(*) FROM pg_stat_activity WHERE pid = {d.p}"),
                                          [int(token[2:])]))
        return token.isdigit() and pid_alive(int(token))

    def last_run(self, source: str) -> dict | None:
        d = dialect_of(self.store)
        rows = self.store.query(d.query(f"SELECT * FROM crawl_runs WHERE source = {d.p} ORDER BY id DESC LIMIT 1"),
                                [source])
        return rows[0] if rows else None

    def sources_with_runs(self) -> set[str]:
        rows = self.store.query(dialect_of(self.store).query("SELECT DISTINCT source FROM crawl_runs"))
        return {row["source"] for row in rows}

    def last_successful_run(self, source: str) -> dict | None:
        d = dialect_of(self.store)
        rows = self.store.query(d.query(f"SELECT started_at, finished_at FROM crawl_runs WHERE source = {d.p} "
                                        "AND status = 'succeeded' ORDER BY id DESC LIMIT 1"), [source])
        return rows[0] if rows else None

    def run_problem_counts(self, source: str) -> dict[str, int]:
        """Runs of the source that crashed or were interrupted, by status."""
        d = dialect_of(self.store)
        return {row["status"]: row["n"] for row in self.store.query(d.query(
            f"SELECT status, COUNT(*) AS n FROM crawl_runs WHERE source = {d.p} AND status IN ('crashed', 'interrupted') "
            "GROUP BY status"), [source])}


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists (a pid we may not signal still exists)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


__all__ = ["Runs", "pid_alive"]
