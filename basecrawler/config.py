"""Settings: defaults → environment (`BASECRAWLER_*`) → CLI flags, in that order.

Everything tunable lives in `Settings`; code reads it, never `os.environ` directly, so a test
can build one with exactly the values it needs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from basecrawler.store.engines import is_postgres_url
from basecrawler.errors import ConfigError

DEFAULT_USER_AGENT = (
    "basecrawler/0.1 (+https://github.com/basecrawler/basecrawler; public recall data collector)"
)


def env_value(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(part) for part in text.split(",") if part.strip())


# The response bounds, each settable as BASECRAWLER_<NAME> and per source as
# BASECRAWLER_<SOURCE>_<NAME> (see Settings.bound).
BOUND_SETTINGS = {
    "max_document_bytes": int, "max_download_bytes": int, "max_decompression_ratio": float,
    "request_deadline_s": float, "download_deadline_s": float, "min_rate_bps": float, "min_rate_grace_s": float,
}


@dataclass(frozen=True)
class Settings:
    db_path: str = "basecrawler.db"
    overlap_days: int = 14
    # Records per store commit, and their input's bytes (pickled, as the input hash reads it):
    # whichever is reached first; the pipeline also commits every COMMIT_EVERY_S (crawler.py).
    batch_size: int = 20_000
    batch_bytes: int = 4 * 1024 * 1024
    # HTTP
    user_agent: str = DEFAULT_USER_AGENT
    timeout_s: float = 30.0
    max_retries: int = 4              # transient retries per request
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 60.0
    rate_per_s: float = 5.0           # default per-host request rate; sources may be politer
    concurrency: int = 4              # default per-host concurrent requests
    blocked_budget: int = 2           # 403 block pages tolerated (with pauses) before the source fails
    # Bounds on every response (http.py, bounded.py), far above what any real source sends: a
    # list page or JSON page is a few MB, an EU weekly report tens of MB, the Canada CSV 200 MB.
    max_document_bytes: int = 64 * 1024 * 1024          # bodies held in memory (get/get_json/get_text)
    max_download_bytes: int = 2 * 1024 * 1024 * 1024    # bodies streamed to disk (download_to_file/stream)
    max_decompression_ratio: float = 200.0   # decoded / wire bytes; real text compresses 5-30x, a bomb ~1000x
    request_deadline_s: float = 300.0         # total time for one in-memory document, headers included
    download_deadline_s: float = 3600.0       # total time for one streamed download
    min_rate_bps: float = 1024.0              # bytes/s on the wire, averaged since the headers ...
    min_rate_grace_s: float = 30.0            # ... once this long has passed
    archive_retention_days: int = 90  # 0 keeps raw bodies forever
    archive_enabled: bool = True
    record_dir: str | None = None
    replay_dir: str | None = None
    # Enrichment ladder
    ladder_backoffs_s: tuple[float, ...] = (900.0, 3600.0, 21600.0, 86400.0)
    enrich_limit: int = 500
    enrich_workers: int = 8
    processing_timeout_s: float = 1800.0
    transient_retry_delay_s: float = 300.0
    # Run lock
    lock_timeout_s: float | None = None   # None: wait as long as it takes
    # List ledger (EU index, MLIT feed, AU listing): attempts before an item is given up.
    ledger_max_attempts: int = 5
    # Documents: beyond these a PDF is a `too_big` dead letter instead of hours of OCR.
    pdf_max_pages: int = 50
    ocr_max_seconds: float = 120.0
    extras: dict = field(default_factory=dict)

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        env = {}
        mapping = {
            "db_path": ("BASECRAWLER_DB", str),
            "overlap_days": ("BASECRAWLER_OVERLAP_DAYS", int),
            "batch_size": ("BASECRAWLER_BATCH_SIZE", int),
            "batch_bytes": ("BASECRAWLER_BATCH_BYTES", int),
            "user_agent": ("BASECRAWLER_USER_AGENT", str),
            "timeout_s": ("BASECRAWLER_HTTP_TIMEOUT", float),
            "max_retries": ("BASECRAWLER_HTTP_RETRIES", int),
            "backoff_base_s": ("BASECRAWLER_HTTP_BACKOFF", float),
            "backoff_cap_s": ("BASECRAWLER_HTTP_BACKOFF_CAP", float),
            "rate_per_s": ("BASECRAWLER_RATE", float),
            "concurrency": ("BASECRAWLER_CONCURRENCY", int),
            "archive_retention_days": ("BASECRAWLER_ARCHIVE_RETENTION_DAYS", int),
            "ladder_backoffs_s": ("BASECRAWLER_LADDER_BACKOFFS", _floats),
            "enrich_limit": ("BASECRAWLER_ENRICH_LIMIT", int),
            "enrich_workers": ("BASECRAWLER_ENRICH_WORKERS", int),
            "transient_retry_delay_s": ("BASECRAWLER_TRANSIENT_RETRY_DELAY", float),
            "processing_timeout_s": ("BASECRAWLER_PROCESSING_TIMEOUT", float),
            "replay_dir": ("BASECRAWLER_REPLAY_DIR", str),
            "lock_timeout_s": ("BASECRAWLER_LOCK_TIMEOUT", float),
            "record_dir": ("BASECRAWLER_RECORD_DIR", str),
            "ledger_max_attempts": ("BASECRAWLER_LEDGER_MAX_ATTEMPTS", int),
            "pdf_max_pages": ("BASECRAWLER_PDF_MAX_PAGES", int),
            "ocr_max_seconds": ("BASECRAWLER_OCR_MAX_SECONDS", float),
            **{attr: (f"BASECRAWLER_{attr.upper()}", kind) for attr, kind in BOUND_SETTINGS.items()},
        }
        for attr, (name, convert) in mapping.items():
            raw = env_value(name)
            if raw is not None:
                env[attr] = convert(raw)
        if env_value("BASECRAWLER_ARCHIVE") in ("0", "off", "false"):
            env["archive_enabled"] = False
        env.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**env)

    def with_(self, **changes) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def source_setting(self, source: str, name: str, default: str | None = None) -> str | None:
        """Per-source environment value, e.g. BASECRAWLER_US_RATE or BASECRAWLER_US_APP_TOKEN."""
        return env_value(f"BASECRAWLER_{source.upper()}_{name.upper()}", default)

    def bound(self, source: str, name: str):
        """One of the response bounds (BOUND_SETTINGS) for a source: BASECRAWLER_<SOURCE>_<NAME>
        when set (e.g. BASECRAWLER_CA_MAX_DOWNLOAD_BYTES), else the run's value."""
        value = getattr(self, name)
        override = self.source_setting(source, name) if source else None
        if override is None:
            return value
        try:
            return BOUND_SETTINGS[name](override)
        except ValueError:
            raise ConfigError(f"BASECRAWLER_{source.upper()}_{name.upper()}={override!r} is not a number") from None


def endpoint_override(source: str, endpoint: str) -> str | None:
    """`BASECRAWLER_<SOURCE>_<ENDPOINT>_URL` (scheme+host[+port]) or None."""
    return env_value(f"BASECRAWLER_{source.upper()}_{endpoint.upper()}_URL")


def db_directory(db_path: str) -> Path:
    if is_postgres_url(db_path):   # files stay on each machine (store.directory)
        return Path(os.environ.get("BASECRAWLER_DATA_DIR") or Path.cwd()).resolve()
    return Path(db_path).resolve().parent if db_path != ":memory:" else Path.cwd()


__all__ = ["Settings", "endpoint_override", "DEFAULT_USER_AGENT", "BOUND_SETTINGS", "fields"]
