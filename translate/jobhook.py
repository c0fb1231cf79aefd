"""The translation worker's part of the daily job. Registered with basecrawler through the
entry point `basecrawler.job_hooks` (pyproject.toml), so the framework runs it after the
sources without importing this package."""
from __future__ import annotations

import logging

log = logging.getLogger("basecrawler.operations.scheduler")


def translate_after_job(store, *, settings=None, stop=None) -> str:
    """Translate what the job left pending; returns the outcome line for the job report."""
    # Imported when called: the worker pulls in the backends, and tests swap these modules out.
    from translate.backends import backend_from_env
    from translate.worker import translate_pending

    from translate.originals import settle_originals

    backend = backend_from_env()
    if backend is None:
        settled = settle_originals(store)   # Korean originals need no backend
        line = "skipped: no translation backend configured"
        if settled:
            line += f" (already Korean {settled})"
        log.info("schedule: translation %s", line)
        return line
    try:
        outcome = translate_pending(store, backend, stop=stop)
    finally:
        close = getattr(backend, "close", None)   # test doubles may have none
        if close is not None:
            close()
    if getattr(outcome, "backend_down", False):
        log.warning("schedule: translation backend is down; untranslated rows stay pending for the next run")
    return outcome.summary_line()
