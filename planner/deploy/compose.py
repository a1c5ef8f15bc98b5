"""docker compose for a plan that fits one host: one service per replica (the plan's
engine arguments, its GPUs reserved by device id) and, per class, a router in front
on its own host port: the vLLM router (``vllm-router``, ``--vllm-pd-disaggregation``
for a disaggregated class) or the SGLang router (``--pd-disaggregation``), with
cache-aware routing where the class counts on prefix hits, round robin otherwise.

A plan larger than one host (more GPUs than ``server.gpus_per_node``, or several
GPU types) is refused, naming the Kubernetes targets instead.
"""

from __future__ import annotations

from typing import Any

from planner.deploy.fleet import FleetSpec, PoolSpec, dns_label, sglang_flags, vllm_flags
from planner.errors import PlanningError

IMAGES = {
    ("vllm", "nvidia"): "vllm/vllm-openai:latest",
    ("vllm", "amd"): "vllm/vllm-openai-rocm:latest",
    ("sglang", "nvidia"): "lmsysorg/sglang:latest",
    ("sglang", "amd"): "lmsysorg/sglang:latest-rocm",
}
ROUTER_IMAGE = "python:3.12-slim"
ENGINE_PORT = {"vllm": 8000, "sglang": 30000}
SGLANG_BOOTSTRAP_PORT = 8998  # SGLang prefill servers' default disaggregation bootstrap port
FIRST_HOST_PORT = 8000
HF_CACHE = "${HF_HOME:-~/.cache/huggingface}:/root/.cache/huggingface"


def check_one_host(fleet: FleetSpec) -> None:
    """Refuse a fleet that one host cannot hold, saying why and what to use instead."""
    types = sorted({p.gpu for p in fleet.pools})
    if len(types) > 1:
        raise PlanningError.for_field(
            "target",
            f"compose deploys one host and a host holds one GPU type; the plan uses "
            f"{len(types)} ({', '.join(types)}): deploy it with target=dynamo or target=llm-d "
            "(Kubernetes)",
        )
    host = fleet.pools[0].host_gpus
    if fleet.gpus > host:
        raise PlanningError.for_field(
            "target",
            f"compose deploys one host: the plan needs {fleet.gpus:,} {types[0]} GPUs and one "
            f"{types[0]} host holds {host}; deploy it with target=dynamo or target=llm-d "
            "(Kubernetes)",
        )
    vendors = {p.vendor for p in fleet.pools} - {"nvidia", "amd"}
    if vendors:
        raise PlanningError.for_field(
            "target",
            f"compose here knows NVIDIA and AMD GPUs, not {', '.join(sorted(vendors))}: "
            "use target=dynamo or target=llm-d",
        )


def replica_name(pool: PoolSpec, i: int) -> str:
    return f"{pool.name}-{i}"


def gpu_access(pool: PoolSpec, ids: list[int]) -> dict[str, Any]:
    """The replica's GPUs: reserved by id (NVIDIA), or the ROCm devices with the
    visible ones named (AMD)."""
    if pool.vendor == "amd":
        return {
            "devices": ["/dev/kfd", "/dev/dri"],
            "group_add": ["video"],
            "environment": {"HIP_VISIBLE_DEVICES": ",".join(map(str, ids))},
        }
    device = {"driver": "nvidia", "device_ids": [str(i) for i in ids], "capabilities": ["gpu"]}
    return {"deploy": {"resources": {"reservations": {"devices": [device]}}}}


def engine_service(
    fleet: FleetSpec, pool: PoolSpec, name: str, ids: list[int], engine: str
) -> dict[str, Any]:
    port = ENGINE_PORT[engine]
    model_name = fleet.served_model_name(pool.class_name)
    common = ["--host", "0.0.0.0", "--port", str(port), "--served-model-name", model_name]
    environment: dict[str, str] = {"HF_TOKEN": "${HF_TOKEN}"}
    if engine == "vllm":
        entrypoint = ["vllm", "serve"]
        command = [pool.checkpoint, *common, *vllm_flags(pool, keep_kv=True)]
        if pool.role != "aggregated":
            environment["VLLM_NIXL_SIDE_CHANNEL_HOST"] = name
    else:
        entrypoint = ["python3", "-m", "sglang.launch_server"]
        command = [*sglang_flags(pool), *common]
    access = gpu_access(pool, ids)
    environment.update(access.pop("environment", {}))
    return {
        "image": IMAGES[(engine, pool.vendor)],
        "entrypoint": entrypoint,
        "command": command,
        "ipc": "host",
        "environment": environment,
        "volumes": [HF_CACHE],
        "labels": {"fleetplan.io/pool": pool.id, "fleetplan.io/class": pool.class_name},
        **access,
    }


def router_command(
    fleet: FleetSpec, class_name: str, urls: dict[str, list[str]], engine: str, port: int
) -> str:
    policy = "cache_aware" if fleet.class_relies_on_prefix(class_name) else "round_robin"
    if engine == "vllm":
        install, run = "vllm-router", ["vllm-router"]
    else:
        install, run = "sglang-router", ["python", "-m", "sglang_router.launch_router"]
    run += ["--host", "0.0.0.0", "--port", str(port), "--policy", policy]
    if fleet.disaggregated(class_name):
        run.append("--vllm-pd-disaggregation" if engine == "vllm" else "--pd-disaggregation")
        for url in urls["prefill"]:
            run += ["--prefill", url]
            if engine == "sglang":
                run.append(str(SGLANG_BOOTSTRAP_PORT))
        for url in urls["decode"]:
            run += ["--decode", url]
    else:
        run += ["--worker-urls", *urls["aggregated"]]
    return f"pip install --no-cache-dir {install} && exec {' '.join(run)}"


def compose_file(fleet: FleetSpec, engine: str, name: str) -> dict[str, Any]:
    """The compose file: the engines (GPUs assigned in order) and one router per class."""
    check_one_host(fleet)
    services: dict[str, Any] = {}
    next_gpu = 0
    for k, class_name in enumerate(fleet.classes):
        urls: dict[str, list[str]] = {"aggregated": [], "prefill": [], "decode": []}
        names = []
        for pool in fleet.class_pools(class_name):
            for i in range(pool.replicas):
                service = replica_name(pool, i)
                ids = list(range(next_gpu, next_gpu + pool.gpus_per_replica))
                next_gpu += pool.gpus_per_replica
                services[service] = engine_service(fleet, pool, service, ids, engine)
                urls[pool.role].append(f"http://{service}:{ENGINE_PORT[engine]}")
                names.append(service)
        port = FIRST_HOST_PORT + k
        services[f"router-{dns_label(class_name, 40)}"] = {
            "image": ROUTER_IMAGE,
            "command": ["sh", "-c", router_command(fleet, class_name, urls, engine, port)],
            "ports": [f"{port}:{port}"],
            "depends_on": names,
            "labels": {"fleetplan.io/class": class_name},
        }
    return {"name": name, "services": services}


def notes(fleet: FleetSpec, engine: str) -> list[str]:
    ports = ", ".join(
        f"{c} -> localhost:{FIRST_HOST_PORT + k} (model {fleet.served_model_name(c)})"
        for k, c in enumerate(fleet.classes)
    )
    return [
        f"docker compose for {fleet.model} on one host: {fleet.gpus} GPUs, engine {engine} "
        "(docker compose up; HF_TOKEN in the environment).",
        f"One router per class: {ports}.",
        "Images are unpinned (latest): pin the versions you validated.",
    ]
