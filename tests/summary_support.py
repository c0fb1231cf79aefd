"""Shared by the web view's summary tests: holding every summary's count until a test lets it go."""
from __future__ import annotations

import threading


def hold_summaries(monkeypatch, summary_module, timeout: float = 30) -> threading.Event:
    """An event every summary's count waits for (up to `timeout` s): the test decides when the
    counts are ready, so "shown before its counts" and "filled in afterwards" cannot race."""
    release = threading.Event()
    real = summary_module._counted

    def held(*args, **kwargs):
        release.wait(timeout)
        return real(*args, **kwargs)
    monkeypatch.setattr(summary_module, "_counted", held)
    return release


def stored_by_a_finished_run(store, recalls):
    """`store` holding `recalls`, written by a run that has finished (the data version the web
    view's counts are kept for)."""
    run = store.runs.start_run("test", "incremental", "running", 1)
    store.upsert("vehicle_recall", recalls, source="test")
    store.runs.update_run(run, status="succeeded", finished_at="2024-01-02T00:00:00+00:00")
    return store
