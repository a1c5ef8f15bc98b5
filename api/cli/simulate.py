"""``fleetplan simulate PLAN_ID|FILE``: run a planned fleet under load.

FILE is a request document (YAML or JSON, ``-`` for stdin): it is planned (no
verification, the simulation is the point) and its fleet simulated. Anything
else is the id of a stored plan (``fleetplan plans list``): its fleet is rebuilt
from the stored request against the database's catalog (shipped + custom
entries, and the request's calibration) and simulated.

Exit status: 0 every class meets its SLO percentile in simulation; 3 a class
misses (or the plan has no fleet); 2 bad input; 1 the database could not be used.

Shared helpers (errors, JSON output, number options) come from :mod:`api.cli.common`.
"""

from __future__ import annotations

import argparse
import os

from api.cli.common import (
    EXIT_OK,
    CliError,
    Subparsers,
    database_session,
    float_range,
    int_range,
    load_settings,
    parse_request_cli,
    print_json,
    progress,
    quiet_stdout,
    read_request,
)
from api.services import plans
from api.services.catalog import shipped_catalog
from api.services.errors import NotFound
from api.services.plans import DEFAULT_REQUESTS, MAX_REQUESTS
from api.services.reports import render_simulation_text
from solver.problem import has_solution

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
        type=int_range(1, MAX_REQUESTS, thousands=True),
        default=DEFAULT_REQUESTS,
        help=f"requests to simulate, all classes together (default {DEFAULT_REQUESTS:,})",
    )
    p.add_argument("--seed", type=int_range(0), default=0, help="random seed (default 0)")
    p.add_argument(
        "--burst-cv",
        type=float_range(0.05, 20),
        default=1.0,
        help="coefficient of variation of inter-arrival times: 1 Poisson (default), >1 bursty",
    )
    p.add_argument("--json", action="store_true", help="print the simulation as JSON")
    p.set_defaults(func=cmd_simulate)


def cmd_simulate(args: argparse.Namespace) -> int:
    settings = load_settings()
    target = args.target
    if target == "-" or os.path.isfile(target) or target.endswith((".yaml", ".yml", ".json")):
        data = read_request(target)
        request = parse_request_cli(data)
        catalog = shipped_catalog()
        with progress(f"planning {request.model}"), quiet_stdout():
            plan = plans.plan_request(request, catalog, settings, alternatives=False, verify=False)
        fleet = plans.StoredFleet(plan.status.value, plan.to_json_dict(), request, catalog)
        title = f"Simulation of the plan for {target}"
    else:
        with database_session(settings) as session:
            try:
                fleet = plans.stored_fleet(session, target, shipped_catalog(), settings)
            except NotFound:
                raise CliError(
                    "PLAN_ID", f"no plan with id {target[:80]!r} (and no such file)"
                ) from None
        title = f"Simulation of plan {target}"
    if not has_solution(fleet.plan.get("status")):
        raise CliError(
            "PLAN_ID|FILE",
            f"the plan is {fleet.plan.get('status')}: there is no fleet to simulate",
            EXIT_MISSES,
        )
    if fleet.plan.get("scenarios"):
        raise CliError(
            "PLAN_ID|FILE",
            "a robust plan has one fleet per scenario: its verification section simulates them",
        )
    with progress(f"simulating {args.requests:,} requests"):
        sim = plans.simulate(fleet, requests=args.requests, seed=args.seed, burst_cv=args.burst_cv)
    if args.json:
        print_json(sim.to_json_dict())
    else:
        print(render_simulation_text(sim, title=title), end="")
    return EXIT_OK if sim.meets_slo else EXIT_MISSES
