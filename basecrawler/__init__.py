"""basecrawler: public data sets (vehicle recalls, product alerts, …) from their publishers, in
one clean store; each kind of record declared once (record types, basecrawler/recordtypes).

Public API for source authors and tools.
"""
from basecrawler.config import Settings
from basecrawler.pipeline.crawler import BaseCrawler
from basecrawler.pipeline.context import RunContext
from basecrawler.pipeline.linking import Republishes
from basecrawler.pipeline.records import Raw
from basecrawler.pipeline.results import RunCounts, RunResult
from basecrawler.errors import (Blocked, ConfigError, CrawlerError, CredentialsRejected, DuplicateSource, FetchError,
                     NotFound, RateLimited, ReplayMiss, Skip, SourceFailed, Transient, UnexpectedContent, UnknownSource)
from basecrawler.recordtypes import Facet, Record, RecordType
from basecrawler.store.core import Store

__all__ = [
    "BaseCrawler", "RunContext", "Republishes", "Raw", "RunCounts", "RunResult", "Skip", "Recall", "Store", "Settings",
    "RecordType", "Facet", "Record",
    "CrawlerError", "ConfigError", "UnknownSource", "DuplicateSource", "SourceFailed", "ReplayMiss",
    "FetchError", "RateLimited", "Blocked", "Transient", "NotFound", "CredentialsRejected", "UnexpectedContent",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    """`Recall` (the vehicle recall model) is looked up when first used, through the registry,
    so importing basecrawler loads no record type by itself."""
    if name == "Recall":
        from basecrawler.model import Recall
        return Recall
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
