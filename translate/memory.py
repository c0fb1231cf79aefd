"""Translation memory: a string (normalised) is translated once and reused from then on.

Manufacturer names, component names and remedy boilerplate repeat thousands of times, so the
`translation_memory` table is what keeps backend calls per row far below one. Only
translations that passed the guards are remembered.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata

from basecrawler.dates import utc_now_iso

_SPACES = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """NFC, whitespace runs collapsed to one space, trimmed: the form that is sent and keyed."""
    return _SPACES.sub(" ", unicodedata.normalize("NFC", text)).strip()


def text_hash(normalized: str) -> str:
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


class TranslationMemory:
    """Reads through the store (under its connection lock); writes happen inside the worker's
    transaction."""

    def __init__(self, store, target_lang: str = "ko"):
        self.store = store
        self.target_lang = target_lang

    def lookup(self, source_lang: str, texts) -> dict[str, str]:
        """{normalised text: remembered translation} for the texts that are remembered."""
        by_hash = {text_hash(t): t for t in texts}
        found: dict[str, str] = {}
        hashes = list(by_hash)
        for start in range(0, len(hashes), 500):
            chunk = hashes[start:start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.store.query(
                f"SELECT source_hash, source_text, translated_text FROM translation_memory "
                f"WHERE source_lang = ? AND target_lang = ? AND source_hash IN ({marks})",
                [source_lang, self.target_lang, *chunk],
            )
            for row in rows:
                if row["source_text"] == by_hash[row["source_hash"]]:   # a hash collision is not a hit
                    found[row["source_text"]] = row["translated_text"]
        return found

    def remember(self, db, source_lang: str, entries: dict[str, str], backend: str) -> None:
        """Insert new entries (inside the caller's transaction); an existing one is kept."""
        now = utc_now_iso()
        db.conn.executemany(
            "INSERT INTO translation_memory (source_lang, target_lang, source_hash, source_text, translated_text, "
            "backend, created_at, uses) VALUES (?,?,?,?,?,?,?,0) "
            "ON CONFLICT(source_lang, target_lang, source_hash) DO NOTHING",
            [(source_lang, self.target_lang, text_hash(t), t, ko, backend, now) for t, ko in entries.items()],
        )

    def count_uses(self, db, source_lang: str, uses: dict[str, int]) -> None:
        db.conn.executemany(
            "UPDATE translation_memory SET uses = uses + ? WHERE source_lang = ? AND target_lang = ? AND source_hash = ?",
            [(n, source_lang, self.target_lang, text_hash(t)) for t, n in uses.items()],
        )
