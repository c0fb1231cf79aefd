"""The mail channel against a real SMTP server on 127.0.0.1 (aiosmtpd): STARTTLS with login,
one mail a record and a daily digest, Korean subject and body with the original beside it in
the text and HTML parts, the delivery id as Message-ID."""
from __future__ import annotations

import email
import email.policy
import socket
import ssl
import subprocess

import pytest

from basecrawler.store.core import Store
from basecrawler.watch import repository
from basecrawler.watch.channels import mail
from basecrawler.watch.delivery import deliver
from basecrawler.watch.model import Watch
from basecrawler.watch.secrets import Secret
from watchkit import food_listeria_set, store_alerts

aiosmtpd = pytest.importorskip("aiosmtpd.controller")
from aiosmtpd.smtp import AuthResult  # noqa: E402

EARLY = "2000-01-01T00:00:00+00:00"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.rcpt_tos, email.message_from_bytes(envelope.content, policy=email.policy.default)))
        return "250 OK"


@pytest.fixture
def smtp(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    logins = []

    def authenticator(server, session, envelope, mechanism, data):
        logins.append((data.login, data.password))
        return AuthResult(success=data.login == b"alerts" and data.password == b"pw-123")

    inbox = Inbox()
    port = _free_port()
    controller = aiosmtpd.Controller(inbox, hostname="127.0.0.1", port=port, tls_context=server_tls,
                                     require_starttls=True, authenticator=authenticator, auth_required=True)
    controller.start()
    client_tls = ssl.create_default_context(cafile=str(cert))
    settings = mail.SmtpSettings(host="127.0.0.1", port=port, security="starttls", user="alerts",
                                 password=Secret("pw-123"), sender="basecrawler@example.org", timeout_s=10,
                                 context=client_tls)
    yield settings, inbox, logins
    controller.stop()


def _translate_all(store):
    store.write(lambda db: db.conn.execute(
        "UPDATE product_alerts SET title_ko = '리스테리아 검출: ' || title_original, "
        "translated_at = '2099-01-01T00:00:00+00:00', translation_status = 'translated'"))


def _parts(message):
    text = message.get_body(("plain",)).get_content()
    html = message.get_body(("html",)).get_content()
    return text, html


def test_one_mail_per_record_in_korean_with_the_original_beside(tmp_path, smtp):
    settings, inbox, logins = smtp
    store = Store(str(tmp_path / "m.db"))
    try:
        repository.add(store, Watch(name="food", channel="mail", target="me@example.org", record_type="product_alert",
                                    facets=(("category", "Food"),), text="Listeria"), now=EARLY)
        store_alerts(store, food_listeria_set())
        _translate_all(store)
        report = deliver(store, smtp=settings)
        assert report.sent == 3 and len(inbox.messages) == 3 and logins[0] == (b"alerts", b"pw-123")
        subjects = sorted(m["Subject"] for _, m in inbox.messages)
        assert subjects[0].startswith("[basecrawler] 새 항목 · New: 리스테리아 검출: Listeria")
        rcpt, message = inbox.messages[0]
        assert rcpt == ["me@example.org"]
        text, html = _parts(message)
        original = message["Subject"].split("리스테리아 검출: ", 1)[1]
        for part in (text, html):
            assert "리스테리아 검출" in part and "원문 · Original" in part and original in part
        assert message["Message-ID"].startswith("<") and message["Message-ID"][1:37] in message["X-Basecrawler-Deliveries"]
        assert deliver(store, smtp=settings).sent == 0 and len(inbox.messages) == 3
    finally:
        store.close()


def test_digest_is_one_mail_a_day(tmp_path, smtp):
    settings, inbox, _ = smtp
    store = Store(str(tmp_path / "d.db"))
    try:
        repository.add(store, Watch(name="digest", channel="mail", target="me@example.org", record_type="product_alert",
                                    text="Listeria", options={"digest": True, "as_soon_as_seen": True}), now=EARLY)
        store_alerts(store, food_listeria_set())
        assert deliver(store, smtp=settings, now="2001-01-01T08:00:00+00:00").sent == 4
        assert len(inbox.messages) == 1 and "4건" in inbox.messages[0][1]["Subject"]
        store_alerts(store, [food_listeria_set()[0][0:1] + (food_listeria_set()[0][1].model_copy(
            update={"what_to_do_original": "Throw it away"}),)])
        assert deliver(store, smtp=settings, now="2001-01-01T12:00:00+00:00").sent == 0   # not a day yet
        assert deliver(store, smtp=settings, now="2001-01-02T08:00:01+00:00").sent == 1
        assert len(inbox.messages) == 2
    finally:
        store.close()


def test_a_wrong_password_is_a_retry_and_never_printed(tmp_path, smtp, caplog):
    settings, inbox, _ = smtp
    settings.password = Secret("wrong-pass-987")
    store = Store(str(tmp_path / "p.db"))
    try:
        repository.add(store, Watch(name="food", channel="mail", target="me@example.org", record_type="product_alert",
                                    text="Listeria", options={"as_soon_as_seen": True}), now=EARLY)
        store_alerts(store, food_listeria_set()[:1])
        report = deliver(store, smtp=settings)
        assert report.retrying == 1 and inbox.messages == []
        assert "wrong-pass-987" not in caplog.text
        assert "wrong-pass-987" not in str(store.query("SELECT * FROM watch_outbox")) + str(store.query("SELECT * FROM watches"))
        assert mail.probe(settings) is not None
    finally:
        store.close()
