"""Python Package Index: the newest releases from the update feed, then each release's metadata,
as `package_release` records.

Where the data comes from: `https://pypi.org/rss/updates.xml` (RSS 2.0, the newest releases:
item `title` "name version", `link`, `description` = the summary, `pubDate` RFC 822), then
`/pypi/<name>/<version>/json` per release (`info`: license, requires_python, project_urls;
`urls`: the files with their upload times).

The feed announces a release before its metadata answers: a 404 there is "not yet", so the
metadata is a second phase run by the enrichment ladder (retried with backoff, `gone` only after
the last level), exactly like NHTSA's detail lookups in `us`.
"""
from __future__ import annotations

import datetime as dt
import email.utils
import logging
from urllib.parse import quote

from basecrawler import BaseCrawler, NotFound, UnexpectedContent
from basecrawler import text as text_rules
from basecrawler.xmlsafe import read_list

log = logging.getLogger(__name__)

FEED_PATH = "/rss/updates.xml"
METADATA_PATH = "/pypi/{name}/{version}/json"
# A licence text pasted whole into the metadata is not a licence name: kept short in the field.
MAX_LICENSE_CHARS = 200


def read_feed(body: bytes, header: str | None = None):
    """(the feed's <item> elements, how it was read) for `read_list_document`."""
    listed = read_list(body, "item", header=header)
    return listed.items, listed


def rfc822_date(value: str | None):
    """'Tue, 01 Dec 2026 22:10:05 GMT' → the UTC date; unreadable → None."""
    if not value:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.timezone.utc)
    return moment.date()


def _child_text(element, name: str) -> str | None:
    for child in element:
        if isinstance(child.tag, str) and child.tag.rsplit("}", 1)[-1] == name:
            return text_rules.clean_text("".join(child.itertext()), markup=True, squash_space=True)
    return None


class PypiCrawler(BaseCrawler):
    """PyPI: the release update feed, then each release's JSON metadata (second phase)."""

    source = "pypi"
    country = ""
    source_lang = "en"
    record_type = "package_release"
    endpoints = {"site": "https://pypi.org"}

    def fetch(self):
        entries = self.read_list_document(self.url("site", FEED_PATH), read_feed, name="update feed",
                                          label="feed", key="feed_url")
        log.info("pypi: %d releases in the update feed", len(entries))
        for element in entries:
            yield {name: _child_text(element, name) for name in ("title", "link", "description", "pubDate")}

    def parse(self, raw: dict) -> dict:
        name, _, version = (raw.get("title") or "").strip().rpartition(" ")
        if not name or not version:
            raise ValueError(f"feed item title is not 'name version': {raw.get('title')!r}")
        published = rfc822_date(raw.get("pubDate"))
        return {
            "registry": "pypi",
            "name": name,
            "version": version,
            "published_date": published or raw.get("pubDate"),   # unreadable: kept, date unknown
            "summary_original": raw.get("description"),
            "source_url": raw.get("link"),
        }

    def needs_detail(self, record) -> bool:
        return "files" not in record.extra

    def fetch_detail(self, record: dict) -> dict | None:
        url = self.url("site", METADATA_PATH.format(name=quote(record["name"]), version=quote(record["version"])))
        # A 404 raises NotFound from the client: "not yet" on the ladder, never "gone" at once.
        document = self.http.get_json(url)
        info = document.get("info") if isinstance(document, dict) else None
        if not isinstance(info, dict):
            raise UnexpectedContent(f"metadata without an info object: {str(document)[:200]}", url=url,
                                    response_sha256=self.http.last_sha256)
        if str(info.get("version")) != record["version"]:
            raise NotFound(f"metadata of {record['name']} answers version {info.get('version')!r}, "
                           f"not {record['version']!r} yet", url=url)
        return metadata_fields(info, document.get("urls"), record)


def metadata_fields(info: dict, files, record: dict) -> dict:
    """The metadata → fields the feed lacks (the feed's summary and date stay unless absent)."""
    files = [f for f in files or [] if isinstance(f, dict)]
    uploads = sorted(f["upload_time_iso_8601"] for f in files if f.get("upload_time_iso_8601"))
    license_text = text_rules.clean_text(info.get("license_expression") or info.get("license"))
    extra = {
        "files": len(files),
        "packagetypes": sorted({f["packagetype"] for f in files if f.get("packagetype")}) or None,
        "first_upload": uploads[0] if uploads else None,
        "project_urls": info.get("project_urls") or None,
        "yanked": info.get("yanked") or None,
    }
    fields: dict = {
        "license": license_text[:MAX_LICENSE_CHARS] if license_text else None,
        "requires_python": text_rules.clean_text(info.get("requires_python")),
        "extra": {key: value for key, value in extra.items() if value is not None},
    }
    if license_text and len(license_text) > MAX_LICENSE_CHARS:
        fields["extra"]["license_truncated"] = True
    if not record.get("summary_original"):
        fields["summary_original"] = text_rules.clean_text(info.get("summary"))
    if record.get("date_unknown") and uploads:
        fields["published_date"] = uploads[0][:10]
        fields["date_unknown"] = False
    return fields
