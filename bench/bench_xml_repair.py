"""A streamed EU-shaped report that needs the repair (a bare `&` in every notification): time
of the pre-scan and of the repaired parse, and peak memory, which must stay flat whatever the
file size. Usage: python bench/bench_xml_repair.py [megabytes]"""
import resource
import sys
import tempfile
import time
from pathlib import Path

from basecrawler.formats.xmlrepair import RepairingXmlReader, count_repairs
from basecrawler.formats.xmlsafe import iter_xml, release

NOTIFICATION = ("<notifications><caseNumber>SR/{n:05d}/26</caseNumber><category><![CDATA[Toys & games]]></category>"
                "<product>Tom & Jerry toy car</product><description><![CDATA[" + "x" * 400 + "]]></description>"
                "</notifications>")


def main(megabytes: int = 50) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.xml"
        with open(path, "w", encoding="utf-8") as handle:
            handle.write('<?xml version="1.0" encoding="UTF-8"?><Safety-Gate><report_date>01/01/2026</report_date>')
            n = 0
            while handle.tell() < megabytes << 20:
                handle.write(NOTIFICATION.format(n=n))
                n += 1
            handle.write("</Safety-Gate>")
        start = time.perf_counter()
        scan = count_repairs(path)
        scanned = time.perf_counter() - start
        start = time.perf_counter()
        seen = 0
        with RepairingXmlReader(path) as reader:
            for _, element in iter_xml(reader, events=("end",)):
                if element.tag == "notifications":
                    seen += 1
                    release(element)
        parsed = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{path.stat().st_size / 1e6:.0f} MB, {n} notifications ({seen} parsed), {scan.amps} '&' repaired: "
              f"pre-scan {scanned:.2f} s, repaired parse {parsed:.2f} s, peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
