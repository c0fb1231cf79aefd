"""Python Package Index: the newest releases from the update feed, each with its metadata, as
`package_release` records.

Where the data comes from: `https://pypi.org/rss/updates.xml` (RSS 2.0, the newest releases:
item `title` "name version", `link`, `description` = the summary, `pubDate` RFC 822), then
`/pypi/<name>/<version>/json` per release (`info`: license, requires_python, project_urls;
`urls`: the files with their upload times).

The feed announces a release before its metadata answers: a 404 there is "not yet", never
"gone". Every release of the feed is an item of the list ledger (key "name version", the feed
fields kept): the release is stored with what the feed says, and while its metadata answers 404
the item stays `failing` — no dead letter — so the next runs ask again, even once the release
has left the feed, until the metadata comes (the record is then completed) or, after
BASECRAWLER_LEDGER_MAX_ATTEMPTS runs, the item is `given_up` (an ERROR; a full run re-queues it).
The enrichment ladder would do the same on a clock, but it keys its rows by a vehicle recall's
(country, recall_number) and this source is added without touching the framework.
"""
from __future__ import annotations

import datetime as dt
import email.utils
import logging
from urllib.parse import quote

from basecrawler import BaseCrawler, NotFound, UnexpectedContent
from basecrawler.formats import text as text_rules
from basecrawler.formats.xmlsafe import read_list

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


def name_and_version(title: str | None) -> tuple[str, str]:
    """'tidewater 2.4.1' → ('tidewater', '2.4.1'); names and versions hold no spaces."""
    name, _, version = (title or "").strip().rpartition(" ")
    if not name or not version:
        raise ValueError(f"feed item title is not 'name version': {title!r}")
    return name, version


class PypiCrawler(BaseCrawler):
    """PyPI: the release update feed, each release with its JSON metadata (retried while 404)."""

    source = "pypi"
    source_lang = "en"
    record_type = "package_release"
    endpoints = {"site": "https://pypi.org"}
    rate_per_s = 5.0

    def fetch(self):
        entries = self.read_list_document(self.url("site", FEED_PATH), read_feed, name="update feed",
                                          label="feed", key="feed_url")
        releases = {}
        for element in entries:
            release = {name: _child_text(element, name) for name in ("title", "link", "description", "pubDate")}
            try:
                releases[" ".join(name_and_version(release["title"]))] = release
            except ValueError as exc:   # no key to retry it by: kept whole for a reader
                self.dead_letter(release, exc, stage="fetch", kind="unreadable_item", url=self.url("site", FEED_PATH))
        log.info("pypi: %d releases in the update feed", len(releases))
        for key, release in releases.items():
            self.ledger.list(key, url=release["link"], listed_date=rfc822_date(release["pubDate"]), data=release)
        # Releases whose metadata an earlier run did not get come again, from what the ledger kept.
        retried = {item.key: item.data for item in self.ledger.retries(releases)}
        for key, release in {**releases, **retried}.items():
            with self.ledger.attempt(key) as attempt:
                yield {**release, "metadata": self._metadata(release, attempt)}

    def _metadata(self, release: dict, attempt) -> dict | None:
        name, version = name_and_version(release["title"])
        url = self.url("site", METADATA_PATH.format(name=quote(name), version=quote(version)))
        with self.item(release, url):     # a transient failure: a dead letter, and asked again next run
            try:
                document = self.http.get_json(url)
            except NotFound:
                attempt.fail(f"metadata of {name} {version} not served yet (404)")   # not yet: no dead letter
                return None
            info = document.get("info") if isinstance(document, dict) else None
            if not isinstance(info, dict):
                raise UnexpectedContent(f"metadata without an info object: {str(document)[:200]}", url=url,
                                        response_sha256=self.http.last_sha256)
            if str(info.get("version")) != version:
                attempt.fail(f"metadata of {name} answers version {info.get('version')!r}, not {version!r} yet")
                return None
            return {"info": info, "urls": document.get("urls")}
        return None

    def parse(self, raw: dict) -> dict:
        name, version = name_and_version(raw.get("title"))
        record = {
            "registry": "pypi",
            "name": name,
            "version": version,
            "published_date": rfc822_date(raw.get("pubDate")) or raw.get("pubDate"),  # unreadable: date unknown
            "summary_original": raw.get("description"),
            "source_url": raw.get("link"),
        }
        metadata = raw.get("metadata")
        if metadata:
            record.update(metadata_fields(metadata["info"], metadata.get("urls"), record))
        return record


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
    if not isinstance(record.get("published_date"), dt.date) and uploads:
        fields["published_date"] = uploads[0][:10]
    return fields
