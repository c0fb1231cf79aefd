"""The reading side: search, export (CSV/JSONL/XLSX), the web view; every output derived from record types and safe to open."""
