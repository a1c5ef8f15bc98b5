"""The ``fleetplan`` command line.

Each command group lives in a small ``register_<group>(subparsers)`` function that
adds its subparser(s) and sets ``func`` (a ``(args) -> int`` handler) as default.
To add a group (``analyze``, ``plan``...), write its ``register_*`` function, in
this module or another one, and add it to :data:`REGISTRARS`::

    def register_analyze(sub: Subparsers) -> None:
        p = sub.add_parser("analyze", help="...")
        ...
        p.set_defaults(func=cmd_analyze)

Handlers raise :class:`CliError`, ``PlanningError`` or ``CatalogError`` for bad
input; :func:`main` prints them as one line, ``fleetplan: error: <field>: <message>``,
on stderr and returns 2. A database that cannot be reached returns 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from sqlalchemy.exc import SQLAlchemyError

from api import __version__
from api.cli.analyze import register_analyze
from api.cli.calibrate import register_calibrate, register_calibrations
from api.cli.catalog import register_catalog
from api.cli.common import (
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_USAGE,
    PROG,
    CliError,
    Handler,
    Subparsers,
)
from api.cli.compare import register_compare, register_comparisons, register_report
from api.cli.db import register_db, register_serve
from api.cli.deploy import register_deploy
from api.cli.plans import register_plan, register_plans
from api.cli.simulate import register_simulate
from api.services.errors import ServiceError
from catalog.loader import CatalogError
from planner.errors import PlanningError

# --------------------------------------------------------------------------- parser

REGISTRARS: list[Callable[[Subparsers], None]] = [
    register_serve,
    register_db,
    register_catalog,
    register_plan,
    register_plans,
    register_compare,
    register_comparisons,
    register_report,
    register_deploy,
    register_analyze,
    register_calibrate,
    register_calibrations,
    register_simulate,
]
"""Command groups, in help order. Append a ``register_*`` function to add one."""


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors in the same one-line form (exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        where = self.prog.removeprefix(PROG).strip()
        raise CliError(where or "command", f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Capacity planning for LLM inference fleets.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for register in REGISTRARS:
        register(sub)
    return parser


def _error(field: str, message: str) -> None:
    text = " ".join(message.split())  # one line, whatever the message held
    print(f"{PROG}: error: {field}: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 runtime failure, 2 bad input)."""
    try:
        args = build_parser().parse_args(argv)
        handler: Handler = args.func
        return handler(args)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except CliError as err:
        _error(err.field, err.message)
        return err.exit_code
    except ServiceError as err:
        _error(err.field, err.detail)
        return EXIT_RUNTIME if err.code == "database" else EXIT_USAGE
    except (PlanningError, CatalogError) as err:
        if err.issues:
            field, message = err.issues[0]
            rest = [f"{f}: {m}" for f, m in err.issues[1:]]
            _error(field, "; ".join([message, *rest]))
        else:
            _error(err.code, str(err))
        return EXIT_USAGE
    except SQLAlchemyError as err:
        _error("database", str(err).splitlines()[0] if str(err) else type(err).__name__)
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
