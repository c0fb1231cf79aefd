"""`status`: per source the last run, its counts and status, record count, enrichment states,
dead letters and translation backlog; `--json` for machines."""
from __future__ import annotations

import json

from ..registry import discover
from ..store import Store

COUNT_FIELDS = ("fetched", "parsed", "out_of_range", "saved", "new", "updated", "unchanged", "unparseable", "dead_lettered")


def register(sub) -> None:
    status = sub.add_parser("status", help="last run and counts per source")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)


def collect_status(store: Store, source_ids) -> dict:
    sources = {}
    known = set(source_ids) | {r["source"] for r in store.query("SELECT DISTINCT source FROM crawl_runs")}
    for source_id in sorted(known):
        last = store.last_run(source_id)
        entry = {
            "records": store.count_recalls(source_id),
            "last_run": None,
            "dead_letters_open": store.scalar(
                "SELECT COUNT(*) FROM dead_letters WHERE source = ? AND resolved_at IS NULL", [source_id]),
            # retry is shown per level (retry1 … retry4): how close items are to `gone`.
            "enrichment": {r["state"]: r["n"] for r in store.query(
                "SELECT CASE WHEN state = 'retry' THEN 'retry' || level ELSE state END AS state, COUNT(*) AS n "
                "FROM enrichment WHERE source = ? GROUP BY 1 ORDER BY 1", [source_id])},
            "translation": {(r["s"] or "pending"): r["n"] for r in store.query(
                "SELECT CASE WHEN translated_at IS NULL THEN 'pending' ELSE COALESCE(translation_status, 'translated') END AS s, "
                "COUNT(*) AS n FROM recalls WHERE source = ? GROUP BY s ORDER BY s", [source_id])},
        }
        entry["ledger"] = ledger_status(store, source_id)
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
        "db": store.path,
        "records": store.count_recalls(),
        "next_scheduled_run": store.get_meta("scheduler.next_run"),
        "last_scheduled_job": json.loads(last_job) if last_job else None,
        "scheduler_errors": json.loads(errors)[-5:] if errors else [],
        "translation_backlog": store.scalar("SELECT COUNT(*) FROM recalls WHERE translated_at IS NULL"),
        "dead_letters_open": store.scalar("SELECT COUNT(*) FROM dead_letters WHERE resolved_at IS NULL"),
        "sources": sources,
    }


# ---- list ledger (basecrawler/ledger.py) ---------------------------------------------------
def ledger_status(store: Store, source_id: str) -> dict:
    """listed / done / failing / given_up counts of the source's list items ({} when the
    source keeps no ledger)."""
    from ..ledger import STATES

    found = store.ledger_counts(source_id)
    return {state: found.get(state, 0) for state in STATES} if found else {}


def ledger_line(counts: dict) -> str:
    return "list items " + ", ".join(f"{state.replace('_', ' ')} {counts[state]}" for state in counts)


def cmd_status(args) -> int:
    store = Store(args.settings.db_path)
    try:
        report = collect_status(store, discover())
    finally:
        store.close()
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    print(f"database {report['db']}: {report['records']} recalls, translation backlog "
          f"{report['translation_backlog']}, open dead letters {report['dead_letters_open']}"
          + (f"; next scheduled run {report['next_scheduled_run']}" if report["next_scheduled_run"] else ""))
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
    return 0
