"""Benchmark of the `eu` source over a full history: 763 weekly reports with the politeness
limit lifted (issue #23: ≤ 20 s).

    python bench/bench_eu_reports.py [--reports 763] [--keep DIR] [--profile N] [--records-to JSONL]

Generates 763 weekly reports and their index in the real layout (docs/SOURCES.md and the real
reports of 2005 and 2026): a legacy id range (1…) with 15–50 notifications a report, brand and
name empty and the product quoted in the description (“Brand – Model”), `null ` prefixes;
then the modern range (10000001…) with 25–110 notifications a report, brand / name / type
fields, HTML fragments in brand, several pictures, run-together measures. Categories are
mixed in every report as in the real feed, about 12 % vehicle-related (`Motor vehicles`,
`Other - Tyres`, `Other - Car floor mats` …); 2 % of notifications repeat an earlier case
(addenda); empty values as `xsi:nil`, empty CDATA or `<x/>`. About 2 KB a notification, as
the real reports.

Then, in fresh child processes that report their own time and peak RSS (VmHWM):

1. a full `basecrawler run --source eu --mode full` through the CLI against a loopback
   server serving the index and the reports from disk (BASECRAWLER_EU_SITE_URL; benchkit's
   server, so the run measures the crawler, not the server), with the
   source's 1 request/s lifted (BASECRAWLER_EU_RATE=1000): download, archive, the streamed
   parse of every report, both record types, the store;
2. the source alone: every report file read and parsed as the crawler does (`ReportReader.read`,
   `parse`), no HTTP, no store. `--records-to` writes every record it makes as JSON lines,
   so two versions of sources/eu.py can be compared record for record.

`--profile N` runs the full run under cProfile: its N costliest functions and its time split
into layers (source parse / framework per record / store: bench/profile_layers.py).
"""
from __future__ import annotations

import argparse
import datetime as dt
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

INDEX_PATH = "/safety-gate-alerts/api/download/weeklyReport/list/xml/en"
DETAIL = "/safety-gate-alerts/api/download/weeklyReport/detail/xml/"
LEGACY_SHARE = 440 / 763          # reports in the legacy id range (1…), the rest from 10000001
FIRST_REPORT = dt.date(2005, 2, 4)

# (category, weight): every report mixes them; the vehicle ones are ~12 % of the weight.
CATEGORIES = [
    ("Toys", 24), ("Electrical appliances and equipment", 14), ("Clothing, textiles and fashion items", 8),
    ("Childcare articles and children's equipment", 6), ("Cosmetics", 5), ("Protective equipment", 4),
    ("Hobby/sports equipment", 4), ("Lighting chains", 3), ("Jewellery", 3), ("Decorative articles", 2),
    ("Machinery", 2), ("Furniture", 2), ("Kitchen/cooking accessories", 2), ("Lighting equipment", 2),
    ("Chemical products", 2), ("Other - Baby carrier", 1), ("Other - Toy cars", 1), ("Gadgets", 2),
    ("Motor vehicles", 9), ("Other - Tyres", 1), ("Other - Car floor mats", 1), ("Other - Automotive accessories", 1),
]
VEHICLES = {"Volkswagen": ["Golf", "Passat", "ID.4"], "Renault": ["Clio", "Mégane", "Trafic"], "BMW": ["X5", "320d"],
            "Mercedes-Benz": ["Sprinter", "CLK Cabriolet", "GLC"], "Toyota": ["Yaris", "Proace"], "Ford": ["Transit", "Kuga"],
            "Škoda": ["Octavia", "Superb"], "Peugeot": ["208", "Expert"], "KTM": ["390 Duke"]}
COUNTRIES = ["Germany", "France", "Spain", "Italy", "Poland", "Hungary", "Netherlands", "Ireland", "Czechia", "Sweden"]
ORIGINS = ["People's Republic of China", "Germany", "Japan", "France", "Unknown", "Türkiye", "India"]
RISKS = ["Injuries", "Choking", "Chemical", "Electric shock", "Fire", "Strangulation", "Burns"]
VEHICLE_DANGERS = [
    "The airbag inflator may rupture on deployment. Metal fragments could strike the occupants and cause serious "
    "injuries. The product does not comply with the Regulation (EU) 2018/858.",
    "The fixing of the brake line may be insufficient. As a result, the brake fluid could leak, reducing the braking "
    "effect and increasing the risk of an accident.",
    "Risk of fire. The battery cells may have a manufacturing defect. This could lead to a short circuit and a fire "
    "while the vehicle is parked or charging.",
]
PRODUCT_DANGERS = [
    "The product contains small parts that can easily detach. A young child could put them in the mouth and choke. "
    "The product does not comply with the Toy Safety Directive and the European standard EN 71-1.",
    "The concentration of bis(2-ethylhexyl) phthalate (DEHP) is too high (measured value up to 12 % by weight). "
    "This phthalate may harm the health of children, causing possible damage to the reproductive system. The "
    "product does not comply with the REACH Regulation.",
    "The insulation of the power cable is insufficient and live parts are accessible. The user could get an electric "
    "shock. The product does not comply with the Low Voltage Directive and the European standard EN 60335.",
]
MEASURES = ["Recall of the product from end users", "Withdrawal of the product from the market",
            "Import rejected at border", "Ban on the marketing of the product and any accompanying measures"]
OPERATORS = ["Manufacturer", "Distributor", "Importer", "Retailer", "Other"]


def _cdata(value: str | None) -> str:
    return "<![CDATA[" + (value or "") + "]]>"


def _measures(rng: random.Random, when: dt.date) -> str:
    parts = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        ordered = rng.random() < 0.4
        label = ("Type of economic operator to whom the measure(s) were ordered: " if ordered
                 else "Type of economic operator taking notified measure(s): ")
        date = "Unknown" if rng.random() < 0.2 else (when - dt.timedelta(days=rng.randint(5, 200))).strftime("%d/%m/%Y")
        parts.append(f"{label}{rng.choice(OPERATORS)}Category of measure(s): {rng.choice(MEASURES)}"
                     f"Date of entry into force: {date}")
    return "".join(parts)


def notification(rng: random.Random, order: int, case: str, legacy: bool, when: dt.date, alert_id: int) -> str:
    category = rng.choices([c for c, _ in CATEGORIES], [w for _, w in CATEGORIES])[0]
    vehicle = category in ("Motor vehicles", "Other - Tyres", "Other - Car floor mats", "Other - Automotive accessories")
    if vehicle:
        brand = rng.choice(list(VEHICLES))
        name = rng.choice(VEHICLES[brand])
        product = "Passenger car" if category == "Motor vehicles" else category.split(" - ")[1]
        model_type = f"e{rng.randint(1, 13)}*2007/46*{rng.randint(100, 9999):04d}*{rng.randint(0, 20):02d}"
        danger = rng.choice(VEHICLE_DANGERS)
        description = (f"Vehicles produced between {rng.randint(1, 28):02d}/0{rng.randint(1, 9)}/{when.year - 1} and "
                       f"{rng.randint(1, 28):02d}/1{rng.randint(0, 2)}/{when.year - 1}. VIN ranges: "
                       f"WVW{rng.randint(10**9, 10**10 - 1)} – WVW{rng.randint(10**9, 10**10 - 1)}.")
    else:
        brand, name, model_type = f"Brand {rng.randint(1, 900)}", f"Item {rng.randint(1, 99999)}", str(rng.randint(1000, 99999))
        product = category.split(" - ")[-1].rstrip("s")
        danger = rng.choice(PRODUCT_DANGERS)
        description = f"{product} made of plastic, in a cardboard box with a label in several languages. {rng.randint(1, 40)} pieces."
    if legacy:
        # Legacy alerts: no brand / name fields, the product quoted in the description.
        description = f"{product} “{brand} – {name}” ({model_type}). " + description
        brand = name = model_type = ""
        if rng.random() < 0.05:
            danger = "null " + danger
    elif rng.random() < 0.08:
        brand = f"<p>{brand}</p>"
    pictures = "".join(f"<picture>{_cdata(f'https://ec.europa.eu/safety-gate-alerts/public/api/notification/image/{alert_id * 10 + n}')}</picture>"
                       for n in range(rng.randint(1, 6)))
    batch = '<batchNumber xsi:nil="true"/>' if rng.random() < 0.3 else f"<batchNumber>{_cdata(str(rng.randint(1, 10**6)) if rng.random() < 0.5 else '')}</batchNumber>"
    return (
        '<notifications xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:type="webReportXmlWeeklyReportDetailMotorVehicleContentDto">'
        f"<order>{order}</order><caseNumber>{case}</caseNumber>"
        f"<reference>{_cdata(f'https://ec.europa.eu/safety-gate-alerts/screen/webReport/alertDetail/{alert_id}')}</reference>"
        f"<category>{_cdata(category)}</category><product>{_cdata(product)}</product><brand>{_cdata(brand)}</brand>"
        f"<name>{_cdata(name)}</name><type_numberOfModel>{_cdata(model_type)}</type_numberOfModel>{batch}"
        f"<barcode>{_cdata(str(rng.randint(10**12, 10**13 - 1)) if rng.random() < 0.4 else '')}</barcode>"
        f"<riskType>{_cdata(rng.choice(RISKS))}</riskType><danger>{_cdata(danger)}</danger>"
        f"<measures>{_cdata(_measures(rng, when))}</measures><URLrecall/>"
        f"<description>{_cdata(description)}</description><notifyingCountry>{rng.choice(COUNTRIES)}</notifyingCountry>"
        f"<countryOfOrigin>{rng.choice(ORIGINS)}</countryOfOrigin><type>Consumer</type>"
        f"<level>{rng.choice(['Serious risk', 'Serious risk', 'Other risk level'])}</level>"
        f"<pictures>{pictures}</pictures><onlineTrader>{_cdata('')}</onlineTrader><companyRecallCode/><productionDates/>"
        "</notifications>"
    )


def generate(folder: Path, reports: int, seed: int = 763) -> tuple[int, list[dict]]:
    """Write `reports` report files and the index into `folder`; returns (notifications, index entries)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    legacy_count = round(reports * LEGACY_SHARE)
    entries, total, per_year, earlier = [], 0, {}, []
    for k in range(reports):
        legacy = k < legacy_count
        report_id = str(k + 1) if legacy else str(10000001 + k - legacy_count)
        when = FIRST_REPORT + dt.timedelta(days=10 * k)
        year, week, _ = when.isocalendar()
        count = rng.randint(15, 50) if legacy else rng.randint(25, 110)
        body = [f'<?xml version="1.0" encoding="UTF-8"?><Safety-Gate>   <report_language>en</report_language>'
                f"<report_date>{when:%d/%m/%Y}</report_date><report_year>{year}</report_year>"
                f"<report_week>{week}</report_week><report_addendum>{_cdata('')}</report_addendum>"]
        for order in range(1, count + 1):
            if earlier and rng.random() < 0.02:
                case = rng.choice(earlier)            # an addendum repeats an earlier alert
            else:
                per_year[year] = per_year.get(year, 0) + 1
                case = (f"{per_year[year]:04d}/{year % 100:02d}" if legacy
                        else f"SR/{per_year[year]:05d}/{year % 100:02d}")
                earlier.append(case)
            body.append(notification(rng, order, case, legacy, when, 10000 * (k + 1) + order))
        body.append("</Safety-Gate>")
        (folder / f"{report_id}.xml").write_text("".join(body), encoding="utf-8")
        total += count
        entries.append({"reference": f"Report-{year}-{week}", "published": f"{when:%d/%m/%Y}", "year": year,
                        "week": week, "id": report_id})
    index = ['<?xml version="1.0" encoding="UTF-8"?><Safety-Gate>']
    for e in reversed(entries):   # the index lists the newest first
        index.append(f"<weeklyReport><reference>{e['reference']}</reference><publicationDate>{e['published']}"
                     f"</publicationDate><year>{e['year']}</year><week>{e['week']}</week>"
                     f"<URL>https://ec.europa.eu{DETAIL}{e['id']}?language=en,</URL></weeklyReport>")
    index.append("</Safety-Gate>")
    (folder / "index.xml").write_text("".join(index), encoding="utf-8")
    (folder / "meta.json").write_text(json.dumps({"reports": reports, "notifications": total, "seed": seed}))
    return total, entries


def report_files(folder: Path):
    """The request path → file of the loopback server: the index, or a report by its id."""
    def resolve(path: str) -> Path | None:
        if path == INDEX_PATH:
            return folder / "index.xml"
        if path.startswith(DETAIL) and path[len(DETAIL):].isdigit():
            return folder / f"{path[len(DETAIL):]}.xml"
        return None
    return resolve


def run_child(db: str, profile_top: int) -> None:
    """Child: `basecrawler run --source eu --mode full`; prints counts, time, CPU, peak RSS."""
    import sqlite3

    from basecrawler.cli import main

    with benchkit.measured(profile_top) as timing:
        code = main(["--db", db, "-q", "run", "--source", "eu", "--mode", "full"])
    elapsed, cpu = timing["seconds"], timing["cpu_s"]
    with sqlite3.connect(db) as connection:
        counts = {table: connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                  for table in ("recalls", "product_alerts")}
    print(json.dumps({"exit": code, "seconds": elapsed, "cpu_s": cpu, "cpu_with_imports_s": benchkit.cpu_s(),
                      "peak_rss_mb": benchkit.peak_rss_mb(), **counts}))


def parse_child(folder: str, out_path: str | None) -> None:
    """Child: the source alone over every report file, oldest first (as the crawler reads
    them), with the first report of a repeated case as its date (a fresh store)."""
    from basecrawler.recordtypes import Record
    from sources.eu import EuSafetyGateCrawler, WeeklyReport
    from sources.eu_report import ReportReader

    crawler = EuSafetyGateCrawler.__new__(EuSafetyGateCrawler)   # reading and parse() use no store
    reader = ReportReader(warn=lambda message: None)
    entries = sorted((p for p in Path(folder).glob("*.xml") if p.stem.isdigit()), key=lambda p: int(p.stem))
    out = open(out_path, "w", encoding="utf-8") if out_path else None
    first_seen: dict[str, str] = {}
    notifications = records = 0
    with benchkit.measured() as timing:
        for path in entries:
            report = WeeklyReport(reference=path.stem, published=None, year=None, week=None, url=None, report_id=path.stem)
            for item in reader.read(str(path), report, "http://127.0.0.1/"):
                notifications += 1
                item["first_report_date"] = first_seen.setdefault(item["caseNumber"], item["report_date"])
                item["date_stored"] = False
                for record in crawler.parse(None, item):   # the source's parse needs nothing of a run
                    records += 1
                    if out:
                        typed = (record.type, record.fields) if isinstance(record, Record) else ("vehicle_recall", record)
                        out.write(json.dumps(typed, sort_keys=True, ensure_ascii=False, default=str) + "\n")
    elapsed, cpu = timing["seconds"], timing["cpu_s"]
    if out:
        out.close()
    print(json.dumps({"notifications": notifications, "records": records, "seconds": elapsed, "cpu_s": cpu,
                      "peak_rss_mb": benchkit.peak_rss_mb()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=763)
    benchkit.whole_run_arguments(parser, keep="work in this directory and keep it (the reports are reused)")
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--parse", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        return run_child(args.run, args.profile)
    if args.parse:
        return parse_child(args.parse, args.records_to)
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_eu_"))
    folder = work / "reports"
    meta = folder / "meta.json"
    started = time.monotonic()
    if meta.exists() and json.loads(meta.read_text())["reports"] == args.reports:
        notifications, gen_s = json.loads(meta.read_text())["notifications"], 0.0
    else:
        notifications, _ = generate(folder, args.reports)
        gen_s = time.monotonic() - started
    size_mb = sum(p.stat().st_size for p in folder.glob("*.xml")) / 1e6
    server = benchkit.serve(benchkit.file_handler(report_files(folder), "application/xml;charset=UTF-8"))
    env = {"BASECRAWLER_EU_SITE_URL": f"http://127.0.0.1:{server.server_address[1]}", "BASECRAWLER_EU_RATE": "1000",
           "NO_PROXY": "127.0.0.1"}
    db = work / "bench.db"
    for stale in work.glob("bench.db*"):
        stale.unlink()
    load = os.getloadavg()[0]
    try:
        run = benchkit.child(__file__, "--run", str(db), "--profile", str(args.profile), env=env, show_stderr=bool(args.profile))
    finally:
        server.shutdown()
    parsed = benchkit.child(__file__, "--parse", str(folder), *(["--records-to", args.records_to] if args.records_to else []))
    table = [
        ("reports", f"{args.reports} ({size_mb:.1f} MB, {notifications:,} notifications, generated in {gen_s:.1f} s); "
                    f"load average {load:.1f} on {os.cpu_count()} cores"),
        ("full run", f"{run['seconds']:.1f} s wall, {run['cpu_s']:.1f} s CPU ({run['cpu_with_imports_s']:.1f} s with "
                     f"imports), peak RSS {run['peak_rss_mb']:.0f} MB, exit {run['exit']} (target ≤ 20 s)"),
        ("stored", f"{run['product_alerts']:,} product alerts, {run['recalls']:,} vehicle recalls"),
        ("source alone: read + parse every report", f"{parsed['seconds']:.1f} s wall, {parsed['cpu_s']:.1f} s CPU, "
                                                   f"{parsed['notifications']:,} notifications → {parsed['records']:,} "
                                                   f"records, peak RSS {parsed['peak_rss_mb']:.0f} MB"),
    ]
    benchkit.print_table(table)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
