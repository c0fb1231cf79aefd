"""Load fixtures/web/recalls.json into a store (see fixtures/web/README.md), plus the records
the web view's display rules and defences are tested on (EXTRA, HOSTILE)."""
import json
import socket
import urllib.request
from pathlib import Path

from basecrawler import Recall, Store

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "web" / "recalls.json"
TRANSLATED_AT = "2024-07-01T00:00:00+00:00"

# A Japanese recall as MLIT publishes it: no summary, only component / cause / remedy, translated.
# A recall whose date could not be read. A recall months before the others (a gap for the chart).
EXTRA = [
    {"country": "JP", "recall_number": "JP-4777", "recall_date": "2024-02-22", "source_lang": "ja", "source": "jp",
     "manufacturer_original": "スズキ株式会社", "model_original": "ジムニー", "model_year": "2018-2020",
     "component_original": "前照灯", "defect_cause_original": "前照灯のスイッチの接点が摩耗し、点灯しなくなるおそれがある。",
     "remedy_original": "スイッチを交換する。", "source_url": "https://www.mlit.go.jp/jidosha/carinf/rcl/data/jp-4777.html",
     "ko": {"component_ko": "전조등", "defect_cause_ko": "전조등 스위치의 접점이 마모되어 점등되지 않을 우려가 있다.",
            "remedy_ko": "스위치를 교환한다."}},
    {"country": "CA", "recall_number": "2024-077", "recall_date": "unknown", "source_lang": "en", "source": "ca",
     "manufacturer_original": "Kia Canada", "model_original": "Soul", "model_year": "2021",
     "summary_original": "The hood latch may corrode.",
     "source_url": "https://wwwapps.tc.gc.ca/Saf-Sec-Sur/7/VRDB-BDRV/search-recherche/detail.aspx?rn=2024077"},
    {"country": "US", "recall_number": "23V-900", "recall_date": "2023-10-05", "source_lang": "en", "source": "us",
     "manufacturer_original": "Ford Motor Company", "model_original": "Bronco", "model_year": "2022",
     "summary_original": "The rear axle bolt may loosen.", "source_url": "https://www.nhtsa.gov/recalls?nhtsaId=23V900"},
]

# Every text a publisher controls, written as an attacker would: markup that would run if a
# page ever rendered it unescaped (each payload marks <body> so an executed one shows in the
# DOM), spreadsheet formulas, and links with other schemes.
PWNED = "data-pwned"
HOSTILE_URLS = {"EVIL-1": f'javascript:document.body.setAttribute("{PWNED}","href")',
                "EVIL-2": f"data:text/html,<script>document.body.setAttribute('{PWNED}','data')</script>"}
HOSTILE = [
    {"country": "US", "recall_number": "EVIL-1", "recall_date": "2024-06-20", "source_lang": "en", "source": "us",
     "manufacturer_original": f'<img src=x onerror="document.body.setAttribute(\'{PWNED}\',\'maker\')">',
     "model_original": "=HYPERLINK(\"http://evil.example/x\",\"click\")", "model_year": "2024",
     "summary_original": f'<script>document.body.setAttribute("{PWNED}","script")</script> Hostile summary',
     "ko": {"summary_ko": f'<svg onload="document.body.setAttribute(\'{PWNED}\',\'ko\')"></svg> 적대적 요약'}},
    {"country": "US", "recall_number": "EVIL-2", "recall_date": "2024-06-21", "source_lang": "en", "source": "us",
     "manufacturer_original": "-2+3+cmd|' /C calc'!A0", "model_original": "@SUM(1+1)*cmd|' /C calc'!A0",
     "summary_original": "\t=1+1 tab first", "model_year": "2024"},
]


def _store(store: Store, records) -> None:
    for record in records:
        record = dict(record)
        korean, source = record.pop("ko", None), record.pop("source")
        store.upsert("vehicle_recall", [Recall(**record)], source=source)
        if korean:
            sets = ", ".join(f"[{k}] = ?" for k in korean)
            store.write(lambda db: db.conn.execute(
                f"UPDATE recalls SET {sets}, translated_at = ?, translation_status = 'translated' "
                "WHERE country = ? AND recall_number = ?",
                [*korean.values(), TRANSLATED_AT, record["country"], record["recall_number"]]))


def fill(db_path, *, extra: bool = False, hostile: bool = False) -> Path:
    """The fixture's records; `extra` adds EXTRA; `hostile` adds HOSTILE, their links written
    straight into the table (the store refuses such URLs, an older store may hold them)."""
    store = Store(db_path)
    try:
        _store(store, json.loads(FIXTURE.read_text("utf-8")))
        if extra:
            _store(store, EXTRA)
        if hostile:
            _store(store, HOSTILE)
            for number, url in HOSTILE_URLS.items():
                store.write(lambda db: db.conn.execute(
                    "UPDATE recalls SET source_url = ? WHERE recall_number = ?", [url, number]))
    finally:
        store.close()
    return Path(db_path)


def free_port() -> int:
    """A port on 127.0.0.1 free at this moment, for a web view a test starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def page(url: str, timeout: float = 20) -> str:
    """A page of the web view as text."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode("utf-8")
