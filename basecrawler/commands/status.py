"""`status`: records per record type and source (and how many of them have no known date:
counted, never invented), and per source the last run, its counts and status, enrichment
states, dead letters and translation backlog, and freshness: the newest date of each type it
stores, the last *successful* run (still shown after a failure), a stale flag and how many runs
crashed or were interrupted; `--json` for machines."""
from __future__ import annotations

import datetime as dt
import json

from basecrawler.pipeline.registry import discover
from basecrawler.store.engines import redact
from basecrawler.recordtypes import record_types
from basecrawler.reading.counts import translation_by_source
from basecrawler.reading.search import counts_by_type, date_unknown_by_source
from basecrawler.recordtypes.registry import DEFAULT_RECORD_TYPE
from basecrawler.store.core import Store
from basecrawler.reading.tables import render_table
from basecrawler.commands import require_database
from basecrawler.operations import coverage

# The scheduler runs every source daily; a source with no success within two of those intervals
# is stale: one missed day can be a bad night at the source, two need a look.
SCHEDULE_INTERVAL = dt.timedelta(days=1)
STALE_AFTER = 2 * SCHEDULE_INTERVAL
COUNT_FIELDS = ("fetched", "parsed", "out_of_range", "saved", "new", "updated", "unchanged", "unparseable", "dead_lettered")


def register(sub) -> None:
    status = sub.add_parser("status", help="last run and counts per source")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=cmd_status)


def freshness(store: Store, source_id: str, now: dt.datetime, types=()) -> dict:
    """Newest date per type the source stores (`types`; the default type's also as
    `newest_recall_date`, as before types), last successful run, stale flag, crashed /
    interrupted run counts."""
    success = store.last_successful_run(source_id)
    last_success = (success["finished_at"] or success["started_at"]) if success else None
    problems = store.run_problem_counts(source_id)
    newest = {name: store.newest_date(name, source_id, now.date()) for name in types}
    return {
        "newest_recall_date": newest.get(DEFAULT_RECORD_TYPE) or store.newest_recall_date(source_id, now.date()),
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
    sources = {}
    known = set(source_ids) | store.sources_with_runs() | {s for counts in by_type.values() for s in counts}
    for source_id in sorted(known):
        last = store.last_run(source_id)
        per_type = {name: counts[source_id] for name, counts in by_type.items() if counts.get(source_id)}
        entry = {
            "records": sum(per_type.values()),
            "records_by_type": per_type,
            "date_unknown_by_type": {name: undated[name][source_id] for name in per_type
                                     if undated[name].get(source_id)},
            "last_run": None,
            "dead_letters_open": store.count_open_dead_letters(source_id),
            **freshness(store, source_id, now, per_type),
            "enrichment": store.enrichment_counts(source_id),
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
        "types": {name: {"title": record_types()[name].title, "records": sum(counts.values()), "sources": counts,
                         "date_unknown": sum(undated[name].values()), "date_unknown_by_source": undated[name]}
                  for name, counts in by_type.items()},
        "next_scheduled_run": store.get_meta("scheduler.next_run"),
        "last_scheduled_job": json.loads(last_job) if last_job else None,
        "scheduler_errors": json.loads(errors)[-5:] if errors else [],
        "translation_backlog": store.translation_backlog(),
        "dead_letters_open": store.count_open_dead_letters(),
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

    found = store.ledger_counts(source_id)
    return {state: found.get(state, 0) for state in STATES} if found else {}


def ledger_line(counts: dict) -> str:
    return "list items " + ", ".join(f"{state.replace('_', ' ')} {counts[state]}" for state in counts)


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
    print(f"database {report['db']}: {report['records']} records, translation backlog "
          f"{report['translation_backlog']}, open dead letters {report['dead_letters_open']}"
          + (f"; next scheduled run {report['next_scheduled_run']}" if report["next_scheduled_run"] else ""))
    print(type_table(report))
    from basecrawler.watch.operators import status_lines
    for line in status_lines(report.get("watches") or {}):
        print(line)
    for error in report["scheduler_errors"]:
        print(f"scheduler error: {json.dumps(error, ensure_ascii=False)[:200]}")
    for source_id, entry in report["sources"].items():
        last = entry["last_run"]
        if last:
            c = last["counts"]
            line = (f"{source_id:<4} {entry['records']:>7} records  last {last['status']:<9} {last['started_at']}  "
                    f"fetched {c['fetched']} saved {c['saved']} (new {c['new']}, updated {c['updated']}) "
                    f"dead-lettered {c['dead_lettered']}")
        else:
            line = f"{source_id:<4} {entry['records']:>7} records  never run"
        print(line)
        extras = []
        if entry["dead_letters_open"]:
            extras.append(f"dead letters open {entry['dead_letters_open']}")
        if entry["enrichment"]:
            extras.append("enrichment " + ", ".join(f"{k} {v}" for k, v in entry["enrichment"].items()))
        if entry["translation"]:
            extras.append("translation " + ", ".join(f"{k} {v}" for k, v in entry["translation"].items()))
        if entry.get("ledger"):
            extras.append(ledger_line(entry["ledger"]))
        if extras:
            print("       " + "; ".join(extras))
        print("       " + _freshness_line(entry))
        for line in coverage.gap_lines(entry["coverage"], source_id) if entry.get("coverage") else ():
            print("       " + line)
    return 0


def type_table(report: dict) -> str:
    """Records per type (rows) and source (columns), padded by display width."""
    sources = sorted({s for entry in report["types"].values() for s in entry["sources"]})
    rows = [[name, *(entry["sources"].get(s, 0) for s in sources), entry["records"], entry["date_unknown"]]
            for name, entry in report["types"].items()]
    return render_table(["type", *sources, "total", "date unknown"], rows, align=["<"] + [">"] * (len(sources) + 2))


def _freshness_line(entry: dict) -> str:
    newest = entry.get("newest_dates") or {}
    if set(newest) <= {DEFAULT_RECORD_TYPE}:   # vehicle recalls only (or nothing yet): the line as before types
        dates = f"newest recall {entry['newest_recall_date'] or '-'}"
    else:
        dates = "newest " + ", ".join(f"{name} {date or '-'}" for name, date in newest.items())
    undated = entry.get("date_unknown_by_type") or {}
    if undated:
        dates += " (date unknown: " + ", ".join(f"{name} {n}" for name, n in undated.items()) + ")"
    parts = [dates,
             f"last success {entry['last_success'] or 'never'}"]
    if entry["stale"]:
        parts.append(f"STALE (no success in {STALE_AFTER.days} days)")
    if entry["crashed_runs"] or entry["interrupted_runs"]:
        parts.append(f"runs crashed {entry['crashed_runs']}, interrupted {entry['interrupted_runs']}")
    return "; ".join(parts)
