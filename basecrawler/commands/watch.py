"""`watch add|list|show|remove|test|feed|deliver`: saved searches delivered once per record
version (basecrawler/watch). `add NAME [--type T] [--filter F=V]… [--text W] [--source S]…
[--country C]… (--webhook URL | --mail ADDRESS | --feed)`."""
from __future__ import annotations

import json
import sys

from basecrawler.commands import require_database
from basecrawler.errors import EXIT_OK, ConfigError, CrawlerError


def register(sub) -> None:
    parser = sub.add_parser("watch", help="saved searches that deliver new matches (feed, mail, webhook)")
    verbs = parser.add_subparsers(dest="watch_command", metavar="VERB", required=True)
    add = verbs.add_parser("add", help="save a watch")
    add.add_argument("name", help="the watch's name (its feed is feeds/NAME.atom)")
    add.add_argument("--type", dest="record_type", help="record type (default: every type)")
    add.add_argument("--filter", action="append", default=[], metavar="F=V", help="a declared facet filter")
    add.add_argument("--text", help="free text (any language the search takes)")
    add.add_argument("--source", action="append", default=[], help="only records of this source")
    add.add_argument("--country", action="append", default=[], help="only records of this country")
    channel = add.add_mutually_exclusive_group(required=True)
    channel.add_argument("--webhook", metavar="URL", help="deliver as a signed JSON POST to URL")
    channel.add_argument("--mail", metavar="ADDRESS", help="deliver by e-mail (SMTP settings from BASECRAWLER_SMTP_*)")
    channel.add_argument("--feed", action="store_true", help="deliver as an Atom feed (file and web view)")
    add.add_argument("--digest", action="store_true", help="mail: one digest a day instead of one mail a record")
    add.add_argument("--as-soon-as-seen", action="store_true", help="deliver before the Korean translation")
    add.add_argument("--secret-env", metavar="VAR", help="webhook: environment variable holding the signing key")
    add.add_argument("--secret-file", metavar="PATH", help="webhook: owner-only file holding the signing key")
    add.add_argument("--backlog", action="store_true", help="also deliver the records stored before now")
    for verb, text in (("show", "one watch and its deliveries"), ("remove", "delete a watch"),
                       ("test", "what the watch selects now (nothing delivered)"),
                       ("feed", "print the watch's Atom feed")):
        one = verbs.add_parser(verb, help=text)
        one.add_argument("name", help="the watch's name")
    verbs.add_parser("list", help="every watch")
    verbs.add_parser("deliver", help="match and deliver now (run after every crawl anyway)")
    for p in verbs.choices.values():
        p.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=cmd_watch)


def _watch_from(args):
    from basecrawler.formats.countries import country_codes
    from basecrawler.pipeline.registry import known_countries
    from basecrawler.watch.model import Watch

    facets = []
    for item in args.filter:
        field, sep, value = item.partition("=")
        if not sep or not field or not value:
            raise ConfigError(f"--filter takes FIELD=VALUE, not {item!r}")
        facets.append((field.strip(), value.strip()))
    options = {k: v for k, v in (("digest", args.digest), ("as_soon_as_seen", args.as_soon_as_seen),
                                 ("secret_env", args.secret_env), ("secret_file", args.secret_file)) if v}
    channel = "webhook" if args.webhook else "mail" if args.mail else "feed"
    # Names or codes, as `search --country` takes them: a watch on "Japan" stored as typed would
    # match no record (they hold "JP") and deliver nothing, silently.
    countries = country_codes(args.country, known_countries()) if args.country else ()
    return Watch(name=args.name, channel=channel, target=args.webhook or args.mail, record_type=args.record_type,
                 facets=tuple(facets), text=args.text, sources=tuple(args.source), countries=countries,
                 options=options)


def _as_dict(watch) -> dict:
    from basecrawler.watch.model import shown_target

    return {"name": watch.name, "type": watch.record_type, "filters": dict(watch.facets), "text": watch.text,
            "sources": list(watch.sources), "countries": list(watch.countries), "channel": watch.channel,
            "target": shown_target(watch) or None,
            "options": {k: v for k, v in watch.options.items()}, "created_at": watch.created_at,
            "checked_until": watch.checked_until}


def cmd_watch(args) -> int:
    from basecrawler.store.core import Store
    from basecrawler.watch import repository

    if args.watch_command == "add":
        from basecrawler.commands import check_existing_database
        check_existing_database(args.settings)
        path = args.settings.db_path
    else:
        path = require_database(args.settings)
    store = Store(path)
    try:
        return _run(args, store, repository)
    finally:
        store.close()


def _print(args, data, text: str) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str) if args.json else text)


def _run(args, store, repository) -> int:
    from basecrawler.watch import outbox

    verb = args.watch_command
    if verb == "add":
        watch = repository.add(store, _watch_from(args), backlog=args.backlog)
        _print(args, _as_dict(watch), f"watch {watch.name} added: {watch.describe()}")
    elif verb == "list":
        watches = repository.all_watches(store)
        counts = outbox.counts(store)
        _print(args, [{**_as_dict(w), **counts.get(w.name, {})} for w in watches],
               "\n".join(f"{w.name}: {w.describe()}" for w in watches) or "no watches")
    elif verb == "show":
        watch = repository.get(store, args.name)
        data = {**_as_dict(watch), **outbox.counts(store).get(watch.name, {})}
        _print(args, data, "\n".join(f"{k}: {v}" for k, v in data.items()))
    elif verb == "remove":
        gone = repository.remove(store, args.name)
        _print(args, {"removed": args.name, "deliveries": gone}, f"watch {args.name} removed ({gone} deliveries)")
    elif verb == "test":
        from basecrawler.watch.matching import preview
        rows = preview(store, repository.get(store, args.name))
        _print(args, rows, "\n".join(f"{r['source']} {r['record_type']} #{r['id']}: "
                                     f"{r.get('title_ko') or r.get('title_original') or ''}" for r in rows)
               or "nothing matches now")
    elif verb == "feed":
        from basecrawler.watch.channels import atom
        watch = repository.get(store, args.name)
        sys.stdout.buffer.write(atom.render(watch.name, outbox.recent(store, watch.id)))
        sys.stdout.flush()
    elif verb == "deliver":
        from basecrawler.watch.delivery import deliver
        report = deliver(store)
        _print(args, report.__dict__, report.line())
        # A delivery given up for good is a job that failed (the notifications that will retry are not).
        return CrawlerError.exit_code if report.failed else EXIT_OK
    return EXIT_OK
