"""``fleetplan plan FILE`` and ``fleetplan plans list|show``.

``plan`` reads a request document (YAML or JSON, ``-`` for stdin), plans the fleet
and prints it as text (``planner.report.text``) or ``--json``. With ``--save`` it
plans against the database's catalog (shipped + custom entries), stores the plan
in ``FLEETPLAN_DATABASE_URL`` like ``POST /plans`` does, and prints its id.

Exit status: 0 a fleet was planned; 2 bad input (one line, ``fleetplan: error:
<field>: <message>``); 3 the request was valid but no fleet meets it (the
infeasible plan and its reasons are still printed, and saved with ``--save``);
1 the database could not be used.

Planning and storing go through :mod:`api.services.plans`, as ``POST /plans`` does.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from api.cli.common import (
    EXIT_OK,
    Subparsers,
    add_paging,
    add_show,
    command_group,
    database_session,
    jsonable,
    load_settings,
    parse_request_cli,
    print_json,
    print_page,
    progress,
    quiet_stdout,
    read_request,
    record_cells,
    show_stored,
)
from api.schemas import PlanPublic
from api.services import plans
from api.services.catalog import shipped_catalog
from api.services.reports import render_plan_text, usd

EXIT_NO_FLEET = 3
PLAN_STATUSES = tuple(s.value for s in plans.PlanStatus)

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
    psub = command_group(sub, "plans", "stored plans (FLEETPLAN_DATABASE_URL)")

    ls = psub.add_parser("list", help="stored plans, newest first")
    ls.add_argument("--model", help="only plans for this model id")
    ls.add_argument("--status", choices=PLAN_STATUSES, help="only plans with this status")
    add_paging(ls)
    ls.set_defaults(func=cmd_plans_list)
    add_show(
        psub,
        "print one stored plan",
        "the plan's id (from 'plan --save' or 'plans list')",
        "print the stored record as JSON",
        cmd_plans_show,
    )


# --------------------------------------------------------------------------- helpers


def _title(name: str | None, plan_id: str | None = None) -> str:
    parts = ["Plan"]
    if plan_id:
        parts.append(plan_id)
    if name:
        parts.append(json.dumps(name, ensure_ascii=False))
    return " ".join(parts)


# --------------------------------------------------------------------------- plan


def cmd_plan(args: argparse.Namespace) -> int:
    settings = load_settings()
    data = read_request(args.file)
    request = parse_request_cli(data)
    message = (
        f"planning {request.model}: {len(request.traffic.classes)} class(es), "
        f"{request.traffic.rate_rps:g} req/s"
    )

    if not args.save:
        with progress(message), quiet_stdout():
            plan = plans.plan_request(request, shipped_catalog(), settings)
        if args.json:
            print_json(plan.to_json_dict())
        else:
            print(render_plan_text(plan.to_json_dict(), title=_title(request.name)), end="")
    else:
        with database_session(settings) as session:
            with progress(message), quiet_stdout():
                created = plans.create_plan(
                    session, jsonable(data), request, shipped_catalog(), settings
                )
            plan, public = created.plan, created.public
        if args.json:
            print_json(public.model_dump(mode="json"))
        else:
            title = _title(request.name, public.id)
            print(render_plan_text(plan.to_json_dict(), title=title), end="")
            print(f"\nsaved: plan {public.id}")
    return EXIT_OK if plan.status.has_solution else EXIT_NO_FLEET


# --------------------------------------------------------------------------- plans


def _list_name(i: Any) -> str:
    """A listed plan's name; a comparison's variant as ``<name> [variant <variant>]``,
    so the base and its variants (which share the request's name) tell apart."""
    name = i.name or ""
    variant = getattr(i, "variant_name", None)
    return f"{name} [variant {variant}]".strip() if variant else name


def cmd_plans_list(args: argparse.Namespace) -> int:
    settings = load_settings()
    status = plans.PlanStatus(args.status) if args.status else None
    with database_session(settings) as session:
        page = plans.list_plans(session, model=args.model, status=status, limit=args.limit)
    headers = ["id", "created (UTC)", "status", "model", "name", "$/h", "GPUs"]
    return print_page(
        args.json,
        page.items,
        page.total,
        headers,
        lambda i: [
            *record_cells(i),
            i.model,
            _list_name(i),
            usd(i.cost_usd_per_hour),
            str(i.gpus_total) if i.gpus_total is not None else "-",
        ],
        "plan",
    )


def _plan_text(public: PlanPublic) -> str:
    created = public.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    title = f"{_title(public.name, public.id)}, created {created}"
    return render_plan_text(public.plan or {"status": public.status.value}, title=title)


def cmd_plans_show(args: argparse.Namespace) -> int:
    return show_stored(args.json, lambda session: plans.get_plan(session, args.id), _plan_text)
