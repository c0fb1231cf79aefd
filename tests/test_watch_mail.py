"""The mail channel against a real SMTP server on 127.0.0.1 (aiosmtpd): STARTTLS with login,
one mail a record and a daily digest, Korean subject and body with the original beside it in
the text and HTML parts, the delivery id as Message-ID."""
from __future__ import annotations

import email
import email.policy
import ssl
import subprocess

import pytest

from basecrawler.store.core import Store
from basecrawler.watch import operators, repository
from basecrawler.watch.channels import mail
from basecrawler.watch.delivery import deliver
from basecrawler.watch.model import Watch
from basecrawler.watch.secrets import Secret
from watchkit import food_listeria_set, store_alerts

aiosmtpd = pytest.importorskip("aiosmtpd.controller")
from aiosmtpd.smtp import AuthResult  # noqa: E402
from web_fixture import free_port

EARLY = "2000-01-01T00:00:00+00:00"
pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.rcpt_tos, email.message_from_bytes(envelope.content, policy=email.policy.default)))
        return "250 OK"


def _certificate(folder, name: str, san: str = "IP:127.0.0.1"):
    """A throw-away self-signed certificate (openssl, as on any machine with TLS) and its key."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                        "-out", str(cert), "-days", "2", "-subj", f"/CN={name}", "-addext", f"subjectAltName={san}"],
                       check=True, capture_output=True, timeout=60)
    except FileNotFoundError:
        pytest.skip("no openssl to make a test certificate")
    return cert, key


class Server:
    """aiosmtpd on 127.0.0.1: STARTTLS (`implicit=False`, required before AUTH) or SMTP over TLS
    from the first byte (`implicit=True`), with login; keeps each mail and each login tried."""

    def __init__(self, cert, key, *, implicit: bool = False, tls: bool = True):
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_tls.load_cert_chain(cert, key)
        self.logins, self.inbox = [], Inbox()

        def authenticator(server, session, envelope, mechanism, data):
            self.logins.append((data.login, data.password))
            # (handled=False: aiosmtpd then answers a refusal with 535; its default, True, means
            # "answered already", and a wrong password was a client timeout, not a refusal.)
            return AuthResult(success=data.login == b"alerts" and data.password == b"pw-123", handled=False)

        self.port = free_port()
        # (aiosmtpd counts only STARTTLS as TLS for AUTH: over implicit TLS it is told not to
        # require it, and warns each connection, `pytestmark`.)
        options = {"ssl_context": server_tls, "auth_require_tls": False} if implicit else \
            {"tls_context": server_tls, "require_starttls": True} if tls else {"auth_require_tls": False}
        self.controller = aiosmtpd.Controller(self.inbox, hostname="127.0.0.1", port=self.port,
                                              authenticator=authenticator, auth_required=True, **options)
        self.controller.start()

    def settings(self, security: str, context=None, **extra) -> mail.SmtpSettings:
        return mail.SmtpSettings(host="127.0.0.1", port=self.port, security=security, user="alerts",
                                 password=Secret("pw-123"), sender="basecrawler@example.org", timeout_s=10,
                                 context=context, **extra)

    def close(self):
        self.controller.stop()


@pytest.fixture
def servers():
    made = []

    def make(*args, **kwargs):
        made.append(Server(*args, **kwargs))
        return made[-1]
    yield make
    for server in made:
        server.close()


@pytest.fixture
def smtp(tmp_path, servers):
    cert, key = _certificate(tmp_path, "localhost")
    server = servers(cert, key)
    settings = server.settings("starttls", ssl.create_default_context(cafile=str(cert)))
    return settings, server.inbox, server.logins


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


def _food_watch(store):
    repository.add(store, Watch(name="food", channel="mail", target="me@example.org", record_type="product_alert",
                                text="Listeria", facets=(("category", "Food"),), options={"as_soon_as_seen": True}),
                   now=EARLY)
    store_alerts(store, food_listeria_set())


def _outbox(store) -> list[dict]:
    return store.query("SELECT state, attempts, last_error, next_attempt_at FROM watch_outbox ORDER BY id")


@pytest.mark.parametrize("security", ["ssl", "starttls"])
def test_mail_over_tls_with_login_from_the_environment(tmp_path, servers, monkeypatch, security):
    """SMTP over TLS from the first byte (SMTP_SSL) and STARTTLS, each with login, configured
    the way an operator does (environment, the server's private CA in _CA_FILE)."""
    cert, key = _certificate(tmp_path, "mail")
    server = servers(cert, key, implicit=security == "ssl")
    for name, value in {"HOST": "127.0.0.1", "PORT": str(server.port), "SECURITY": security, "USER": "alerts",
                        "PASSWORD": "pw-123", "FROM": "alerts@example.org", "CA_FILE": str(cert)}.items():
        monkeypatch.setenv(mail.ENV + name, value)
    settings = mail.settings_from_env()
    store = Store(str(tmp_path / "tls.db"))
    try:
        _food_watch(store)
        assert mail.probe(settings) is None and server.inbox.messages == []   # doctor: logs in, sends nothing
        report = deliver(store)
        assert report.sent == 3 and len(server.inbox.messages) == 3
        assert server.logins[-1] == (b"alerts", b"pw-123")
        assert sorted(m["To"] for _, m in server.inbox.messages) == ["me@example.org"] * 3
        assert all(r["state"] == "sent" for r in _outbox(store))
        assert deliver(store).sent == 0 and len(server.inbox.messages) == 3
    finally:
        store.close()


@pytest.mark.parametrize("security", ["ssl", "starttls"])
@pytest.mark.parametrize("wrong", ["untrusted", "other-name", "system-ca"])
def test_a_wrong_certificate_is_refused_clearly_nothing_marked_sent_and_retried(tmp_path, servers, security, wrong):
    """A certificate the client does not trust (another self-signed one; a trusted one for
    another name; the system's CAs against a self-signed one) ends the connection before the
    password or any mail: the delivery stays pending with a clear error, and goes out once
    when the certificate is right, after its back-off."""
    cert, key = _certificate(tmp_path, "mail", "DNS:mail.example.org" if wrong == "other-name" else "IP:127.0.0.1")
    other, _ = _certificate(tmp_path, "other")
    server = servers(cert, key, implicit=security == "ssl")
    trusted = {"untrusted": str(other), "other-name": str(cert), "system-ca": None}[wrong]
    refused = server.settings(security, ca_file=trusted)
    store = Store(str(tmp_path / "bad.db"))
    try:
        _food_watch(store)
        problem = mail.probe(refused)
        assert problem.startswith("TLS certificate of 127.0.0.1:") and "refused" in problem, problem
        report = deliver(store, smtp=refused, now="2001-01-01T00:00:00+00:00")
        assert report.sent == 0 and report.retrying == 3 and server.inbox.messages == [] and server.logins == []
        rows = _outbox(store)
        assert [r["state"] for r in rows] == ["pending"] * 3 and all(r["attempts"] == 1 for r in rows)
        assert all(r["last_error"].startswith("TLS certificate of 127.0.0.1:") for r in rows)
        assert "3 pending" in operators.status_lines(operators.status(store))[0]
        assert "(last error: TLS certificate of 127.0.0.1:" in operators.status_lines(operators.status(store))[0]
        if wrong == "other-name":   # the operator fixes the server: a certificate for the name we connect to
            cert, key = _certificate(tmp_path, "mail-ip")
            server = servers(cert, key, implicit=security == "ssl")
        good = server.settings(security, ca_file=str(cert))
        assert deliver(store, smtp=good, now="2001-01-01T00:00:10+00:00").sent == 0   # still backing off
        assert deliver(store, smtp=good, now="2001-01-01T01:00:00+00:00").sent == 3
        assert len(server.inbox.messages) == 3 and server.logins == [(b"alerts", b"pw-123")] * 3
        assert deliver(store, smtp=good, now="2001-01-01T02:00:00+00:00").sent == 0 and len(server.inbox.messages) == 3
    finally:
        store.close()


def test_a_server_without_starttls_gets_no_password(tmp_path, servers):
    """STARTTLS asked of a server that offers none (a downgrade): refused before AUTH."""
    cert, key = _certificate(tmp_path, "mail")
    server = servers(cert, key, tls=False)
    settings = server.settings("starttls", ca_file=str(cert))
    store = Store(str(tmp_path / "plain.db"))
    try:
        _food_watch(store)
        assert deliver(store, smtp=settings).retrying == 3
        assert server.logins == [] and server.inbox.messages == []
        assert "offers no STARTTLS" in _outbox(store)[0]["last_error"]
    finally:
        store.close()


def test_a_password_without_tls_is_a_configuration_error(monkeypatch):
    for name, value in {"HOST": "127.0.0.1", "SECURITY": "none", "USER": "alerts", "PASSWORD": "pw-123"}.items():
        monkeypatch.setenv(mail.ENV + name, value)
    with pytest.raises(mail.ConfigError, match="in clear"):
        mail.settings_from_env()


def _delivery(title_ko, title_original) -> dict:
    return {"delivery_id": "7f0c2a4e-0000-4000-8000-000000000001", "change": "new", "created_at": "2026-08-11T00:00:00+00:00",
            "payload": {"title_ko": title_ko, "title_original": title_original, "source": "kr",
                        "record_title": "Product alerts", "record_type": "product_alert"}}


def test_a_korean_original_copied_into_its_korean_is_said_once_in_mail_and_feed():
    from basecrawler.watch import strings
    from basecrawler.watch.channels import atom

    same = _delivery("저속전동이륜차 · 터보", "저속전동이륜차 · 터보")   # a Korean publisher's, after the translation step
    text = mail.compose([same], "kr", "reader@example.org", "alerts@example.org").get_body(("plain",)).get_content()
    feed = atom.render("kr", [same]).decode("utf-8")
    assert text.count("저속전동이륜차 · 터보") == 2 and strings.ORIGINAL not in text     # the change line and the Korean
    assert strings.ORIGINAL not in feed
    translated = _delivery("주전자 과열 우려", "Kettle may overheat")
    text = mail.compose([translated], "kr", "reader@example.org", "alerts@example.org").get_body(("plain",)).get_content()
    assert f"{strings.ORIGINAL}" in text and "Kettle may overheat" in text
    assert "Kettle may overheat" in atom.render("kr", [translated]).decode("utf-8")
    unsettled = _delivery(None, "저속전동이륜차 · 터보")   # before the translation step: still its own Korean
    unsettled["payload"]["fields"] = {"source_lang": "ko"}
    text = mail.compose([unsettled], "kr", "reader@example.org", "alerts@example.org").get_body(("plain",)).get_content()
    assert f"{strings.KOREAN}: 저속전동이륜차 · 터보" in text and strings.ORIGINAL not in text
