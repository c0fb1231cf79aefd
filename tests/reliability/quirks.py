"""The quirks corpus (#13 "Done when"): real-world input quirks, one entry per payload set,
each run black-box through `python -m basecrawler run` against a loopback server.

An entry is a `Quirk`: the source, the HTTP routes it serves (path regex → Reply; anything else
404), the exit code the run must end with, the records it must store (values written by hand
from the payload), the dead letters it must keep (kind + a phrase of the reason), phrases
the run line must carry as warnings and phrases the log must carry at WARNING level. To add a
quirk class append entries to `CORPUS`; `test_quirks.py` runs them all.

Payloads are authored here, next to what they must give; the list PDF with label lines is made
by fixtures/quirks/make_fixtures.py, the other PDFs (locked, too many pages) by reportlab at
import (tests/support.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from basecrawler.testing import Reply
from support import encrypted_pdf, pdf_of_pages

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


class EndsWith(str):
    """An expected value that only has to end the stored one (a link whose host is the test
    server today and the public host once endpoint overrides stop leaking into links)."""

    def __eq__(self, other):
        return isinstance(other, str) and other.endswith(str(self))

    __hash__ = str.__hash__


@dataclass
class Quirk:
    name: str
    source: str
    routes: dict[str, Reply]
    exit_code: int = 0
    records: dict[str, dict] = field(default_factory=dict)         # recall_number → column: value
    dead_letters: list[tuple[str, str]] = field(default_factory=list)   # (kind, phrase of the error)
    warnings: list[str] = field(default_factory=list)               # phrases in the run line
    # Phrases of WARNING lines in the log that the run line does not count: a problem of one
    # record's value (a date or a count set aside, the record stored) rather than of a list.
    logged: list[str] = field(default_factory=list)
    mode: str = "full"
    args: tuple[str, ...] = ()          # more `run` arguments (e.g. "--since", "2026-01-01")
    env: dict[str, str] = field(default_factory=dict)   # more environment (caps, limits …)


CRLF = "\r\n"


def crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", CRLF)


# ---- us: NHTSA list (JSON) + detail -----------------------------------------------------------
US_LIST = "\ufeff" + crlf(json.dumps([
    {"report_received_date": "2026-06-24T00:00:00.000", "nhtsa_id": "26V100000",
     "manufacturer": "Müller Fahrzeugbau GmbH",
     "subject": "Seat\tbelt\u0001 anchor may break",                 # raw tab and SOH inside a string
     "component": "  SEAT BELTS  ", "potentially_affected": "1200",
     "defect_summary": "The anchor bolt may crack.", "consequence_summary": "Injury risk.",
     "corrective_action": "Dealers will replace the anchor.",
     "recall_link": {"url": "https://www.nhtsa.gov/recalls?nhtsaId=26V100000", "description": "Go to Recall"}},
    {"report_received_date": "2026-06-23T00:00:00.000", "nhtsa_id": "26V100001",
     "subject": "Mirror – may detach"},                               # most fields missing
    {"report_received_date": "2026-06-22T00:00:00.000", "subject": "a row without an id"},
], ensure_ascii=False, indent=1)).replace("\\t", "\t").replace("\\u0001", "\u0001")

US_DETAIL = "\ufeff" + crlf(json.dumps({"Count": 1, "Message": "Results returned successfully", "results": [
    {"Make": "MÜLLER", "Model": "KÜBEL 4", "ModelYear": "2025", "Manufacturer": "Müller Fahrzeugbau GmbH"}]},
    ensure_ascii=False))

US = [Quirk(
    "us-bom-lying-charset-control-chars-missing-fields", "us",
    routes={
        # UTF-8 with a BOM, CRLF and raw control characters inside strings, declared ISO-8859-1.
        r"/resource/6axg-epim\.json": Reply(200, body=US_LIST.encode("utf-8"),
                                            headers={"Content-Type": "application/json; charset=ISO-8859-1"}),
        r"/recalls/campaignNumber\?campaignNumber=26V100000": Reply(200, body=US_DETAIL.encode("utf-8"),
                                          headers={"Content-Type": "application/json"}),
    },
    records={
        "26V100000": {"recall_date": "2026-06-24", "manufacturer_original": "Müller Fahrzeugbau GmbH",
                      "summary_original": "Seat\tbelt anchor may break", "component_original": "SEAT BELTS",
                      "affected_units": 1200, "defect_cause_original": "The anchor bolt may crack.",
                      "remedy_original": "Dealers will replace the anchor.",
                      "model_original": "KÜBEL 4", "model_year": "2025",         # from the detail API
                      "source_url": "https://www.nhtsa.gov/recalls?nhtsaId=26V100000"},
        "26V100001": {"recall_date": "2026-06-23", "summary_original": "Mirror – may detach",
                      "manufacturer_original": None, "component_original": None, "affected_units": None},
    },
    dead_letters=[("parse_error", "nhtsa_id")],
)]


# ---- ca: Transport Canada CSV -------------------------------------------------------------------
CA_HEADER = ('"RECALL_NUMBER_NUM","YEAR","MANUFACTURER_RECALL_NO_TXT","CATEGORY_ETXT","CATEGORY_FTXT",'
             '"MAKE_NAME_NM","MODEL_NAME_NM","UNIT_AFFECTED_NBR","SYSTEM_TYPE_ETXT","SYSTEM_TYPE_FTXT",'
             '"NOTIFICATION_TYPE_ETXT","NOTIFICATION_TYPE_FTXT","COMMENT_ETXT","COMMENT_FTXT","RECALL_DATE_DTE"')
CA_COMMENT = ("Issue: The seat belt anchor may break.\r\nSafety Risk: An occupant may not be restrained."
              "\r\nCorrective Actions: Dealers will replace the anchor.")


def ca_csv() -> bytes:
    utf8 = lambda s: s.encode("utf-8")  # noqa: E731
    rows = [
        # One recall on two rows; its French system type is Windows-1252 bytes inside a UTF-8 file.
        utf8('"2026101","2024","R26-01","Passenger Car","Voiture de tourisme","MÜLLER","KÜBEL","1,250.00",'
             '"Seat Belts","') + "Ceintures de sécurité".encode("cp1252")
        + utf8(f'","Safety Mfr","Sécurité - fabricant","{CA_COMMENT}","Problème : ancrage.","2026-09-30"'),
        utf8(f'"2026101","2025","R26-01","Passenger Car","Voiture de tourisme","MÜLLER","KÜBEL XL","1,250.00",'
             f'"Seat Belts","Ceintures de sécurité","Safety Mfr","Sécurité - fabricant","{CA_COMMENT}",'
             f'"Problème : ancrage.","2026-09-30"'),
        # Mojibake French, odd whitespace, no unit count.
        utf8('"2026102","2023","","Light Truck & Van","Camionnette","  FORD ","RANGER\t","","Electrical",'
             '"Ã‰lectricitÃ©","Safety Mfr","","  Fuse   box may overheat.  ","","2026-09-29"'),
        # A row without a recall number: it cannot be stored without a key, so it is kept as a
        # dead letter with the row (never a silent skip).
        utf8('"","2023","","Passenger Car","","FORD","FOCUS","","","","","","","","2026-09-28"'),
    ]
    return b"\xef\xbb\xbf" + utf8(CA_HEADER) + b"\r\n" + b"\r\n".join(rows) + b"\r\n"


CA = [Quirk(
    "ca-bom-crlf-cp1252-cell-mojibake-odd-whitespace", "ca",
    routes={r"\.csv": Reply(200, body=ca_csv(), headers={"Content-Type": "text/csv"})},
    records={
        "2026101": {"recall_date": "2026-09-30", "manufacturer_original": "MÜLLER",
                    "model_original": "KÜBEL, KÜBEL XL", "model_year": "2024-2025",
                    "component_original": "Seat Belts", "affected_units": 1250,
                    "defect_cause_original": "The seat belt anchor may break.",
                    "consequence_original": "An occupant may not be restrained.",
                    "remedy_original": "Dealers will replace the anchor.",
                    "summary_original": CA_COMMENT.replace("\r\n", "\n"),
                    "extra.fr.system_type": "Ceintures de sécurité"},
        "2026102": {"recall_date": "2026-09-29", "manufacturer_original": "FORD", "model_original": "RANGER",
                    "model_year": "2023", "affected_units": None, "summary_original": "Fuse   box may overheat.",
                    "extra.fr.system_type": "Électricité"},
    },
    dead_letters=[("parse_error", "has no RECALL_NUMBER_NUM")],
)]


# ---- jp: MLIT feed → press page → PDF ----------------------------------------------------------
JP_FEED_HEAD = ('<?xml version="1.0" encoding="Shift_JIS"?>\n'
                '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"'
                ' xmlns:dc="http://purl.org/dc/elements/1.1/">\n'
                '<channel rdf:about="http://www.mlit.go.jp/"><title>国土交通省</title>'
                '<link>http://www.mlit.go.jp/</link><description>報道発表</description></channel>\n')


def jp_item(title: str, page: str, date: str = "2024-10-03T14:00:00+09:00") -> str:
    link = f"http://www.mlit.go.jp/report/press/{page}.html"
    return (f'<item rdf:about="{link}">\n<title>{title}</title>\n<link>{link}</link>\n'
            f'<dc:date>{date}</dc:date>\n</item>\n')


def jp_feed(*items: str) -> str:
    return crlf(JP_FEED_HEAD + "".join(items) + "</rdf:RDF>\n")


JP_PRESS = ("\ufeff<!DOCTYPE html>\n<html lang=\"ja\"><head><meta charset=\"UTF-8\">"
            "<title>リコールの届出について（スズキ　ジムニー　他）</title></head><body>\n"
            "<h2 class=\"title\">リコールの届出について（スズキ　ジムニー　他）</h2>\n"
            "<p class=\"date mb20\">令和６年１０月３日</p>\n"
            "<p class=\"linkArrow01 mb10\"><a href=\"/report/press/content/009001.pdf\">リコール届出一覧表</a>（PDF形式）</p>\n"
            "<p class=\"linkArrow01 mb10\"><a href=\"/report/press/content/009002.pdf\">改善箇所説明図</a></p>\n"
            "</body></html>\n")

JP_5120 = {
    "recall_date": "2024-10-03", "manufacturer_original": "スズキ", "model_original": "ジムニー、ジムニー シエラ",
    "component_original": "制動装置（ブレーキホース）",
    "defect_cause_original": "ブレーキホースの取り回しが不適切なため、ハンドルを最大に切った状態を繰り返すと、"
                             "ブレーキホースがフレームと干渉して摩耗することがある。そのため、そのままの状態で使用を続けると、"
                             "ブレーキホースに亀裂が生じてブレーキ液が漏れ、最悪の場合、制動力が低下するおそれがある。",
    "remedy_original": "全車両、ブレーキホースを対策品に交換するとともに、取り回しを修正する。",
    "affected_units": 5100, "source_url": EndsWith("/report/press/jidosha08_hh_009001.html"),
    "extra.notifier": "スズキ株式会社",
}


def jp_routes(feed: bytes, feed_type: str = "application/rdf+xml") -> dict:
    return {
        r"pressrelease\.rdf": Reply(200, body=feed, headers={"Content-Type": feed_type}),
        r"jidosha08_hh_009001\.html": Reply(200, body=JP_PRESS.encode("utf-8"), headers={"Content-Type": "text/html"}),
        r"content/009001\.pdf": Reply(200, body=(FIXTURES / "quirks" / "jp_list_label_lines.pdf").read_bytes(),
                                      headers={"Content-Type": "application/pdf"}),
    }


JP_RECALL = "リコールの届出について（スズキ　ジムニー　他）"
JP = [
    Quirk("jp-utf8-under-shift-jis-bare-amp-broken-item-label-lines-pdf", "jp",
          routes=jp_routes(jp_feed(
              jp_item("道路局 A & B の公表について", "road01"),                 # bare &: the real-world case
              jp_item(JP_RECALL, "jidosha08_hh_009001"),
              jp_item("リコールの届出について（壊れ<た）", "jidosha08_hh_009003"),  # cannot be read at all
          ).encode("utf-8")),                                                  # declared Shift_JIS, sent as UTF-8
          records={"5120": JP_5120},
          dead_letters=[("unreadable_item", "壊れ")],
          warnings=["declared shift_jis but the body is valid UTF-8", "escaped 1 bare '&'",
                    "2 read, 1 lost"]),
    Quirk("jp-feed-in-cp932-with-a-charset-header-that-says-utf-8", "jp",
          routes=jp_routes(jp_feed(jp_item("第①回 道路局の公表", "road01"), jp_item(JP_RECALL, "jidosha08_hh_009001"))
                           .encode("cp932"), feed_type="application/rdf+xml; charset=utf-8"),
          records={"5120": JP_5120}, warnings=["not valid utf-8; read as cp932"]),
    Quirk("jp-feed-without-any-recall-item", "jp",
          routes=jp_routes(jp_feed(jp_item("道路局の公表について", "road01")).encode("cp932")),
          # Incremental: before #13 this ended "succeeded", exit 0, without a word.
          mode="incremental", warnings=["none of its 1 items is titled as a recall press release"]),
    Quirk("jp-feed-that-cannot-be-read-at-all", "jp", exit_code=1,
          routes=jp_routes(b'<?xml version="1.0" encoding="Shift_JIS"?><rdf:RDF><channel>\x82\xa0</rdf:RDF'),
          dead_letters=[("unexpected", "the press-release feed cannot be read")]),
]


# ---- au: listing pages + Drupal detail pages ---------------------------------------------------
def au_detail(number: str, title: str, make: str, models: list[str], years: tuple[str, str], date: str,
              defect: str, action: str, *, meta: str = "utf-8") -> str:
    field = ('<div class="field field--name-field-{name}"><div class="field__label">{label}</div>'
             '<div class="field__item">{value}</div></div>\n')
    models_html = "".join(f'<div class="field__item">{m}</div>' for m in models)
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"" + meta + "\"><title>" + title + "</title></head><body>\n"
            f"<h1 class=\"page-title\">{title}</h1>\n"
            + field.format(name="r-make", label="Make", value=make)
            + f'<div class="field field--name-field-r-models"><div class="field__label">Models</div>'
              f'<div class="field__items">{models_html}</div></div>\n'
            + field.format(name="r-date-ranges", label="Year range",
                           value=f"<span>{years[0]}</span> - <span>{years[1]}</span>")
            + field.format(name="r-original-publish-date", label="Original publish date",
                           value=f'<time datetime="{date}T12:00:00Z">x</time>')
            + field.format(name="r-defect", label="What is the defect?", value=f"<p>{defect}</p>")
            + field.format(name="r-action", label="What should consumers do?", value=f"<p>{action}</p>")
            + "</body></html>\n")


AU_LISTING = crlf("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<!DOCTYPE html>\n<html><body><table>\n"
                  "<tr><td><a href=\"/recalls/rec-009001\">Škoda Octavia – Brake & clutch</a></td><td>02/10/2026</td></tr>\n"
                  "<tr><td><a href=\"/recalls/rec-009002\">Citroën C3 \x00 Airbag</a></td><td>01/10/2026</td></tr>\n"
                  "<tr><td><a href=\"/recalls/rec-009003\">Kia Rio</a></td><td>30/09/2026</td></tr>\n"
                  "</table></body></html>\n")

AU = [Quirk(
    "au-lying-charsets-xml-declaration-nul-bare-amp-cp1252-page", "au",
    routes={
        # UTF-8 listing with an XML declaration, a NUL and a bare &, declared ISO-8859-1.
        r"browse-all-recalls\?page=0": Reply(200, body=AU_LISTING.encode("utf-8"),
                                             headers={"Content-Type": "text/html; charset=ISO-8859-1"}),
        # A Windows-1252 page that says so only in its <meta>: “smart quotes” and an en dash.
        r"/recalls/rec-009001": Reply(200, body=au_detail(
            "REC-009001", "Škoda Octavia – Brake pedal", "Škoda", ["Octavia"], ("2021", "2023"), "2026-10-02",
            "The brake pedal “pivot” may wear.", "Contact your dealer.", meta="windows-1252").encode("cp1252"),
            headers={"Content-Type": "text/html"}),
        # UTF-8 with a BOM and CRLF, declared ISO-8859-1 in the header.
        r"/recalls/rec-009002": Reply(200, body=("\ufeff" + crlf(au_detail(
            "REC-009002", "Citroën C3 — Airbag", "Citroën", ["C3", " C3 Aircross "], ("2019", "2020"), "2026-10-01",
            "The airbag   may not deploy.", "Do not drive; contact Citroën."))).encode("utf-8"),
            headers={"Content-Type": "text/html; charset=ISO-8859-1"}),
        # Bytes no charset fits (declared UTF-8, not UTF-8): lost, a dead letter with its reason.
        r"/recalls/rec-009003": Reply(200, body=b"<html><body><h1>Kia \x81\x8d Rio</h1></body></html>",
                                      headers={"Content-Type": "text/html; charset=utf-8"}),
    },
    records={
        "REC-009001": {"recall_date": "2026-10-02", "manufacturer_original": "Škoda", "model_original": "Octavia",
                       "model_year": "2021-2023", "defect_cause_original": "The brake pedal “pivot” may wear.",
                       "summary_original": "Škoda Octavia – Brake pedal"},
        "REC-009002": {"recall_date": "2026-10-01", "manufacturer_original": "Citroën",
                       "model_original": "C3, C3 Aircross", "model_year": "2019-2020",
                       "defect_cause_original": "The airbag may not deploy.",
                       "remedy_original": "Do not drive; contact Citroën.", "summary_original": "Citroën C3 — Airbag"},
    },
    dead_letters=[("unexpected", "not valid in utf-8")],
)]


# ---- eu: weekly index + streamed report ----------------------------------------------------------
EU_INDEX = crlf("""<?xml version="1.0" encoding="UTF-8"?>
<Safety-Gate>
  <weeklyReport>
    <reference>Report-2026-40</reference>\x0b
    <publicationDate>02/10/2026</publicationDate>
    <year>2026</year>
    <week>40</week>
    <URL>https://ec.europa.eu/safety-gate-alerts/api/download/weeklyReport/detail/xml/10000301?language=en&search=WEB_REPORT%7C:%7C10000301, </URL>
  </weeklyReport>
  <weeklyReport>
    <reference>Report-2026-39</reference>
    <publicationDate>25/09/2026</publicationDate>
    <year>2026</year<week>39</week>
    <URL>https://ec.europa.eu/safety-gate-alerts/api/download/weeklyReport/detail/xml/10000300?language=en</URL>
  </weeklyReport>
</Safety-Gate>
""")

EU_REPORT = crlf("""<?xml version="1.0" encoding="ISO-8859-1"?>
<Safety-Gate>
<report_date>02/10/2026</report_date><report_year>2026</report_year><report_week>40</report_week>
<notifications><caseNumber>SR/03001/26</caseNumber>
<reference><![CDATA[https://ec.europa.eu/safety-gate-alerts/screen/webReport/alertDetail/10300001]]></reference>
<category><![CDATA[Motor vehicles]]></category><product><![CDATA[Passenger car]]></product>
<brand><![CDATA[Müller Automobile]]></brand><name><![CDATA[Kübel 4]]></name>
<type_numberOfModel><![CDATA[MK4]]></type_numberOfModel>
<danger><![CDATA[The seat belt anchorage may break. As a result, the occupant may not be restrained in a crash.]]></danger>
<measures><![CDATA[Category of measure(s): Recall of the product from end usersDate of entry into force: 25/09/2026]]></measures>
<description><![CDATA[Passenger car “Müller – Kübel 4”.]]></description></notifications>
<notifications><caseNumber>SR/03002/26</caseNumber><category><![CDATA[Toys]]></category>
<brand><![CDATA[Spielzeug Größe]]></brand></notifications>
<notifications><caseNumber></caseNumber><category><![CDATA[Other - Tyres]]></category>
<brand><![CDATA[Reifen Weiß]]></brand></notifications>
</Safety-Gate>
""")

EU = [Quirk(
    "eu-index-bare-amp-control-char-broken-entry-report-utf8-under-latin1", "eu",
    routes={
        r"/list/xml/": Reply(200, body=EU_INDEX.encode("utf-8"), headers={"Content-Type": "application/xml"}),
        r"/detail/xml/10000301": Reply(200, body=EU_REPORT.encode("utf-8"), headers={"Content-Type": "application/xml"}),
    },
    records={
        "SR/03001/26": {"recall_date": "2026-10-02", "manufacturer_original": "Müller Automobile",
                        "model_original": "Kübel 4 (MK4)", "summary_original": "Passenger car “Müller – Kübel 4”.",
                        "defect_cause_original": "The seat belt anchorage may break.",
                        "consequence_original": "As a result, the occupant may not be restrained in a crash.",
                        "remedy_original": "Recall of the product from end users, in force from 25/09/2026.",
                        "source_url": "https://ec.europa.eu/safety-gate-alerts/screen/webReport/alertDetail/10300001"},
    },
    dead_letters=[("unreadable_item", "unreadable <weeklyReport>"), ("unexpected", "without a caseNumber")],
    warnings=["escaped 1 bare '&'", "removed 1 control character", "declared iso8859-1 but the body is valid UTF-8"],
)]


def eu_index(report_id: str) -> bytes:
    return ('<?xml version="1.0" encoding="UTF-8"?><Safety-Gate><weeklyReport><reference>Report-2026-41</reference>'
            '<publicationDate>09/10/2026</publicationDate><year>2026</year><week>41</week>'
            f'<URL>https://ec.europa.eu/safety-gate-alerts/api/download/weeklyReport/detail/xml/{report_id}?language=en'
            '</URL></weeklyReport></Safety-Gate>').encode("utf-8")


# Declared UTF-8, but one alert's brand was pasted in Latin-1 (0xEB for ë): the report's other
# bytes are UTF-8 (é in the description).
EU_MIXED_REPORT = (
    '<?xml version="1.0" encoding="UTF-8"?><Safety-Gate><report_date>09/10/2026</report_date>'
    '<notifications><caseNumber>SR/03101/26</caseNumber><category>Motor vehicles</category>'
    '<brand>Citro'.encode("utf-8") + b"\xeb" + 'n</brand><name>C5</name>'
    '<description>Véhicule.</description></notifications></Safety-Gate>'.encode("utf-8"))

EU += [
    Quirk("eu-utf8-report-with-a-latin1-byte", "eu",
          routes={r"/list/xml/": Reply(200, body=eu_index("10000310"), headers={"Content-Type": "application/xml"}),
                  r"/detail/xml/10000310": Reply(200, body=EU_MIXED_REPORT, headers={"Content-Type": "application/xml"})},
          records={"SR/03101/26": {"recall_date": "2026-10-09", "manufacturer_original": "Citroën",
                                   "model_original": "C5", "summary_original": "Véhicule."}},
          warnings=["bytes that are not UTF-8 in a utf-8 report; read as cp1252"]),
    Quirk("eu-report-without-any-vehicle-alert", "eu", mode="incremental",
          routes={r"/list/xml/": Reply(200, body=eu_index("10000311"), headers={"Content-Type": "application/xml"}),
                  r"/detail/xml/10000311": Reply(200, body=(
                      '<?xml version="1.0" encoding="UTF-8"?><Safety-Gate><report_date>09/10/2026</report_date>'
                      '<notifications><caseNumber>SR/03111/26</caseNumber><category>Toys</category></notifications>'
                      '</Safety-Gate>').encode("utf-8"), headers={"Content-Type": "application/xml"})},
          warnings=["none of its 1 notifications is in a vehicle category"]),
]

AU += [
    Quirk("au-listing-that-cannot-be-read", "au", exit_code=1,   # a full run that fetched nothing is suspect
          routes={r"browse-all-recalls\?page=0": Reply(200, body=b"<html><body><p>Maintenance & upgrades</p></body></html>",
                                                        headers={"Content-Type": "text/html"})},
          dead_letters=[("unexpected", "no recall links")]),
]


# ---- point 3: implausible dates -----------------------------------------------------------------
# A date after tomorrow or before 1900 would become the incremental watermark: the record is
# stored as date-unknown (the sentinel 1970-01-01), the published date kept in extra.
def us_list(*rows: dict) -> Reply:
    return Reply(200, body=json.dumps(list(rows)).encode("utf-8"), headers={"Content-Type": "application/json"})


US += [
    Quirk("us-report-received-9999-12-31-beside-a-good-row", "us",
          routes={r"/resource/6axg-epim\.json": us_list(
              {"report_received_date": "9999-12-31T00:00:00.000", "nhtsa_id": "26V200000",
               "subject": "Hood latch may release", "potentially_affected": "300"},
              {"report_received_date": "2026-06-20T00:00:00.000", "nhtsa_id": "26V200001",
               "subject": "Wiper motor may fail", "potentially_affected": "45"})},
          records={
              "26V200000": {"recall_date": "1970-01-01", "date_unknown": 1,
                            "extra.implausible_recall_date": "9999-12-31",
                            "summary_original": "Hood latch may release", "affected_units": 300},
              "26V200001": {"recall_date": "2026-06-20", "date_unknown": 0, "extra.implausible_recall_date": None,
                            "summary_original": "Wiper motor may fail", "affected_units": 45},
          },
          logged=["26V200000: recall date 9999-12-31 is implausible"]),
]


def eu_two_reports_index() -> bytes:
    def entry(reference: str, date: str, report_id: str) -> str:
        return (f"<weeklyReport><reference>{reference}</reference><publicationDate>{date}</publicationDate>"
                f"<URL>https://ec.europa.eu/safety-gate-alerts/api/download/weeklyReport/detail/xml/{report_id}"
                "?language=en</URL></weeklyReport>")
    return ('<?xml version="1.0" encoding="UTF-8"?><Safety-Gate>'
            + entry("Report-2026-41", "09/10/2026", "10000320") + entry("Report-9999-52", "31/12/9999", "10000321")
            + "</Safety-Gate>").encode("utf-8")


def eu_report(date: str, case: str, brand: str, name: str) -> Reply:
    return Reply(200, body=(
        f'<?xml version="1.0" encoding="UTF-8"?><Safety-Gate><report_date>{date}</report_date>'
        f'<notifications><caseNumber>{case}</caseNumber><category>Motor vehicles</category>'
        f'<brand>{brand}</brand><name>{name}</name></notifications></Safety-Gate>').encode("utf-8"),
        headers={"Content-Type": "application/xml"})


EU += [
    Quirk("eu-report-dated-31-12-9999-beside-a-good-report", "eu",
          routes={r"/list/xml/": Reply(200, body=eu_two_reports_index(), headers={"Content-Type": "application/xml"}),
                  r"/detail/xml/10000320": eu_report("09/10/2026", "SR/03201/26", "Renault", "Clio"),
                  r"/detail/xml/10000321": eu_report("31/12/9999", "SR/03202/26", "Peugeot", "208")},
          records={
              "SR/03201/26": {"recall_date": "2026-10-09", "date_unknown": 0, "manufacturer_original": "Renault",
                              "model_original": "Clio", "extra.implausible_recall_date": None},
              "SR/03202/26": {"recall_date": "1970-01-01", "date_unknown": 1, "manufacturer_original": "Peugeot",
                              "model_original": "208", "extra.implausible_recall_date": "9999-12-31"},
          },
          logged=["SR/03202/26: recall date 9999-12-31 is implausible"]),
]


# ---- point 6: numbers that do not fit -----------------------------------------------------------
# 10^23 overflowed SQLite's INTEGER and cost the recall; -5 silently became None. Either is
# stored as an unknown count with the published value in extra, and said at WARNING.
US += [
    Quirk("us-potentially-affected-10-to-the-23", "us",
          routes={r"/resource/6axg-epim\.json": us_list(
              {"report_received_date": "2026-06-19T00:00:00.000", "nhtsa_id": "26V200002",
               "subject": "Fuel pump may fail", "potentially_affected": "100000000000000000000000"},
              {"report_received_date": "2026-06-18T00:00:00.000", "nhtsa_id": "26V200003",
               "subject": "Horn may not sound", "potentially_affected": "1200"})},
          records={
              "26V200002": {"recall_date": "2026-06-19", "summary_original": "Fuel pump may fail",
                            "affected_units": None, "extra.unparsed_affected_units": "100000000000000000000000"},
              "26V200003": {"recall_date": "2026-06-18", "summary_original": "Horn may not sound",
                            "affected_units": 1200, "extra.unparsed_affected_units": None},
          },
          logged=["26V200002: affected_units '100000000000000000000000' is not a plausible count"]),
]


def ca_rows(*rows: tuple[str, str, str, str]) -> bytes:
    """(recall number, model, UNIT_AFFECTED_NBR, RECALL_DATE_DTE) → a CSV with the real header."""
    lines = [CA_HEADER] + [
        f'"{number}","2024","","Passenger Car","Voiture de tourisme","KIA","{model}","{units}","Brakes","Freins",'
        f'"Safety Mfr","Sécurité - fabricant","Issue: Brake {model.lower()}.","","{date}"'
        for number, model, units, date in rows]
    return ("\r\n".join(lines) + "\r\n").encode("utf-8")


CA += [
    Quirk("ca-unit-count-minus-5-and-a-recall-dated-9999-12-31", "ca",
          routes={r"\.csv": Reply(200, body=ca_rows(("2026201", "RIO", "-5", "2026-09-21"),
                                                    ("2026202", "SOUL", "980", "2026-09-22"),
                                                    ("2026203", "NIRO", "12", "9999-12-31")),
                                  headers={"Content-Type": "text/csv"})},
          records={
              "2026201": {"recall_date": "2026-09-21", "model_original": "RIO", "affected_units": None,
                          "extra.unparsed_affected_units": "-5"},
              "2026202": {"recall_date": "2026-09-22", "date_unknown": 0, "model_original": "SOUL",
                          "affected_units": 980, "extra.unparsed_affected_units": None,
                          "defect_cause_original": "Brake soul."},
              "2026203": {"recall_date": "1970-01-01", "date_unknown": 1, "model_original": "NIRO",
                          "affected_units": 12, "extra.implausible_recall_date": "9999-12-31"},
          },
          logged=["2026201: affected_units '-5' is not a plausible count",
                  "2026203: recall date 9999-12-31 is implausible"]),
]


# ---- points 7 and 8: the list PDF of a second press release is from elsewhere, too big, locked --
# The feed lists two recall press releases: 009001 (the good one, its records stored as in the
# entries above) and 009004, whose list PDF is the quirk; 009004 is lost as a dead letter of
# its own kind, never at the cost of 009001.
JP_SECOND = "リコールの届出について（ホンダ　GB350　他）"


def jp_press(title: str, list_href: str) -> bytes:
    return ("<!DOCTYPE html>\n<html lang=\"ja\"><head><meta charset=\"UTF-8\"><title>" + title + "</title></head>"
            f"<body>\n<h2 class=\"title\">{title}</h2>\n<p class=\"date mb20\">令和６年１０月３日</p>\n"
            f"<p class=\"linkArrow01 mb10\"><a href=\"{list_href}\">リコール届出一覧表</a>（PDF形式）</p>\n"
            "</body></html>\n").encode("utf-8")


def jp_second_press_release(list_href: str, pdf: bytes | None = None) -> dict:
    routes = jp_routes(jp_feed(jp_item(JP_RECALL, "jidosha08_hh_009001"), jp_item(JP_SECOND, "jidosha08_hh_009004"))
                       .encode("cp932"))
    routes[r"jidosha08_hh_009004\.html"] = Reply(200, body=jp_press(JP_SECOND, list_href),
                                                 headers={"Content-Type": "text/html"})
    if pdf is not None:
        routes[r"content/009004\.pdf"] = Reply(200, body=pdf, headers={"Content-Type": "application/pdf"})
    return routes


JP += [
    # A link to another host is never followed (a test server on this machine answers only
    # for the source's own host; files.example.org is not it).
    Quirk("jp-list-pdf-linked-on-another-host", "jp",
          routes=jp_second_press_release("https://files.example.org/report/press/content/009004.pdf"),
          records={"5120": JP_5120},
          dead_letters=[("foreign_host", "files.example.org is not one of the source's hosts")]),
    Quirk("jp-list-pdf-of-5-pages-over-a-3-page-cap", "jp", env={"BASECRAWLER_PDF_MAX_PAGES": "3"},
          routes=jp_second_press_release("/report/press/content/009004.pdf", pdf_of_pages(5)),
          records={"5120": JP_5120},          # its list PDF has 1 page: under the cap
          dead_letters=[("too_big", "5 pages, more than the 3-page limit")]),
    Quirk("jp-list-pdf-locked-with-a-password", "jp",
          routes=jp_second_press_release("/report/press/content/009004.pdf", encrypted_pdf()),
          records={"5120": JP_5120},
          dead_letters=[("encrypted", "encrypted PDF")]),
]

CORPUS: list[Quirk] = US + CA + JP + AU + EU
