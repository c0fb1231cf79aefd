"""A streamed XML document (an EU weekly report) is repaired like a list: bare `&` escaped
outside CDATA, forbidden control characters removed, memory bounded (issue #22.7)."""
import logging

import pytest
from lxml import etree

from basecrawler.formats.xmlrepair import RepairingXmlReader, count_repairs
from basecrawler.formats.xmlsafe import iter_xml, release

from test_eu import FIXTURES, Site, crawl, index_xml

BROKEN = ('<?xml version="1.0" encoding="UTF-8"?><r><a>Tom & Jerry</a><b><![CDATA[Salt & pepper &nbsp;]]></b>'
          '<c x="R&D">bell\x07 &amp; &#38; &lt;</c></r>')


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 16])
def test_the_reader_repairs_outside_cdata_whatever_the_chunk_boundaries(tmp_path, chunk):
    path = tmp_path / "doc.xml"
    path.write_text(BROKEN, encoding="utf-8")
    reader = RepairingXmlReader(path, "utf-8", chunk=chunk)
    root = etree.fromstring(reader.read())
    assert root.findtext("a") == "Tom & Jerry"
    assert root.findtext("b") == "Salt & pepper &nbsp;"           # CDATA kept exactly as published
    assert root.find("c").get("x") == "R&D" and root.findtext("c") == "bell & & <"
    assert (reader.amps, reader.controls) == (2, 1)


def test_a_well_formed_document_needs_no_repair(tmp_path):
    path = tmp_path / "doc.xml"
    path.write_bytes((FIXTURES / "report_10000201.xml").read_bytes())
    assert count_repairs(path).notes() == []


def test_the_reader_feeds_iterparse_in_bounded_pieces(tmp_path):
    path = tmp_path / "big.xml"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("<r>")
        for n in range(20000):
            handle.write(f"<i>{n} Tom & Jerry</i>")
        handle.write("</r>")
    reader = RepairingXmlReader(path, "utf-8")
    sizes = []
    original_read = reader.read

    def read(size=-1):
        out = original_read(size)
        sizes.append(len(out))
        return out
    reader.read = read
    seen = 0
    for _, element in iter_xml(reader, events=("end",)):
        if element.tag == "i":
            assert element.text.endswith("Tom & Jerry")
            seen += 1
            release(element)
    assert seen == 20000 and reader.amps == 20000
    assert max(sizes) <= 1 << 16


def test_a_report_with_a_bare_ampersand_stores_that_notification_with_a_warning(store, settings, caplog):
    body = (FIXTURES / "report_10000201.xml").read_bytes().replace(
        b"<product><![CDATA[Toy car]]></product>", b"<product>Tom & Jerry toy car\x01</product>")
    site = Site(index_xml(("10000201", "24/07/2026", "")), {"10000201": body})
    with caplog.at_level(logging.WARNING):
        result = crawl(store, settings, site)
    assert result.counts.dead_lettered == 0
    row = store.lookup.get("product_alert", {"source": "eu", "country": "EU", "alert_id": "SR/01902/26"})
    assert row["product_original"] == "Tom & Jerry toy car"
    assert store.lookup.count("product_alert", "eu") == 4
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("escaped 1 bare '&'" in m and "control character" in m for m in warnings)
