"""What operators see of watches: `status` (per watch the last delivery, pending, failed) and
`doctor` (each channel checked without sending: SMTP login, webhook reachability, the
signing key present, the feed folder writable)."""
from __future__ import annotations

import os

from basecrawler.watch import outbox
from basecrawler.watch.repository import all_watches, any_watch


def status(store) -> dict:
    """{name: {channel, held, pending, sent, failed, last_delivery, last_error}}; {} without watches."""
    if not any_watch(store):
        return {}
    counts = outbox.counts(store)
    return {w.name: {"channel": w.channel, **counts.get(w.name, {})} for w in all_watches(store)}


def status_lines(watches: dict) -> list[str]:
    return [f"watch {name} ({e['channel']}): last delivery {e.get('last_delivery') or 'never'}, "
            f"{e.get('pending', 0)} pending, {e.get('held', 0)} waiting for Korean, {e.get('failed', 0)} failed"
            # (a pending row's error is a retry on its way: a refused certificate shows here at once)
            + (f" (last error: {e['last_error'][:160]})" if e.get("last_error") and (e.get("failed") or e.get("pending"))
               else "")
            for name, e in watches.items()]


def doctor_checks(db_path: str) -> list[tuple[str, bool, str]]:
    """(name, ok, detail) per watch channel; nothing is sent."""
    from pathlib import Path

    from basecrawler.store.core import Store
    from basecrawler.store.engines import is_postgres_url

    if not is_postgres_url(db_path) and not Path(db_path).is_file():
        return []
    store = Store(db_path)
    try:
        watches = all_watches(store) if any_watch(store) else []
        feed_folder = None
        if any(w.channel == "feed" for w in watches):
            from basecrawler.watch.channels.atom import feed_dir
            feed_folder = feed_dir(store)
    finally:
        store.close()
    checks = []
    if any(w.channel == "mail" for w in watches):
        from basecrawler.watch.channels import mail
        try:
            problem = mail.probe(mail.settings_from_env())
        except Exception as exc:
            problem = str(exc)
        checks.append(("watch mail (SMTP login)", problem is None, problem or "logged in, nothing sent"))
    for watch in (w for w in watches if w.channel == "webhook"):
        from basecrawler.watch.channels import webhook
        from basecrawler.watch.delivery import DEFAULT_SECRET_ENV
        from basecrawler.watch.model import shown_target
        from basecrawler.watch.secrets import lookup
        try:
            key = lookup(watch.options.get("secret_env") or DEFAULT_SECRET_ENV, watch.options.get("secret_file"))
        except Exception as exc:
            key, problem = None, str(exc)
        else:
            problem = None if key else "no signing key in the environment or file"
        problem = problem or webhook.probe(watch.target)
        checks.append((f"watch {watch.name} webhook", problem is None, problem or f"{shown_target(watch)} reachable"))
    if feed_folder is not None:
        writable = os.access(feed_folder if feed_folder.exists() else feed_folder.parent, os.W_OK)
        checks.append(("watch feeds", writable, f"{feed_folder} {'writable' if writable else 'not writable'}"))
    return checks
