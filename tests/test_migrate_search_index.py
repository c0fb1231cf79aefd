"""`migrate --to` a SQLite file rebuilds every type's full-text index, so a search over any type
(not only vehicle recalls) finds in the copy what it found in the original."""
from basecrawler import Recall, Store
from basecrawler.cli import main
from basecrawler.reading.search import RecallFilter, count
from basecrawler.recordtypes import get_record_type


def _alerts():
    model = get_record_type("product_alert").model
    return [model(country="CA", alert_id="N1", alert_date="2024-05-01", title_original="Peanut butter recalled",
                  hazard_original="Undeclared peanut", category=["Food"]),
            model(country="CA", alert_id="N2", alert_date="2024-05-02", title_original="Crib recalled",
                  category=["Consumer products"])]


def test_a_product_alert_is_found_by_text_in_the_migrated_copy(db_path, tmp_path, capsys):
    store = Store(db_path)
    store.upsert("product_alert", _alerts(), source="hc")
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="R1", recall_date="2024-01-01",
                                 summary_original="Brake hose may leak")], source="us")
    store.close()
    target = str(tmp_path / "copy.db")
    assert main(["--db", db_path, "migrate", "--to", target]) == 0
    copy = Store(target)
    try:
        conn = copy.db.conn
        assert count(conn, RecallFilter(record_type="product_alert", text="peanut")) == 1     # through alerts_fts
        assert count(conn, RecallFilter(record_type="product_alert", text="recalled")) == 2
        assert count(conn, RecallFilter(text="Brake hose")) == 1
        assert copy.scalar("SELECT COUNT(*) FROM product_alerts_fts WHERE product_alerts_fts MATCH '\"peanut\"'") == 1
    finally:
        copy.close()
