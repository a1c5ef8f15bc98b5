"""NVIDIA Dynamo: one ``DynamoGraphDeployment`` (``nvidia.com/v1alpha1``) for the plan.

Field names follow the operator's CRD (``deploy/cloud/operator/config/crd/bases/
nvidia.com_dynamographdeployments.yaml`` in ai-dynamo/dynamo) and its examples
(``examples/backends/vllm/deploy/disagg.yaml``, ``disagg-multinode.yaml``):

- ``Frontend`` (``componentType: frontend``): the OpenAI endpoint and router, with
  ``--router-mode kv`` (KV-aware routing) when any pool counts on prefix hits;
- one worker service per pool (``componentType: worker``; ``subComponentType:
  prefill|decode`` for disaggregated pools), ``replicas``, ``resources.limits.gpu``
  = the replica's GPUs on one node (``gpuType`` for non-NVIDIA devices) and
  ``multinode.nodeCount`` when a replica spans hosts (the operator starts every node);
- the worker's command ``python3 -m dynamo.vllm`` (or ``dynamo.sglang``) with the
  plan's engine flags and ``--served-model-name <model>-<class>``: a class is
  reached by its model name (per-class routing through the one frontend).
"""

from __future__ import annotations

from typing import Any

from planner.deploy.fleet import FleetSpec, PoolSpec, sglang_flags, vllm_flags
from planner.errors import PlanningError

API_VERSION = "nvidia.com/v1alpha1"
DYNAMO_VERSION = "0.9.0"
IMAGES = {
    "vllm": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{DYNAMO_VERSION}",
    "sglang": f"nvcr.io/nvidia/ai-dynamo/sglang-runtime:{DYNAMO_VERSION}",
}
HF_SECRET = "hf-token-secret"
HTTP_PORT = 8000
#: The CRD's ``spec.services.maxProperties``: the frontend and at most 24 pools.
MAX_SERVICES = 25


def frontend(fleet: FleetSpec, engine: str) -> dict[str, Any]:
    args = ["--http-port", str(HTTP_PORT)]
    if any(p.relies_on_prefix for p in fleet.pools):
        args += ["--router-mode", "kv"]
    return {
        "componentType": "frontend",
        "replicas": 1,
        "extraPodSpec": {
            "mainContainer": {
                "image": IMAGES[engine],
                "command": ["python3", "-m", "dynamo.frontend"],
                "args": args,
            }
        },
    }


def worker_args(fleet: FleetSpec, pool: PoolSpec, engine: str) -> tuple[list[str], list[str]]:
    """(command, args) of a pool's worker: the plan's flags for the engine, the class's
    model name, and the disaggregation role."""
    name = fleet.served_model_name(pool.class_name)
    if engine == "vllm":
        args = ["--model", pool.checkpoint, "--served-model-name", name, *vllm_flags(pool)]
        if pool.role == "prefill":
            args.append("--is-prefill-worker")
        elif pool.role == "decode":
            args.append("--is-decode-worker")
        return ["python3", "-m", "dynamo.vllm"], args
    args = [*sglang_flags(pool), "--served-model-name", name]
    if pool.role != "aggregated":  # --disaggregation-mode comes from the plan
        args += ["--disaggregation-transfer-backend", "nixl"]
    return ["python3", "-m", "dynamo.sglang"], args


def worker(fleet: FleetSpec, pool: PoolSpec, engine: str) -> dict[str, Any]:
    command, args = worker_args(fleet, pool, engine)
    limits: dict[str, str] = {"gpu": str(pool.gpus_per_node)}
    if pool.vendor != "nvidia":
        limits["gpuType"] = pool.resource
    service: dict[str, Any] = {
        "componentType": "worker",
        "annotations": {
            "fleetplan.io/pool": pool.id,
            "fleetplan.io/class": pool.class_name,
            "fleetplan.io/gpu": pool.gpu,
        },
        "envFromSecret": HF_SECRET,
        "replicas": pool.replicas,
        "resources": {"limits": limits},
    }
    if pool.role != "aggregated":
        service["subComponentType"] = pool.role
    if pool.nodes > 1:
        service["multinode"] = {"nodeCount": pool.nodes}
    service["extraPodSpec"] = {
        "mainContainer": {"image": IMAGES[engine], "command": command, "args": args}
    }
    return service


def notes(fleet: FleetSpec, engine: str) -> list[str]:
    out = [
        f"DynamoGraphDeployment for {fleet.model}: {len(fleet.pools)} pool(s), "
        f"{fleet.gpus} GPUs; engine {engine}, Dynamo {DYNAMO_VERSION}.",
        f"Needs the Dynamo platform (operator) and a Secret {HF_SECRET!r} with HF_TOKEN.",
        "Clients pick a class by model name: "
        + ", ".join(f"{c} -> {fleet.served_model_name(c)}" for c in fleet.classes)
        + ".",
    ]
    others = sorted({p.gpu for p in fleet.pools if p.vendor != "nvidia"})
    if others:
        out.append(
            f"{', '.join(others)}: Dynamo's runtime images are built for CUDA; these pools "
            "need a runtime image built for their GPUs (resources.limits.gpuType is set)."
        )
    return out


def dynamo_manifest(fleet: FleetSpec, engine: str, name: str) -> dict[str, Any]:
    """The DynamoGraphDeployment: the frontend and one worker service per pool."""
    if len(fleet.pools) + 1 > MAX_SERVICES:
        raise PlanningError.for_field(
            "target",
            f"a DynamoGraphDeployment holds at most {MAX_SERVICES} services (the frontend and "
            f"{MAX_SERVICES - 1} pools); the plan has {len(fleet.pools)} pools",
        )
    services: dict[str, Any] = {"Frontend": frontend(fleet, engine)}
    for pool in fleet.pools:
        services[pool.name] = worker(fleet, pool, engine)
    return {
        "apiVersion": API_VERSION,
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": name},
        "spec": {"backendFramework": engine, "services": services},
    }
