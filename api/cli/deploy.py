"""``fleetplan deploy PLAN --target dynamo|llm-d|compose``: a plan as a deployment.

PLAN is a stored plan's id (``FLEETPLAN_DATABASE_URL``) or a plan file: the JSON of
``fleetplan plan FILE --json`` (or of ``plans show ID --json``). The artifact (YAML)
goes to stdout or ``--output FILE``. Exit status: 0 written; 2 bad input (a target
the plan cannot take, such as compose for a fleet larger than one host); 1 the
database could not be used.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from api.cli.common import (
    EXIT_OK,
    CliError,
    Subparsers,
    database_session,
    load_settings,
    read_request,
)
from api.services import deployments
from api.services.catalog import shipped_catalog

#: A PLAN with one of these suffixes is a file even when missing (said so, not
#: looked up as an id).
PLAN_FILE_SUFFIXES = {".json", ".yaml", ".yml"}


def register_deploy(sub: Subparsers) -> None:
    p = sub.add_parser(
        "deploy",
        help="write a plan as a deployment: Dynamo, llm-d or docker compose",
        description="Write the deployment of PLAN for --target: dynamo (a "
        "DynamoGraphDeployment), llm-d (a helmfile: an InferencePool per class and an "
        "llm-d-modelservice release per pool) or compose (docker compose, one host).",
    )
    p.add_argument(
        "plan",
        metavar="PLAN",
        help="a stored plan's id, or a plan file (the JSON of 'fleetplan plan FILE --json')",
    )
    p.add_argument("--target", "-t", required=True, choices=deployments.TARGETS)
    p.add_argument("--engine", choices=deployments.ENGINES, default="vllm", help="default vllm")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    p.set_defaults(func=cmd_deploy)


def cmd_deploy(args: argparse.Namespace) -> int:
    path = Path(args.plan)
    if args.plan == "-" or path.is_file() or path.suffix in PLAN_FILE_SUFFIXES:
        document = read_request(args.plan)
        artifact = deployments.plan_document_deployment(
            document, args.target, shipped_catalog(), args.engine
        )
    else:
        settings = load_settings()
        with database_session(settings) as session:
            artifact = deployments.stored_deployment(
                session, args.plan, args.target, shipped_catalog(), args.engine
            )
    if args.output and args.output != "-":
        try:
            Path(args.output).write_text(artifact.text, encoding="utf-8")
        except OSError as err:
            raise CliError("--output", f"{args.output}: {err.strerror or err}") from None
    else:
        print(artifact.text, end="")
    return EXIT_OK
