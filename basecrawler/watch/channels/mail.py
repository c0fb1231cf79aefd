"""E-mail through SMTP: one mail per record or a daily digest, a Korean subject and body with
the original beside it, plain text and HTML parts, the delivery id as Message-ID (a receiver
or a mail client spots a resend). Settings from the environment:
BASECRAWLER_SMTP_HOST, _PORT, _SECURITY (starttls | ssl | none, default starttls), _USER,
_PASSWORD (or _PASSWORD_FILE, owner-only), _FROM, _TIMEOUT_S."""
from __future__ import annotations

import html
import os
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from basecrawler.errors import ConfigError
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
    context: ssl.SSLContext | None = None   # tests pass one trusting their own certificate


def settings_from_env(environ=os.environ) -> SmtpSettings:
    host = environ.get(ENV + "HOST")
    if not host:
        raise ConfigError(f"mail watches need {ENV}HOST (and {ENV}FROM)")
    security = (environ.get(ENV + "SECURITY") or "starttls").lower()
    if security not in ("starttls", "ssl", "none"):
        raise ConfigError(f"{ENV}SECURITY={security!r}: use starttls, ssl or none")
    port = int(environ.get(ENV + "PORT") or (465 if security == "ssl" else 587))
    return SmtpSettings(host=host, port=port, security=security, user=environ.get(ENV + "USER"),
                        password=lookup(ENV + "PASSWORD"), sender=environ.get(ENV + "FROM") or f"basecrawler@{host}",
                        timeout_s=float(environ.get(ENV + "TIMEOUT_S") or 30))


def _lines(row: dict) -> list[tuple[str, str]]:
    p = row["payload"]
    out = [(strings.CHANGE.get(row["change"], row["change"]), p.get("title_ko") or p.get("title_original") or strings.NO_TITLE)]
    if p.get("title_ko"):
        out.append((strings.KOREAN, p["title_ko"]))
    if p.get("title_original"):
        out.append((strings.ORIGINAL, p["title_original"]))
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


def _connect(settings: SmtpSettings) -> smtplib.SMTP:
    context = settings.context or ssl.create_default_context()
    if settings.security == "ssl":
        client = smtplib.SMTP_SSL(settings.host, settings.port, timeout=settings.timeout_s, context=context)
    else:
        client = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout_s)
        if settings.security == "starttls":
            client.starttls(context=context)
    if settings.user:
        client.login(settings.user, settings.password.reveal() if settings.password else "")
    return client


def send(settings: SmtpSettings, message: EmailMessage) -> str | None:
    """None when sent, else the problem (the password never appears in it)."""
    try:
        with _connect(settings) as client:
            client.send_message(message)
    except (OSError, smtplib.SMTPException) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def probe(settings: SmtpSettings) -> str | None:
    """`doctor`: connect, TLS and log in, send nothing."""
    try:
        with _connect(settings) as client:
            client.noop()
    except (OSError, smtplib.SMTPException) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
