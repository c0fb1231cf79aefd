"""Benchmark of the `ca` source on a full-size CSV: rows/s and peak memory of a full run.

    python bench/bench_ca_csv.py [--rows 800000] [--keep DIR] [--profile N]
    python bench/bench_ca_csv.py --real [--keep DIR]
    python bench/bench_ca_csv.py --real --keep DIR --serve   # only serve DIR's CSV, print the URL

`--serve`: generate the CSV (or reuse it with --keep) and serve it until killed, printing its
URL, so that the bare `python -m basecrawler run --source ca` can be timed from outside
(farm-bench) with BASECRAWLER_CA_DATA_URL pointed at it.

`--real`: the published file's shape (issue #35 item 8): 332,354 rows of 1–5 per recall (about
110,800 recalls) with comments as long as the published ones (~200 MB), and besides the
in-process crawl the whole process `python -m basecrawler run --source ca --mode full` under
`/usr/bin/time -v` (start-up included: its wall time, CPU time and maximum RSS).

Generates a ~200 MB CSV in the real Transport Canada column layout (quoted cells, multi-line
comments, French accents, recalls of 1–60 rows, a few recalls with non-adjacent rows), serves it
from disk in 64 KB chunks on 127.0.0.1, and runs a full `ca` crawl in a fresh child process
pointed at it (BASECRAWLER_CA_DATA_URL). The child reports its own peak RSS (VmHWM), so the
number is the crawl's alone, not the generator's, and its CPU time (the machine may be shared:
CPU rows/s is the steadier figure). `--profile N` runs the crawl under cProfile and prints its N
costliest functions and its time split into layers (source parse, framework per record, store:
bench/profile_layers.py). `--keep DIR` reuses the CSV already generated there. Prints one table.
Targets (issue #23): ≥ 60,000 rows/s, peak RSS < 150 MB.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
import benchkit  # noqa: E402

HEADER = ["RECALL_NUMBER_NUM", "YEAR", "MANUFACTURER_RECALL_NO_TXT", "CATEGORY_ETXT", "CATEGORY_FTXT",
          "MAKE_NAME_NM", "MODEL_NAME_NM", "UNIT_AFFECTED_NBR", "SYSTEM_TYPE_ETXT", "SYSTEM_TYPE_FTXT",
          "NOTIFICATION_TYPE_ETXT", "NOTIFICATION_TYPE_FTXT", "COMMENT_ETXT", "COMMENT_FTXT", "RECALL_DATE_DTE"]
MAKES = {"FORD": ["F-150", "ESCAPE", "EXPLORER", "MUSTANG", "RANGER"], "CHEVROLET": ["SILVERADO 1500", "EQUINOX", "MALIBU"],
         "TOYOTA": ["COROLLA", "RAV4", "CAMRY", "TACOMA"], "HONDA": ["CIVIC", "CR-V", "ACCORD"],
         "HYUNDAI": ["ELANTRA", "TUCSON", "SANTA FE"], "KIA": ["FORTE", "SORENTO"], "RAM": ["1500", "2500", "3500"]}
CATEGORIES = [("Passenger Car", "Voiture de tourisme"), ("Light Truck & Van", "Camionnette et fourgonnette"),
              ("Heavy Truck", "Camion lourd"), ("Motorcycle", "Motocyclette")]
SYSTEMS = [("Air Bags", "Sacs gonflables"), ("Brakes", "Freins"), ("Seats And Restraints", "Sièges et dispositifs de retenue"),
           ("Electrical", "Système électrique"), ("Steering", "Direction"), ("Fuel System", "Système d'alimentation")]
WORDS = ("vehicle bolt bracket could loosen fracture inflator module harness connector software camera display "
         "pressure sensor weld seam corrosion").split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def generate(path: Path, rows: int, seed: int = 5, most_per_recall: int = 45, wordy: int = 1) -> int:
    """Write the CSV; returns the number of recalls. A recall has 1 to `most_per_recall` rows;
    `wordy` multiplies the length of its comments."""
    rng = random.Random(seed)
    recalls = 0
    held: list[list[str]] = []      # rows written later, away from their recall (non-adjacent)
    with open(path, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(HEADER)
        written = 0
        number = 1990000
        while written < rows:
            number += 1
            recalls += 1
            make = rng.choice(list(MAKES))
            category, system = rng.choice(CATEGORIES), rng.choice(SYSTEMS)
            units = f"{rng.randint(1, 90000):,}.00"
            year = rng.randint(1990, 2024)
            date = f"{min(year + 1, 2024)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            comment_e = (f"Issue: {sentence(rng, rng.randint(1, 3) * wordy)}\n"
                         f"Safety Risk: {sentence(rng, rng.randint(1, 2) * wordy)}\n"
                         f"Corrective Actions: {sentence(rng, rng.randint(1, 2) * wordy)}")
            comment_f = "Problème : " + sentence(rng, rng.randint(1, 2) * wordy)
            fixed = [str(number), "", f"{rng.randint(10, 99)}V-{rng.randint(100, 999)}", category[0], category[1], make, "",
                     units, system[0], system[1], "Safety Mfr", "Sécurité - fabricant", comment_e, comment_f, date]
            for _ in range(min(rng.randint(1, most_per_recall), rows - written)):
                row = list(fixed)
                row[1] = str(year + rng.randint(0, 4))
                row[6] = rng.choice(MAKES[make])
                if rng.random() < 0.0005:
                    held.append(row)
                else:
                    writer.writerow(row)
                written += 1
            if held and rng.random() < 0.01:
                writer.writerows(held)
                held.clear()
        writer.writerows(held)
    return recalls


def _count_recalls(path: Path) -> int:
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        next(reader)
        return len({row[0] for row in reader})


def crawl(url: str, db: str, profile_top: int = 0) -> None:
    """Child process: one full `ca` run; prints a JSON line with counts, time and peak RSS."""
    os.environ["BASECRAWLER_CA_DATA_URL"] = url
    from basecrawler import Store
    from basecrawler.config import Settings
    from sources.ca import CanadaCrawler

    store = Store(db)
    with benchkit.measured(profile_top, cumulative=True) as timing:
        result = CanadaCrawler(store, settings=Settings.from_env(db_path=db), mode="full").run()
    elapsed, cpu = timing["seconds"], timing["cpu_s"]
    c = result.counts
    print(json.dumps({"status": result.status, "recalls": c.saved, "fetched": c.fetched, "dead": c.dead_lettered,
                      "seconds": elapsed, "cpu_seconds": cpu, "peak_rss_mb": benchkit.peak_rss_mb()}))


def parse_only(path: str, out_path: str | None = None) -> None:
    """Child process: the source's own work alone (both CSV passes and parse(), no HTTP, no
    store); prints a JSON line. `out_path` writes every parsed record as JSON lines, so two
    versions of sources/ca.py can be compared record for record."""
    from sources.ca import CanadaCrawler, count_rows, group_rows

    crawler = CanadaCrawler.__new__(CanadaCrawler)   # parse() reads no state
    out = open(out_path, "w", encoding="utf-8") if out_path else None
    records = 0
    with benchkit.measured() as timing:
        for group in group_rows(Path(path), count_rows(Path(path))):
            record = crawler.parse(None, group)   # parse() reads nothing of the run
            records += 1
            if out:
                out.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
    elapsed, cpu = timing["seconds"], timing["cpu_s"]
    if out:
        out.close()
    print(json.dumps({"records": records, "seconds": elapsed, "cpu_seconds": cpu, "peak_rss_mb": benchkit.peak_rss_mb()}))


def whole_process(url: str, db: Path) -> dict:
    """`python -m basecrawler run --source ca --mode full` as a user runs it, under
    `/usr/bin/time -v`: wall time, CPU time (user + system) and maximum RSS of the process."""
    env = {**os.environ, "BASECRAWLER_CA_DATA_URL": url, "PYTHONPATH": str(REPO)}
    for stale in db.parent.glob(db.name + "*"):
        stale.unlink()
    proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "basecrawler", "run", "--source", "ca",
                           "--mode", "full", "--db", str(db), "-q"], capture_output=True, text=True, cwd=REPO, env=env)
    if proc.returncode != 0:
        sys.exit(f"run --source ca failed:\n{proc.stderr[-3000:]}")
    fields = dict(line.strip().rsplit(": ", 1) for line in proc.stderr.splitlines() if ": " in line and line.startswith("\t"))
    wall = fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")
    return {"seconds": sum(float(part) * 60 ** i for i, part in enumerate(reversed(wall))),
            "cpu_seconds": float(fields["User time (seconds)"]) + float(fields["System time (seconds)"]),
            "peak_rss_mb": int(fields["Maximum resident set size (kbytes)"]) / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=800_000)
    parser.add_argument("--real", action="store_true",
                        help="the published file's shape (332,354 rows, ~110,800 recalls, ~200 MB), and the whole `run --source ca` process")
    benchkit.whole_run_arguments(parser, profile="print the crawl's N costliest functions")
    parser.add_argument("--serve", action="store_true", help="only serve the CSV (until killed) and print its URL")
    parser.add_argument("--crawl", nargs=2, metavar=("URL", "DB"), help=argparse.SUPPRESS)
    parser.add_argument("--parse", metavar="CSV", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.crawl:
        crawl(*args.crawl, profile_top=args.profile)
        return
    if args.parse:
        parse_only(args.parse, args.records_to)
        return
    if args.real:
        args.rows = 332_354
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_ca_"))
    work.mkdir(parents=True, exist_ok=True)
    csv_path = work / ("vrdb_full_monthly_real.csv" if args.real else "vrdb_full_monthly.csv")
    t0 = time.monotonic()
    if args.keep and csv_path.exists():   # the generator is deterministic: reuse its file
        recalls, gen_s = _count_recalls(csv_path), 0.0
    else:
        recalls = generate(csv_path, args.rows, **({"most_per_recall": 5, "wordy": 7} if args.real else {}))
        gen_s = time.monotonic() - t0
    server = benchkit.serve(benchkit.file_handler(csv_path, "text/csv"))
    url = f"http://127.0.0.1:{server.server_address[1]}"
    if args.serve:
        print(url, flush=True)
        threading.Event().wait()
    db = work / "bench.db"
    for stale in work.glob("bench.db*"):
        stale.unlink()
    try:
        proc = subprocess.run([sys.executable, __file__, "--crawl", url, str(db), "--profile", str(args.profile)],
                              capture_output=True, text=True, cwd=REPO)
        whole = whole_process(url, work / "cli.db") if args.real and shutil.which("/usr/bin/time") else None
    finally:
        server.shutdown()
    if proc.returncode != 0:
        sys.exit(f"crawl failed:\n{proc.stderr[-3000:]}")
    command = [sys.executable, __file__, "--parse", str(csv_path)]
    parsed_proc = subprocess.run(command + (["--records-to", args.records_to] if args.records_to else []),
                                 capture_output=True, text=True, cwd=REPO)
    if parsed_proc.returncode != 0:
        sys.exit(f"parse failed:\n{parsed_proc.stderr[-3000:]}")
    parsed = json.loads(parsed_proc.stdout.strip().splitlines()[-1])
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if args.profile:
        print(proc.stderr[-20000:])
    size_mb = csv_path.stat().st_size / 1e6
    table = [
        ("CSV size", f"{size_mb:.1f} MB ({args.rows:,} rows, {recalls:,} recalls, generated in {gen_s:.1f}s)"),
        ("run status", f"{result['status']} ({result['recalls']:,} recalls saved, {result['dead']} dead letters)"),
        ("full run wall time", f"{result['seconds']:.1f} s (download + archive + 2 CSV passes + store)"),
        ("rows/s (wall)", f"{args.rows / result['seconds']:,.0f} (target ≥ 60,000)"),
        ("CPU time / rows/s per CPU second", f"{result['cpu_seconds']:.1f} s / {args.rows / result['cpu_seconds']:,.0f}"),
        ("MB/s", f"{size_mb / result['seconds']:.1f}"),
        ("peak RSS of the crawl", f"{result['peak_rss_mb']:.0f} MB (target < 150 MB)"),
        ("source alone: 2 CSV passes + parse()", f"{parsed['seconds']:.1f} s wall, {parsed['cpu_seconds']:.1f} s CPU: "
         f"{args.rows / parsed['seconds']:,.0f} rows/s ({args.rows / parsed['cpu_seconds']:,.0f} per CPU s), "
         f"peak RSS {parsed['peak_rss_mb']:.0f} MB"),
        ("database size", f"{db.stat().st_size / 1e6:.0f} MB"),
    ]
    if whole is not None:
        table += [
            ("`run --source ca`, whole process: wall", f"{whole['seconds']:.1f} s: {args.rows / whole['seconds']:,.0f} rows/s "
             "(target ≥ 60,000)"),
            ("`run --source ca`, whole process: CPU", f"{whole['cpu_seconds']:.1f} s: "
             f"{args.rows / whole['cpu_seconds']:,.0f} rows per CPU s"),
            ("`run --source ca`, whole process: max RSS", f"{whole['peak_rss_mb']:.0f} MB (target < 150 MB)"),
        ]
    benchkit.print_table(table)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
