"""Text already in the target language is never sent to a translator: rows whose source
language is Korean (any source with `source_lang = "ko"`, such as Korea's own publishers) have
their originals copied into their `_ko` fields and are stamped translated, so `translate`,
`status` and the daily job count them done and no backend ever sees them."""
from __future__ import annotations

import logging

from basecrawler.formats.dates import utc_now_iso
from basecrawler.store.engines.dialect import Dialect, dialect_of

from .targets import translation_targets

log = logging.getLogger(__name__)

# translation_note of a row whose originals are its Korean (reader-visible: Korean first).
ORIGINAL_NOTE = "원문이 한국어 (original in Korean)"


def _in_target_lang(d: Dialect, target_lang: str) -> tuple[str, list[str]]:
    """The SQL condition (and its parameters) of a row whose source language is `target_lang`
    ("ko", "KO", "ko-KR")."""
    return (f"(LOWER(source_lang) = {d.p} OR LOWER(source_lang) {d.ilike} {d.p})",
            [target_lang.lower(), target_lang.lower() + "-%"])


def settle_originals(store, target_lang: str = "ko") -> int:
    """Rows pending whose source language is `target_lang`: their originals become their
    `_ko` fields and they are stamped translated, in one statement per type, without a
    backend. Returns how many rows."""
    d = dialect_of(store)
    condition, params = _in_target_lang(d, target_lang)
    now = utc_now_iso()

    def op(db):
        settled = 0
        for target in translation_targets(store):
            if not target.has_lang:
                continue
            copies = ", ".join(f"{k} = {o}" for o, k in zip(target.originals, target.koreans))
            settled += db.conn.execute(d.write(
                f"UPDATE {target.table} SET {copies}, translated_at = {d.p}, translation_status = 'translated', "
                f"translation_note = {d.p} WHERE translated_at IS NULL AND {condition}"),
                [now, ORIGINAL_NOTE, *params]).rowcount
        return settled
    # Asked first, so a store with nothing in Korean pending takes no write lock for it.
    waiting = [target for target in translation_targets(store) if target.has_lang and store.query(d.query(
        f"SELECT 1 FROM {target.table} WHERE translated_at IS NULL AND {condition} LIMIT 1"), list(params))]
    if not waiting:
        return 0
    settled = store.write(op)
    if settled:
        log.info("translate: %d rows already in Korean kept as their own translation", settled)
    return settled
