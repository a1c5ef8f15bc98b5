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
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import SQLAlchemyError

from api import __version__
from api.cli_analyze import register_analyze
from api.cli_calibrate import register_calibrate, register_calibrations
from api.cli_compare import register_compare, register_comparisons, register_report
from api.cli_plans import register_plan, register_plans
from api.cli_simulate import register_simulate
from api.settings import Settings
from catalog.loader import KIND_SCHEMAS, CatalogError, load_catalog
from catalog.schema import Catalog, Gpu, Link, Model, Workload
from planner.errors import PlanningError, UnknownEntryError
from planner.report.text import render_table

PROG = "fleetplan"
EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2

Subparsers = argparse._SubParsersAction  # the object add_subparsers() returns
Handler = Callable[[argparse.Namespace], int]


class CliError(Exception):
    """A user-facing error: ``field`` names what was wrong (an option, an id...)."""

    def __init__(self, field: str, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.exit_code = exit_code


# --------------------------------------------------------------------------- helpers


def load_settings() -> Settings:
    """Settings from FLEETPLAN_* variables; a bad value is a one-line CLI error."""
    try:
        return Settings()
    except ValidationError as err:
        first = err.errors()[0]
        field = "FLEETPLAN_" + ".".join(str(p) for p in first["loc"]).upper()
        raise CliError(field, first["msg"]) from None


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


# --------------------------------------------------------------------------- serve


def register_serve(sub: Subparsers) -> None:
    p = sub.add_parser("serve", help="run the HTTP API (uvicorn)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--log-level", default="info", help="uvicorn log level (default info)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from api.main import create_app

    app = create_app(load_settings())  # a bad catalog or setting fails here, in one line
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
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
    from api.db import migrate

    url = _db_url()
    with _alembic_progress():
        migrate.upgrade(url, args.revision)
    return EXIT_OK


def cmd_db_downgrade(args: argparse.Namespace) -> int:
    from api.db import migrate

    url = _db_url()
    with _alembic_progress():
        migrate.downgrade(url, args.revision)
    return EXIT_OK


def cmd_db_current(args: argparse.Namespace) -> int:
    from api.db import migrate

    current = migrate.current_revision(_db_url())
    head = migrate.head_revision()
    state = "up to date" if current == head else f"behind head {head}"
    print(f"{current or '(empty)'} ({state})")
    return EXIT_OK


# --------------------------------------------------------------------------- catalog

KINDS = tuple(KIND_SCHEMAS)
SINGULAR = {"gpus": "GPU", "models": "model", "workloads": "workload", "links": "link"}


def register_catalog(sub: Subparsers) -> None:
    p = sub.add_parser("catalog", help="browse the shipped catalog")
    csub = p.add_subparsers(dest="catalog_command", metavar="{list,show}")
    csub.required = True

    ls = csub.add_parser("list", help="list entries of one kind as a table")
    ls.add_argument("kind", choices=KINDS)
    ls.add_argument("--json", action="store_true", help="print the entries as JSON")
    ls.set_defaults(func=cmd_catalog_list)

    show = csub.add_parser("show", help="print one entry (YAML, or --json)")
    show.add_argument("kind", choices=KINDS)
    show.add_argument("id")
    show.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    show.set_defaults(func=cmd_catalog_show)


def _entries(catalog: Catalog, kind: str) -> list[BaseModel]:
    return [entry for _, entry in sorted(getattr(catalog, kind).items())]


def gpu_rows(gpus: Sequence[Gpu]) -> tuple[list[str], list[list[str]]]:
    headers = ["id", "name", "bf16 TFLOP/s", "fp8 TFLOP/s", "mem GB", "BW TB/s", "domain", "$/h"]
    rows = [
        [
            g.id,
            g.name,
            _num(g.bf16_dense_tflops),
            _num(g.fp8_dense_tflops),
            _num(g.memory_gb),
            _num(g.mem_bw_tbps, 2),
            str(g.scale_up_domain_size),
            ("~" if g.price.estimate else "") + f"{g.price.usd_per_hour:.2f}",
        ]
        for g in gpus
    ]
    return headers, rows


def model_rows(models: Sequence[Model]) -> tuple[list[str], list[list[str]]]:
    headers = ["id", "layers", "params (B)", "active (B)", "KV bytes/token (bf16)"]
    rows = [
        [
            m.id,
            str(m.num_layers),
            _num(m.reference.total_params_b, 1),
            _num(m.reference.active_params_b, 1),
            _num(m.reference.kv_bytes_per_token_bf16),
        ]
        for m in models
    ]
    return headers, rows


def workload_rows(workloads: Sequence[Workload]) -> tuple[list[str], list[list[str]]]:
    headers = ["id", "prompt mean/p90", "output mean/p90", "prefix hit", "SLO TTFT/TPOT ms"]
    rows = [
        [
            w.id,
            f"{w.prompt_tokens.mean_tokens:.0f}/{w.prompt_tokens.p90_tokens:.0f}",
            f"{w.output_tokens.mean_tokens:.0f}/{w.output_tokens.p90_tokens:.0f}",
            f"{w.prefix_hit_rate:.0%}",
            f"{w.slo.ttft_ms:g}/{w.slo.tpot_ms:g} @p{w.slo.percentile:g}",
        ]
        for w in workloads
    ]
    return headers, rows


def link_rows(links: Sequence[Link]) -> tuple[list[str], list[list[str]]]:
    headers = ["id", "kind", "GB/s", "latency us", "name"]
    rows = [
        [lk.id, str(lk.kind), _num(lk.bandwidth_gb_per_s, 1), f"{lk.latency_us:g}", lk.name]
        for lk in links
    ]
    return headers, rows


ROWS: dict[str, Callable[[Any], tuple[list[str], list[list[str]]]]] = {
    "gpus": gpu_rows,
    "models": model_rows,
    "workloads": workload_rows,
    "links": link_rows,
}


def render_catalog_table(kind: str, entries: Sequence[BaseModel]) -> str:
    headers, rows = ROWS[kind](entries)
    return render_table(headers, rows)


def cmd_catalog_list(args: argparse.Namespace) -> int:
    entries = _entries(load_catalog(), args.kind)
    if args.json:
        print_json([e.model_dump(mode="json") for e in entries])
    else:
        print(render_catalog_table(args.kind, entries))
    return EXIT_OK


def cmd_catalog_show(args: argparse.Namespace) -> int:
    by_id: dict[str, BaseModel] = getattr(load_catalog(), args.kind)
    entry = by_id.get(args.id)
    if entry is None:
        known = ", ".join(sorted(by_id)) or "none"
        raise UnknownEntryError.for_field(
            "id", f"unknown {SINGULAR[args.kind]} {args.id!r}; known: {known}"
        )
    data = entry.model_dump(mode="json")
    if args.json:
        print_json(data)
    else:
        print(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), end="")
    return EXIT_OK


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
