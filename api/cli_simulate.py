"""``fleetplan simulate PLAN_ID|FILE``: run a planned fleet under load.

FILE is a request document (YAML or JSON, ``-`` for stdin): it is planned (no
verification, the simulation is the point) and its fleet simulated. Anything
else is the id of a stored plan (``fleetplan plans list``): its fleet is rebuilt
from the stored request against the database's catalog (shipped + custom
entries, and the request's calibration) and simulated.

Exit status: 0 every class meets its SLO percentile in simulation; 3 a class
misses (or the plan has no fleet); 2 bad input; 1 the database could not be used.

:mod:`api.cli` imports this module for its registrar, so this module imports
:mod:`api.cli` only inside functions.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from planner.simulate.runner import DEFAULT_REQUESTS, MAX_REQUESTS
from solver.problem import has_solution

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from api.cli import Subparsers
    from api.db.models import PlanRecord
    from catalog.schema import Catalog

EXIT_MISSES = 3

EPILOG = """\
exit status: 0 every class meets its SLO percentile in simulation; 3 a class misses
(or the plan has no fleet); 2 bad input; 1 the database could not be used."""


def register_simulate(sub: Subparsers) -> None:
    p = sub.add_parser(
        "simulate",
        help="simulate a planned fleet under load (a stored plan, or a request file)",
        description="Simulate the fleet of a stored plan (PLAN_ID) or of the plan for the "
        "request in FILE: Poisson (or bursty) arrivals, log-normal lengths, the planned "
        "pools' schedulers; prints per class TTFT/TPOT percentiles, SLO attainment and "
        "goodput, per pool utilization and queues.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="PLAN_ID|FILE", help="a stored plan's id, or a request file")
    p.add_argument(
        "--requests",
        type=_requests,
        default=DEFAULT_REQUESTS,
        help=f"requests to simulate, all classes together (default {DEFAULT_REQUESTS:,})",
    )
    p.add_argument("--seed", type=_seed, default=0, help="random seed (default 0)")
    p.add_argument(
        "--burst-cv",
        type=_burst,
        default=1.0,
        help="coefficient of variation of inter-arrival times: 1 Poisson (default), >1 bursty",
    )
    p.add_argument("--json", action="store_true", help="print the simulation as JSON")
    p.set_defaults(func=cmd_simulate)


def _requests(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= MAX_REQUESTS:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_REQUESTS:,}, got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _burst(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.05 <= value <= 20:
        raise argparse.ArgumentTypeError(f"must be in [0.05, 20], got {value:g}")
    return value


def catalog_for_record(session: Session, record: PlanRecord, base: Catalog) -> Catalog:
    """The catalog a stored plan was made with, as far as the database knows it: the
    shipped catalog with the custom entries, calibrated as its request asked."""
    from api.custom_catalog import merged_catalog
    from planner.service import calibrated_catalog

    catalog = merged_catalog(session, base)
    request = record.normalized_request or record.request or {}
    if request.get("calibration"):
        catalog = calibrated_catalog(catalog, request["calibration"])
    return catalog


def stored_request(record: PlanRecord) -> dict[str, Any]:
    return record.normalized_request or record.request


def cmd_simulate(args: argparse.Namespace) -> int:
    from api.cli import EXIT_OK, CliError, load_settings, print_json
    from api.cli_plans import (
        database_session,
        parse_request_cli,
        progress,
        quiet_stdout,
        read_request,
    )
    from api.db import repository as repo
    from api.plan_records import solver_caps
    from catalog.loader import load_catalog
    from planner.simulate import simulate_plan
    from planner.simulate.report import render_simulation_text

    settings = load_settings()
    target = args.target
    if target == "-" or os.path.isfile(target) or target.endswith((".yaml", ".yml", ".json")):
        data = read_request(target)
        request = parse_request_cli(data)
        catalog = load_catalog()
        with progress(f"planning {request.model}"), quiet_stdout():
            from planner.service import make_plan

            plan = make_plan(
                request, catalog, solver_caps(settings), alternatives=False, verify=False
            )
        plan_json = plan.to_json_dict()
        title = f"Simulation of the plan for {target}"
    else:
        with database_session(settings) as session:
            record = repo.get_plan(session, target) if len(target) <= 36 else None
            if record is None:
                raise CliError("PLAN_ID", f"no plan with id {target[:80]!r} (and no such file)")
            catalog = catalog_for_record(session, record, load_catalog())
            plan_json, request = record.plan or {}, stored_request(record)
        title = f"Simulation of plan {target}"
    if not has_solution(plan_json.get("status")):
        raise CliError(
            "PLAN_ID|FILE",
            f"the plan is {plan_json.get('status')}: there is no fleet to simulate",
            EXIT_MISSES,
        )
    if plan_json.get("scenarios"):
        raise CliError(
            "PLAN_ID|FILE",
            "a robust plan has one fleet per scenario: its verification section simulates them",
        )
    with progress(f"simulating {args.requests:,} requests"):
        sim = simulate_plan(plan_json, request, catalog, args.requests, args.seed, args.burst_cv)
    if args.json:
        print_json(sim.to_json_dict())
    else:
        print(render_simulation_text(sim, title=title), end="")
    return EXIT_OK if sim.meets_slo else EXIT_MISSES
