"""Dead letters: keeping what could not become a stored record (with its raw input and where it
came from), and re-parsing those letters later with a fixed parser (`dead-letters retry`).

Listing them is the store's (`store.dead_letters.list_dead_letters`); the `dead-letters` command shows them.
`crawler` below is the running source's public API (source_api.SourceAPI: `store`, `counts`,
`last_response_sha256()`, `ledger_in_use()`, `records_from()`, `prepare_record()`).
"""
from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from basecrawler.formats.dates import utc_now_iso
from basecrawler.errors import FetchError, Interrupted
from basecrawler.pipeline.records import Raw
from basecrawler.pipeline.runlock import RunLock
from basecrawler.store.core import decode_raw



log = logging.getLogger("basecrawler")


def record(crawler, raw: Any, error: BaseException | str, *, stage: str = "fetch",
           kind: str | None = None, url: str | None = None, key: str | None = None,
           response_sha256: str | None = None, record_type: str | None = None) -> None:
    """Keep one item the crawler could not turn into records, count it, and tie it to the
    ledger's current list item (a fetch-stage letter is resolved once that item is collected)."""
    if isinstance(error, Interrupted):
        raise error  # a requested stop, caught by an `except Exception` on its way out
    if isinstance(raw, Raw):
        url = url or raw.url
        response_sha256 = response_sha256 or raw.response_sha256
        raw = raw.data
    if kind is None:
        kind = getattr(error, "kind", None) or ("parse_error" if stage == "parse" else "unexpected")
    if isinstance(error, FetchError):
        url = url or error.url
        response_sha256 = response_sha256 or error.response_sha256
    if response_sha256 is None and stage in ("parse", "store"):
        # The body the item came from, so the letter can be traced back to the archive.
        response_sha256 = crawler.last_response_sha256()
    message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    # A letter of a fetch or parse failure is meant to be a record of the source's own type.
    record_type = record_type or crawler.record_type
    letter_id = crawler.store.dead_letters.add_dead_letter(
        source=crawler.source, run_id=crawler.run_id, stage=stage, kind=kind, error=message, raw=raw,
        record_key=key, url=url, response_sha256=response_sha256, record_type=record_type,
    )
    crawler.counts.dead_lettered += 1
    ledger = crawler.ledger_in_use()
    if stage == "fetch" and ledger is not None:
        ledger.note_letter(letter_id)  # resolved once the list item is collected
    log.error("%s: dead letter (%s/%s) %s%s", crawler.source, stage, kind, (message.splitlines() or [""])[0][:300],
              f" [{url}]" if url else "")   # one line: a traceback kept in the letter stays there


def retry(crawler) -> dict:
    """Re-parse the source's open parse/store dead letters with the current parser, from the
    kept raw input (no re-fetch), and store what now parses, each record by its type, through
    the pipeline's own record making (records.py). Under the run lock."""
    outcome = {"retried": 0, "resolved": 0, "still_failing": 0}
    store = crawler.store
    with RunLock(store.path, crawler.settings.lock_timeout_s, scope=crawler.source):
        letters = [l for l in store.dead_letters.open_dead_letters(crawler.source) if l["stage"] in ("parse", "store")]
        for letter in letters:
            outcome["retried"] += 1
            error = _store_again(crawler, decode_raw(letter["raw_kind"], letter["raw"], letter["raw_bytes"]))
            outcome["resolved" if error is None else "still_failing"] += 1
            store.dead_letters.dead_letter_retried(letter["id"], error=error, at=utc_now_iso())
    log.info("%s: dead letters retried %d → resolved %d, still failing %d", crawler.source,
             outcome["retried"], outcome["resolved"], outcome["still_failing"])
    return outcome


def _store_again(crawler, raw: Any) -> str | None:
    """None when the raw input now parses and stores, else why not."""
    try:
        if raw is None:  # only the whole response was kept: not one item parse() can take
            raise ValueError("no raw item was kept for this letter; the next crawl fetches it again")
        by_type: dict = {}
        for record_type, made in crawler.records_from(raw):
            by_type.setdefault(record_type, []).append(crawler.prepare_record(made, record_type))
        failed = []
        for record_type, made in by_type.items():
            failed += crawler.store.upsert(record_type, made, source=crawler.source, raws=[raw] * len(made)).failed
        return failed[0][1] if failed else None
    except ValidationError as exc:
        return short_validation(exc)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def short_validation(exc: ValidationError) -> str:
    """A model refusal as one line: the first five fields and why."""
    parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]]
    return "validation failed: " + "; ".join(parts)


__all__ = ["record", "retry", "short_validation"]
