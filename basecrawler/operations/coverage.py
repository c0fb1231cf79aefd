"""Coverage of a rolling-window source: a publisher that lists only its last N days (a feed of
"the recalls of the last 7 days") has no history to catch up from, so the daily run is the only
copy. A source says so with a class attribute, `window_days = N`; nothing here names a source.

Each successful run of such a source covered the N days before it started (the list is read at
the start of the run): `[started_at - N days, started_at]`. Between two successful runs further
apart than N days lies a gap nobody read; after the last one, once now is more than N days
later, what was published between the end of its coverage and N days ago has left the list.
`status` shows the coverage (`--json`: every run's covered window and the gaps) and `doctor`
fails loudly on a current gap. Derived from `crawl_runs` (source, status, started_at): no
schema of its own.
"""
from __future__ import annotations

import datetime as dt
from typing import Callable

from basecrawler.store.engines.dialect import Dialect, dialect_of



def message(kind: str, lang: str | None = None, **values) -> str:
    """The reader-visible lines of this module, in one place, through the catalogue
    (basecrawler/i18n): `lang` None is the reader's language, "en" the operator's."""
    from basecrawler.i18n import gettext as _

    texts = {
        "lost": lambda: _("records published between %(d1)s and %(d2)s may be lost for good (the %(source)s list "
                          "keeps %(days)s days; last successful run %(last)s)", lang, **values),
        "gap": lambda: _("nothing was collected between %(d1)s and %(d2)s (runs more than %(days)s days apart)",
                         lang, **values),
        "never": lambda: _("never collected: the %(source)s list keeps only %(days)s days", lang, **values),
        "covered": lambda: _("covered %(d1)s to %(d2)s (%(days)s-day window)", lang, **values),
        "fix": lambda: _("run it now: basecrawler run --source %(source)s; schedule it daily (README, Daily use)",
                         lang, **values),
        "LOST": lambda: _("LOST", lang),
    }
    return texts[kind]()


# Runs looked at for gaps: a year and more of daily runs, bounded whatever the history.
MAX_RUNS = 500

Query = Callable[[str, list], list]


def window_days(crawler_class) -> int | None:
    """The source's list window in days, None for a source with a history to catch up from."""
    days = getattr(crawler_class, "window_days", None)
    return days if isinstance(days, int) and not isinstance(days, bool) and days > 0 else None


def _moment(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def coverage(query: Query, source_id: str, days: int, now: dt.datetime, dialect: Dialect | None = None) -> dict:
    """The coverage of one rolling-window source: every successful run's covered window (newest
    last), the gaps between them, and the current loss (`lost`, None while the last run is
    recent enough). Dates are ISO days; `message` is the line a reader sees. `dialect`: the
    store's, by default the one of the store whose method `query` is (`store.query`), else SQLite's."""
    d = dialect or dialect_of(getattr(query, "__self__", None))
    rows = query(d.query(f"SELECT id, started_at FROM crawl_runs WHERE source = {d.p} AND status = 'succeeded' "
                         f"ORDER BY id DESC LIMIT {d.p}"), [source_id, MAX_RUNS])
    window = dt.timedelta(days=days)
    started = sorted((m, row["id"]) for m, row in ((_moment(row["started_at"]), row) for row in rows) if m)
    starts = [moment for moment, _ in started]
    # What each run covered: the window before its start (the list is read as the run begins).
    runs = [{"run_id": run_id, "from": (start - window).date().isoformat(), "to": start.date().isoformat()}
            for start, run_id in started]
    gaps = []
    for earlier, later in zip(starts, starts[1:]):
        if later - window > earlier:
            gaps.append({"from": earlier.date().isoformat(), "to": (later - window).date().isoformat(),
                         "days": (later - window - earlier).days})
    report = {"window_days": days, "runs": runs[-30:], "gaps": gaps, "lost": None, "covered": None,
              "message": None, "last_success": starts[-1].isoformat() if starts else None, "source": source_id}
    if not starts:
        report["message"] = message("never", "en", source=source_id, days=days)
        return report
    last = starts[-1]
    if now - window > last:
        report["lost"] = {"from": last.date().isoformat(), "to": (now - window).date().isoformat()}
    else:
        since = dt.datetime.fromisoformat(gaps[-1]["to"]).date() if gaps else (starts[0] - window).date()
        report["covered"] = {"from": since.isoformat(), "to": last.date().isoformat()}
    report["message"] = current_line(report, "en")
    return report


def current_line(report: dict, lang: str | None = None) -> str | None:
    """The line of the source's current state: lost, covered, or never collected."""
    source, days = report.get("source"), report["window_days"]
    if report.get("lost"):
        lost = report["lost"]
        last = dt.datetime.fromisoformat(report["last_success"]).isoformat(timespec="minutes")
        return message("lost", lang, d1=lost["from"], d2=lost["to"], source=source, days=days, last=last)
    if report.get("covered"):
        return message("covered", lang, d1=report["covered"]["from"], d2=report["covered"]["to"], days=days)
    return message("never", lang, source=source, days=days) if report.get("last_success") is None else None


def gap_lines(report: dict, source_id: str, lang: str | None = None) -> list[str]:
    """The lines `status` prints for a rolling-window source, in `lang` (None: the reader's):
    the current loss first (marked LOST), then the past gaps (newest first, at most five)."""
    current = current_line({"source": source_id, **report}, lang)
    lines = [(message("LOST", lang) + " " if report.get("lost") else "") + current] if current else []
    for gap in reversed(report.get("gaps", [])[-5:]):
        lines.append(message("gap", lang, d1=gap["from"], d2=gap["to"], days=report["window_days"]))
    return lines


def doctor_findings(query: Query | None, sources: dict, now: dt.datetime) -> list[dict]:
    """One finding per rolling-window source: {name, ok, note, detail, fix}. A current loss is a
    failure; a source never run on this store is a note; without a store (`query` None) every
    such source is a note."""
    findings = []
    for source_id, cls in sorted(sources.items()):
        days = window_days(cls)
        if days is None:
            continue
        name = f"source {source_id} coverage"
        if query is None:
            findings.append({"name": name, "ok": True, "note": True, "fix": message("fix", "en", source=source_id),
                             "detail": message("never", "en", source=source_id, days=days)})
            continue
        report = coverage(query, source_id, days, now)
        findings.append({"name": name, "ok": report["lost"] is None, "note": report["last_success"] is None,
                         "detail": "; ".join(gap_lines(report, source_id, "en")[:2]),
                         "fix": message("fix", "en", source=source_id)})
    return findings


def doctor_checks(db_path: str, sources: dict, now: dt.datetime | None = None) -> list[dict]:
    """`doctor_findings` on the store at `db_path`, opened read-only (SQLite: `mode=ro`; no file
    yet: notes). An unreadable store is one failed finding, never a traceback."""
    import sqlite3
    from pathlib import Path

    from basecrawler.store.engines import is_postgres_url

    now = now or dt.datetime.now(dt.timezone.utc)
    if not any(window_days(cls) for cls in sources.values()):
        return []
    conn = None
    try:
        query = None
        if is_postgres_url(db_path):
            from basecrawler.store.core import Store

            conn = Store(db_path)
            query = conn.query
        elif Path(db_path).exists():
            conn = sqlite3.connect(f"file:{Path(db_path).resolve()}?mode=ro", uri=True)
            conn.row_factory = sqlite3.Row
            query = lambda sql, params: [dict(row) for row in conn.execute(sql, params)]  # noqa: E731
        return doctor_findings(query, sources, now)
    except Exception as exc:   # the database line of doctor says why; the checklist goes on
        return [{"name": "source coverage", "ok": False, "note": False, "fix": "fix the database first",
                 "detail": f"unknown: the runs cannot be read ({type(exc).__name__})"}]
    finally:
        if conn is not None:
            conn.close()


__all__ = ["doctor_checks", "message", "current_line", "coverage", "doctor_findings", "gap_lines", "window_days"]
