"""The same recall from two publishers is one group (basecrawler/pipeline/linking.py,
basecrawler/store/groups.py): a source that republishes declares `republishes`; after a run of
either side its records are grouped with the original publisher's; each keeps its own row;
search, count and export show the group once unless every copy is asked for."""
import json

from basecrawler import BaseCrawler, Republishes
from basecrawler.reading.export import export_recalls
from basecrawler.reading.search import RecallFilter, count, search
from basecrawler.store import groups
from basecrawler.testing import fast_settings
from basecrawler.recordtypes import get_record_type
from basecrawler.store.engines.dialect import dialect_of

ALERTS = get_record_type("product_alert")


class Original(BaseCrawler):
    """The original publisher: its alert id is the number the republisher carries."""

    source = "origdemo"
    country = "CA"
    record_type = "product_alert"
    items: list = []

    def fetch(self, ctx):
        yield from self.items

    def parse(self, ctx, raw):
        return {"alert_id": raw["nid"], "alert_date": "2026-08-01", "title_original": raw["title"],
                "description_original": raw.get("text")}


class Republisher(BaseCrawler):
    """Republishes the original's Canadian alerts (and nobody's German ones)."""

    source = "repubdemo"
    country = "XX"
    record_type = "product_alert"
    republishes = (Republishes("origdemo", country="CA", field="alert_id"),)
    items: list = []

    def fetch(self, ctx):
        yield from self.items

    def parse(self, ctx, raw):
        return {"country": raw["country"], "alert_id": f"EN/{raw['country']}/{raw['nid']}",
                "alert_date": "2026-08-02", "title_original": raw["title"], "recall_number": raw["nid"]}


def crawl(cls, db_path, items):
    cls.items = items
    return cls(db_path, mode="full", settings=fast_settings(db_path)).run()


def ids_of(rows):
    return sorted((row["source"], row["alert_id"]) for row in rows)


def test_a_republished_recall_is_shown_once_with_the_original_first(db_path, store):
    crawl(Original, db_path, [{"nid": "82438", "title": "Peanut butter recalled", "text": "Salmonella"},
                              {"nid": "90001", "title": "Kettle recalled"}])
    crawl(Republisher, db_path, [{"country": "CA", "nid": "82438", "title": "Peanut butter (OECD)"},
                                 {"country": "DE", "nid": "82438", "title": "A German alert"}])
    shown = search(store.db.conn, RecallFilter(record_type="product_alert"))
    assert ids_of(shown) == [("origdemo", "82438"), ("origdemo", "90001"), ("repubdemo", "EN/DE/82438")]
    assert count(store.db.conn, RecallFilter(record_type="product_alert")) == 3
    every = search(store.db.conn, RecallFilter(record_type="product_alert", all_copies=True))
    assert ids_of(every) == [("origdemo", "82438"), ("origdemo", "90001"), ("repubdemo", "EN/CA/82438"),
                             ("repubdemo", "EN/DE/82438")]


def test_nothing_is_overwritten_each_publisher_keeps_its_record(db_path, store):
    crawl(Original, db_path, [{"nid": "82438", "title": "Peanut butter recalled", "text": "Salmonella"}])
    crawl(Republisher, db_path, [{"country": "CA", "nid": "82438", "title": "Peanut butter (OECD)"}])
    rows = {r["source"]: r for r in store.query(dialect_of(store).query("SELECT * FROM product_alerts"))}
    assert rows["origdemo"]["title_original"] == "Peanut butter recalled"
    assert rows["repubdemo"]["title_original"] == "Peanut butter (OECD)"
    assert rows["repubdemo"]["description_original"] is None
    copies = groups.copies_of(store, ALERTS, [rows["origdemo"]["id"]])
    assert copies == {rows["origdemo"]["id"]: [{"source": "repubdemo", "id": rows["repubdemo"]["id"]}]}
    assert groups.primary_of(store, ALERTS, rows["repubdemo"]["id"]) == {"source": "origdemo",
                                                                        "id": rows["origdemo"]["id"]}


def test_the_group_forms_whichever_publisher_runs_first(db_path, store, monkeypatch):
    # The original's run finds the republisher's declaration among the discovered sources.
    import basecrawler.pipeline.registry as registry
    monkeypatch.setattr(registry, "discover", lambda package="sources": {"repubdemo": Republisher})
    crawl(Republisher, db_path, [{"country": "CA", "nid": "82438", "title": "Peanut butter (OECD)"}])
    assert count(store.db.conn, RecallFilter(record_type="product_alert")) == 1   # no original yet: shown
    crawl(Original, db_path, [{"nid": "82438", "title": "Peanut butter recalled"}])
    assert ids_of(search(store.db.conn, RecallFilter(record_type="product_alert"))) == [("origdemo", "82438")]


def test_an_export_holds_each_group_once_unless_every_copy_is_asked(db_path, store, tmp_path):
    crawl(Original, db_path, [{"nid": "82438", "title": "Peanut butter recalled"}])
    crawl(Republisher, db_path, [{"country": "CA", "nid": "82438", "title": "Peanut butter (OECD)"}])
    one, every = tmp_path / "one.jsonl", tmp_path / "every.jsonl"
    export_recalls(store.db.conn, RecallFilter(record_type="product_alert"), "jsonl", one)
    export_recalls(store.db.conn, RecallFilter(record_type="product_alert", all_copies=True), "jsonl", every)
    assert [json.loads(line)["source"] for line in one.read_text().splitlines()] == ["origdemo"]
    assert sorted(json.loads(line)["source"] for line in every.read_text().splitlines()) == ["origdemo", "repubdemo"]


def test_a_record_that_stops_matching_leaves_its_group(db_path, store):
    crawl(Original, db_path, [{"nid": "82438", "title": "Peanut butter recalled"}])
    crawl(Republisher, db_path, [{"country": "CA", "nid": "82438", "title": "Peanut butter (OECD)"}])
    store.write(lambda db: db.conn.execute("DELETE FROM product_alerts WHERE source = 'origdemo'"))
    crawl(Republisher, db_path, [{"country": "CA", "nid": "82438", "title": "Peanut butter (OECD)"}])
    assert ids_of(search(store.db.conn, RecallFilter(record_type="product_alert"))) == [("repubdemo", "EN/CA/82438")]
