"""``fleetplan plan FILE`` and ``fleetplan plans list|show``.

``plan`` reads a request document (YAML or JSON, ``-`` for stdin), plans the fleet
and prints it as text (``planner.report.text``) or ``--json``. With ``--save`` it
plans against the database's catalog (shipped + custom entries), stores the plan
in ``FLEETPLAN_DATABASE_URL`` like ``POST /plans`` does, and prints its id.

Exit status: 0 a fleet was planned; 2 bad input (one line, ``fleetplan: error:
<field>: <message>``); 3 the request was valid but no fleet meets it (the
infeasible plan and its reasons are still printed, and saved with ``--save``);
1 the database could not be used.

:mod:`api.cli` imports this module for its registrars, so this module imports
:mod:`api.cli` only inside functions (by then it is fully loaded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from planner.errors import PlanningError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from api.cli import Subparsers
    from api.settings import Settings

EXIT_NO_FLEET = 3
PLAN_STATUSES = ("optimal", "feasible", "infeasible", "error")

EPILOG = """\
exit status: 0 a fleet was planned; 2 bad input; 3 no fleet meets the request
(the infeasible plan and its reasons are printed, and saved with --save);
1 the database could not be used."""


# --------------------------------------------------------------------------- registrars


def register_plan(sub: Subparsers) -> None:
    p = sub.add_parser(
        "plan",
        help="plan a fleet from a request file (YAML or JSON)",
        description="Plan a fleet for the request in FILE and print the plan.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", metavar="FILE", help="the request, YAML or JSON; '-' reads stdin")
    p.add_argument(
        "--save",
        action="store_true",
        help="store the plan in the database (FLEETPLAN_DATABASE_URL) and print its id; "
        "the plan then also sees the custom catalog entries stored there",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print JSON: the plan (with --save, the stored record, plan included)",
    )
    p.set_defaults(func=cmd_plan)


def register_plans(sub: Subparsers) -> None:
    p = sub.add_parser("plans", help="stored plans (FLEETPLAN_DATABASE_URL)")
    psub = p.add_subparsers(dest="plans_command", metavar="{list,show}")
    psub.required = True

    ls = psub.add_parser("list", help="stored plans, newest first")
    ls.add_argument("--model", help="only plans for this model id")
    ls.add_argument("--status", choices=PLAN_STATUSES, help="only plans with this status")
    ls.add_argument("--limit", type=_limit, default=20, help="at most this many (1-200, 20)")
    ls.add_argument("--json", action="store_true", help="print JSON (items and total)")
    ls.set_defaults(func=cmd_plans_list)

    show = psub.add_parser("show", help="print one stored plan")
    show.add_argument("id", help="the plan's id (from 'plan --save' or 'plans list')")
    show.add_argument("--json", action="store_true", help="print the stored record as JSON")
    show.set_defaults(func=cmd_plans_show)


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= 200:
        raise argparse.ArgumentTypeError(f"must be between 1 and 200, got {value}")
    return value


# --------------------------------------------------------------------------- helpers


def read_request(path: str) -> dict[str, Any]:
    """The request document in ``path`` (``-``: stdin), YAML or JSON, as a mapping."""
    from api.cli import CliError

    where = "stdin" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError("FILE", f"{path}: no such file") from None
    except IsADirectoryError:
        raise CliError("FILE", f"{path}: is a directory") from None
    except UnicodeDecodeError:
        raise CliError("FILE", f"{where}: not UTF-8 text") from None
    except OSError as err:
        raise CliError("FILE", f"{path}: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)  # YAML 1.1 reads JSON documents too
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CliError("FILE", f"{where}: not valid YAML or JSON: {first}") from None
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise CliError("FILE", f"{where}: expected a mapping (the request), got {kind}")
    return data


def _clean(message: str) -> str:
    return message.replace("Value error, ", "")


def parse_request_cli(data: dict[str, Any]):  # type: ignore[no-untyped-def]
    """``parse_request`` with pydantic's "Value error, " prefixes dropped."""
    from planner.problem_build import parse_request

    try:
        return parse_request(data)
    except PlanningError as err:
        issues = [(field, _clean(message)) for field, message in err.issues]
        raise type(err)(_clean(err.message), issues) from None


@contextmanager
def quiet_stdout() -> Iterator[None]:
    """Point file descriptor 1 at the null device meanwhile: the HiGHS library prints
    its banner on stdout from C (once per process), which would break ``--json``."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:  # no usable descriptors (embedded use): leave them alone
        yield
        return
    try:
        os.dup2(null, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


@contextmanager
def progress(message: str) -> Iterator[None]:
    """A one-line status on stderr while long work runs (terminals only; erased after)."""
    shown = sys.stderr.isatty()
    if shown:
        sys.stderr.write(f"{message}\u2026")
        sys.stderr.flush()
    try:
        yield
    finally:
        if shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _jsonable(data: Any) -> Any:
    return json.loads(json.dumps(data, default=str))


@contextmanager
def database_session(settings: Settings) -> Iterator[Session]:
    """A session on a migrated database, or a one-line error (exit 1) saying what to do."""
    from sqlalchemy.engine import make_url

    from api.cli import EXIT_RUNTIME, CliError
    from api.db import migrate
    from api.db.session import make_engine, make_sessionmaker

    url = make_url(settings.database_url)
    is_file = url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")
    if is_file and not Path(str(url.database)).exists():
        raise CliError(
            "database",
            f"{url.database} does not exist; run 'fleetplan db upgrade' first",
            EXIT_RUNTIME,
        )
    current, head = migrate.current_revision(settings.database_url), migrate.head_revision()
    if current != head:
        raise CliError(
            "database",
            f"at revision {current or '(empty)'}, not {head}; run 'fleetplan db upgrade'",
            EXIT_RUNTIME,
        )
    engine = make_engine(settings.database_url)
    try:
        with make_sessionmaker(engine)() as session:
            yield session
    finally:
        engine.dispose()


def _title(name: str | None, plan_id: str | None = None) -> str:
    parts = ["Plan"]
    if plan_id:
        parts.append(plan_id)
    if name:
        parts.append(json.dumps(name, ensure_ascii=False))
    return " ".join(parts)


# --------------------------------------------------------------------------- plan


def cmd_plan(args: argparse.Namespace) -> int:
    from api.cli import EXIT_OK, load_settings, print_json
    from api.custom_catalog import merged_catalog
    from api.db import repository as repo
    from api.plan_records import build_plan_record, plan_public, solver_caps
    from catalog.loader import load_catalog
    from planner.report.text import render_plan_text
    from planner.service import make_plan

    settings = load_settings()
    data = read_request(args.file)
    request = parse_request_cli(data)
    caps = solver_caps(settings)
    message = (
        f"planning {request.model}: {len(request.traffic.classes)} class(es), "
        f"{request.traffic.rate_rps:g} req/s"
    )

    if not args.save:
        with progress(message), quiet_stdout():
            plan = make_plan(request, load_catalog(), caps)
        if args.json:
            print_json(plan.to_json_dict())
        else:
            print(render_plan_text(plan.to_json_dict(), title=_title(request.name)), end="")
    else:
        with database_session(settings) as session:
            catalog = merged_catalog(session, load_catalog())
            session.rollback()  # hold no transaction while solving
            with progress(message), quiet_stdout():
                plan = make_plan(request, catalog, caps)
            record = build_plan_record(_jsonable(data), request, plan, caps)
            repo.add_plan(session, record)
            session.commit()
            public = plan_public(record)
        if args.json:
            print_json(public.model_dump(mode="json"))
        else:
            title = _title(request.name, record.id)
            print(render_plan_text(plan.to_json_dict(), title=title), end="")
            print(f"\nsaved: plan {record.id}")
    return EXIT_OK if plan.status.has_solution else EXIT_NO_FLEET


# --------------------------------------------------------------------------- plans


def cmd_plans_list(args: argparse.Namespace) -> int:
    from api.cli import EXIT_OK, load_settings, print_json
    from api.db import repository as repo
    from api.db.models import PlanStatus
    from api.plan_records import plan_summary
    from planner.report.text import render_table, usd

    settings = load_settings()
    status = PlanStatus(args.status) if args.status else None
    with database_session(settings) as session:
        records = repo.list_plans(session, model_id=args.model, status=status, limit=args.limit)
        total = repo.count_plans(session, model_id=args.model, status=status)
        items = [plan_summary(r) for r in records]
    if args.json:
        print_json({"items": [i.model_dump(mode="json") for i in items], "total": total})
        return EXIT_OK
    headers = ["id", "created (UTC)", "status", "model", "name", "$/h", "GPUs"]
    rows = [
        [
            i.id,
            i.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            i.status.value,
            i.model,
            i.name or "",
            usd(i.cost_usd_per_hour),
            str(i.gpus_total) if i.gpus_total is not None else "-",
        ]
        for i in items
    ]
    print(render_table(headers, rows))
    print(f"{len(items)} of {total} plan(s)")
    return EXIT_OK


def cmd_plans_show(args: argparse.Namespace) -> int:
    from api.cli import EXIT_OK, CliError, load_settings, print_json
    from api.db import repository as repo
    from api.plan_records import plan_public
    from planner.report.text import render_plan_text

    settings = load_settings()
    with database_session(settings) as session:
        record = repo.get_plan(session, args.id) if len(args.id) <= 36 else None
        if record is None:
            raise CliError("id", f"no plan with id {args.id[:80]!r}")
        public = plan_public(record)
    if args.json:
        print_json(public.model_dump(mode="json"))
        return EXIT_OK
    created = public.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    title = f"{_title(public.name, public.id)}, created {created}"
    print(render_plan_text(public.plan or {"status": public.status.value}, title=title), end="")
    return EXIT_OK
