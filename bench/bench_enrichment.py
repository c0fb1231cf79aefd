"""Benchmark of the enrichment ladder: N detail lookups (default 2,000) by the US source against
a loopback server answering after 50 ms, with the host limited to 20 requests/s. Reports the
rate achieved against the limit (target ≥ 0.9) and the total time. Run on demand:

    python bench/bench_enrichment.py [--count 2000] [--rate 20] [--latency 0.05] [--workers 8]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from basecrawler import Settings, Store  # noqa: E402
from basecrawler.testing import LoopbackServer, Reply  # noqa: E402
from sources.us import DETAIL_PATH, LIST_PATH, UsCrawler  # noqa: E402


def list_rows(count: int) -> list[dict]:
    return [{"report_received_date": f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}T00:00:00.000",
             "nhtsa_id": f"24V{n:06d}", "manufacturer": "Bench Motors", "subject": f"Bench recall {n}",
             "component": "ELECTRICAL SYSTEM", "potentially_affected": str(100 + n)} for n in range(count)]


def detail_envelope(number: str) -> dict:
    results = [{"Manufacturer": "Bench Motors", "NHTSACampaignNumber": number, "ReportReceivedDate": "01/02/2024",
                "ModelYear": str(year), "Make": "BENCH", "Model": model}
               for model in ("ALPHA", "BETA") for year in (2021, 2022, 2023)]
    return {"Count": len(results), "Message": "Results returned successfully", "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    rows = list_rows(args.count)

    def handler(request):
        parts = urlsplit(request.path)
        query = parse_qs(parts.query)
        if parts.path == LIST_PATH:
            offset, limit = int(query["$offset"][0]), int(query["$limit"][0])
            body = rows[offset:offset + limit]
        elif parts.path == DETAIL_PATH:
            body = detail_envelope(query["campaignNumber"][0])
        else:
            return Reply(404, delay_s=args.latency)
        return Reply(200, json.dumps(body), headers={"Content-Type": "application/json"}, delay_s=args.latency)

    with tempfile.TemporaryDirectory() as tmp, LoopbackServer(handler) as server:
        os.environ["BASECRAWLER_US_BULK_URL"] = server.url
        os.environ["BASECRAWLER_US_DETAIL_URL"] = server.url
        settings = Settings(db_path=str(Path(tmp) / "bench.db"), rate_per_s=args.rate, concurrency=args.workers,
                            enrich_limit=args.count, enrich_workers=args.workers)
        store = Store(settings.db_path)
        started = time.monotonic()
        result = UsCrawler(store, settings=settings, mode="full").run()
        total = time.monotonic() - started
        details = [r.time for r in server.requests if urlsplit(r.path).path == DETAIL_PATH]
        store.close()

    span = details[-1] - details[0] if len(details) > 1 else float("nan")
    achieved = (len(details) - 1) / span if span else float("nan")
    stats = result.enrichment_stats
    table = [
        ("detail lookups", f"{len(details)}"),
        ("done / not yet / errors", f"{stats.get('done')} / {stats.get('not_yet')} / {stats.get('errors')}"),
        ("host limit (req/s)", f"{args.rate:.1f}"),
        ("latency per request (s)", f"{args.latency:.3f}"),
        ("workers", f"{args.workers}"),
        ("achieved detail rate (req/s)", f"{achieved:.2f}"),
        ("achieved / limit", f"{achieved / args.rate:.3f}  (target ≥ 0.9)"),
        ("detail phase (s)", f"{span:.1f}"),
        ("whole run incl. list (s)", f"{total:.1f}"),
        ("run status", result.status),
    ]
    width = max(len(k) for k, _ in table)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  {'-' * 24}")
    for key, value in table:
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
