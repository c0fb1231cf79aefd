"""The list ledger: "not yet collected" beats the date window.

Sources that read a list before the items themselves (EU weekly index → reports, MLIT feed →
press pages, AU listing → detail pages) note every item they choose in `list_ledger`, and
process it inside `with self.ledger.attempt(key):`. An item whose processing raised or
dead-lettered at the fetch stage (a report that answered 500, a press page that answered 404,
a PDF on a foreign host) is `failing`; the next incremental run fetches it again whatever
its date — even after it scrolled out of the list, from what the ledger kept — and its records
are stored even though they are older than the run's window. After
`BASECRAWLER_LEDGER_MAX_ATTEMPTS` (default 5) failed attempts the item is `given_up` (logged as
an ERROR: its records are missing). A full run re-queues given-up items with their attempts
reset, like the enrichment ladder's `gone`.

States: listed (chosen, not processed yet — e.g. the run was killed) → done | failing →
given_up. Only fetch-stage problems count: a parse-stage dead letter keeps the raw input and
is retried by `dead-letters retry`, so fetching the item again would not help.

An item is marked done only once the batch holding its records is stored (`commit()`, called
by the pipeline after each flush), so a run killed in between fetches it again. Marking it
done resolves the fetch dead letters of its earlier failed attempts: what they lost is stored.
A run with an explicit `--since/--until` window stays inside it: retries join only runs
with the default window (and full runs).
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from basecrawler.errors import FetchError

log = logging.getLogger(__name__)

STATES = ("listed", "done", "failing", "given_up")
# Failures that are the host's, not the item's: they end the run and do not use up an attempt.
_NOT_THE_ITEMS_FAULT = ("blocked", "rate_limited", "credentials")


@dataclass
class LedgerItem:
    key: str
    url: str | None = None
    listed_date: str | None = None
    data: dict = field(default_factory=dict)
    state: str = "listed"
    attempts: int = 0
    last_error: str | None = None


class Attempt:
    """One item being processed; `fail()` records why it did not complete."""

    def __init__(self, key: str, beyond_window: bool):
        self.key = key
        self.beyond_window = beyond_window
        self.error: str | None = None
        self.letters: list[int] = []     # fetch dead letters written during this attempt

    def fail(self, error: BaseException | str) -> None:
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self.error = self.error or message


class Ledger:
    def __init__(self, store, source: str, *, max_attempts: int = 5, retries: bool = True, requeue: bool = False):
        self.store = store
        self.source = source
        self.max_attempts = max(1, max_attempts)
        self.retries_enabled = retries   # False for a run with an explicit date window
        self.current: Attempt | None = None
        self._done: list[str] = []
        if requeue:  # a full run: given-up items get a fresh set of attempts
            self.requeue_given_up()
        # Items earlier runs left uncollected: whether this run finds them through the list
        # (AU fetches any recall not stored yet) or through `retries()`, their records are
        # kept whatever their date.
        self._carried: set[str] = ({row["key"] for row in store.ledger.items(source, ("listed", "failing"))}
                                   if retries else set())

    # ---- what sources call ------------------------------------------------------------
    def list(self, key: str, *, url: str | None = None, listed_date=None, data: dict | None = None) -> None:
        """Note an item this run chose from the list (known items keep state and attempts)."""
        self.store.ledger.note(self.source, key, url=url,
                               listed_date=listed_date.isoformat() if hasattr(listed_date, "isoformat") else listed_date,
                               data=data)

    def retries(self, chosen: Iterable[str] = ()) -> list[LedgerItem]:
        """Items not yet collected (listed or failing) that this run did not choose from the
        list itself: fetch them too, whatever their date. Empty when retries are off."""
        if not self.retries_enabled:
            return []
        chosen = set(chosen)
        items = [LedgerItem(key=row["key"], url=row["url"], listed_date=row["listed_date"], data=row["data"],
                            state=row["state"], attempts=row["attempts"], last_error=row["last_error"])
                 for row in self.store.ledger.items(self.source, ("listed", "failing")) if row["key"] not in chosen]
        if items:
            log.info("%s: %d list item(s) not yet collected are fetched again whatever their date: %s",
                     self.source, len(items), ", ".join(item.key for item in items[:10])
                     + (" …" if len(items) > 10 else ""))
        return items

    @contextlib.contextmanager
    def attempt(self, key: str) -> Iterator[Attempt]:
        """Process one item: done when the block ends without a failure (committed with the
        batch holding its records), failing when it raised or `fail()` was called (a
        fetch-stage dead letter calls it)."""
        attempt = Attempt(key, beyond_window=key in self._carried)
        outer, self.current = self.current, attempt
        try:
            yield attempt
        except FetchError as exc:
            self._failed(attempt, f"{type(exc).__name__}: {exc}", count=exc.kind not in _NOT_THE_ITEMS_FAULT)
            raise
        except Exception as exc:
            self._failed(attempt, f"{type(exc).__name__}: {exc}")
            raise
        else:
            if attempt.error is None:
                self._done.append(key)
            else:
                self._failed(attempt, attempt.error)
        finally:
            # GeneratorExit (the pipeline stopped early) lands here: the item stays as it was.
            self.current = outer

    def note_letter(self, letter_id: int | None) -> None:
        if self.current is not None and letter_id is not None:
            self.current.letters.append(letter_id)

    def fail_current(self, error: BaseException | str) -> None:
        if self.current is not None:
            self.current.fail(error)

    @property
    def beyond_window(self) -> bool:
        """True while an item left uncollected by an earlier run is processed: its records
        are kept whatever their date."""
        return self.current is not None and self.current.beyond_window

    # ---- what the framework calls -----------------------------------------------------
    def commit(self) -> None:
        """Mark done the items whose records are now stored."""
        done, self._done = self._done, []
        resolved = self.store.ledger.done(self.source, done)
        if resolved:
            log.info("%s: %d dead letter(s) of earlier failed attempts resolved: their list items are collected",
                     self.source, resolved)

    def requeue_given_up(self) -> int:
        count = self.store.ledger.requeue_given_up(self.source)
        if count:
            log.info("%s: full run: %d given-up list item(s) re-queued", self.source, count)
        return count

    def counts(self) -> dict[str, int]:
        found = self.store.ledger.counts(self.source)
        return {state: found.get(state, 0) for state in STATES}

    def _failed(self, attempt: Attempt, error: str, *, count: bool = True) -> None:
        key = attempt.key
        outcome = self.store.ledger.failed(self.source, key, error, max_attempts=self.max_attempts, count=count,
                                           letters=attempt.letters)
        if outcome.get("state") == "given_up":
            log.error("%s: list item %s given up after %d failed attempts (last: %s); a full run tries it again",
                      self.source, key, outcome["attempts"], error[:200])
        elif count:
            # Says why and where the item is, so the line agrees with the run's counts: what was
            # stored is counted there; an item without a dead letter is kept here, in the ledger.
            kept = "its dead letter is counted in this run" if attempt.letters else "no dead letter: kept in the list ledger"
            log.warning("%s: list item %s not complete yet (%s), attempt %s of %d; %s, the next run asks again",
                        self.source, key, error[:200], outcome.get("attempts"), self.max_attempts, kept)


__all__ = ["Ledger", "LedgerItem", "Attempt", "STATES"]
