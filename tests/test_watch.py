"""Watches end to end (issue #33): matching through the search, exactly once per record
version through the outbox, the Atom feed, the webhook (signature, retries, hangs, SSRF),
a kill -9 between commit and send, both engines."""
from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import httpx
import pytest

from basecrawler.store.core import Store
from basecrawler.watch import outbox, repository
from basecrawler.watch.channels import webhook
from basecrawler.watch.delivery import deliver
from basecrawler.watch.model import Watch, WatchError
from pgcluster import any_db, pg_cluster, pg_url  # noqa: F401  (fixtures)
from watchkit import Receiver, alert, food_listeria_set, store_alerts
from basecrawler.store.engines.dialect import dialect_of

REPO = Path(__file__).resolve().parents[1]
EARLY = "2000-01-01T00:00:00+00:00"   # the watch's cursor: every record stored by the test is after it
KEY = "s3cret-key"
WANT = ["Listeria in cheese", "Listeria in smoked fish", "Listeria monocytogenes in salad"]


@pytest.fixture
def hook(monkeypatch):
    monkeypatch.setenv(webhook.ALLOW_PRIVATE_ENV, "1")
    monkeypatch.setenv("BASECRAWLER_WATCH_SECRET", KEY)
    monkeypatch.setenv("BASECRAWLER_WATCH_FEED_DIR", "")
    receivers = []

    def make(answer=lambda n: (200, {}, 0.0)):
        receivers.append(Receiver(answer))
        return receivers[-1]
    yield make
    for r in receivers:
        r.close()


def food_watch(channel="webhook", target=None, **options):
    return Watch(name="food", channel=channel, target=target, record_type="product_alert",
                 facets=(("category", "Food"),), text="Listeria", sources=("hc", "eu"),
                 options={"as_soon_as_seen": True, **options})


def test_webhook_delivers_each_match_once_signed_then_nothing_then_the_change(any_db, hook):  # noqa: F811
    receiver = hook()
    store = Store(any_db)
    try:
        repository.add(store, food_watch(target=receiver.url), now=EARLY)
        store_alerts(store, food_listeria_set())
        report = deliver(store)
        assert report.sent == 3 and receiver.titles() == WANT
        for headers, body in receiver.posts:
            assert headers["x-basecrawler-signature"] == "sha256=" + hmac.new(KEY.encode(), body, hashlib.sha256).hexdigest()
            assert headers["x-basecrawler-delivery"] == json.loads(body)["delivery_id"]
            assert headers["x-basecrawler-timestamp"].isdigit()
        store_alerts(store, food_listeria_set())   # the same data again: nothing changed
        assert deliver(store).sent == 0 and len(receiver.posts) == 3
        store_alerts(store, [alert("hc", 1, title="Listeria in cheese", category="Food", what_to_do_original="Return it")])
        assert deliver(store).sent == 1
        headers, body = receiver.posts[-1]
        sent = json.loads(body)
        assert sent["change"] == "changed" and sent["record"]["fields"]["what_to_do_original"] == "Return it"
        assert len({h["x-basecrawler-delivery"] for h, _ in receiver.posts}) == 4
        assert outbox.counts(store)["food"]["sent"] == 4
    finally:
        store.close()


def test_a_record_waits_for_its_korean_translation_unless_as_soon_as_seen(any_db, hook):  # noqa: F811
    receiver = hook()
    store = Store(any_db)
    try:
        watch = food_watch(target=receiver.url)
        repository.add(store, Watch(**{**watch.__dict__, "options": {}}), now=EARLY)
        store_alerts(store, food_listeria_set())
        assert deliver(store).sent == 0 and outbox.counts(store)["food"]["held"] == 3
        store.write(lambda db: db.conn.execute(
            dialect_of(db.conn).write("UPDATE product_alerts SET title_ko = '치즈의 리스테리아', translated_at = '2099-01-01T00:00:00+00:00', "
            "translation_status = 'translated' WHERE alert_id = 'hc-1'")))
        assert deliver(store).sent == 1
        record = json.loads(receiver.posts[0][1])["record"]
        assert record["title_ko"] == "치즈의 리스테리아" and record["title_original"] == "Listeria in cheese"
        assert deliver(store).sent == 0   # the held version of hc-1 was superseded, not sent too
    finally:
        store.close()


def test_kill_9_between_commit_and_send_then_each_pending_delivered_once(any_db, hook):  # noqa: F811
    receiver = hook()
    path = any_db
    store = Store(path)
    repository.add(store, food_watch(target=receiver.url), now=EARLY)
    store_alerts(store, food_listeria_set())
    store.close()
    script = ("import os, sys; sys.path[:0] = [%r, %r]\n"
              "from basecrawler.store.core import Store\nfrom basecrawler.watch import matching\n"
              "s = Store(%r); matching.match(s); os.kill(os.getpid(), 9)" % (str(REPO), str(REPO / "tests"), path))
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    assert receiver.posts == []
    store = Store(path)
    try:
        assert outbox.counts(store)["food"]["pending"] == 3
        assert deliver(store).sent == 3 and receiver.titles() == WANT
        assert deliver(store).sent == 0 and len(receiver.posts) == 3
    finally:
        store.close()


def test_failing_receiver_is_retried_with_back_off_then_given_up_and_shown_failed(tmp_path, hook, monkeypatch):
    monkeypatch.setenv("BASECRAWLER_WATCH_MAX_ATTEMPTS", "3")
    receiver = hook(lambda n: (500, {}, 0.0))
    store = Store(str(tmp_path / "f.db"))
    try:
        repository.add(store, food_watch(target=receiver.url), now=EARLY)
        store_alerts(store, [food_listeria_set()[0]])
        first = deliver(store, now="2030-01-01T00:00:00+00:00")
        assert first.retrying == 1 and len(receiver.posts) == 1
        assert deliver(store, now="2030-01-01T00:00:10+00:00").sent == 0 and len(receiver.posts) == 1   # backing off
        deliver(store, now="2030-01-01T00:01:00+00:00")
        last = deliver(store, now="2030-01-01T01:00:00+00:00")
        assert last.failed == 1 and len(receiver.posts) == 3
        counts = outbox.counts(store)["food"]
        assert counts["failed"] == 1 and counts["pending"] == 0 and "HTTP 500" in counts["last_error"]
        assert deliver(store, now="2030-01-02T00:00:00+00:00").sent == 0 and len(receiver.posts) == 3
    finally:
        store.close()


def test_a_hanging_receiver_costs_one_deadline_and_stays_pending(tmp_path, hook, monkeypatch):
    monkeypatch.setenv(webhook.TIMEOUT_ENV, "0.5")
    receiver = hook(lambda n: (200, {}, 5.0))
    store = Store(str(tmp_path / "h.db"))
    try:
        repository.add(store, food_watch(target=receiver.url), now=EARLY)
        store_alerts(store, [food_listeria_set()[0]])
        import time
        started = time.monotonic()
        report = deliver(store)
        assert time.monotonic() - started < 3.0
        assert report.retrying == 1 and "timed out" in outbox.counts(store)["food"]["last_error"]
    finally:
        store.close()


def test_ssrf_loopback_refused_by_default_and_a_redirect_to_loopback_refused(tmp_path, monkeypatch):
    monkeypatch.delenv(webhook.ALLOW_PRIVATE_ENV, raising=False)
    row = {"delivery_id": "d1", "change": "new", "created_at": "x", "payload": {}}
    key = type("K", (), {"reveal": lambda self: "k"})()
    asked = []

    def handler(request):
        asked.append(str(request.url))
        return httpx.Response(307, headers={"location": "http://127.0.0.1:9/steal"})
    public = lambda host: ["93.184.216.34"]   # noqa: E731
    refused = webhook.send("http://127.0.0.1:1/x", row, "w", key, transport=httpx.MockTransport(handler))
    assert not refused.ok and refused.final and "loopback" in refused.error and asked == []
    redirected = webhook.send("https://hooks.example.com/x", row, "w", key,
                              transport=httpx.MockTransport(handler), resolve=public)
    assert not redirected.ok and redirected.final and "redirect refused" in redirected.error
    assert asked == ["https://hooks.example.com/x"]
    assert webhook.send("http://10.1.2.3/x", row, "w", key, transport=httpx.MockTransport(handler)).final


def _validate_atom(document: bytes) -> list[ET.Element]:
    ns = {"a": "http://www.w3.org/2005/Atom"}
    feed = ET.fromstring(document)
    assert feed.tag == "{http://www.w3.org/2005/Atom}feed"
    for tag in ("id", "title", "updated"):
        assert feed.find(f"a:{tag}", ns) is not None and feed.find(f"a:{tag}", ns).text
    import datetime as dt
    entries = feed.findall("a:entry", ns)
    for entry in entries:
        for tag in ("id", "title", "updated"):
            assert entry.find(f"a:{tag}", ns).text
        dt.datetime.fromisoformat(entry.find("a:updated", ns).text)   # RFC 3339
        assert entry.find("a:id", ns).text.startswith("urn:uuid:")
    return entries


def test_feed_watch_writes_a_valid_atom_file_and_the_command_prints_it(tmp_path, capsys):
    from basecrawler.cli import main

    db = str(tmp_path / "feed.db")
    store = Store(db)
    try:
        repository.add(store, Watch(**{**food_watch("feed").__dict__}), now=EARLY)
        store_alerts(store, food_listeria_set())
        assert deliver(store).sent == 3
    finally:
        store.close()
    written = (tmp_path / "feeds" / "food.atom").read_bytes()
    entries = _validate_atom(written)
    assert sorted(e.find("{http://www.w3.org/2005/Atom}title").text.split(": ", 1)[1] for e in entries) == WANT
    assert len(_validate_atom((tmp_path / "feeds" / "all.atom").read_bytes())) == 3
    assert main(["--db", db, "watch", "feed", "food"]) == 0
    assert len(_validate_atom(capsys.readouterr().out.encode())) == 3


def test_watch_commands_add_list_show_test_remove(tmp_path, capsys):
    from basecrawler.cli import main

    db = str(tmp_path / "cli.db")
    store = Store(db)
    store_alerts(store, food_listeria_set())
    store.close()
    assert main(["--db", db, "watch", "add", "food", "--type", "product_alert", "--filter", "category=Food",
                 "--text", "Listeria", "--source", "hc", "--source", "eu", "--webhook",
                 "https://hooks.example.com/x?token=abc", "--secret-env", "MY_KEY"]) == 0
    assert main(["--db", db, "watch", "list"]) == 0
    out = capsys.readouterr().out
    assert "food" in out and "token=abc" not in out
    assert main(["--db", db, "watch", "test", "food", "--json"]) == 0
    assert sorted(r["title_original"] for r in json.loads(capsys.readouterr().out)) == WANT
    assert main(["--db", db, "watch", "show", "food", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["options"] == {"secret_env": "MY_KEY"}
    assert main(["--db", db, "watch", "add", "bad", "--type", "product_alert", "--filter", "nope=1", "--feed"]) == 2
    assert main(["--db", db, "watch", "add", "u", "--webhook", "https://a:b@hooks.example.com/"]) == 2
    assert main(["--db", db, "watch", "remove", "food"]) == 0
    assert main(["--db", db, "watch", "show", "food"]) == 2


def test_a_watch_takes_country_names_as_search_does(tmp_path, capsys):
    """`--country 프랑스` is stored as FR and finds the French alert; a watch stored as typed
    matched no record and delivered nothing, silently. No country at all is refused."""
    from basecrawler.cli import main

    db = str(tmp_path / "cli.db")
    store = Store(db)
    store_alerts(store, food_listeria_set())
    store.close()
    assert main(["--db", db, "watch", "add", "fr", "--type", "product_alert", "--country", "프랑스", "--text",
                 "Listeria", "--feed"]) == 0
    capsys.readouterr()
    assert main(["--db", db, "watch", "show", "fr", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["countries"] == ["FR"]
    assert main(["--db", db, "watch", "test", "fr", "--json"]) == 0
    assert [r["title_original"] for r in json.loads(capsys.readouterr().out)] == ["Listeria in smoked fish"]
    assert main(["--db", db, "watch", "add", "nowhere", "--country", "Narnia", "--feed"]) == 2


def test_secrets_are_never_stored_or_shown(tmp_path, monkeypatch):
    from basecrawler.watch.secrets import Secret, from_file, lookup

    secret_file = tmp_path / "key"
    secret_file.write_text("file-key\n")
    secret_file.chmod(0o644)
    with pytest.raises(Exception, match="readable by others"):
        from_file(str(secret_file))
    secret_file.chmod(0o600)
    assert from_file(str(secret_file)).reveal() == "file-key"
    monkeypatch.setenv("K1", "env-key")
    found = lookup("K1")
    assert found.reveal() == "env-key" and "env-key" not in repr(found) and str(Secret("x")) == "Secret(***)"


def test_a_run_delivers_after_its_sources_and_keeps_its_counts(tmp_path, hook):
    from basecrawler.pipeline.runner import run_sources
    from basecrawler.testing import fast_settings

    receiver = hook(lambda n: (500, {}, 0.0))   # a failing receiver changes nothing of the run
    db = str(tmp_path / "run.db")
    store = Store(db)
    repository.add(store, food_watch(target=receiver.url), now=EARLY)
    store_alerts(store, food_listeria_set())
    store.close()
    summary = run_sources({}, settings=fast_settings(db))
    assert summary.ok and len(receiver.posts) == 3


def test_watch_validation():
    from basecrawler.watch.model import check

    with pytest.raises(WatchError, match="address"):
        check(Watch(name="x", channel="mail", target="not-an-address"))
    with pytest.raises(WatchError, match="name"):
        check(Watch(name="../x", channel="feed"))
    assert check(Watch(name="ok", channel="mail", target="me@example.org")).name == "ok"


def test_status_shows_each_watch_and_doctor_checks_the_webhook_without_sending(tmp_path, hook, capsys, monkeypatch):
    from basecrawler.cli import main
    from basecrawler.watch.operators import doctor_checks

    monkeypatch.setenv("BASECRAWLER_WATCH_MAX_ATTEMPTS", "1")
    receiver = hook(lambda n: (500, {}, 0.0))
    db = str(tmp_path / "st.db")
    store = Store(db)
    repository.add(store, food_watch(target=receiver.url), now=EARLY)
    store_alerts(store, food_listeria_set())
    deliver(store)
    store.close()
    assert main(["--db", db, "status"]) == 0
    out = capsys.readouterr().out
    assert "watch food (webhook): last delivery never, 0 pending, 0 waiting for Korean, 3 failed" in out
    posts = len(receiver.posts)
    assert doctor_checks(db) == [("watch food webhook", True, f"{receiver.url} reachable")]
    assert len(receiver.posts) == posts + 1 and receiver.posts[-1][0].get("x-basecrawler-delivery") is None


def test_migrate_copies_watches_and_their_outbox_to_the_other_engine(tmp_path, pg_url, hook):  # noqa: F811
    from basecrawler.cli import main

    receiver = hook()
    lite = str(tmp_path / "from.db")
    store = Store(lite)
    repository.add(store, food_watch(target=receiver.url), now=EARLY)
    store_alerts(store, food_listeria_set())
    deliver(store)
    store.close()
    assert main(["--db", lite, "migrate", "--to", pg_url]) == 0
    target = Store(pg_url)
    try:
        assert repository.get(target, "food").facets == (("category", "Food"),)
        assert outbox.counts(target)["food"]["sent"] == 3
        store_alerts(target, food_listeria_set())
        assert deliver(target).sent == 0 and len(receiver.posts) == 3   # the copied outbox knows what was sent
    finally:
        target.close()


def test_a_full_disk_while_queueing_loses_nothing_and_sends_nothing_twice(tmp_path, hook):
    """The outbox rows and the watches' cursors are written in one transaction: a disk that
    fills up while they are written (SQLite's page limit standing for it) leaves both as they
    were, the run goes on, and the next pass queues and delivers each match once."""
    from basecrawler.watch.delivery import deliver_after_run

    receiver = hook()
    store = Store(str(tmp_path / "full.db"))
    try:
        repository.add(store, food_watch(target=receiver.url), now=EARLY)
        # Long texts, so the outbox rows (each holding its record) need pages the limit denies.
        store_alerts(store, [(source, record.model_copy(update={"description_original": "long text " * 2000}))
                             for source, record in food_listeria_set()])
        conn = store.db.conn
        conn.execute("VACUUM")
        conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
        assert deliver_after_run(store) is None   # the pass failed, logged; it never raises into the run
        assert store.query("SELECT COUNT(*) AS n FROM watch_outbox")[0]["n"] == 0 and receiver.posts == []
        assert repository.get(store, "food").checked_until == EARLY
        conn.execute("PRAGMA max_page_count = 1073741823")
        assert deliver(store).sent == 3 and receiver.titles() == WANT
        assert deliver(store).sent == 0 and len(receiver.posts) == 3
    finally:
        store.close()


def test_a_scheduled_job_delivers_what_its_translation_filled_in_korean(tmp_path, hook, monkeypatch):
    """The run's own delivery holds the untranslated matches; the job's translation hook fills
    them in Korean; the scheduler's delivery after the hook sends them, in Korean, once."""
    from basecrawler.operations.scheduler import run_scheduled_job
    from basecrawler.testing import fast_settings

    receiver = hook()
    db = str(tmp_path / "job.db")
    store = Store(db)
    repository.add(store, Watch(**{**food_watch(target=receiver.url).__dict__, "options": {}}), now=EARLY)
    store_alerts(store, food_listeria_set())
    store.close()
    seen_before_translation = []

    def translate(store, **kwargs):
        seen_before_translation.append(len(receiver.posts))
        store.write(lambda db: db.conn.execute(
            "UPDATE product_alerts SET title_ko = '리스테리아: ' || title_original, "
            "translated_at = '2099-01-01T00:00:00+00:00', translation_status = 'translated'"))
        return "translated"
    monkeypatch.setattr("basecrawler.operations.schedulejob.job_hooks", lambda: {"translate": translate})
    report = run_scheduled_job(fast_settings(db), crawlers={})
    assert report.translation == "translated" and seen_before_translation == [0]
    assert sorted(json.loads(body)["record"]["title_ko"] for _, body in receiver.posts) == \
        ["리스테리아: " + title for title in WANT]
