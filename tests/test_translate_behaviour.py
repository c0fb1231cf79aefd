"""Translation worker behaviours one at a time: memory, glossary, protected codes, outcomes,
ordering, languages, re-queueing, progress."""
import io
import json
from pathlib import Path

import httpx
import pytest

from basecrawler import Recall
from basecrawler.cli import main as cli_main
from basecrawler.commands.status import collect_status
from translate.backends import Backend
from translate.errors import BackendItemError, BackendUnavailable
from translate.fakeserver import FakeLibreTranslate, pseudo_korean
from translate.glossary import Glossary, Term
from basecrawler.operations.progress import ProgressBar
from translate.protect import mask
from translate.testing import libre, seed, statuses
from translate.worker import translate_pending


class RecordingBackend(Backend):
    """An in-process backend: pseudo-Korean, with per-text overrides, failures and hooks."""

    name = "recording"

    def __init__(self, overrides=None, fail_texts=(), on_call=None, down=None):
        super().__init__()
        self.overrides = dict(overrides or {})
        self.fail_texts = set(fail_texts)
        self.on_call = on_call
        self.down = down
        self.sent: list[tuple[str, str]] = []   # (source_lang, text)

    def translate(self, texts, source_lang, target_lang="ko"):
        self.calls += 1
        if self.down:
            raise BackendUnavailable(self.down, reason="rate_limited")
        if self.on_call:
            self.on_call(texts)
        if self.fail_texts & set(texts):
            raise BackendItemError("HTTP 400: text too long")
        self.sent.extend((source_lang, t) for t in texts)
        return [self.overrides.get(t, pseudo_korean(t)) for t in texts]

    def texts(self):
        return [t for _, t in self.sent]


# ---- translation memory ------------------------------------------------------------------
def test_string_translated_in_an_earlier_run_comes_from_memory(store):
    seed(store, 2)
    translate_pending(store, RecordingBackend())
    store.upsert("vehicle_recall", [Recall(country="JP", recall_number="J1", recall_date="2024-06-01", source_lang="en",
                                 manufacturer_original="Acme Motor Company", component_original="AIR BAGS")], source="jp")
    backend = RecordingBackend()
    report = translate_pending(store, backend)
    assert backend.sent == [] and report.from_memory == 1
    assert store.lookup.get("vehicle_recall", {"country": "JP", "recall_number": "J1"})["manufacturer_ko"] == pseudo_korean("Acme Motor Company")
    uses = store.db.execute("SELECT uses FROM translation_memory WHERE source_text = 'Acme Motor Company'").fetchone()[0]
    assert uses == 1


def test_whitespace_and_unicode_variants_of_a_string_are_sent_once(store):
    seed(store, 3, manufacturer_original="Citroe\u0308n  Automobiles", summary="Same  text\n here.")
    store.upsert("vehicle_recall", [Recall(country="FR", recall_number="F1", recall_date="2024-02-01", source_lang="en",
                                 manufacturer_original="Citro\u00ebn Automobiles", summary_original="Same text here.")],
                         source="fr")
    backend = RecordingBackend()
    translate_pending(store, backend)
    assert [t for t in backend.texts() if "Automobiles" in t] == ["Citro\u00ebn Automobiles"]
    assert [t for t in backend.texts() if "Same" in t] == ["Same text here."]


# ---- glossary and do-not-translate ---------------------------------------------------------
def test_glossary_term_gets_its_fixed_korean_even_when_the_backend_says_otherwise(store):
    seed(store, 1, summary="The airbag may not deploy.")
    glossary = Glossary([Term("airbag", "에어백", "en")])
    sent_form = mask("The airbag may not deploy.", glossary, "en").text
    backend = RecordingBackend(overrides={sent_form: "⟦0⟧이 전개되지 않을 수 있습니다."})
    translate_pending(store, backend, glossary=glossary)
    assert "airbag" not in " ".join(backend.texts())
    assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})["summary_ko"] == "에어백이 전개되지 않을 수 있습니다."


def test_remembered_translation_that_contradicts_the_glossary_is_translated_again(store):
    seed(store, 1, summary="The airbag may not deploy.")
    translate_pending(store, RecordingBackend())          # remembered without a glossary
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="US-0001", recall_date="2024-03-01", source_lang="en",
                                 summary_original="The airbag may not deploy.")], source="us")
    backend = RecordingBackend()
    translate_pending(store, backend, glossary=Glossary([Term("airbag", "에어백", None)]))
    assert len(backend.sent) == 1
    assert "에어백" in store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0001"})["summary_ko"]


def test_glossary_csv_loads_terms_languages_and_keep_as_is_entries(tmp_path):
    path = tmp_path / "glossary.csv"
    path.write_text("source,korean,lang\nairbag,에어백,en\n# a comment\nTakata,=,\nリコール,리콜,ja\n", encoding="utf-8")
    glossary = Glossary.load(path)
    assert [(t.source, t.korean, t.lang) for t in glossary.terms] == [
        ("airbag", "에어백", "en"), ("Takata", None, None), ("リコール", "리콜", "ja")]


def test_codes_vins_and_keep_as_is_names_never_reach_the_backend_and_come_back_unchanged(store):
    summary = "Takata inflators in F-150 trucks (recall 24V-123), VINs 1FTEW1EP5MKD12345 to 1FTEW1EP5MKD12399."
    seed(store, 1, summary=summary)
    backend = RecordingBackend()
    translate_pending(store, backend, glossary=Glossary([Term("Takata", None, None)]))
    sent = " ".join(backend.texts())
    for kept in ("Takata", "F-150", "24V-123", "1FTEW1EP5MKD12345", "1FTEW1EP5MKD12399"):
        assert kept not in sent
        assert kept in store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})["summary_ko"]


def test_text_made_only_of_codes_is_kept_without_a_backend_call(store):
    seed(store, 1, model_original="F-150", summary="24V-123", manufacturer_original=None, component_original=None)
    backend = RecordingBackend()
    translate_pending(store, backend)
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})
    assert (row["model_ko"], row["summary_ko"]) == ("F-150", "24V-123")
    assert backend.calls == 0 and row["translation_status"] == "translated"


def test_translation_that_loses_a_protected_code_is_blocked(store):
    summary = "Recall 24V-123 covers some trucks."
    seed(store, 1, summary=summary)
    backend = RecordingBackend(overrides={mask(summary, None, "en").text: "리콜은 일부 트럭에 적용됩니다."})
    translate_pending(store, backend)
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})
    assert row["translation_status"] == "blocked" and row["summary_ko"] is None
    assert row["translation_note"] == "summary: protected term lost: 24V-123"


# ---- outcomes ------------------------------------------------------------------------------
def test_record_the_backend_refuses_alone_is_stamped_failed_and_the_rest_translated(store):
    seed(store, 3)
    bad = "The airbag inflator may rupture in vehicle number 1."
    report = translate_pending(store, RecordingBackend(fail_texts={bad}))
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0001"})
    assert row["translation_status"] == "failed" and row["translated_at"] and row["summary_ko"] is None
    assert "backend error" in row["translation_note"]
    assert (report.failed, report.translated, report.pending) == (1, 2, 0)


def test_retry_failed_requeues_failed_rows_and_translates_them(store):
    seed(store, 2)
    translate_pending(store, RecordingBackend(fail_texts={"The airbag inflator may rupture in vehicle number 0."}))
    assert statuses(store) == {"failed": 1, "translated": 1}
    plain = translate_pending(store, RecordingBackend())
    assert plain.processed == 0                      # failed rows are retried only on request
    report = translate_pending(store, RecordingBackend(), retry="failed")
    assert report.requeued == 1 and report.translated == 1
    assert statuses(store) == {"translated": 2}


def test_retry_blocked_requeues_only_blocked_rows(store):
    seed(store, 2)
    echo = "The airbag inflator may rupture in vehicle number 0."
    translate_pending(store, RecordingBackend(overrides={echo: echo}))
    translate_pending(store, RecordingBackend(fail_texts={"The airbag inflator may rupture in vehicle number 1."}), retry=None)
    assert statuses(store) == {"blocked": 1, "translated": 1}
    report = translate_pending(store, RecordingBackend(), retry="blocked")
    assert report.requeued == 1 and statuses(store) == {"translated": 2}


def test_rate_limited_backend_stops_the_run_and_leaves_every_row_pending(store):
    seed(store, 5)
    report = translate_pending(store, RecordingBackend(down="rate-limiting (HTTP 429)"))
    assert report.backend_down and report.pending == 5 and report.processed == 0
    assert statuses(store) == {"pending": 5}


def test_libretranslate_429_is_reported_as_backend_down():
    transport = httpx.MockTransport(lambda request: httpx.Response(429, json={"error": "Too many requests"}))
    from translate.backends import LibreTranslateBackend
    backend = LibreTranslateBackend("http://lt.example", transport=transport, retry_waits_s=())
    with pytest.raises(BackendUnavailable) as caught:
        backend.translate(["hello"], "en")
    assert caught.value.reason == "rate_limited"


def test_backend_down_makes_the_command_exit_1_with_a_clear_message(store, db_path, monkeypatch, capsys):
    seed(store, 2)
    server = FakeLibreTranslate().start()
    url = server.url
    server.stop()
    monkeypatch.setenv("BASECRAWLER_TRANSLATE_BACKEND", "libretranslate")
    monkeypatch.setenv("BASECRAWLER_LIBRETRANSLATE_URL", url)
    monkeypatch.setattr("translate.backends.RETRY_WAITS_S", ())
    code = cli_main(["--db", db_path, "translate", "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "2 rows stay pending" in err and "unreachable" in err
    assert "pending 2" in out


def test_row_whose_original_changes_while_in_flight_is_not_written_and_stays_pending(store):
    seed(store, 1)

    def crawl_changes_the_summary(texts):
        store.upsert("vehicle_recall", [Recall(country="US", recall_number="US-0000", recall_date="2024-01-01",
                                     summary_original="The inflator was replaced by a new text.")], source="us")
    report = translate_pending(store, RecordingBackend(on_call=crawl_changes_the_summary))
    row = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})
    assert row["translated_at"] is None and row["summary_ko"] is None
    assert report.skipped == 1 and report.pending == 1


def test_crawl_changing_a_translated_original_requeues_the_row_for_translation(store):
    seed(store, 1)
    translate_pending(store, RecordingBackend())
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="US-0000", recall_date="2024-01-01",
                                 summary_original="A corrected summary of the defect.")], source="us")
    backend = RecordingBackend()
    translate_pending(store, backend)
    assert backend.texts() == ["A corrected summary of the defect."]
    assert store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})["summary_ko"] == pseudo_korean("A corrected summary of the defect.")


# ---- order, limit, languages ------------------------------------------------------------------
def test_limit_translates_the_newest_recalls_first(store):
    seed(store, 10)
    report = translate_pending(store, RecordingBackend(), limit=3, batch_rows=2)
    done = [r["recall_number"] for r in store.query(
        "SELECT recall_number FROM recalls WHERE translated_at IS NOT NULL ORDER BY recall_number")]
    assert done == ["US-0007", "US-0008", "US-0009"] and report.pending == 7


def test_each_row_is_sent_with_its_own_source_language(store):
    seed(store, 1, source="us", country="US", lang="en", summary="The hood may open.")
    seed(store, 1, source="jp", country="JP", lang="ja", manufacturer_original="トヨタ自動車", summary="ボンネットが開くおそれがある。")
    seed(store, 1, source="ca", country="CA", lang="fr", manufacturer_original="Ford du Canada", summary="Le capot peut s'ouvrir.")
    backend = RecordingBackend()
    translate_pending(store, backend)
    languages = dict((text, lang) for lang, text in backend.sent)
    assert languages["The hood may open."] == "en"
    assert languages["ボンネットが開くおそれがある。"] == "ja"
    assert languages["Le capot peut s'ouvrir."] == "fr"


def test_libretranslate_request_carries_q_list_source_target_and_key():
    seen = {}

    def handler(request):
        seen.update(json.loads(request.content))
        return httpx.Response(200, json={"translatedText": ["가", "나"]})
    from translate.backends import LibreTranslateBackend
    backend = LibreTranslateBackend("http://lt.example", api_key="k1", transport=httpx.MockTransport(handler))
    assert backend.translate(["a", "b"], "fr") == ["가", "나"]
    assert seen == {"q": ["a", "b"], "source": "fr", "target": "ko", "format": "text", "api_key": "k1"}


def test_chunks_of_one_batch_are_sent_in_parallel_up_to_the_backend_concurrency(store):
    seed(store, 100)
    with FakeLibreTranslate(delay_s=0.1) as server:
        backend = libre(server)
        backend.concurrency = 3
        report = translate_pending(store, backend, batch_rows=100)
    assert report.backend_calls == 5            # 102 texts in chunks of 25
    assert server.max_in_flight == 3


# ---- progress and status ------------------------------------------------------------------------
def test_progress_is_reported_after_every_batch(store):
    seed(store, 5)
    calls = []
    translate_pending(store, RecordingBackend(), batch_rows=2, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(2, 5), (4, 5), (5, 5)]


def test_progress_bar_draws_counts_on_its_stream():
    stream = io.StringIO()
    bar = ProgressBar(stream=stream)
    bar(5, 5)
    bar.close()
    assert "5/5 rows" in stream.getvalue() and stream.getvalue().endswith("\n")


def test_status_counts_translation_outcomes_per_source(store):
    seed(store, 3)
    translate_pending(store, RecordingBackend(fail_texts={"The airbag inflator may rupture in vehicle number 2."}), limit=2)
    report = collect_status(store, ["us"])
    assert report["sources"]["us"]["translation"] == {"failed": 1, "translated": 1, "pending": 1}


def test_command_applies_the_glossary_file_given_with_glossary(store, db_path, monkeypatch):
    seed(store, 1, summary="The Takata airbag may not deploy.")
    example = Path(__file__).resolve().parents[1] / "fixtures" / "translate" / "glossary.example.csv"
    with FakeLibreTranslate() as server:
        monkeypatch.setenv("BASECRAWLER_TRANSLATE_BACKEND", "libretranslate")
        monkeypatch.setenv("BASECRAWLER_LIBRETRANSLATE_URL", server.url)
        assert cli_main(["--db", db_path, "translate", "--no-progress", "--glossary", str(example)]) == 0
        sent = server.texts
    summary_ko = store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})["summary_ko"]
    assert "에어백" in summary_ko and "Takata" in summary_ko
    assert not any("airbag" in text or "Takata" in text for text in sent)


def test_glossary_named_by_the_environment_applies_without_being_passed(store, tmp_path, monkeypatch):
    path = tmp_path / "glossary.csv"
    path.write_text("airbag,에어백,en\n", encoding="utf-8")
    monkeypatch.setenv("BASECRAWLER_GLOSSARY", str(path))
    seed(store, 1, summary="The airbag may not deploy.")
    backend = RecordingBackend()
    translate_pending(store, backend)
    assert "airbag" not in " ".join(backend.texts())
    assert "에어백" in store.lookup.get("vehicle_recall", {"country": "US", "recall_number": "US-0000"})["summary_ko"]


def test_capitalised_phrase_echoed_in_a_descriptive_field_is_blocked_but_a_name_is_kept(store):
    seed(store, 1, manufacturer_original="FORD MOTOR COMPANY", component_original="SERVICE BRAKES, HYDRAULIC",
         summary="Air Bags: Frontal")
    backend = RecordingBackend(overrides={"FORD MOTOR COMPANY": "FORD MOTOR COMPANY",
                                          "SERVICE BRAKES, HYDRAULIC": "SERVICE BRAKES, HYDRAULIC",
                                          "Air Bags: Frontal": "Air Bags: Frontal"})
    translate_pending(store, backend)
    row = store.query("SELECT * FROM recalls")[0]
    assert row["manufacturer_ko"] == "FORD MOTOR COMPANY"
    assert row["component_ko"] is None and row["summary_ko"] is None
    assert row["translation_status"] == "blocked"
    assert "component: echo of the source" in row["translation_note"]
    assert "summary: echo of the source" in row["translation_note"]
