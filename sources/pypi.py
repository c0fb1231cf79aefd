"""Package releases from a package index the operator configures (a private index, a mirror):
its update feed, then each release's metadata, as `package_release` records.

Package indexes are the infrastructure the project installs from, not publishers it crawls:
no public index is built in. The source reads any index that serves the JSON API shape
(`/rss/updates.xml`: RSS 2.0, the newest releases, item `title` "name version", `link`,
`description` = the summary, `pubDate` RFC 822; then `/pypi/<name>/<version>/json` per release,
`info`: license, requires_python, project_urls; `urls`: the files with their upload times).
Configure it with BASECRAWLER_PYPI_INDEX_URL (scheme, host, port) and, for an index served
under a path (a repository manager's `/repository/<name>`), BASECRAWLER_PYPI_INDEX_PATH; until
then `list` shows it "not configured" and `run --all` skips it with one note
(`needs_configuration`). The declared
host `packages.example.org` is a placeholder that never resolves: it names the replay set.

A feed's name and version never choose the path: a name that is not a package name
(`../../etc/passwd`, `a/b/c`) is that item's dead letter, and every value is put in the URL
as one encoded segment (`ctx.url`).

The feed announces a release before its metadata answers: a 404 there is "not yet", never
"gone". Every release of the feed is an item of the list ledger (key "name version", the feed
fields kept): the release is stored with what the feed says, and while its metadata answers 404
the item stays `failing` — no dead letter — so the next runs ask again, even once the release
has left the feed, until the metadata comes (the record is then completed) or, after
BASECRAWLER_LEDGER_MAX_ATTEMPTS runs, the item is `given_up` (an ERROR; a full run re-queues it).
"""
from __future__ import annotations

import datetime as dt
import email.utils
import logging
import re

from basecrawler import BaseCrawler, NotFound, UnexpectedContent
from basecrawler.errors import UnsafePath
from basecrawler.formats import text as text_rules
from basecrawler.formats.xmlsafe import read_list

log = logging.getLogger(__name__)

FEED_PATH = "/rss/updates.xml"
METADATA_PATH = "/pypi/{}/{}/json"
# A distribution name (PEP 508) and a version as indexes publish them: anything else in a feed
# title is not a release we can ask about, and never reaches a URL.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,200}[A-Za-z0-9])?")
_VERSION = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.+!_-]{0,100}[A-Za-z0-9])?")
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
    if not _NAME.fullmatch(name) or not _VERSION.fullmatch(version):
        raise ValueError(f"feed item title is not a package name and version: {title[:200]!r}")
    return name, version


class PypiCrawler(BaseCrawler):
    """Package releases of a configured index: its update feed, each release with its JSON metadata."""

    source = "pypi"
    source_lang = "en"
    record_type = "package_release"
    endpoints = {"index": "https://packages.example.org"}
    needs_configuration = ("index",)   # no public index is a default (README, Package releases)
    rate_per_s = 5.0

    @staticmethod
    def _prefix(ctx) -> str:
        """The operator's path of the index on its host ('' at the root), as a `ctx.url` path."""
        path = (ctx.setting("index_path") or "").strip().strip("/")
        return "/" + path if path else ""

    def fetch(self, ctx):
        feed_url = ctx.url("index", self._prefix(ctx) + FEED_PATH)
        entries = ctx.read_list_document(feed_url, read_feed, name="update feed", label="feed", key="feed_url")
        releases = {}
        for element in entries:
            release = {name: _child_text(element, name) for name in ("title", "link", "description", "pubDate")}
            try:
                releases[" ".join(name_and_version(release["title"]))] = release
            except ValueError as exc:   # no key to retry it by, or a name that would choose the path
                ctx.dead_letter(release, exc, stage="fetch", kind="unreadable_item", url=feed_url)
        log.info("pypi: %d releases in the update feed", len(releases))
        for key, release in releases.items():
            ctx.ledger.list(key, url=release["link"], listed_date=rfc822_date(release["pubDate"]), data=release)
        # Releases whose metadata an earlier run did not get come again, from what the ledger kept.
        retried = {item.key: item.data for item in ctx.ledger.retries(releases)}
        waiting: list[str] = []
        for key, release in {**releases, **retried}.items():
            with ctx.ledger.attempt(key) as attempt:
                yield {**release, "metadata": self._metadata(ctx, release, attempt, waiting)}
        if waiting:
            # Stored and counted as saved, yet not complete: the run line says so beside its
            # "dead-lettered 0" (they wait in the list ledger, not among the dead letters).
            ctx.warn(f"{len(waiting)} release(s) stored from the feed without their metadata yet "
                     f"({', '.join(waiting[:5])}{' …' if len(waiting) > 5 else ''}): no dead letter, kept in the "
                     "list ledger, the next run asks again")

    def _metadata(self, ctx, release: dict, attempt, waiting: list[str]) -> dict | None:
        name, version = name_and_version(release["title"])
        try:
            prefix = self._prefix(ctx).replace("{", "{{").replace("}", "}}")   # literal in the template
            url = ctx.url("index", prefix + METADATA_PATH, name, version)
        except UnsafePath as exc:   # name_and_version lets none through; kept whole if one did
            ctx.dead_letter(release, exc, stage="fetch", kind="unreadable_item")
            return None
        with ctx.item(release, url):     # a transient failure: a dead letter, and asked again next run
            try:
                document = ctx.http.get_json(url)
            except NotFound:
                # Not yet: stored from the feed, no dead letter, asked again by the next run.
                attempt.fail(f"metadata of {name} {version} not served yet (404): stored from the feed")
                waiting.append(f"{name} {version}")
                return None
            info = document.get("info") if isinstance(document, dict) else None
            if not isinstance(info, dict):
                raise UnexpectedContent(f"metadata without an info object: {str(document)[:200]}", url=url,
                                        response_sha256=ctx.http.last_sha256)
            if str(info.get("version")) != version:
                attempt.fail(f"metadata of {name} answers version {str(info.get('version'))[:40]!r}, not {version!r} yet")
                waiting.append(f"{name} {version}")
                return None
            return {"info": info, "urls": document.get("urls")}
        return None

    def parse(self, ctx, raw: dict) -> dict:
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
