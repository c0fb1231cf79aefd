"""basecrawler: public vehicle-recall data from government sources, in one clean SQLite store.

Public API for source authors and tools.
"""
from .config import Settings
from .crawler import BaseCrawler
from .records import Raw
from .results import RunCounts, RunResult
from .errors import (Blocked, ConfigError, CrawlerError, CredentialsRejected, DuplicateSource, FetchError,
                     NotFound, RateLimited, ReplayMiss, Skip, SourceFailed, Transient, UnexpectedContent, UnknownSource)
from .model import Recall
from .recordtypes import Facet, Record, RecordType
from .store import Store

__all__ = [
    "BaseCrawler", "Raw", "RunCounts", "RunResult", "Skip", "Recall", "Store", "Settings",
    "RecordType", "Facet", "Record",
    "CrawlerError", "ConfigError", "UnknownSource", "DuplicateSource", "SourceFailed", "ReplayMiss",
    "FetchError", "RateLimited", "Blocked", "Transient", "NotFound", "CredentialsRejected", "UnexpectedContent",
]
__version__ = "0.1.0"
