"""Enrichment ladder for two-phase sources (feed ahead of meta). See ARCHITECTURE
"Enrichment ladder". Called by BaseCrawler.run():

    enqueue(crawler, records)   after each stored batch: queue the records needing detail
    run_ladder(crawler) -> dict after the list is stored: claim due items, call fetch_detail,
                                apply results with COALESCE; returns counts for the run log
"""
from __future__ import annotations


def enqueue(crawler, records) -> int:
    raise NotImplementedError("enrichment ladder: being built (issue 4)")


def run_ladder(crawler) -> dict:
    raise NotImplementedError("enrichment ladder: being built (issue 4)")
