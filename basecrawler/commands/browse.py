"""`browse`: serve the database read-only in a web browser (Datasette on 127.0.0.1); a
PostgreSQL store through a read-only SQLite snapshot refreshed every --refresh minutes."""
from __future__ import annotations

import logging
import signal
import sys
import webbrowser

from basecrawler.reading.browse import INSTALL_HINT, BrowseServer, SnapshotServer, datasette_available
from basecrawler.config import db_directory
from basecrawler.errors import EXIT_OK, ConfigError, UnusablePath
from basecrawler.store.engines import is_postgres_url

log = logging.getLogger("basecrawler")


def register(sub) -> None:
    parser = sub.add_parser("browse", help="browse and search the database in a web browser (read-only)")
    parser.add_argument("--port", type=int, default=8001, help="port on 127.0.0.1 (default 8001)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--open", action="store_true", help="open the view in the default browser")
    parser.add_argument("--refresh", type=float, default=10.0, metavar="MINUTES",
                        help="PostgreSQL only: remake the read-only SQLite snapshot the view serves every "
                             "MINUTES (default 10)")
    parser.add_argument("--allow-sql", action="store_true",
                        help="also answer arbitrary read-only SQL (?sql=, _where=, …); off by default: the view "
                             "serves its declared tables and searches only (still under its time and memory limits)")
    parser.set_defaults(func=cmd_browse)


def cmd_browse(args) -> int:
    if not datasette_available():
        raise ConfigError(INSTALL_HINT)   # a missing extra is configuration, like a bad option
    on_postgres = is_postgres_url(args.settings.db_path)
    if on_postgres and args.refresh <= 0:
        raise ConfigError("--refresh must be a positive number of minutes")
    _check_port_free(args.host, args.port)
    # SIGTERM (service managers, `timeout`) must stop Datasette too, not orphan it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(EXIT_OK))
    if on_postgres:
        return _browse_snapshot(args)
    server = BrowseServer(args.settings.db_path, host=args.host, port=args.port,
                          allow_sql=getattr(args, "allow_sql", False))
    server.start()
    try:
        server.wait_ready()
        log.info("browse: %s (read-only); Ctrl-C to stop", server.table_url)
        if args.open:
            webbrowser.open(server.table_url)
        return server.wait()
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        server.stop()


def _browse_snapshot(args) -> int:
    server = SnapshotServer(args.settings.db_path, db_directory(args.settings.db_path), host=args.host,
                            port=args.port, refresh_s=args.refresh * 60,
                            allow_sql=getattr(args, "allow_sql", False))
    try:
        server.refresh()
        log.info("browse: %s (read-only snapshot of PostgreSQL, remade every %g min); Ctrl-C to stop",
                 server.server.table_url, args.refresh)
        if args.open:
            webbrowser.open(server.server.table_url)
        return server.serve_forever(started=True)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        server.stop()


def _check_port_free(host: str, port: int) -> None:
    """A port in use would only show as "datasette exited with code 1": say it plainly (an
    UnusablePath: one line, its exit code)."""
    import errno
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise UnusablePath(exc.errno or errno.EADDRINUSE,
                          f"port {port} on {host} is not free ({exc.strerror}); try --port {port + 1}") from None
