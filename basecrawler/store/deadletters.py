"""The `dead_letters` table: an item that did not become records, kept with its raw input until
a retry resolves it (`store.dead_letters`); each statement is spelled with the store's dialect."""
from __future__ import annotations

import json
from typing import Any

from basecrawler.formats.dates import utc_now_iso
from basecrawler.recordtypes.upsert import json_default as _json_default
from basecrawler.store.engines.dialect import dialect_of


def encode_raw(raw: Any) -> tuple[str, str | None, bytes | None]:
    """A raw item as (kind, text, bytes) for the dead_letters table."""
    if raw is None:
        return "none", None, None
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return "bytes", None, bytes(raw)
    if isinstance(raw, str):
        return "text", raw, None
    return "json", json.dumps(raw, ensure_ascii=False, default=_json_default), None


def decode_raw(kind: str, text: str | None, blob: bytes | None) -> Any:
    if kind.endswith(_UTF8_SUFFIX):   # text kept as bytes (it held NUL; see add_dead_letter)
        kind, text, blob = kind[:-len(_UTF8_SUFFIX)], bytes(blob).decode("utf-8"), None
    if kind == "bytes":
        return blob
    if kind == "json":
        return json.loads(text) if text is not None else None
    return text


_UTF8_SUFFIX = "_utf8"


class DeadLetters:
    """The dead letters of one store (its `write` and `query`)."""

    def __init__(self, store):
        self.store = store

    def add_dead_letter(self, *, source: str, run_id: int | None, stage: str, kind: str, error: str,
                        raw: Any, record_key: str | None = None, url: str | None = None,
                        response_sha256: str | None = None, record_type: str | None = None) -> int:
        """Keep one item that did not become records. `record_key` is the last field of the
        record key it was meant to have (the publisher's own number or id), as text, when known;
        `record_type` the type it was meant to be, None for the source's default type."""
        raw_kind, raw_text, raw_bytes = encode_raw(raw)
        if self.store.engine == "postgresql":
            # PostgreSQL text cannot hold NUL (SQLite can): such a raw item is kept as its UTF-8
            # bytes under `<kind>_utf8`, which decode_raw turns back into the same text.
            if raw_text is not None and "\x00" in raw_text:
                raw_kind, raw_text, raw_bytes = raw_kind + _UTF8_SUFFIX, None, raw_text.encode("utf-8")
            error = error.replace("\x00", "\\x00")

        d = dialect_of(self.store)

        def op(db):
            return db.conn.execute(d.write(
                "INSERT INTO dead_letters (source, run_id, stage, kind, error, record_key, url, "
                "response_sha256, raw_kind, raw, raw_bytes, created_at, retry_count, record_type) "
                f"VALUES ({d.params(12)}, 0, {d.p}) RETURNING id"),
                [source, run_id, stage, kind, error[:4000], record_key, url, response_sha256,
                 raw_kind, raw_text, raw_bytes, utc_now_iso(), record_type],
            ).fetchone()[0]
        return self.store.write(op)

    def open_dead_letters(self, source: str | None = None) -> list[dict]:
        d = dialect_of(self.store)
        where, params = ("resolved_at IS NULL AND source = " + d.p, [source]) if source else ("resolved_at IS NULL", [])
        return self.store.query(d.query(f"SELECT * FROM dead_letters WHERE {where} ORDER BY id"), params)

    def dead_letter_retried(self, letter_id: int, *, error: str | None, at: str) -> None:
        """One `dead-letters retry` of a letter: resolved when `error` is None, else its new error."""
        d = dialect_of(self.store)
        column, value = ("resolved_at", at) if error is None else ("error", error[:4000])
        self.store.write(lambda db: db.conn.execute(d.write(
            f"UPDATE dead_letters SET {column} = {d.p}, retried_at = {d.p}, retry_count = retry_count + 1 "
            f"WHERE id = {d.p}"), [value, at, letter_id]))

    # Resolving inside another table's write (the transaction `db` is open): what a letter lost
    # is now stored, and the two changes commit together.
    @staticmethod
    def resolve(db, letter_ids: list[int], *, at: str) -> int:
        """Resolve these letters (the list ledger's item they were written for is collected);
        returns how many were still open."""
        if not letter_ids:
            return 0
        d = dialect_of(db.conn)
        return db.conn.execute(d.write(f"UPDATE dead_letters SET resolved_at = {d.p} WHERE resolved_at IS NULL AND id IN "
                                       f"({d.params(len(letter_ids))})"), [at, *letter_ids]).rowcount

    @staticmethod
    def resolve_detail(db, source: str, record_key: str, *, at: str) -> None:
        """Resolve the detail-stage letters of a record (its enrichment item is settled)."""
        d = dialect_of(db.conn)
        db.conn.execute(d.write(f"UPDATE dead_letters SET resolved_at = {d.p} WHERE source = {d.p} AND stage = 'detail' "
                                f"AND record_key = {d.p} AND resolved_at IS NULL"), [at, source, record_key])

    def list_dead_letters(self, source: str | None = None, *, include_resolved: bool = False,
                          limit: int = 100) -> list[dict]:
        """Newest first, with a preview of the raw input instead of all of it (`dead-letters list`)."""
        d = dialect_of(self.store)
        where, params = ["1=1"], []
        if not include_resolved:
            where.append("resolved_at IS NULL")
        if source:
            where.append(f"source = {d.p}")
            params.append(source)
        return self.store.query(d.query(
            "SELECT id, source, run_id, stage, kind, error, record_key, url, response_sha256, raw_kind, "
            "substr(raw, 1, 300) AS raw_preview, length(raw_bytes) AS raw_bytes_size, created_at, retried_at, "
            f"resolved_at, retry_count FROM dead_letters WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT {d.p}"),
            [*params, limit])

    def sources_with_open_dead_letters(self) -> list[str]:
        rows = self.store.query(dialect_of(self.store).query(
            "SELECT DISTINCT source FROM dead_letters WHERE resolved_at IS NULL"))
        return sorted(row["source"] for row in rows)

    def count_open_dead_letters(self, source: str | None = None) -> int:
        d = dialect_of(self.store)
        if source is None:
            return self.store.scalar(d.query("SELECT COUNT(*) FROM dead_letters WHERE resolved_at IS NULL"))
        return self.store.scalar(d.query(f"SELECT COUNT(*) FROM dead_letters WHERE source = {d.p} AND resolved_at IS NULL"),
                                 [source])


__all__ = ["DeadLetters", "encode_raw", "decode_raw"]
