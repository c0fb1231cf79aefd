"""The guards of issue 16 inside the worker: codes in any width masked and stored as written,
letter-only codes protected, blocked rows keep their reason and `--retry blocked` re-queues them."""
from basecrawler.cli import main as cli_main
from translate.fakeserver import FakeLibreTranslate
from translate.glossary import Glossary, Term
from translate.protect import mask
from translate.testing import libre, seed, statuses
from translate.worker import translate_pending


def test_full_width_type_code_never_reaches_the_backend_and_is_stored_as_written(store):
    summary = "型式ＤＢＡ－ＺＶＷ３０の車両において、ブレーキ液が漏れるおそれがある。"
    seed(store, 1, country="JP", source="jp", lang="ja", summary=summary)
    sent_form = mask(summary, None, "ja").text
    with FakeLibreTranslate(overrides={sent_form: "형식 ⟦0⟧ 차량에서 브레이크액이 샐 우려가 있다."}) as server:
        translate_pending(store, libre(server))
        sent = " ".join(server.texts)
    row = store.lookup.get("vehicle_recall", {"country": "JP", "recall_number": "JP-0000"})
    assert "ＺＶＷ" not in sent and "ZVW" not in sent
    assert row["summary_ko"] == "형식 ＤＢＡ－ＺＶＷ３０ 차량에서 브레이크액이 샐 우려가 있다."
    assert row["translation_status"] == "translated"


def test_letter_only_code_is_masked_so_a_backend_that_swaps_it_is_blocked(store):
    summary = "The ECU software may reduce engine power while driving."
    seed(store, 1, summary=summary)
    sent_form = mask(summary, None, "en").text
    assert "ECU" not in sent_form
    with FakeLibreTranslate(overrides={sent_form: "ECM 소프트웨어가 주행 중 엔진 출력을 낮출 수 있다."}) as server:
        translate_pending(store, libre(server))
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})
    assert row["translation_status"] == "blocked" and row["summary_ko"] is None
    assert row["translation_note"] == "summary: protected term lost: ECU"


def test_an_acronym_the_glossary_renders_in_korean_is_not_demanded_back(store):
    seed(store, 1, summary="The ABS warning light may illuminate.")
    with FakeLibreTranslate() as server:
        translate_pending(store, libre(server), glossary=Glossary([Term("ABS", "잠김 방지 브레이크", "en")]))
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})
    assert row["translation_status"] == "translated"
    assert "잠김 방지 브레이크" in row["summary_ko"] and "ABS" not in row["summary_ko"]


def test_doubled_translation_is_blocked_with_its_reason_and_retry_blocked_translates_it(store, db_path, monkeypatch):
    summary = "全車両、燃料ポンプを対策品に交換する。"
    good = "전 차량, 연료 펌프를 대책품으로 교환한다."
    seed(store, 1, country="JP", source="jp", lang="ja", summary=summary)
    with FakeLibreTranslate(overrides={summary: f"{good} {good}"}) as server:
        translate_pending(store, libre(server))
    row = store.lookup.get("vehicle_recall", {"country": "JP", "recall_number": "JP-0000"})
    assert row["translation_status"] == "blocked" and row["summary_ko"] is None
    assert row["translation_note"] == "summary: repeated output: the same text 2 times"

    with FakeLibreTranslate(overrides={summary: good}) as server:
        monkeypatch.setenv("BASECRAWLER_TRANSLATE_BACKEND", "libretranslate")
        monkeypatch.setenv("BASECRAWLER_LIBRETRANSLATE_URL", server.url)
        assert cli_main(["--db", db_path, "translate", "--no-progress", "--retry", "blocked"]) == 0
    row = store.lookup.get("vehicle_recall", {"country": "JP", "recall_number": "JP-0000"})
    assert statuses(store) == {"translated": 1}
    assert row["summary_ko"] == good and row["translation_note"] is None
