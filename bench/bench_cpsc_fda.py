"""Benchmark of the `fda` and `cpsc` sources through a whole `run`, against loopback servers
(the emulators in fixtures/fda/api.py and fixtures/cpsc/api.py, as strict as the real APIs:
openFDA's skip cap of 25,000 and limit of 1000).

    python bench/bench_cpsc_fda.py [--fda-records 30000] [--cpsc-records 10000] [--keep DIR]

1. a full `fda` walk of N generated food enforcement records (drug and device empty): the walk
   must split its windows under the skip cap; every record stored once;
2. a `cpsc` answer of M generated recalls in one window (~2.7 KB each, like the real API's),
   with BASECRAWLER_CPSC_MAX_WINDOW_RECORDS raised so the window may hold them.

Each run is a fresh child process reporting its wall time, CPU and peak RSS (VmHWM). Target:
each under 150 MB peak.
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
import benchkit  # noqa: E402

WORDS = ("recalled due to possible contamination listeria salmonella undeclared milk labelling hazard brand certain "
         "products lot strangulation fire burn injury consumers should stop using return heater charger").split()


def _fixture_api(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_bench_api", REPO / "fixtures" / name / "api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def fda_records(n: int, seed: int = 31) -> list[dict]:
    rng = random.Random(seed)
    first = dt.date(2012, 6, 13)
    records = []
    for i in range(n):
        day = first + dt.timedelta(weeks=rng.randint(0, 52 * 14))
        records.append({
            "recall_number": f"F-{i:05d}-{day.year}", "event_id": str(60000 + i // 3), "report_date": f"{day:%Y%m%d}",
            "status": rng.choice(["Ongoing", "Completed", "Terminated"]), "classification": rng.choice(["Class I", "Class II", "Class III"]),
            "product_type": "Food", "recalling_firm": f"Firm {rng.randint(1, 2000)} Inc.", "address_1": "1 Main St",
            "city": "Springfield", "state": rng.choice(["IL", "CA", "NY", "TX"]), "postal_code": "62701",
            "country": "United States", "voluntary_mandated": "Voluntary: Firm initiated",
            "initial_firm_notification": "Letter", "distribution_pattern": rng.choice(["Nationwide", "OH, CA", "Distributed in NY and NJ."]),
            "product_description": sentence(rng, 30), "product_quantity": f"{rng.randint(1, 9000)} cases",
            "code_info": f"Lot {rng.randint(1000, 9999)}", "reason_for_recall": sentence(rng, 12),
            "recall_initiation_date": f"{day - dt.timedelta(days=20):%Y%m%d}", "openfda": {},
        })
    return records


def cpsc_records(n: int, seed: int = 32) -> list[dict]:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        day = dt.date(2026, 1, 1) + dt.timedelta(days=rng.randint(0, 300))
        records.append({
            "RecallID": 100000 + i, "RecallNumber": f"26{i:04d}", "RecallDate": f"{day}T00:00:00",
            "LastPublishDate": f"{day}T00:00:00", "Title": sentence(rng, 10), "Description": "<p>" + sentence(rng, 60) + "</p>",
            "URL": f"https://www.cpsc.gov/Recalls/2026/r{i}", "ConsumerContact": sentence(rng, 15),
            "Products": [{"Name": sentence(rng, 4), "Description": sentence(rng, 10), "Model": "", "Type": "Toys",
                          "CategoryID": "1", "NumberOfUnits": "About 1,000"}],
            "Images": [{"URL": f"https://www.cpsc.gov/s3fs-public/{i}.jpg", "Caption": sentence(rng, 4)}],
            "Injuries": [{"Name": sentence(rng, 12)}], "Manufacturers": [{"Name": f"Maker {rng.randint(1, 900)}"}],
            "Retailers": [{"Name": sentence(rng, 20)}], "Importers": [], "Distributors": [],
            "ManufacturerCountries": [{"Country": rng.choice(["China", "Vietnam", "United States"])}],
            "ProductUPCs": [{"UPC": f"{rng.randint(10**11, 10**12 - 1)}"}],
            "Hazards": [{"Name": sentence(rng, 14), "HazardType": "", "HazardTypeID": ""}],
            "Remedies": [{"Name": sentence(rng, 16)}], "RemedyOptions": [{"Option": "Refund"}],
        })
    return records


def run_child(db: str, source: str) -> None:
    from basecrawler.cli import main

    with benchkit.measured() as timing:
        code = main(["--db", db, "-q", "run", "--source", source, "--mode", "full"])
    print(json.dumps({"seconds": timing["seconds"], "exit": code, "peak_rss_mb": benchkit.peak_rss_mb(),
                      "cpu_s": benchkit.cpu_s()}))


def last_run(db: str, source: str) -> dict:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        run = dict(conn.execute("SELECT * FROM crawl_runs WHERE source = ? ORDER BY id DESC LIMIT 1", (source,)).fetchone())
        run["stored"] = conn.execute("SELECT count(*) FROM product_alerts WHERE source = ?", (source,)).fetchone()[0]
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fda-records", type=int, default=30_000)
    parser.add_argument("--cpsc-records", type=int, default=10_000)
    parser.add_argument("--keep", help="work in this directory and keep it")
    parser.add_argument("--run", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        return run_child(*args.run)
    from basecrawler.testing import LoopbackServer

    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_cpsc_fda_"))
    work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    table = [("machine", f"load average {load:.1f} on {os.cpu_count()} cores")]
    fda_api, cpsc_api = _fixture_api("fda"), _fixture_api("cpsc")
    cases = [
        ("fda", fda_api.handler({"food": fda_records(args.fda_records)}), {}, args.fda_records, "food walk"),
        ("cpsc", cpsc_api.handler(cpsc_records(args.cpsc_records), {}),
         {"BASECRAWLER_CPSC_MAX_WINDOW_RECORDS": str(args.cpsc_records * 2)}, args.cpsc_records, "one answer"),
    ]
    for source, handle, extra_env, expected, label in cases:
        db = str(work / f"{source}.db")
        for stale in work.glob(f"{source}.db*"):
            stale.unlink()
        with LoopbackServer(handle) as server:
            env = {f"BASECRAWLER_{source.upper()}_API_URL": server.url, "BASECRAWLER_RATE": "1000", **extra_env}
            r = benchkit.child(__file__, "--run", db, source, env=env)
            requests = len(server.requests)
        run = last_run(db, source)
        table.append((f"{source}: {label} of {expected:,}",
                      f"{r['seconds']:.1f} s wall, {r['cpu_s']:.1f} s CPU, peak RSS {r['peak_rss_mb']:.0f} MB "
                      f"(target < 150 MB), {requests} requests, stored {run['stored']:,}, merged {run['merged']}, "
                      f"dead-lettered {run['dead_lettered']}, {run['status']}"))
    benchkit.print_table(table)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
