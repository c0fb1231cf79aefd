"""Load fixtures/web/recalls.json into a store (see fixtures/web/README.md)."""
import json
from pathlib import Path

from basecrawler import Recall, Store

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "web" / "recalls.json"
TRANSLATED_AT = "2024-07-01T00:00:00+00:00"


def fill(db_path) -> Path:
    records = json.loads(FIXTURE.read_text("utf-8"))
    store = Store(db_path)
    try:
        for record in records:
            record = dict(record)
            korean, source = record.pop("ko", None), record.pop("source")
            store.upsert_recalls([Recall(**record)], source=source)
            if korean:
                sets = ", ".join(f"[{k}] = ?" for k in korean)
                store.write(lambda db: db.conn.execute(
                    f"UPDATE recalls SET {sets}, translated_at = ?, translation_status = 'translated' "
                    "WHERE country = ? AND recall_number = ?",
                    [*korean.values(), TRANSLATED_AT, record["country"], record["recall_number"]]))
    finally:
        store.close()
    return Path(db_path)
