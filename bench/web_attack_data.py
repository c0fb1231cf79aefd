"""Generated product alerts for the web view's attack benchmark (bench_web_attack.py --alerts N),
beside read_data.py's vehicle recalls: several sources and countries, multi-valued categories
and hazards, a fifth without a date, and text with

- a term in most records (`choking`: three alerts in five),
- Korean titles on three in four (`유아`, two characters, on a fifth),
- the number of each alert in its title (`#123456`: one record).

One transaction per 20,000 rows, then the full-text index rebuilt once and ANALYZE.
"""
from __future__ import annotations

import datetime as dt
import json
import sqlite3

COLUMNS = ["source", "country", "alert_id", "alert_date", "date_unknown", "title_original", "title_ko",
           "product_original", "hazard_original", "what_to_do_original", "category", "authority", "risk_class",
           "brand", "hazard_type", "made_in", "company", "distribution", "status", "source_lang", "source_url",
           "extra", "first_seen_at", "updated_at"]
SOURCES = [("hc", "CA"), ("eu", "EU"), ("cpsc", "US"), ("fda", "US")]
TITLES = [("Baby rattles recalled due to choking hazard", "유아용 딸랑이 질식 위험으로 리콜"),
          ("Hair dryer may overheat", "헤어드라이어 과열 우려"),
          ("Toy car: small parts, choking hazard", "장난감 자동차 작은 부품 질식 위험"),
          ("Undeclared peanut in cookies", "쿠키에 땅콩 미표시"),
          ("Crib mattress may cause choking", "유아 침대 매트리스 질식 우려")]
CATEGORIES = ["Toys", "Food", "Electrical", "Children's products", "Cosmetics", "Medical devices"]
HAZARDS = ["Choking", "Fire", "Burns", "Allergen", "Injury"]


def rows(first: int, size: int):
    now = "2026-12-01T00:00:00+00:00"
    base = dt.date(2005, 1, 1)
    for n in range(first, first + size):
        source, country = SOURCES[n % len(SOURCES)]
        title, title_ko = TITLES[n % len(TITLES)]
        undated = n % 5 == 3
        yield (source, country, f"A{n:08d}", None if undated else (base + dt.timedelta(days=n % 7000)).isoformat(),
               int(undated), f"{title} (#{n})", title_ko if n % 4 else None, f"Product {n % 1201}",
               "Choking" if n % 5 in (0, 2, 4) else "Fire", "Stop using the product.",
               json.dumps([CATEGORIES[n % 6], CATEGORIES[(n // 6) % 6]]), ["CFIA", "Safety Gate", "CPSC", "FDA"][n % 4],
               f"Class {1 + n % 3}", f"Brand {n % 313}", json.dumps([HAZARDS[n % 5]]), json.dumps(["CN"] if n % 2 else ["DE"]),
               json.dumps([f"Company {n % 97}"]), json.dumps(["Nationwide"]), ["Ongoing", "Terminated"][n % 2], "en",
               f"https://example.gov/alerts/{n}", json.dumps({"n": n % 50}), now, now)


def alert_rows(db_path: str) -> int:
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute("SELECT count(*) FROM product_alerts").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def generate_alerts(db_path: str, count: int, step: int = 20_000) -> float:
    from read_data import bulk_insert

    return bulk_insert(db_path, "product_alerts", COLUMNS, rows, count, first=alert_rows(db_path), step=step)
