"""The pipeline carries records of any type: parse() returns dicts (the source's `record_type`),
model instances or `Record(type, fields)`; each record is validated by its type's model,
prepared by its declaration, windowed by its date field, upserted per type; the run line adds
up across types; dead letters say their type and retry re-parses through the same path."""
import datetime as dt

from basecrawler import Recall
from basecrawler.recordtypes import Record
from record_types_support import GadgetAlert, gadget_type  # noqa: F401  (fixture)
from support import ItemsCrawler


class MixedCrawler(ItemsCrawler):
    """One item → a vehicle recall (a dict: the default type), a gadget alert (Record) and,
    when asked, a second gadget alert as a model instance."""

    source = "mixed"
    country = "CA"

    def parse(self, raw):
        produced = [
            {"recall_number": raw["id"], "recall_date": raw.get("date"), "summary_original": raw.get("text")},
            Record("gadget_alert", {"alert_id": raw["id"], "published": raw.get("published"),
                                    "title_original": raw.get("text"), "category": raw.get("category", []),
                                    "source_url": raw.get("url")}),
        ]
        if raw.get("instance"):
            produced.append(GadgetAlert(alert_id=raw["id"] + "-b", country="CA", title_original="b"))
        return produced


class GadgetCrawler(ItemsCrawler):
    """A source whose own type is gadget_alert: plain dicts are gadget alerts."""

    source = "gadgets"
    country = "CA"
    record_type = "gadget_alert"

    def parse(self, raw):
        return {"alert_id": raw["id"], "published": raw.get("published"), "title_original": raw.get("text"),
                "source_url": raw.get("url")}


def mixed(n, **kw):
    base = {"id": f"M{n}", "date": "2024-05-01", "published": "2024-05-02", "text": f"Item {n}",
            "category": ["Food", "Allergen"]}
    base.update(kw)
    return base


def test_one_item_may_yield_records_of_several_types_and_the_run_line_adds_up(gadget_type, store, settings):
    result = MixedCrawler(store, items=[mixed(1), mixed(2, instance=True)], settings=settings, mode="full").run()
    c = result.counts
    assert result.status == "succeeded"
    assert (c.fetched, c.parsed, c.new, c.saved) == (2, 5, 5, 5)
    assert c.parsed == c.out_of_range + c.new + c.updated + c.unchanged + c.merged + c.store_failed
    assert store.lookup.count("vehicle_recall", source="mixed") == 2 and store.lookup.count("gadget_alert", source="mixed") == 3
    alert = store.lookup.get("gadget_alert", {"source": "mixed", "alert_id": "M1"})
    assert alert["country"] == "CA" and alert["category"] == ["Food", "Allergen"]   # the source's country filled in
    again = MixedCrawler(store, items=[mixed(1), mixed(2, instance=True)], settings=settings, mode="full").run()
    assert (again.counts.unchanged, again.counts.new, again.counts.updated) == (5, 0, 0)


def test_a_source_of_another_type_windows_by_that_types_date(gadget_type, store, settings):
    items = [{"id": "G1", "published": "2024-05-01", "text": "in"}, {"id": "G2", "published": "2023-01-01", "text": "old"},
             {"id": "G3", "published": None, "text": "undated"}]
    result = GadgetCrawler(store, items=items, settings=settings, since="2024-01-01").run()
    assert (result.counts.parsed, result.counts.out_of_range, result.counts.new) == (3, 1, 2)
    undated = store.lookup.get("gadget_alert", {"source": "gadgets", "alert_id": "G3"})
    assert undated["date_unknown"] == 1 and undated["published"] is None
    assert store.lookup.count("vehicle_recall") == 0


def test_implausible_dates_and_links_that_are_not_http_are_prepared_by_the_declaration(gadget_type, store, settings):
    items = [{"id": "G1", "published": "2999-01-01", "text": "future", "url": "javascript:alert(1)"},
             {"id": "G2", "published": "2024-05-01", "text": "fine", "url": "https://example.gc.ca/a"}]
    result = GadgetCrawler(store, items=items, settings=settings, mode="full", clock=lambda: 1717200000.0).run()
    assert result.counts.new == 2
    future = store.lookup.get("gadget_alert", {"source": "gadgets", "alert_id": "G1"})
    assert (future["published"], future["date_unknown"]) == (None, 1)
    assert future["extra"] == {"implausible_published": "2999-01-01", "source_url_text": "javascript:alert(1)"}
    assert future["source_url"] is None
    assert store.lookup.get("gadget_alert", {"source": "gadgets", "alert_id": "G2"})["source_url"] == "https://example.gc.ca/a"


def test_a_vehicle_recall_link_that_is_not_http_is_kept_as_text(store, settings):
    class Links(ItemsCrawler):
        source = "links"

        def parse(self, raw):
            return {"recall_number": raw, "recall_date": "2024-05-01", "source_url": "file:///etc/passwd"}

    Links(store, items=["R1"], settings=settings, mode="full").run()
    row = store.lookup.get("vehicle_recall", {"country": "XX", "recall_number": "R1"})
    assert row["source_url"] is None and row["extra"] == {"source_url_text": "file:///etc/passwd"}


def test_a_store_failure_letter_names_its_type_and_retry_stores_it_through_the_same_path(gadget_type, store, settings):
    store.db.execute("CREATE TRIGGER refuse BEFORE INSERT ON gadget_alerts WHEN new.alert_id = 'M2' "
                     "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    result = MixedCrawler(store, items=[mixed(1), mixed(2)], settings=settings, mode="full").run()
    assert (result.counts.new, result.counts.store_failed, result.counts.dead_lettered) == (3, 1, 1)
    letter, = store.dead_letters.open_dead_letters("mixed")
    assert (letter["stage"], letter["record_type"], letter["record_key"]) == ("store", "gadget_alert", "M2")
    store.db.execute("DROP TRIGGER refuse")
    outcome = MixedCrawler(store, settings=settings).retry_dead_letters()
    assert outcome == {"retried": 1, "resolved": 1, "still_failing": 0}
    assert store.lookup.get("gadget_alert", {"source": "mixed", "alert_id": "M2"})["title_original"] == "Item 2"
    assert store.lookup.count("vehicle_recall", source="mixed") == 2


def test_two_sources_emitting_the_same_publisher_number_keep_two_records(store, settings):
    class Federal(ItemsCrawler):
        source = "federal"
        country = "CA"

        def parse(self, raw):
            return {"recall_number": "2024-123", "recall_date": "2024-05-01", "manufacturer_original": raw}

    class Alerts(Federal):
        source = "alerts"

    Federal(store, items=["Ford"], settings=settings, mode="full").run()
    other = Alerts(store, items=["Ford Motor Company"], settings=settings, mode="full").run()
    assert (other.counts.new, other.counts.updated) == (1, 0)
    rows = store.query("SELECT source, manufacturer_original FROM recalls WHERE country = 'CA' ORDER BY source")
    assert rows == [{"source": "alerts", "manufacturer_original": "Ford Motor Company"},
                    {"source": "federal", "manufacturer_original": "Ford"}]
    again = Federal(store, items=["Ford"], settings=settings, mode="full").run()
    assert again.counts.unchanged == 1
    assert Federal(store, settings=settings).known_keys(["2024-123", "2024-999"]) == {"2024-123"}
    assert Alerts(store, settings=settings).known_date("2024-123") == "2024-05-01"
    assert Alerts(store, settings=settings).known_keys(["2024-999"]) == set()


def test_parse_returning_a_model_of_no_declared_type_is_one_dead_letter(store, settings):
    from pydantic import BaseModel

    class Stray(BaseModel):
        x: int = 1

    class StrayCrawler(ItemsCrawler):
        source = "stray"

        def parse(self, raw):
            return Stray()

    result = StrayCrawler(store, items=["a"], settings=settings, mode="full").run()
    assert (result.counts.unparseable, result.counts.dead_lettered) == (1, 1)
    assert "model of no record type" in store.dead_letters.open_dead_letters("stray")[0]["error"]


def test_a_list_item_is_marked_done_only_once_its_records_of_every_type_are_stored(gadget_type, store, settings,
                                                                                     monkeypatch):
    class Listed(MixedCrawler):
        source = "listed"

        def fetch(self):
            for raw in self.items:
                self.ledger.list(raw["id"])
                with self.ledger.attempt(raw["id"]):
                    yield raw

    marked = []
    real_done = store.ledger.done

    def ledger_done(source, keys):
        for key in keys:   # when an item is marked done, its gadget alert is in the store already
            marked.append((key, store.lookup.get("gadget_alert", {"source": "listed", "alert_id": key}) is not None))
        return real_done(source, keys)
    monkeypatch.setattr(store.ledger, "done", ledger_done)
    result = Listed(store, items=[mixed(1), mixed(2), mixed(3)], settings=settings.with_(batch_size=2),
                    mode="full").run()
    assert result.counts.new == 6
    assert marked == [("M1", True), ("M2", True), ("M3", True)]


def test_a_parse_failure_letter_is_meant_for_the_sources_own_type(gadget_type, store, settings):
    result = GadgetCrawler(store, items=[{"id": "", "text": "no id"}], settings=settings, mode="full").run()
    assert result.counts.unparseable == 1
    letter, = store.dead_letters.open_dead_letters("gadgets")
    assert (letter["stage"], letter["record_type"]) == ("parse", "gadget_alert")


def test_a_source_of_another_type_has_a_detail_phase_too(gadget_type, store, settings):
    class DetailedGadgets(GadgetCrawler):
        source = "detailed"
        asked: list = []

        def fetch_detail(self, record):
            self.asked.append(record["alert_id"])
            return {"hazard_original": f"Hazard of {record['alert_id']}", "category": ["Toys"]}

    result = DetailedGadgets(store, items=[{"id": "G1", "published": "2024-05-01", "text": "a"},
                                           {"id": "G2", "published": "2024-05-02", "text": "b"}],
                             settings=settings, mode="full").run()
    assert result.enrichment_stats["done"] == 2 and sorted(DetailedGadgets.asked) == ["G1", "G2"]
    one = store.lookup.get("gadget_alert", {"source": "detailed", "alert_id": "G1"})
    assert (one["hazard_original"], one["category"], one["title_original"]) == ("Hazard of G1", ["Toys"], "a")
    queued = store.query("SELECT key_prefix, record_key, record_date, state FROM enrichment ORDER BY record_key")
    assert queued == [{"key_prefix": "", "record_key": "G1", "record_date": "2024-05-01", "state": "done"},
                      {"key_prefix": "", "record_key": "G2", "record_date": "2024-05-02", "state": "done"}]
