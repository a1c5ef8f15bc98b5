"""Deployment artifacts for a plan (issue 13 item 5), as pure functions of the plan
document and the catalog:

- ``dynamo``: an NVIDIA Dynamo ``DynamoGraphDeployment`` (:mod:`planner.deploy.dynamo`);
- ``llm-d``: a helmfile of llm-d releases, an InferencePool per class and an
  ``llm-d-modelservice`` per pool (:mod:`planner.deploy.llmd`);
- ``compose``: a docker compose file for a plan that fits one host
  (:mod:`planner.deploy.compose`).

Every artifact names every pool (its id in an annotation or label), gives each class
its own model name (``<model>-<class>``, per-class routing), turns on prefix-aware
routing where the plan counts on prefix hits, spans hosts where a replica does, and
carries the plan's engine arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from catalog.schema import Catalog
from planner.deploy import compose, dynamo, llmd
from planner.deploy.fleet import (
    DEPLOYMENT_NAME_LIMIT,
    FleetSpec,
    PoolSpec,
    dns_label,
    fleet_spec,
    to_yaml,
)
from planner.errors import PlanningError

__all__ = [
    "ENGINES",
    "TARGETS",
    "Deployment",
    "FleetSpec",
    "PoolSpec",
    "fleet_spec",
    "render_deployment",
]

TARGETS = ("dynamo", "llm-d", "compose")
ENGINES = ("vllm", "sglang")
FILENAMES = {"dynamo": "dynamo.yaml", "llm-d": "helmfile.yaml", "compose": "docker-compose.yml"}


@dataclass(frozen=True)
class Deployment:
    target: str
    engine: str
    filename: str  # a name to save it under
    text: str  # YAML, notes as comments on top


def render_deployment(
    plan: Mapping[str, Any],
    target: str,
    catalog: Catalog,
    *,
    engine: str = "vllm",
    name: str | None = None,
) -> Deployment:
    """The ``target`` artifact for the plan document ``plan`` (its fleet, the catalog's
    GPUs), running ``engine``; ``name`` names the deployment (default: from the
    model). :class:`PlanningError` naming ``target``, ``engine`` or the plan field
    when it cannot be made."""
    if target not in TARGETS:
        raise PlanningError.for_field("target", f"one of {', '.join(TARGETS)}, got {target!r}")
    if engine not in ENGINES:
        raise PlanningError.for_field("engine", f"one of {', '.join(ENGINES)}, got {engine!r}")
    fleet = fleet_spec(plan, catalog)
    label = dns_label(name or f"fleetplan-{fleet.model}", DEPLOYMENT_NAME_LIMIT)
    if target == "dynamo":
        doc = dynamo.dynamo_manifest(fleet, engine, label)
        text = to_yaml([doc], dynamo.notes(fleet, engine))
    elif target == "llm-d":
        if engine != "vllm":
            raise PlanningError.for_field(
                "engine",
                "the llm-d target deploys vLLM (the modelservice chart's P/D routing sidecar "
                "and NIXL settings here are vLLM's); use engine=vllm",
            )
        text = to_yaml([llmd.llmd_helmfile(fleet)], llmd.notes(fleet))
    else:
        doc = compose.compose_file(fleet, engine, label)
        text = to_yaml([doc], compose.notes(fleet, engine))
    return Deployment(target, engine, FILENAMES[target], text)
