"""Translation of every record type (issue #24): the worker reads each declaration's translated
fields, table and date, and the types take turns so one type's backlog never starves another."""
import pytest
from pydantic import BaseModel

from basecrawler import Store
from pgcluster import any_db, pg_cluster, pg_url  # noqa: F401  (fixtures)

from basecrawler.recordtypes import RecordType, register_record_type
from basecrawler.recordtypes.registry import forget_registered_types
from translate.backends import Backend
from translate.fakeserver import pseudo_korean
from translate.testing import seed
from translate.worker import count_pending, pending_by_type, requeue, translate_pending
from basecrawler.store.engines.dialect import dialect_of


class Notice(BaseModel):
    notice_id: str
    notice_date: str | None = None
    title_original: str | None = None
    title_ko: str | None = None
    body_original: str | None = None
    body_ko: str | None = None


NOTICE = RecordType(name="demo_notice", title="Demo notices", model=Notice, table="demo_notices",
                    key=("notice_id",), date_field="notice_date", translated=("title", "body"))


@pytest.fixture
def notices(any_db):  # noqa: F811
    register_record_type(NOTICE)
    store = Store(any_db)
    store.ensure_type_tables()   # the store derives the type's table from the declaration
    yield store
    store.close()
    forget_registered_types()



def backlog(store) -> dict[str, int]:
    """Pending rows per type, the types with none left out (the built-in types are there too)."""
    return {name: n for name, n in pending_by_type(store).items() if n}

def add_notices(store, count, *, undated=0):
    store.upsert(NOTICE, [Notice(notice_id=f"N{n}", notice_date=None if n < undated else f"2023-05-{n % 28 + 1:02d}",
                                 title_original=f"Notice title number {n}",
                                 body_original=f"The product may overheat during use ({n}).") for n in range(count)],
                 source="demo")


class Echo(Backend):
    name = "echo"

    def __init__(self):
        super().__init__()
        self.languages = []

    def translate(self, texts, source_lang, target_lang="ko"):
        self.count_call()
        self.languages.append(source_lang)
        return [pseudo_korean(t) for t in texts]


def test_every_translated_type_gets_its_korean_fields_filled(notices):
    seed(notices, 5)
    add_notices(notices, 4, undated=2)   # an undated record is translated too
    assert backlog(notices) == {"demo_notice": 4, "vehicle_recall": 5} and count_pending(notices) == 9
    report = translate_pending(notices, Echo())
    assert report.translated == 9 and report.pending == 0
    rows = notices.query(dialect_of(notices).query("SELECT title_original, title_ko, body_ko, translation_status FROM demo_notices"))
    assert all(r["title_ko"] == pseudo_korean(r["title_original"]) and r["body_ko"] for r in rows)
    assert {r["translation_status"] for r in rows} == {"translated"}
    assert notices.scalar(dialect_of(notices).query("SELECT COUNT(*) FROM recalls WHERE summary_ko IS NULL")) == 0


def test_one_types_backlog_does_not_starve_another(notices):
    seed(notices, 60)            # a big backlog of vehicle recalls …
    add_notices(notices, 6)      # … and a few notices queued after them
    report = translate_pending(notices, Echo(), limit=12, batch_rows=3)
    assert report.processed == 12
    # Batches alternate between the types: 2 of the 4 batches were notices.
    assert backlog(notices) == {"vehicle_recall": 54}


def test_a_type_without_a_language_column_is_sent_as_auto(notices):
    add_notices(notices, 2)
    backend = Echo()
    translate_pending(notices, backend)
    assert set(backend.languages) == {"auto"}


def test_retry_requeues_failed_rows_of_every_type(notices):
    seed(notices, 2)
    add_notices(notices, 2)
    translate_pending(notices, Echo())
    notices.write(lambda db: [db.conn.execute(dialect_of(db.conn).write(f"UPDATE {t} SET translation_status = 'failed'"))
                              for t in ("recalls", "demo_notices")])
    assert requeue(notices, "failed") == 4
    assert backlog(notices) == {"demo_notice": 2, "vehicle_recall": 2}
