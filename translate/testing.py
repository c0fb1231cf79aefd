"""Helpers for testing the translation worker: seeding recalls, counting row writes, a backend on the fake server."""
from __future__ import annotations

from basecrawler import Recall
from basecrawler.store.engines.dialect import dialect_of
from translate.backends import LibreTranslateBackend


def seed(store, count: int, *, source="us", country="US", lang="en", summary=None, **fields):
    """Store `count` recalls with distinct summaries and dates 2024-01-01 + i days."""
    import datetime as dt
    records = []
    for i in range(count):
        day = dt.date(2024, 1, 1) + dt.timedelta(days=i)
        values = {
            "country": country, "recall_number": f"{country}-{i:04d}", "recall_date": day.isoformat(),
            "manufacturer_original": "Acme Motor Company",
            "component_original": "AIR BAGS",
            "summary_original": (summary or "The airbag inflator may rupture in vehicle number {i}.").format(i=i),
            "source_lang": lang,
        }
        values.update({k: (v.format(i=i) if isinstance(v, str) else v) for k, v in fields.items()})
        records.append(Recall(**values))
    store.upsert("vehicle_recall", records, source=source)
    return records


def count_writes(store) -> None:
    """Log every stamping of translated_at, so a test can prove no row was written twice."""
    store.db.executescript(
        """
        CREATE TABLE IF NOT EXISTS translation_writes (recall_id INTEGER);
        CREATE TRIGGER IF NOT EXISTS count_translation_writes AFTER UPDATE OF translated_at ON recalls
        WHEN new.translated_at IS NOT NULL BEGIN
          INSERT INTO translation_writes VALUES (new.id);
        END;
        """
    )


def writes_per_row(store) -> dict[int, int]:
    return {r["recall_id"]: r["n"] for r in store.query(dialect_of(store).query(
        "SELECT recall_id, COUNT(*) AS n FROM translation_writes GROUP BY recall_id"))}


def libre(server, **kw) -> LibreTranslateBackend:
    """A LibreTranslate backend on the fake server, without the production retry waits."""
    kw.setdefault("retry_waits_s", ())
    kw.setdefault("timeout_s", 10)
    return LibreTranslateBackend(server.url, **kw)


def statuses(store) -> dict[str, int]:
    return {(r["s"] or "pending"): r["n"] for r in store.query(dialect_of(store).query(
        "SELECT CASE WHEN translated_at IS NULL THEN 'pending' ELSE translation_status END AS s, COUNT(*) AS n "
        "FROM recalls GROUP BY s"))}
