"""Translation memory: a string (normalised) is translated once and reused from then on.

Manufacturer names, component names and remedy boilerplate repeat thousands of times, so the
`translation_memory` table is what keeps backend calls per row far below one. Only
translations that passed the guards are remembered.
"""
from __future__ import annotations

import functools
import hashlib
import re
import unicodedata

from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines.dialect import Dialect, dialect_of

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
            d = dialect_of(self.store)
            rows = self.store.query(d.query(
                f"SELECT source_hash, source_text, translated_text FROM translation_memory "
                f"WHERE source_lang = {d.p} AND target_lang = {d.p} AND source_hash IN ({d.params(len(chunk))})"),
                [source_lang, self.target_lang, *chunk],
            )
            for row in rows:
                if row["source_text"] == by_hash[row["source_hash"]]:   # a hash collision is not a hit
                    found[row["source_text"]] = row["translated_text"]
        return found

    def write(self, db, new_entries: dict[str, dict[str, str]], uses: dict[str, dict[str, int]], backend: str) -> None:
        """Inside the caller's transaction: insert new entries (an existing one is kept) and add
        use counts, one row per statement in (language, hash) order. Every writer takes the
        row locks of the memory in that one order, so two translators on PostgreSQL can wait
        for each other but never deadlock (two executemany in dict order did)."""
        now = utc_now_iso()
        work = []
        for lang, entries in new_entries.items():
            work += [((lang, text_hash(t)), 0, (lang, self.target_lang, text_hash(t), t, ko, backend, now))
                     for t, ko in entries.items()]
        for lang, counts in uses.items():
            work += [((lang, text_hash(t)), 1, (n, lang, self.target_lang, text_hash(t))) for t, n in counts.items()]
        statements = _statements(dialect_of(db.conn))
        for _, kind, params in sorted(work, key=lambda item: (item[0], item[1])):
            db.conn.execute(statements[kind], params)


    def remember(self, db, source_lang: str, entries: dict[str, str], backend: str) -> None:
        self.write(db, {source_lang: entries}, {}, backend)

    def count_uses(self, db, source_lang: str, uses: dict[str, int]) -> None:
        self.write(db, {}, {source_lang: uses}, "")


@functools.cache
def _statements(d: Dialect) -> tuple[str, str]:
    """(insert an entry unless there, add to its use count) in dialect `d`."""
    return (d.write("INSERT INTO translation_memory (source_lang, target_lang, source_hash, source_text, translated_text, "
                    f"backend, created_at, uses) VALUES ({d.params(7)}, 0) "
                    "ON CONFLICT(source_lang, target_lang, source_hash) DO NOTHING"),
            d.write(f"UPDATE translation_memory SET uses = uses + {d.p} "
                    f"WHERE source_lang = {d.p} AND target_lang = {d.p} AND source_hash = {d.p}"))
