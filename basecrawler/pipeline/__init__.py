"""The pipeline and the source API: BaseCrawler.run() and everything a run owns (records, counts, dead letters, the ledger, enrichment, source discovery, the runner, the run lock)."""
