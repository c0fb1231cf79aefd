"""A Korean publisher's text in the web view (a Korean reader's day): an original written in
Korean is its own Korean. It is never marked "awaiting translation" (a crawl without the
translation step after it leaves it unsettled), and once the translation step has copied it
into its Korean field it is not shown twice. Text in another language keeps its mark until
it is translated, and its original beneath the Korean once it is."""
from __future__ import annotations

import re

import pytest

from basecrawler import Store
from basecrawler.reading.browse import BrowseServer
from record_types.product_alert import ProductAlert
from web_fixture import free_port, page

KR_TITLE = "저속전동이륜차 · 터보"
KR_PRODUCT = "저속전동이륜차"
SETTLED_TITLE = "휴대용 레이저용품 · KKOONS-LTM40"
EN_TITLE = "Hoodies: drawstrings may strangle"
TRANSLATED_TITLE, TRANSLATED_KO = "Kettle may overheat", "주전자 과열 우려"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("korean") / "recalls.db"
    store = Store(str(db))
    try:
        store.upsert("product_alert", [
            ProductAlert(country="KR", alert_id="K-1", alert_date="2026-08-11", title_original=KR_TITLE,
                         product_original=KR_PRODUCT, hazard_original="배터리 과열로 화재 우려", source_lang="ko"),
            ProductAlert(country="KR", alert_id="K-2", alert_date="2026-08-10", title_original=SETTLED_TITLE,
                         product_original="휴대용 레이저용품", source_lang="ko"),
        ], source="kr")
        store.upsert("product_alert", [
            ProductAlert(country="GB", alert_id="E-1", alert_date="2026-08-09", title_original=EN_TITLE,
                         product_original="Hoodie", source_lang="en"),
            ProductAlert(country="GB", alert_id="E-2", alert_date="2026-08-08", title_original=TRANSLATED_TITLE,
                         product_original="Kettle", source_lang="en"),
        ], source="oecd")
        # What the translation step leaves: K-2's originals copied into its Korean fields
        # (translate/originals.py), E-2 translated by a backend.
        store.write(lambda db: db.conn.execute(
            "UPDATE product_alerts SET title_ko = title_original, product_ko = product_original WHERE alert_id = 'K-2'"))
        store.write(lambda db: db.conn.execute(
            "UPDATE product_alerts SET title_ko = ? WHERE alert_id = 'E-2'", [TRANSLATED_KO]))
        ids = {row["alert_id"]: row["id"] for row in store.query("SELECT id, alert_id FROM product_alerts")}
    finally:
        store.close()
    with BrowseServer(str(db), port=free_port()) as running:
        running.ids = ids
        yield running


def _pending_before(html: str, text: str) -> bool:
    """Whether `text` is shown behind the "awaiting translation" mark."""
    return re.search(r'class="bc-pending">[^<]*</span>\s*' + re.escape(text), html) is not None


def test_a_korean_original_is_shown_once_and_never_as_awaiting_translation_in_the_table(server):
    html = page(f"{server.url}/recalls/product_alerts?_sort_desc=alert_date")
    assert KR_TITLE in html and not _pending_before(html, KR_TITLE)
    assert html.count(KR_TITLE) == 1                      # as the Korean, no "original" line repeating it
    assert html.count(SETTLED_TITLE) == 1                 # copied into title_ko: still once
    assert _pending_before(html, EN_TITLE)                # English not yet translated keeps its mark
    assert html.count(TRANSLATED_KO) == 1 and html.count(TRANSLATED_TITLE) == 1   # Korean, original beneath


def test_a_korean_originals_card_reads_as_korean(server):
    html = page(f"{server.url}/recalls/product_alerts/{server.ids['K-1']}")
    assert "배터리 과열로 화재 우려" in html and not _pending_before(html, "배터리 과열로 화재 우려")
    assert 'class="bc-pending"' not in html
    assert f'<p class="bc-ko" lang="ko">{KR_TITLE}</p>' in html
    english = page(f"{server.url}/recalls/product_alerts/{server.ids['E-1']}")
    assert _pending_before(english, EN_TITLE)


@pytest.mark.parametrize("korean, original, lang, shown", [
    (None, "화재 우려", "ko", ("화재 우려", None)),
    (None, "화재 우려", "ko-KR", ("화재 우려", None)),
    ("화재 우려", "화재 우려", "ko", ("화재 우려", None)),
    ("F-150", "F-150", "en", ("F-150", None)),
    (None, "Fire risk", "en", (None, "Fire risk")),
    ("화재 우려", "Fire risk", "en", ("화재 우려", "Fire risk")),
    (None, None, "ko", (None, None)),
    (None, "화재 우려", 1.5, (None, "화재 우려")),   # a source_lang that is no text: no language
])
def test_as_read(korean, original, lang, shown):
    from basecrawler.recordtypes.declaration import as_read

    assert as_read(korean, original, lang) == shown
