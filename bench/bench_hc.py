"""Benchmark of the `hc` source on a full-size file: how to read it, and a full run.

    python bench/bench_hc.py [--records 34000] [--keep DIR] [--parse-only] [--records-to JSONL]
                              [--profile N]

Generates a ~16 MB `HCRSAMOpenData.json` in the real layout (a JSON array of flat objects,
every value a string or null; zero-width spaces, entities, multi-categories, empty dates),
then, each in a fresh child process that reports its own time and peak RSS (VmHWM):

1. reading the file with `json.load` vs streaming it with `ijson.items` (the choice the source
   makes), each followed by `HealthCanadaAlertsCrawler.parse` of every record;
2. a full `basecrawler run --source hc --mode full` against a loopback server serving the file
   (BASECRAWLER_HC_DATA_URL), then the same run again (nothing to write).

Targets: full run ≤ 5 s, peak RSS < 200 MB.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
import benchkit  # noqa: E402

ORGANIZATIONS = {
    "CFIA": (["Food", "Dairy", "Meat and poultry", "Candy, confectionary, snacks and sweeteners - Nuts, grains, and seeds",
              "Fish and seafood - Food"], ["Class 1", "Class 2", "Class 3", "--"]),
    "TC": (["Car", "SUV", "SUV - Car", "Truck - Med. & H.D.", "Bus", "RV Trailer", "Equipment"], [""]),
    "Medical devices": (["Cardiovascular", "General and plastic surgery",
                         "General hospital and personal use - Chemistry - Microbiology"], ["Type I", "Type II", "Type III"]),
    "Consumer product safety": (["Household items", "Toys and games", "Household items - Tools and accessories",
                                 "Appliances - Household items", "Chemicals"], [""]),
    "Drugs and health products": (["Drugs", "Drugs - Natural health products"], ["Type I", "Type II", "Type I - Type II"]),
    "Controlled substances and cannabis": (["Cannabis"], [""]),
}
WORDS = ("recalled due to possible contamination listeria salmonella undeclared milk labelling hazard brand certain "
         "products lot strangulation fire burn injury consumers should stop using return").split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize()


def generate(path: Path, records: int, seed: int = 24) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        out.write("[")
        for n in range(records):
            organization = rng.choice(list(ORGANIZATIONS))
            categories, classes = ORGANIZATIONS[organization]
            nid = str(20000 + n)
            if organization == "TC":
                title = f"Transport Canada Recall - {rng.randint(2010, 2026)}{rng.randint(1, 999):03d} - {rng.choice(['FORD', 'GM', ''])}"
            else:
                title = ("\u200b" if rng.random() < 0.05 else "") + sentence(rng, rng.randint(6, 14))
            record = {
                "NID": nid, "Title": title,
                "URL": f"https://recalls-rappels.canada.ca/en/alert-recall/alert-{nid}",
                "Organization": organization,
                "Product": None if rng.random() < 0.3 else sentence(rng, 3),
                "Issue": rng.choice(["", "Listeria", "Milk - Sulphites", "Performance", "Fire hazard"]),
                "What you should do": "" if rng.random() < 0.5 else
                sentence(rng, 20) + ".Consumers&nbsp;should " + sentence(rng, 15) + ".",
                "Category": rng.choice(categories), "Recall class": rng.choice(classes),
                "Last updated": None if rng.random() < 0.08 else
                f"{rng.randint(1991, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                "Archived": rng.choice("01"),
            }
            out.write(("," if n else "") + json.dumps(record, ensure_ascii=False))
        out.write("]")


def read_child(how: str, path: str, out_path: str | None = None) -> None:
    """Child: read and parse the file one way; prints seconds, records, peak RSS. `out_path`
    writes every parsed record as JSON lines, so two versions of sources/hc.py can be compared
    record for record."""
    import ijson

    from sources.hc import HealthCanadaAlertsCrawler

    parse = HealthCanadaAlertsCrawler.parse.__get__(HealthCanadaAlertsCrawler.__new__(HealthCanadaAlertsCrawler))
    out = open(out_path, "w", encoding="utf-8") if out_path else None
    started = time.monotonic()
    count = 0
    with open(path, "rb") as handle:
        items = json.load(handle) if how == "json.load" else ijson.items(handle, "item", use_float=True)
        for item in items:
            record = parse(None, item)   # parse() reads nothing of the run
            count += 1
            if out:
                out.write(json.dumps(record, sort_keys=True, ensure_ascii=False, default=str) + "\n")
    if out:
        out.close()
    print(json.dumps({"seconds": time.monotonic() - started, "records": count, "peak_rss_mb": benchkit.peak_rss_mb(),
                      "cpu_s": benchkit.cpu_s()}))


def run_child(db: str, profile_top: int = 0) -> None:
    """Child: `basecrawler run --source hc --mode full` through the CLI; prints time and peak RSS.
    `profile_top` runs it under cProfile and prints (to stderr) the N costliest functions and
    the time split into layers (bench/profile_layers.py)."""
    from basecrawler.cli import main

    with benchkit.measured(profile_top) as timing:
        code = main(["--db", db, "-q", "run", "--source", "hc", "--mode", "full"])
    # (CPU of the whole process, imports included, as this bench has always reported it)
    print(json.dumps({"seconds": timing["seconds"], "exit": code, "peak_rss_mb": benchkit.peak_rss_mb(),
                      "cpu_s": benchkit.cpu_s()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=34_000)
    benchkit.whole_run_arguments(parser, profile="profile the first full run: its N costliest functions and the layer split")
    parser.add_argument("--parse-only", action="store_true", help="only compare json.load and ijson")
    parser.add_argument("--read", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        return read_child(*args.read, args.records_to)
    if args.run:
        return run_child(args.run, args.profile)
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_hc_"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / "HCRSAMOpenData.json"
    generate(path, args.records)
    load = os.getloadavg()[0]
    table = [("file", f"{path.stat().st_size / 1e6:.1f} MB, {args.records:,} records; load average {load:.1f} "
                      f"on {os.cpu_count()} cores")]
    for how in ("json.load", "ijson"):
        extra = ["--records-to", args.records_to] if args.records_to and how == "ijson" else []
        r = benchkit.child(__file__, "--read", how, str(path), *extra)
        # (wall of the read + parse loop alone, per record: the source's own share of a full run)
        table.append((f"read + parse, {how}", f"{r['seconds']:.2f} s wall ({r['seconds'] / r['records'] * 1e6:.1f} µs a "
                                               f"record), {r['cpu_s']:.2f} s CPU (process), peak RSS {r['peak_rss_mb']:.0f} MB"))
    if not args.parse_only:
        server = benchkit.serve(benchkit.file_handler(path, "application/json"))
        env = {"BASECRAWLER_HC_DATA_URL": f"http://127.0.0.1:{server.server_address[1]}"}
        db = str(work / "bench.db")
        for stale in work.glob("bench.db*"):   # a kept directory: the first run must be a first run
            stale.unlink()
        try:
            for label in ("full run (first)", "full run (again, nothing to write)"):
                profile = ["--profile", str(args.profile)] if args.profile and "first" in label else []
                r = benchkit.child(__file__, "--run", db, *profile, env=env, show_stderr=bool(profile))
                table.append((label, f"{r['seconds']:.2f} s wall, {r['cpu_s']:.2f} s CPU (process, imports included), "
                                     f"peak RSS {r['peak_rss_mb']:.0f} MB, exit {r['exit']} (targets ≤ 5 s, < 200 MB)"))
        finally:
            server.shutdown()
    benchkit.print_table(table)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
