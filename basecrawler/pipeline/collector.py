"""Python's garbage collector during a run.

A run allocates millions of short-lived dicts and model instances, which reference counting
frees at once; cycles are rare. With the default thresholds the collector still ran about 600
young and 5 full collections for 30,000 records, each full one scanning every long-lived object
(pydantic's schemas, the imported modules), about a fifth of a first run's CPU time
(bench/README.md, "Write path"). During a run it collects less often; the thresholds the process
had come back when the last concurrent run ends.
"""
from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

# Young collections every 200,000 net allocations instead of 700; older generations as often as
# before. The young count is net of what was freed, so it grows by what stays alive: mostly the
# batch being made, about ten tracked objects a record (a batch holds at most 20,000 records,
# `Settings.batch_size`). At 20,000 every batch met collections that walked it and found nothing
# (a run makes almost no cyclic garbage); above a whole batch, one written and freed never
# reaches one. The price is the bound on cyclic garbage waiting for a collection: 200,000 objects.
RUN_THRESHOLDS = (200_000, 50, 100)

_lock = threading.Lock()
_active = 0
_saved: tuple[int, int, int] | None = None


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*(max(mine, theirs) for mine, theirs in zip(RUN_THRESHOLDS, _saved)))
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                gc.set_threshold(*_saved)


__all__ = ["fewer_collections", "RUN_THRESHOLDS"]
