"""Benchmark of the translation worker: backend calls per row and rows per second.

10,000 recalls with the repetition real sources have (a few dozen manufacturers, a few hundred
models and components, boilerplate consequences and remedies, mostly unique summaries; en, ja,
fr) are translated against the fake LibreTranslate server on 127.0.0.1 with 20 ms latency per
request. Run on demand (not part of the test suite):

    python bench/bench_translate.py [--rows 10000] [--latency 0.02] [--batch 50]
"""
from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from basecrawler import Recall, Store  # noqa: E402
from translate.backends import LibreTranslateBackend  # noqa: E402
from translate.fakeserver import FakeLibreTranslate  # noqa: E402
from translate.worker import DEFAULT_BATCH_ROWS, translate_pending  # noqa: E402

MAKERS = ["Ford Motor Company", "General Motors LLC", "Chrysler (FCA US, LLC)", "Toyota Motor Engineering & Manufacturing",
          "Honda (American Honda Motor Co.)", "Nissan North America, Inc.", "Hyundai Motor America", "Kia America, Inc.",
          "Volkswagen Group of America, Inc.", "BMW of North America, LLC", "Mercedes-Benz USA, LLC", "Subaru of America, Inc.",
          "Tesla, Inc.", "Mazda North American Operations", "Forest River, Inc.", "Thor Motor Coach", "Harley-Davidson Motor Company",
          "Blue Bird Body Company", "Daimler Trucks North America", "Paccar Incorporated"] + [f"Trailer Works {n} LLC" for n in range(40)]
COMPONENTS = ["AIR BAGS:FRONTAL:DRIVER SIDE:INFLATOR MODULE", "SERVICE BRAKES, HYDRAULIC", "ELECTRICAL SYSTEM",
              "FUEL SYSTEM, GASOLINE:DELIVERY:FUEL PUMP", "STEERING:COLUMN", "SEAT BELTS:FRONT", "POWER TRAIN:AXLE ASSEMBLY",
              "BACK OVER PREVENTION:REARVIEW SYSTEMS", "EQUIPMENT:RECREATIONAL VEHICLE", "TIRES:TREAD/BELT",
              "EXTERIOR LIGHTING:HEADLIGHTS", "SUSPENSION:REAR", "STRUCTURE:BODY", "LATCHES/LOCKS/LINKAGES:DOORS",
              "VISIBILITY:WINDSHIELD WIPER/WASHER", "ENGINE AND ENGINE COOLING", "WHEELS"] + [f"EQUIPMENT:OTHER:PART {n}" for n in range(60)]
MODELS = ["F-150", "Explorer", "Silverado 1500", "Equinox", "Ram 1500", "Camry", "RAV4", "Civic", "CR-V", "Altima", "Tucson",
          "Sorento", "Atlas", "X5", "GLE 350", "Outback", "Model 3", "CX-5"] + [f"Series {n}" for n in range(300)]
PARTS = ["rearview camera", "fuel pump", "brake hose", "seat belt buckle", "steering column", "door latch", "wiper motor",
         "headlight", "rear axle bolt", "airbag inflator", "tire tread", "battery cable", "coolant hose", "trailer hitch"]
FAILURES = ["may fail", "may crack", "may leak", "may detach", "may short circuit", "may not latch properly", "may rupture"]
CONSEQUENCES = [f"A {p} that {f.replace('may ', '')}s can increase the risk of a crash." for p in PARTS[:8] for f in FAILURES[:5]]
REMEDIES = [f"Dealers will inspect and replace the {p}, free of charge." for p in PARTS] + \
           [f"Owner notification letters are expected to be mailed {m} {d}, 2024." for m in ("May", "June", "July") for d in (3, 17, 28)]
JA_SUMMARIES = ["{part}の不具合により、走行中に停止するおそれがある。", "{part}の取付けが不適切なため、脱落するおそれがある。"]
JA_PARTS = ["燃料ポンプ", "ブレーキホース", "シートベルト", "ドアラッチ", "ワイパーモーター"]
JA_MAKERS = ["トヨタ自動車株式会社", "本田技研工業株式会社", "日産自動車株式会社", "マツダ株式会社", "スズキ株式会社"]
FR_SUMMARIES = ["Sur certains véhicules, le {part} pourrait se fissurer ({n} véhicules).", "Le {part} pourrait ne pas fonctionner."]
FR_PARTS = ["tuyau de frein", "pompe à carburant", "loquet de porte", "moteur d'essuie-glace"]


def make_rows(count: int, seed: int = 8) -> list[Recall]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        date = f"20{rng.randint(18, 24)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        roll = rng.random()
        if roll < 0.15:
            part = rng.choice(JA_PARTS)
            values = dict(country="JP", source_lang="ja", manufacturer_original=rng.choice(JA_MAKERS),
                          summary_original=rng.choice(JA_SUMMARIES).format(part=part), remedy_original="対策品と交換する。",
                          model_original=rng.choice(["プリウス", "フィット", "ノート", "CX-5"]))
        elif roll < 0.25:
            part = rng.choice(FR_PARTS)
            values = dict(country="CA", source_lang="fr", manufacturer_original=rng.choice(MAKERS[:14]),
                          summary_original=rng.choice(FR_SUMMARIES).format(part=part, n=rng.randint(10, 9000)),
                          remedy_original="Les concessionnaires remplaceront la pièce.")
        else:
            part, failure = rng.choice(PARTS), rng.choice(FAILURES)
            maker = MAKERS[min(int(rng.paretovariate(1.2)) - 1, len(MAKERS) - 1)]
            values = dict(country="US", source_lang="en", manufacturer_original=maker,
                          model_original=rng.choice(MODELS), component_original=rng.choice(COMPONENTS),
                          summary_original=(f"{maker} is recalling certain {date[:4]} {rng.choice(MODELS)} vehicles. "
                                            f"The {part} {failure}." if rng.random() < 0.7 else f"The {part} {failure}."),
                          consequence_original=rng.choice(CONSEQUENCES), remedy_original=rng.choice(REMEDIES))
        rows.append(Recall(recall_number=f"B{i:06d}", recall_date=date, **values))
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per backend request")
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH_ROWS, help="rows per worker batch")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "bench.db")
        records = make_rows(args.rows)
        for start in range(0, len(records), 1000):
            store.upsert("vehicle_recall", records[start:start + 1000], source="bench")
        texts = [getattr(r, f) for r in records for f in type(r).model_fields if f.endswith("_original") and getattr(r, f)]
        with FakeLibreTranslate(delay_s=args.latency) as server:
            results = []
            for label in ("cold memory", "rerun (nothing pending)"):
                backend = LibreTranslateBackend(server.url, retry_waits_s=())
                started = time.perf_counter()
                report = translate_pending(store, backend, batch_rows=args.batch)
                elapsed = time.perf_counter() - started
                results.append((label, report, elapsed))
            # A crawl brings 1,000 new rows that repeat what is known: the warm-memory case.
            fresh = make_rows(1000, seed=9)
            for r in fresh:
                r.recall_number = "N" + r.recall_number
            store.upsert("vehicle_recall", fresh, source="bench")
            started = time.perf_counter()
            report = translate_pending(store, LibreTranslateBackend(server.url, retry_waits_s=()), batch_rows=args.batch)
            results.append(("1,000 new rows, warm memory", report, time.perf_counter() - started))
        store.close()

    print(f"translation benchmark: {args.rows} rows, {len(texts)} texts ({len(set(texts))} distinct), "
          f"{args.latency * 1000:.0f} ms per request, {args.batch} rows per batch, "
          f"{LibreTranslateBackend.concurrency} requests in flight")
    print(f"{'run':<30} {'rows':>7} {'blocked':>8} {'calls':>7} {'texts sent':>11} {'calls/row':>10} {'rows/s':>9} {'seconds':>8}")
    for label, report, elapsed in results:
        rows = report.processed
        print(f"{label:<30} {rows:>7} {report.blocked + report.failed:>8} {report.backend_calls:>7} {report.texts_sent:>11} "
              f"{(report.backend_calls / rows if rows else 0):>10.3f} {(rows / elapsed if elapsed else 0):>9.0f} {elapsed:>8.2f}")


if __name__ == "__main__":
    main()
