"""`status`: records per record type and source (and how many of them have no known date:
counted, never invented), and per source the last run, its counts and status, enrichment
states, dead letters and translation backlog, and freshness: the newest date of each type it
stores, the last *successful* run (still shown after a failure), a stale flag and how many runs
crashed or were interrupted; `--json` for machines."""
from __future__ import annotations

import datetime as dt
import json

from basecrawler.i18n import gettext as _, number
from basecrawler.pipeline.registry import discover
from basecrawler.store.engines import redact
from basecrawler.recordtypes import record_types
from basecrawler.reading.counts import copies_by_type_and_source, translation_by_source
from basecrawler.reading.search import counts_by_type, date_unknown_by_source
from basecrawler.recordtypes.registry import DEFAULT_RECORD_TYPE
from basecrawler.store.core import Store
from basecrawler.reading.tables import pad, render_table
from basecrawler.commands import add_lang_argument, in_reader_language, require_database
from basecrawler.operations import coverage

# The scheduler runs every source daily; a source with no success within two of those intervals
# is stale: one missed day can be a bad night at the source, two need a look.
SCHEDULE_INTERVAL = dt.timedelta(days=1)
STALE_AFTER = 2 * SCHEDULE_INTERVAL
COUNT_FIELDS = ("fetched", "parsed", "out_of_range", "saved", "new", "updated", "unchanged", "unparseable", "dead_lettered")


def register(sub) -> None:
    status = sub.add_parser("status", help="last run and counts per source")
    status.add_argument("--json", action="store_true", help="print JSON")
    add_lang_argument(status)
    status.set_defaults(func=cmd_status)


def freshness(store: Store, source_id: str, now: dt.datetime, types=()) -> dict:
    """Newest date per type the source stores (`types`; the default type's also as
    `newest_recall_date`, as before types), last successful run, stale flag, crashed /
    interrupted run counts."""
    success = store.runs.last_successful_run(source_id)
    last_success = (success["finished_at"] or success["started_at"]) if success else None
    problems = store.runs.run_problem_counts(source_id)
    newest = {name: store.lookup.newest_date(name, source_id, now.date()) for name in types}
    return {
        "newest_recall_date": newest.get(DEFAULT_RECORD_TYPE) or store.lookup.newest_date(DEFAULT_RECORD_TYPE, source_id, now.date()),
        "newest_dates": newest,
        "last_success": last_success,
        "stale": last_success is None or now - dt.datetime.fromisoformat(last_success) > STALE_AFTER,
        "crashed_runs": problems.get("crashed", 0),
        "interrupted_runs": problems.get("interrupted", 0),
    }


def collect_status(store: Store, source_ids, *, now: dt.datetime | None = None) -> dict:
    """`now` (aware) is injectable so the stale flag can be tested at a fixed time."""
    now = now or dt.datetime.now(dt.timezone.utc)
    by_type = counts_by_type(store.db.conn)
    undated = {name: date_unknown_by_source(store.db.conn, record_types()[name]) for name in by_type}
    translation = translation_by_source(store.db.conn)
    copies = copies_by_type_and_source(store.db.conn)
    sources = {}
    known = set(source_ids) | store.runs.sources_with_runs() | {s for counts in by_type.values() for s in counts}
    for source_id in sorted(known):
        last = store.runs.last_run(source_id)
        per_type = {name: counts[source_id] for name, counts in by_type.items() if counts.get(source_id)}
        own_copies = sum(by_source.get(source_id, 0) for by_source in copies.values())
        entry = {
            "records": sum(per_type.values()),
            # Records that are another publisher's copy of a recall (store/groups.py): counted
            # under the original's group, so `groups` is the distinct recalls this source adds.
            "copies": own_copies,
            "groups": sum(per_type.values()) - own_copies,
            "records_by_type": per_type,
            "date_unknown_by_type": {name: undated[name][source_id] for name in per_type
                                     if undated[name].get(source_id)},
            "last_run": None,
            "dead_letters_open": store.dead_letters.count_open_dead_letters(source_id),
            **freshness(store, source_id, now, per_type),
            "enrichment": store.enrichment.counts(source_id),
            "translation": translation.get(source_id, {}),
        }
        entry["ledger"] = ledger_status(store, source_id)
        days = coverage.window_days(source_ids.get(source_id)) if isinstance(source_ids, dict) else None
        if days:   # a rolling-window source: what was read, the gaps, what may be lost (coverage.py)
            entry["coverage"] = coverage.coverage(store.query, source_id, days, now)
        if last:
            entry["last_run"] = {
                "id": last["id"], "status": last["status"], "mode": last["mode"],
                "started_at": last["started_at"], "finished_at": last["finished_at"],
                "duration_s": last["duration_s"], "error": last["error"],
                "counts": {k: last[k] for k in COUNT_FIELDS},
                "http": json.loads(last["http_stats"]) if last.get("http_stats") else {},
                "enrichment": json.loads(last["enrichment_stats"]) if last.get("enrichment_stats") else {},
            }
        sources[source_id] = entry
    last_job = store.get_meta("scheduler.last_job")
    errors = store.get_meta("scheduler.errors")
    return {
        "db": redact(store.path),   # a postgresql:// URL may carry a password
        "records": sum(n for counts in by_type.values() for n in counts.values()),
        "groups": sum(n for counts in by_type.values() for n in counts.values())
                  - sum(n for by_source in copies.values() for n in by_source.values()),
        "types": {name: {"title": record_types()[name].title, "records": sum(counts.values()),
                         "groups": sum(counts.values()) - sum(copies.get(name, {}).values()), "sources": counts,
                         "date_unknown": sum(undated[name].values()), "date_unknown_by_source": undated[name]}
                  for name, counts in by_type.items()},
        "next_scheduled_run": store.get_meta("scheduler.next_run"),
        "last_scheduled_job": json.loads(last_job) if last_job else None,
        "scheduler_errors": json.loads(errors)[-5:] if errors else [],
        "translation_backlog": store.lookup.translation_backlog(),
        "dead_letters_open": store.dead_letters.count_open_dead_letters(),
        "sources": sources,
        "watches": _watches(store),
    }


def _watches(store) -> dict:
    from basecrawler.watch.operators import status

    return status(store)


# ---- list ledger (basecrawler/pipeline/ledger.py) ---------------------------------------------------
def ledger_status(store: Store, source_id: str) -> dict:
    """listed / done / failing / given_up counts of the source's list items ({} when the
    source keeps no ledger)."""
    from basecrawler.pipeline.ledger import STATES

    found = store.ledger.counts(source_id)
    return {state: found.get(state, 0) for state in STATES} if found else {}


def ledger_line(counts: dict) -> str:
    return _("list items %(states)s", states=", ".join(f"{word(state)} {number(counts[state])}" for state in counts))


@in_reader_language
def cmd_status(args) -> int:
    require_database(args.settings)
    store = Store(args.settings.db_path)
    try:
        report = collect_status(store, discover())
    finally:
        store.close()
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    for line in status_lines(report):
        print(line)
    return 0


# ---- what a person reads, in the reader's language (basecrawler/i18n) ---------------------------
def word(state: str) -> str:
    """A run, enrichment, translation or ledger state as the reader says it (the --json keeps
    the stored word)."""
    words = {
        "succeeded": _("succeeded"), "failed": _("failed"), "suspect": _("suspect"), "running": _("running"),
        "crashed": _("crashed"), "interrupted": _("interrupted"), "pending": _("pending"),
        "translated": _("translated"), "done": _("done"), "empty": _("empty"), "gone": _("gone"),
        "listed": _("listed"), "failing": _("failing"), "given_up": _("given up"), "original": _("original"),
        "error": _("error"), "retry": _("retry"),
    }
    if state in words:
        return words[state]
    base = state.rstrip("0123456789")   # retry1 … retry4
    return words[base] + state[len(base):] if base in words else state.replace("_", " ")


def status_lines(report: dict) -> list[str]:
    lines = [_("database %(db)s: %(records)s records, %(groups)s distinct recalls (a recall two publishers carry "
               "counts once), translation backlog %(backlog)s, open dead letters %(dead)s",
               db=report["db"], records=number(report["records"]), groups=number(report["groups"]),
               backlog=number(report["translation_backlog"]), dead=number(report["dead_letters_open"]))
             + (_("; next scheduled run %(when)s", when=report["next_scheduled_run"])
                if report["next_scheduled_run"] else "")]
    lines.append(type_table(report))
    from basecrawler.watch.operators import status_lines as watch_lines
    lines += watch_lines(report.get("watches") or {})
    for error in report["scheduler_errors"]:
        lines.append(_("scheduler error: %(error)s", error=json.dumps(error, ensure_ascii=False)[:200]))
    for source_id, entry in report["sources"].items():
        lines.append(f"{source_id:<4} " + _source_line(entry))
        extras = []
        if entry["dead_letters_open"]:
            extras.append(_("dead letters open %(n)s", n=number(entry["dead_letters_open"])))
        if entry["enrichment"]:
            extras.append(_("enrichment %(states)s", states=_states(entry["enrichment"])))
        if entry["translation"]:
            extras.append(_("translation %(states)s", states=_states(entry["translation"])))
        if entry.get("ledger"):
            extras.append(ledger_line(entry["ledger"]))
        if extras:
            lines.append("       " + "; ".join(extras))
        lines.append("       " + _freshness_line(entry))
        lines += ["       " + line for line in (coverage.gap_lines(entry["coverage"], source_id)
                                              if entry.get("coverage") else ())]
    return lines


def _states(counts: dict) -> str:
    return ", ".join(f"{word(k)} {number(v)}" for k, v in counts.items())


def _source_line(entry: dict) -> str:
    records = pad(_("%(records)s records", records=number(entry["records"])), 11, ">")
    if entry.get("copies"):
        records += " " + _("(%(copies)s of them another publisher's copy)", copies=number(entry["copies"]))
    last = entry["last_run"]
    if not last:
        return records + "  " + _("never run")
    c = last["counts"]
    return records + "  " + _("last %(status)s %(started)s  fetched %(fetched)s saved %(saved)s (new %(new)s, "
                              "updated %(updated)s) dead-lettered %(dead)s",
                              status=pad(word(last["status"]), 11), started=last["started_at"],
                              fetched=number(c["fetched"]), saved=number(c["saved"]), new=number(c["new"]),
                              updated=number(c["updated"]), dead=number(c["dead_lettered"]))


def type_table(report: dict) -> str:
    """Records per type (rows) and source (columns), then the total and the distinct recalls
    (groups), padded by display width."""
    sources = sorted({s for entry in report["types"].values() for s in entry["sources"]})
    rows = [[name, _(entry["title"]), *(number(entry["sources"].get(s, 0)) for s in sources), number(entry["records"]),
             number(entry.get("groups", entry["records"])), number(entry["date_unknown"])]
            for name, entry in report["types"].items()]
    return render_table([_("type"), _("title"), *sources, _("total"), _("distinct recalls"), _("date unknown")], rows,
                        align=["<", "<"] + [">"] * (len(sources) + 3))


def _freshness_line(entry: dict) -> str:
    newest = entry.get("newest_dates") or {}
    if set(newest) <= {DEFAULT_RECORD_TYPE}:   # vehicle recalls only (or nothing yet): the line as before types
        dates = _("newest recall %(date)s", date=entry["newest_recall_date"] or "-")
    else:
        dates = _("newest %(dates)s", dates=", ".join(f"{_(record_types()[name].title) if name in record_types() else name}"
                                                      f" {date or '-'}" for name, date in newest.items()))
    undated = entry.get("date_unknown_by_type") or {}
    if undated:
        dates += " " + _("(date unknown: %(counts)s)", counts=", ".join(
            f"{_(record_types()[name].title) if name in record_types() else name} {number(n)}"
            for name, n in undated.items()))
    parts = [dates, _("last success %(when)s", when=entry["last_success"] or _("never"))]
    if entry["stale"]:
        parts.append(_("STALE (no success in %(days)s days)", days=STALE_AFTER.days))
    if entry["crashed_runs"] or entry["interrupted_runs"]:
        parts.append(_("runs crashed %(crashed)s, interrupted %(interrupted)s",
                       crashed=number(entry["crashed_runs"]), interrupted=number(entry["interrupted_runs"])))
    return "; ".join(parts)
