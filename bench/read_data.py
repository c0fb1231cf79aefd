"""Generated vehicle recalls for the read-side benchmark (bench_read.py, #23.5): a store with
`rows` records that has what the read side is timed on — several sources and countries, makers
with their normalised key, model-year ranges, and text with

- a term in every record (`brake`: the component of every record is "Brakes / ブレーキ"),
- a term in most (`vehicle`: four records in five),
- a rare one (`#123456`: one record; the number of each record is in its summary),
- Japanese text (`燃料ポンプ`, a third of the records; `燃料`, two characters, the same third),
- one and two characters (`x`, `燃料`, `Q7` in none: what the trigram index cannot answer).

SQLite: one transaction per 20,000 rows with executemany, then the full-text index built once
(the store feeds it per upsert batch; a bulk insert does it in one go). PostgreSQL: COPY.
"""
from __future__ import annotations

import datetime as dt
import json
import random
import time

MAKERS = [("トヨタ自動車株式会社", "TOYOTA", "도요타 자동차"), ("Ford Motor Company", "FORD", "포드"),
          ("本田技研工業株式会社", "HONDA", "혼다"), ("Volkswagen AG", "VOLKSWAGEN", "폭스바겐"),
          ("General Motors LLC", "GENERAL MOTORS", "제너럴 모터스"), ("マツダ株式会社", "MAZDA", "마쓰다"),
          ("AC Schnitzer GmbH", "AC SCHNITZER", None)]
SUMMARIES = [
    ("燃料ポンプのインペラが変形し、走行中にエンジンが停止するおそれがある。", "연료 펌프 임펠러가 변형되어 주행 중 엔진이 정지할 우려가 있다."),
    ("The fuel pump impeller may deform, causing the vehicle to stall while driving.",
     "연료 펌프 임펠러가 변형되어 주행 중 차량이 정지할 수 있다."),
    ("Le coussin gonflable du passager peut ne pas se déployer; the vehicle may not protect its occupant.",
     "조수석 에어백이 전개되지 않을 수 있다."),
    ("ブレーキホースの取り付けが不適切なため、制動力が低下するおそれがある。vehicle", "브레이크 호스 장착이 부적절하다."),
    ("The rear axle nut may loosen over time; the vehicle may lose control.", "뒤 차축 너트가 풀릴 수 있다."),
]
SOURCES = [("us", "US"), ("jp", "JP"), ("ca", "CA"), ("eu", "EU"), ("au", "AU")]
COLUMNS = ["source", "country", "recall_number", "recall_date", "date_unknown", "manufacturer_original",
           "manufacturer_ko", "manufacturer_key", "model_original", "component_original", "summary_original",
           "summary_ko", "remedy_original", "model_year", "affected_units", "source_lang", "source_url", "extra",
           "first_seen_at", "updated_at"]


def rows(first: int, size: int, seed: int = 9):
    rng = random.Random(seed * 1_000_003 + first)
    now = "2026-12-01T00:00:00+00:00"
    base = dt.date(2000, 1, 1)
    for n in range(first, first + size):
        maker, key, maker_ko = MAKERS[n % len(MAKERS)]
        summary, summary_ko = SUMMARIES[n % len(SUMMARIES)]
        source, country = SOURCES[n % len(SOURCES)]
        year = 2000 + n % 25
        unknown = n % 1000 == 7   # a few records without a readable date: the sentinel
        date = "1970-01-01" if unknown else (base + dt.timedelta(days=n % 9000)).isoformat()
        yield (source, country, f"R{n:08d}", date, int(unknown), maker, maker_ko if n % 4 else None, key,
               f"Model {n % 997}", "Brakes / ブレーキ", f"{summary} (#{n})", summary_ko if n % 4 else None,
               "Dealers will replace the part free of charge.",
               f"{year}" if n % 3 else f"{year}-{year + rng.randint(1, 3)}", rng.randint(1, 200_000),
               "ja" if "ー" in summary else "en", f"https://example.gov/recalls/{n}",
               json.dumps({"units": n % 500}), now, now)


def generate_sqlite(db_path: str, count: int, step: int = 20_000) -> float:
    return bulk_insert(db_path, "recalls", COLUMNS, rows, count, step=step)


def bulk_insert(db_path: str, table: str, columns: list[str], make_rows, count: int, first: int = 0,
                step: int = 20_000) -> float:
    """Rows `first`…`count` of `make_rows(first, size)` into `table` of the store at `db_path`
    (made or evolved first), one transaction per `step`; then its full-text index rebuilt once
    and ANALYZE. The seconds it took."""
    from basecrawler import Store

    started = time.monotonic()
    store = Store(db_path)
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    for start in range(first, count, step):
        size = min(step, count - start)
        store.write(lambda db: db.conn.executemany(sql, make_rows(start, size)))
    store.write(lambda db: db.conn.execute(f"INSERT INTO {table}_fts({table}_fts) VALUES ('rebuild')"))
    store.write(lambda db: db.conn.execute("ANALYZE"))
    store.close()
    return time.monotonic() - started


def generate_pg(url: str, count: int, step: int = 50_000) -> float:
    """COPY the same rows into a migrated PostgreSQL store, then ANALYZE."""
    import psycopg

    from basecrawler import Store

    started = time.monotonic()
    Store(url).close()   # migrate
    with psycopg.connect(url, autocommit=False) as conn:
        for first in range(0, count, step):
            with conn.cursor().copy(f"COPY recalls ({', '.join(COLUMNS)}) FROM STDIN") as copy:
                for row in rows(first, min(step, count - first)):
                    copy.write_row(row)
            conn.commit()
        conn.autocommit = True
        conn.execute("ANALYZE recalls")
    return time.monotonic() - started


def pg_rows(url: str) -> int:
    """Records already in the store at `url` (0 when it has no table yet)."""
    import psycopg

    with psycopg.connect(url) as conn:
        if conn.execute("SELECT to_regclass('recalls')").fetchone()[0] is None:
            return 0
        return conn.execute("SELECT count(*) FROM recalls").fetchone()[0]
