"""``fleetplan serve`` (the HTTP API under uvicorn) and ``fleetplan db ...`` (migrations)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from api.cli.common import EXIT_OK, CliError, Subparsers, load_settings
from api.services import database

# --------------------------------------------------------------------------- serve


def register_serve(sub: Subparsers) -> None:
    p = sub.add_parser("serve", help="run the HTTP API (uvicorn)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--log-level", default="info", help="uvicorn log level (default info)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="service processes behind the port (default FLEETPLAN_WORKERS, or 1)",
    )
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """One process, or ``--workers N`` processes sharing the port (uvicorn's
    supervisor; each makes its own app and dies with the supervisor). Every
    process serves every route: comparisons are leased in the database, so any
    of them may run, resume or report one."""
    import uvicorn

    from api.main import create_app

    settings = load_settings()
    workers = args.workers if args.workers is not None else settings.workers
    if not 1 <= workers <= 64:
        raise CliError("--workers", f"must be between 1 and 64, not {workers}")
    app = create_app(settings)  # a bad catalog or setting fails here, in one line
    if workers == 1:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    else:
        uvicorn.run(
            "api.main:create_worker_app",
            factory=True,
            workers=workers,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
        )
    return EXIT_OK


# --------------------------------------------------------------------------- db


def register_db(sub: Subparsers) -> None:
    p = sub.add_parser("db", help="database migrations (FLEETPLAN_DATABASE_URL)")
    dbsub = p.add_subparsers(dest="db_command", metavar="{upgrade,downgrade,current}")
    dbsub.required = True

    up = dbsub.add_parser("upgrade", help="apply migrations (default: to the newest)")
    up.add_argument("--revision", default="head", help="target revision (default head)")
    up.set_defaults(func=cmd_db_upgrade)

    down = dbsub.add_parser("downgrade", help="revert migrations (default: one step)")
    down.add_argument(
        "--revision", default="-1", help="target revision; 'base' empties the database"
    )
    down.set_defaults(func=cmd_db_downgrade)

    cur = dbsub.add_parser("current", help="print the database's revision")
    cur.set_defaults(func=cmd_db_current)


def _db_url() -> str:
    return load_settings().database_url


@contextmanager
def _alembic_progress() -> Iterator[None]:
    """Show Alembic's "Running upgrade ..." lines on stderr while a command runs,
    without touching the root logger (main() may run inside another program)."""
    logger = logging.getLogger("alembic")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    url = _db_url()
    with _alembic_progress():
        database.upgrade(url, args.revision)
    return EXIT_OK


def cmd_db_downgrade(args: argparse.Namespace) -> int:
    url = _db_url()
    with _alembic_progress():
        database.downgrade(url, args.revision)
    return EXIT_OK


def cmd_db_current(args: argparse.Namespace) -> int:
    current, head = database.revisions(_db_url())
    state = "up to date" if current == head else f"behind head {head}"
    print(f"{current or '(empty)'} ({state})")
    return EXIT_OK
