"""Peak memory of the EU Safety Gate source on a large weekly report (target: < 150 MB RSS).

Generates a report of about 50 MB (authored notifications, ~12% vehicles as in the real
feed) on disk, serves it from a local HTTP server in this process, and runs the `eu` crawler
in a child process against it (endpoint override), so the child's peak RSS is the crawler's
alone. For comparison, a second child loads the same file with a plain `lxml.etree.parse`.

    python bench/bench_eu_memory.py [--mb 50]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INDEX_PATH = "/safety-gate-alerts/api/download/weeklyReport/list/xml/en"
REPORT_ID = "10000999"
TARGET_MB = 150

NOTIFICATION = (
    '<notifications xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xsi:type="webReportXmlWeeklyReportDetailMotorVehicleContentDto"><order>{n}</order>'
    "<caseNumber>SR/{n:06d}/26</caseNumber>"
    "<reference><![CDATA[https://ec.europa.eu/safety-gate-alerts/screen/webReport/alertDetail/{n}]]></reference>"
    "<category><![CDATA[{category}]]></category><product><![CDATA[Passenger car]]></product>"
    "<brand><![CDATA[<p>Brand {n}</p>]]></brand><name><![CDATA[Model {n}]]></name>"
    "<type_numberOfModel><![CDATA[e1*2018/858*{n:05d}]]></type_numberOfModel><batchNumber xsi:nil=\"true\"/>"
    "<barcode><![CDATA[]]></barcode><riskType><![CDATA[Injuries]]></riskType>"
    "<danger><![CDATA[{danger}]]></danger>"
    "<measures><![CDATA[Type of economic operator taking notified measure(s): ManufacturerCategory of "
    "measure(s): Recall of the product from end usersDate of entry into force: 14/07/2026]]></measures>"
    "<URLrecall/><description><![CDATA[{description}]]></description><notifyingCountry>France</notifyingCountry>"
    "<countryOfOrigin>Spain</countryOfOrigin><type>Consumer</type><level>Serious risk</level>"
    "<pictures><picture><![CDATA[https://ec.europa.eu/safety-gate-alerts/public/api/notification/image/{n}]]>"
    "</picture></pictures><onlineTrader><![CDATA[]]></onlineTrader><companyRecallCode/><productionDates/>"
    "</notifications>"
)
DANGER = ("A component may fail under load. As a result, the vehicle may lose power while driving, increasing "
          "the risk of an accident. The product does not comply with the Regulation. ") * 3
DESCRIPTION = "Passenger car with a long description of the affected variants and VIN ranges. " * 4


def write_report(path: Path, megabytes: int) -> tuple[int, int]:
    """Stream a report of about `megabytes` MB to `path`; returns (notifications, vehicles)."""
    target = megabytes * 1024 * 1024
    count = vehicles = 0
    with open(path, "w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?><Safety-Gate><report_language>en</report_language>'
                  "<report_date>28/08/2026</report_date><report_year>2026</report_year>"
                  "<report_week>35</report_week><report_addendum><![CDATA[]]></report_addendum>")
        while out.tell() < target:
            count += 1
            vehicle = count % 8 == 0  # ~12% vehicles, like the real feed
            vehicles += vehicle
            out.write(NOTIFICATION.format(n=count, category="Motor vehicles" if vehicle else "Toys",
                                          danger=DANGER, description=DESCRIPTION))
        out.write("</Safety-Gate>")
    return count, vehicles


def serve(report: Path) -> ThreadingHTTPServer:
    index = (f'<?xml version="1.0"?><Safety-Gate><weeklyReport><reference>Report-2026-35</reference>'
             f"<publicationDate>28/08/2026</publicationDate><year>2026</year><week>35</week>"
             f"<URL>https://ec.europa.eu/safety-gate-alerts/api/download/weeklyReport/detail/xml/{REPORT_ID}"
             f"?language=en,</URL></weeklyReport></Safety-Gate>").encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            if self.path.startswith(INDEX_PATH):
                size, source = len(index), None
            elif f"/detail/xml/{REPORT_ID}" in self.path:
                size, source = report.stat().st_size, report
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if source is None:
                self.wfile.write(index)
            else:
                with open(source, "rb") as handle:
                    shutil.copyfileobj(handle, self.wfile, 1 << 20)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


CRAWL_CHILD = """
import resource, sys, time
from basecrawler import Store
from basecrawler.testing import fast_settings
from sources.eu import EuSafetyGateCrawler
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
store = Store(sys.argv[1])
started = time.monotonic()
result = EuSafetyGateCrawler(store, settings=fast_settings(sys.argv[1]), mode="full").run()
elapsed = time.monotonic() - started
print(baseline, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, elapsed, result.counts.saved, result.status)
"""

TREE_CHILD = """
import resource, sys, time
from lxml import etree
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.monotonic()
tree = etree.parse(sys.argv[1], etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False))
count = sum(1 for _ in tree.getroot().iter("notifications"))
elapsed = time.monotonic() - started
print(baseline, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, elapsed, count, "ok")
"""


def run_child(code: str, arg: str, env: dict) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code, arg], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return done.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50, help="report size in MB (default 50)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-eu-") as tmp:
        report = Path(tmp) / "report.xml"
        notifications, vehicles = write_report(report, args.mb)
        size_mb = report.stat().st_size / 1024 / 1024
        server = serve(report)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BASECRAWLER_")}
        env.update({"BASECRAWLER_EU_SITE_URL": f"http://127.0.0.1:{server.server_address[1]}",
                    "BASECRAWLER_EU_RATE": "1000", "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1"})
        try:
            crawl = run_child(CRAWL_CHILD, str(Path(tmp) / "bench.db"), env)
            tree = run_child(TREE_CHILD, str(report), env)
        finally:
            server.shutdown()
    rows = [("eu crawler (stream to file + iterparse + store)", crawl),
            ("lxml.etree.parse of the whole report (comparison)", tree)]
    print(f"EU report: {size_mb:.1f} MB, {notifications} notifications, {vehicles} vehicle alerts")
    print(f"{'run':<52} {'baseline MB':>11} {'peak RSS MB':>11} {'seconds':>8} {'items':>7}  result")
    for label, (baseline, peak, seconds, items, status) in rows:
        print(f"{label:<52} {int(baseline) / 1024:>11.1f} {int(peak) / 1024:>11.1f} {float(seconds):>8.1f} "
              f"{items:>7}  {status}")
    peak_mb = int(crawl[1]) / 1024
    verdict = "PASS" if peak_mb < TARGET_MB else "FAIL"
    print(f"target: crawler peak RSS < {TARGET_MB} MB → {verdict} ({peak_mb:.1f} MB)")
    sys.exit(0 if verdict == "PASS" else 1)


if __name__ == "__main__":
    main()
