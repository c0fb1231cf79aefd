"""E-mail through SMTP: one mail per record or a daily digest, a Korean subject and body with
the original beside it, plain text and HTML parts, the delivery id as Message-ID (a receiver
or a mail client spots a resend). Settings from the environment:
BASECRAWLER_SMTP_HOST, _PORT, _SECURITY (starttls | ssl | none, default starttls), _USER,
_PASSWORD (or _PASSWORD_FILE, owner-only), _FROM, _TIMEOUT_S, _CA_FILE (a CA bundle to trust in
place of the system's, for a server with a private CA). The server's certificate and host name
are always verified: a refused certificate is a delivery to retry, never a mail sent unverified."""
from __future__ import annotations

import html
import os
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from basecrawler.errors import ConfigError
from basecrawler.recordtypes.declaration import as_read
from basecrawler.watch import strings
from basecrawler.watch.secrets import Secret, lookup

ENV = "BASECRAWLER_SMTP_"


@dataclass
class SmtpSettings:
    host: str
    port: int
    security: str
    user: str | None
    password: Secret | None
    sender: str
    timeout_s: float = 30.0
    ca_file: str | None = None   # the CA bundle to trust in place of the system's (a private CA)
    context: ssl.SSLContext | None = None   # tests may pass one trusting their own certificate


def settings_from_env(environ=os.environ) -> SmtpSettings:
    host = environ.get(ENV + "HOST")
    if not host:
        raise ConfigError(f"mail watches need {ENV}HOST (and {ENV}FROM)")
    security = (environ.get(ENV + "SECURITY") or "starttls").lower()
    if security not in ("starttls", "ssl", "none"):
        raise ConfigError(f"{ENV}SECURITY={security!r}: use starttls, ssl or none")
    if security == "none" and environ.get(ENV + "USER"):
        raise ConfigError(f"{ENV}USER with {ENV}SECURITY=none would send the password in clear: use starttls or ssl")
    port = int(environ.get(ENV + "PORT") or (465 if security == "ssl" else 587))
    return SmtpSettings(host=host, port=port, security=security, user=environ.get(ENV + "USER"),
                        password=lookup(ENV + "PASSWORD"), sender=environ.get(ENV + "FROM") or f"basecrawler@{host}",
                        timeout_s=float(environ.get(ENV + "TIMEOUT_S") or 30),
                        ca_file=environ.get(ENV + "CA_FILE") or None)


def _lines(row: dict) -> list[tuple[str, str]]:
    p = row["payload"]
    korean, original = as_read(p.get("title_ko"), p.get("title_original"), (p.get("fields") or {}).get("source_lang"))
    out = [(strings.CHANGE.get(row["change"], row["change"]), korean or original or strings.NO_TITLE)]
    if korean:
        out.append((strings.KOREAN, korean))
    if original:
        out.append((strings.ORIGINAL, original))
    out.append((strings.SOURCE, f"{p.get('source')} · {p.get('record_title')}"))
    if p.get("url"):
        out.append((strings.LINK, p["url"]))
    return out


def compose(rows: list[dict], watch_name: str, to: str, sender: str) -> EmailMessage:
    """One message for `rows` (one row: that record's mail; several: a digest)."""
    message = EmailMessage()
    if len(rows) == 1:
        p = rows[0]["payload"]
        title = p.get("title_ko") or p.get("title_original") or strings.NO_TITLE
        subject = strings.MAIL_SUBJECT_ONE.format(change=strings.CHANGE.get(rows[0]["change"], ""), title=title)
        domain = sender.rpartition("@")[2] or "basecrawler"
        message["Message-ID"] = f"<{rows[0]['delivery_id']}@{domain}>"
    else:
        subject = strings.MAIL_SUBJECT_DIGEST.format(name=watch_name, count=len(rows))
        message["Message-ID"] = make_msgid("basecrawler")
    message["Subject"] = " ".join(subject.split())[:300]
    message["From"], message["To"], message["Date"] = sender, to, formatdate(localtime=False)
    message["X-Basecrawler-Deliveries"] = ",".join(r["delivery_id"] for r in rows)[:900]
    intro = strings.MAIL_INTRO.format(name=watch_name)
    text = [intro, ""]
    parts = [f"<p>{html.escape(intro)}</p>"]
    for row in rows:
        lines = _lines(row)
        text += [f"{label}: {value}" for label, value in lines] + [""]
        parts.append("<dl>" + "".join(f"<dt>{html.escape(str(label))}</dt><dd>{html.escape(str(value))}</dd>"
                                      for label, value in lines) + "</dl>")
    message.set_content("\n".join(text), charset="utf-8")
    message.add_alternative('<!doctype html><html lang="ko"><meta charset="utf-8"><body>' + "".join(parts)
                            + "</body></html>", subtype="html", charset="utf-8")
    return message


def _context(settings: SmtpSettings) -> ssl.SSLContext:
    if settings.context is not None:
        return settings.context
    return ssl.create_default_context(cafile=settings.ca_file or None)


def _connect(settings: SmtpSettings) -> smtplib.SMTP:
    """Connected, TLS verified (certificate and host name) and logged in; the password is sent
    only over the verified TLS (a server refusing STARTTLS gets none: smtplib raises first)."""
    context = _context(settings)
    if settings.security == "ssl":
        client = smtplib.SMTP_SSL(settings.host, settings.port, timeout=settings.timeout_s, context=context)
    else:
        client = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout_s)
    try:
        if settings.security == "starttls":
            client.starttls(context=context)
        if settings.user:
            client.login(settings.user, settings.password.reveal() if settings.password else "")
    except BaseException:
        client.close()   # (a refused certificate or login left the socket open)
        raise
    return client


def _problem(settings: SmtpSettings, exc: BaseException) -> str:
    """What went wrong, for the outbox row, `status` and the log (never the password)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"TLS certificate of {settings.host}:{settings.port} refused ({exc.verify_message or exc}); "
                f"nothing sent, retried later (a private CA: {ENV}CA_FILE)")
    if isinstance(exc, smtplib.SMTPNotSupportedError) and settings.security == "starttls":
        return (f"{settings.host}:{settings.port} offers no STARTTLS; nothing sent, no password given "
                f"(an SMTP-over-TLS port: {ENV}SECURITY=ssl)")
    return f"{type(exc).__name__}: {exc}"


def send(settings: SmtpSettings, message: EmailMessage) -> str | None:
    """None when sent, else the problem (the password never appears in it)."""
    try:
        with _connect(settings) as client:
            client.send_message(message)
    except (OSError, smtplib.SMTPException) as exc:
        return _problem(settings, exc)
    return None


def probe(settings: SmtpSettings) -> str | None:
    """`doctor`: connect, TLS and log in, send nothing."""
    try:
        with _connect(settings) as client:
            client.noop()
    except (OSError, smtplib.SMTPException) as exc:
        return _problem(settings, exc)
    return None
