"""`schedule`: run every source daily (incremental) and weekly (full) in the foreground, then
translate; `--once` runs the job now and exits, `--print` shows the next fire times;
`--source ID` (repeatable) runs only those sources, so several machines sharing one
PostgreSQL store can each run their own (README, "Several machines")."""
from __future__ import annotations

import json

from basecrawler.errors import EXIT_OK, Interrupted, SourceFailed
from basecrawler.pipeline.runner import stop_on_signals
from basecrawler.operations.scheduler import SchedulePlan, SchedulerAlreadyRunning, run_forever, run_scheduled_job, select_sources


def register(sub) -> None:
    parser = sub.add_parser("schedule", help="daily incremental + weekly full runs, then translation")
    parser.add_argument("--at", metavar="HH:MM", help="daily time (env BASECRAWLER_SCHEDULE_AT, default 06:00)")
    parser.add_argument("--tz", metavar="ZONE", help="IANA time zone, e.g. Asia/Seoul "
                                                     "(env BASECRAWLER_SCHEDULE_TZ, default: this machine's)")
    parser.add_argument("--full-day", metavar="DAY", help="weekday of the full run: mon … sun, or 'none' "
                                                          "(env BASECRAWLER_SCHEDULE_FULL_DAY, default sun)")
    parser.add_argument("--grace-hours", type=float, metavar="H",
                        help="run a job up to H hours late, e.g. after sleep (env BASECRAWLER_SCHEDULE_GRACE_HOURS, default 12)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--once", action="store_true", help="run the job now and exit (1 if any source failed)")
    action.add_argument("--print", dest="print_times", action="store_true", help="show the next fire times and exit")
    parser.add_argument("--mode", choices=["incremental", "full"], default="incremental",
                        help="mode for --once (default incremental)")
    parser.add_argument("--source", action="append", dest="sources", metavar="ID",
                        help="run only this source (repeatable); default: every source")
    parser.add_argument("--no-translate", action="store_true", help="skip the translation worker")
    parser.add_argument("--json", action="store_true", help="with --once / --print: print JSON")
    parser.set_defaults(func=cmd_schedule)


def _plan(args) -> SchedulePlan:
    grace = int(args.grace_hours * 3600) if args.grace_hours is not None else None
    return SchedulePlan.from_env(at=args.at, tz=args.tz, full_day=args.full_day, misfire_grace_s=grace)


def cmd_schedule(args) -> int:
    plan = _plan(args)
    settings = args.settings
    if args.sources:   # an unknown id is a usage error now, not a failed job at 06:00
        from basecrawler.pipeline.registry import discover
        select_sources(discover(), args.sources)
    if args.print_times:
        upcoming = plan.upcoming(8)
        if args.json:
            print(json.dumps([{"at": t.isoformat(), "job": job, "mode": mode} for t, job, mode in upcoming], indent=2))
        else:
            print(f"every day at {plan.at} {plan.tz}; full run on {plan.full_day or 'no day'}; "
                  f"late runs allowed for {plan.misfire_grace_s / 3600:g} h")
            for when, _job, mode in upcoming:
                print(f"  {when:%Y-%m-%d %a %H:%M %Z}  {mode}")
        return EXIT_OK
    if args.once:
        with stop_on_signals() as stop:
            report = run_scheduled_job(settings, mode=args.mode, translate=not args.no_translate, stop=stop,
                                       sources=args.sources)
        if args.json:
            print(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
        elif report.skipped:
            print(f"basecrawler: schedule --once skipped: {report.skipped}")
        if report.summary.stopped:
            return Interrupted.exit_code
        return EXIT_OK if report.ok else SourceFailed.exit_code
    try:
        run_forever(settings, plan, translate=not args.no_translate, sources=args.sources)
    except SchedulerAlreadyRunning as exc:
        print(f"basecrawler: {exc}")
        return exc.exit_code
    return EXIT_OK
