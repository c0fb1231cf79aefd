"""basecrawler.fetch.artifacts: verified, resumable, manifest-driven PDF downloads."""
import hashlib
import io

import pytest

from basecrawler.fetch.artifacts import ArtifactError, Artifacts
from basecrawler.errors import Transient
from basecrawler.fetch.http import HttpClient
from basecrawler.testing import LoopbackServer, Reply


def make_pdf(text: str = "recall list", pages: int = 3) -> bytes:
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pageCompression=0)
    for page in range(pages):
        pdf.drawString(72, 720, f"{text} page {page}")
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


BODY = make_pdf()
CUT = len(BODY) // 3


@pytest.fixture
def http(settings, store):
    client = HttpClient(settings=settings, store=store)
    yield client
    client.close()


@pytest.fixture
def artifacts(http, store):
    return Artifacts(http, store, source="jp")


def serve(handler):
    return LoopbackServer(handler)


def test_download_is_verified_stored_under_its_hash_and_recorded(artifacts):
    with serve(lambda req: Reply(200, BODY, {"ETag": '"v1"'})) as server:
        artifact = artifacts.ensure("jp:press/1#list", server.url + "/report/press/content/001.pdf")
    sha = hashlib.sha256(BODY).hexdigest()
    assert artifact.path.read_bytes() == BODY and artifact.sha256 == sha
    assert artifact.path.name == f"{sha}.pdf"
    row = artifacts.manifest("jp:press/1#list")
    assert (row["state"], row["sha256"], row["content_length"], row["etag"]) == ("complete", sha, len(BODY), '"v1"')


def test_url_never_steers_the_file_path(artifacts):
    with serve(lambda req: Reply(200, BODY)) as server:
        artifact = artifacts.ensure("../../etc/passwd", server.url + "/../../../etc/passwd.pdf")
    assert artifact.path.resolve().is_relative_to(artifacts.root.resolve())
    assert "passwd" not in str(artifact.path) and "passwd" not in str(artifacts.partial_path("../../etc/passwd"))


def test_zero_byte_body_is_empty_never_complete(artifacts):
    with serve(lambda req: Reply(200, b"")) as server:
        with pytest.raises(ArtifactError) as caught:
            artifacts.ensure("t", server.url + "/a.pdf")
    assert caught.value.state == "empty"
    row = artifacts.manifest("t")
    assert row["state"] == "empty" and row["sha256"] is None and row["path"] is None
    assert row["attempts"] == artifacts.max_attempts


def test_html_error_page_served_as_pdf_is_rejected_by_magic_check(artifacts):
    page = "<!DOCTYPE html><html><body>ただいまアクセスが集中しております</body></html>"
    with serve(lambda req: Reply(200, page, {"Content-Type": "application/pdf"})) as server:
        with pytest.raises(ArtifactError) as caught:
            artifacts.ensure("t", server.url + "/a.pdf")
    assert caught.value.state == "corrupt"
    assert "magic" in artifacts.manifest("t")["error"]


def test_pdf_cut_off_with_consistent_length_is_corrupt_and_never_complete(artifacts):
    with serve(lambda req: Reply(200, BODY[:CUT])) as server:
        with pytest.raises(ArtifactError):
            artifacts.ensure("t", server.url + "/a.pdf")
        assert len(server.requests) == artifacts.max_attempts  # downloaded again each time
    row = artifacts.manifest("t")
    assert row["state"] == "corrupt" and "%%EOF" in row["error"] and row["path"] is None


def test_truncated_download_is_downloaded_again_whole(artifacts):
    replies = iter([Reply(200, BODY, truncate_to=CUT), Reply(200, BODY)])
    with serve(lambda req: next(replies)) as server:
        artifact = artifacts.ensure("t", server.url + "/a.pdf")
        # Without an ETag / Last-Modified nothing proves the bytes are the same: no Range.
        assert "range" not in server.requests[1].headers
    assert artifact.path.read_bytes() == BODY
    assert artifacts.manifest("t")["state"] == "complete"


def test_connection_cut_every_time_leaves_partial_then_resumes_next_run(artifacts, http, store):
    headers = {"ETag": '"v1"'}
    with serve(lambda req: Reply(200, BODY, headers, truncate_to=CUT)) as server:
        with pytest.raises(Transient):
            artifacts.ensure("t", server.url + "/a.pdf")
        url = server.url + "/a.pdf"
        row = artifacts.manifest("t")
        assert row["state"] == "partial" and row["path"] is None
        assert artifacts.partial_path("t").stat().st_size == CUT

        def honour_range(req):
            start = int(req.headers["range"].split("=")[1].rstrip("-"))
            return Reply(206, BODY[start:], {**headers, "Content-Range": f"bytes {start}-{len(BODY) - 1}/{len(BODY)}"})

        server.handler = honour_range
        artifact = Artifacts(http, store, source="jp").ensure("t", url)
    assert artifact.path.read_bytes() == BODY


def test_range_resume_when_server_honours_range(artifacts):
    headers = {"ETag": '"v1"'}

    def handler(req):
        if "range" not in req.headers:
            return Reply(200, BODY, headers, truncate_to=CUT)
        start = int(req.headers["range"].split("=")[1].rstrip("-"))
        return Reply(206, BODY[start:], {**headers, "Content-Range": f"bytes {start}-{len(BODY) - 1}/{len(BODY)}"})

    with serve(handler) as server:
        artifact = artifacts.ensure("t", server.url + "/a.pdf")
        second = server.requests[1].headers
    assert second["range"] == f"bytes={CUT}-" and second["if-range"] == '"v1"'
    assert artifact.path.read_bytes() == BODY


def test_server_answering_200_to_range_is_downloaded_whole_without_duplicate_bytes(artifacts):
    replies = iter([Reply(200, BODY, {"ETag": '"v1"'}, truncate_to=CUT), Reply(200, BODY, {"ETag": '"v1"'})])
    with serve(lambda req: next(replies)) as server:
        artifact = artifacts.ensure("t", server.url + "/a.pdf")
        assert "range" in server.requests[1].headers
    assert artifact.path.read_bytes() == BODY and artifact.size == len(BODY)


def test_206_with_unexpected_content_range_falls_back_to_full_download(artifacts):
    headers = {"ETag": '"v1"'}

    def handler(req):
        if len(handler.seen) == 0:
            handler.seen.append(req)
            return Reply(200, BODY, headers, truncate_to=CUT)
        handler.seen.append(req)
        if "range" in req.headers:  # wrong window: starts at 0, not where we stopped
            return Reply(206, BODY[:100], {**headers, "Content-Range": f"bytes 0-99/{len(BODY)}"})
        return Reply(200, BODY, headers)

    handler.seen = []
    with serve(handler) as server:
        artifact = artifacts.ensure("t", server.url + "/a.pdf")
        assert "range" not in server.requests[-1].headers
    assert artifact.path.read_bytes() == BODY


def test_complete_target_is_revalidated_and_304_reuses_the_copy(artifacts):
    def handler(req):
        if req.headers.get("if-none-match") == '"v1"':
            return Reply(304, b"", {"ETag": '"v1"'})
        return Reply(200, BODY, {"ETag": '"v1"'})

    with serve(handler) as server:
        first = artifacts.ensure("t", server.url + "/a.pdf")
        again = artifacts.ensure("t", server.url + "/a.pdf")
        assert server.requests[1].headers["if-none-match"] == '"v1"'
    assert again.path == first.path and not again.drifted


def test_changed_checksum_is_drift_and_rediscovers_from_the_press_page(artifacts):
    new_body = make_pdf("corrected recall list")
    states_seen = []

    def handler(req):
        if req.path == "/new.pdf":
            return Reply(200, new_body, {"ETag": '"v2"'})
        return Reply(200, BODY if len(server.requests) == 1 else new_body, {"ETag": '"v1"' if len(server.requests) == 1 else '"v2"'})

    with serve(handler) as server:
        artifacts.ensure("t", server.url + "/a.pdf")

        def rediscover():
            states_seen.append(artifacts.manifest("t")["state"])
            return server.url + "/new.pdf"

        artifact = artifacts.ensure("t", server.url + "/a.pdf", rediscover=rediscover)
    assert states_seen == ["drift_suspect"]
    assert artifact.drifted and artifact.path.read_bytes() == new_body
    assert artifact.url.endswith("/new.pdf")
    row = artifacts.manifest("t")
    assert row["state"] == "complete" and row["sha256"] == hashlib.sha256(new_body).hexdigest()


def test_stored_copy_altered_on_disk_is_fetched_again(artifacts):
    with serve(lambda req: Reply(200, BODY)) as server:
        first = artifacts.ensure("t", server.url + "/a.pdf")
        first.path.write_bytes(b"%PDF-1.4 tampered")
        again = artifacts.ensure("t", server.url + "/a.pdf")
        assert len(server.requests) == 2
    assert again.path.read_bytes() == BODY
