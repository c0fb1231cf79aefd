"""package_release: one version of a package published on a registry (PyPI's update feed, each
release's metadata). The feed announces a release before its metadata answers; the date is the
feed's publication date, or the first file's upload time once the metadata is read."""
from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from pydantic import Field, field_validator

from basecrawler.recordtypes import Facet, RecordType

from ._fields import TypeModel


class PackageRelease(TypeModel):
    date_field: ClassVar[str] = "published_date"

    registry: str = Field(min_length=1)              # "pypi"
    name: str = Field(min_length=1)                  # as the registry spells it
    version: str = Field(min_length=1)
    published_date: dt.date | None = None
    date_unknown: bool = False
    summary_original: str | None = None
    summary_ko: str | None = None
    license: str | None = Field(default=None, max_length=2_000)   # some projects paste the whole licence
    requires_python: str | None = None
    source_lang: str = "en"
    source_url: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("registry")
    @classmethod
    def _lower_registry(cls, value: str) -> str:
        return value.lower()


PACKAGE_RELEASE = RecordType(
    name="package_release",
    title="Package releases",
    model=PackageRelease,
    table="package_releases",
    key=("registry", "name", "version"),
    date_field="published_date",
    date_optional=True,
    date_sentinel=None,
    translated=("summary",),
    searchable=("name", "version", "license"),
    facets=(
        Facet("registry", "Registry"),
        Facet("source", "Source"),
        Facet("license", "Licence"),
    ),
    labels={
        "source": "Source", "registry": "Registry", "name": "Package", "version": "Version",
        "published_date": "Published", "date_unknown": "Date unknown",
        "summary_original": "Summary", "summary_ko": "Summary (Korean)", "license": "Licence",
        "requires_python": "Requires Python", "source_lang": "Language", "source_url": "Source link",
        "extra": "Extra",
    },
    display=("summary",),
    listing=("published_date", "registry", "name", "version", "summary_original", "license"),
    card=("name", "version", "registry", "published_date", "summary", "license", "requires_python", "source_url"),
    heading=("name", "version"),
)
