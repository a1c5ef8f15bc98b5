"""llm-d: a helmfile installing, per class, an InferencePool with the llm-d inference
scheduler (the endpoint picker, EPP) and, per pool, an ``llm-d-modelservice`` release.

The modelservice values follow the chart's ``values.schema.json``
(llm-d-incubation/llm-d-modelservice, chart v0.4.12): ``modelArtifacts``, ``routing``
(the P/D routing sidecar in decode pods), ``accelerator``, ``multinode`` (a
LeaderWorkerSet when a replica spans hosts) and the ``prefill``/``decode`` sections
(``replicas``, ``parallelism``, ``containers`` with the plan's engine arguments and
GPU resources). An aggregated pool is a decode section without prefill (llm-d's
aggregated serving); a disaggregated class's pools are prefill-only and decode-only
releases under one InferencePool, whose scheduler runs the P/D profile handler.

Routing: each class has its own InferencePool (pods labelled ``llm-d.ai/model:
<model>-<class>``) and HTTPRoute, matched on the model name (``X-Gateway-Model-Name``,
set by the gateway's body-based router); classes that count on prefix hits get the
``prefix-cache-scorer``. The EPP configuration follows the llm-d guides
(``guides/pd-disaggregation/gaie-pd/values.yaml``).
"""

from __future__ import annotations

from typing import Any

from planner.deploy.fleet import FleetSpec, PoolSpec, dns_label, dump_yaml, vllm_flags

MODELSERVICE_CHART = "llm-d-modelservice/llm-d-modelservice"
MODELSERVICE_VERSION = "v0.4.12"
MODELSERVICE_REPO = "https://llm-d-incubation.github.io/llm-d-modelservice/"
INFERENCEPOOL_CHART = "oci://registry.k8s.io/gateway-api-inference-extension/charts/inferencepool"
SCHEDULER_IMAGE = {"name": "llm-d-inference-scheduler", "hub": "ghcr.io/llm-d", "tag": "v0.5.0"}
LLMD_VERSION = "v0.5.0"  # the llm-d images matching the scheduler above
IMAGES = {
    "nvidia": f"ghcr.io/llm-d/llm-d-cuda:{LLMD_VERSION}",
    "amd": f"ghcr.io/llm-d/llm-d-rocm:{LLMD_VERSION}",
    "intel": f"ghcr.io/llm-d/llm-d-hpu:{LLMD_VERSION}",
}
ACCELERATOR = {"nvidia": "nvidia", "amd": "amd", "intel": "intel-gaudi"}
NAMESPACE = "llm-d"
GATEWAY = "llm-d-inference-gateway"
HF_SECRET = "llm-d-hf-token"
SERVICE_PORT = 8000
PROXY_TARGET_PORT = 8200  # vLLM's port in decode pods behind the routing sidecar
NIXL_PORT = 5600
NIXL_BOTH = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
MODEL_HEADER = "X-Gateway-Model-Name"


def pool_release(fleet: FleetSpec, pool: PoolSpec) -> str:
    return f"ms-{pool.name}"[:53]  # Helm release names: at most 53 characters


def class_release(class_name: str) -> str:
    return f"gaie-{dns_label(class_name, 40)}"


def epp_config(fleet: FleetSpec, class_name: str) -> str:
    """The scheduler's EndpointPickerConfig for a class: P/D profiles for a
    disaggregated class, one profile otherwise; prefix-aware scoring when the class
    counts on prefix hits."""
    prefix = fleet.class_relies_on_prefix(class_name)
    scorers: list[dict[str, Any]] = [{"pluginRef": "queue-scorer", "weight": 1.0}]
    plugins: list[dict[str, Any]] = [{"type": "queue-scorer"}]
    if prefix:
        plugins.append({"type": "prefix-cache-scorer"})
        scorers.append({"pluginRef": "prefix-cache-scorer", "weight": 3.0})
    if fleet.disaggregated(class_name):
        plugins = [
            {"type": "prefill-header-handler"},
            {"type": "prefill-filter"},
            {"type": "decode-filter"},
            *plugins,
            {"type": "pd-profile-handler", "parameters": {"threshold": 0, "hashBlockSize": 5}},
        ]
        profiles = [
            {"name": "prefill", "plugins": [{"pluginRef": "prefill-filter"}, *scorers]},
            {"name": "decode", "plugins": [{"pluginRef": "decode-filter"}, scorers[0]]},
        ]
    else:
        plugins = [
            {"type": "single-profile-handler"},
            {"type": "kv-cache-utilization-scorer"},
            *plugins,
        ]
        scorers.append({"pluginRef": "kv-cache-utilization-scorer", "weight": 1.0})
        profiles = [{"name": "default", "plugins": scorers}]
    config = {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": profiles,
    }
    return dump_yaml(config)


def pool_labels(fleet: FleetSpec, class_name: str) -> dict[str, str]:
    return {
        "llm-d.ai/inference-serving": "true",
        "llm-d.ai/model": fleet.served_model_name(class_name),
    }


def inferencepool_values(fleet: FleetSpec, class_name: str) -> dict[str, Any]:
    return {
        "inferenceExtension": {
            "replicas": 1,
            "image": dict(SCHEDULER_IMAGE),
            "pluginsConfigFile": "fleetplan-config.yaml",
            "pluginsCustomConfig": {"fleetplan-config.yaml": epp_config(fleet, class_name)},
        },
        "inferencePool": {
            "targetPorts": [{"number": SERVICE_PORT}],
            "modelServerType": "vllm",
            "modelServers": {"matchLabels": pool_labels(fleet, class_name)},
        },
    }


def http_route(fleet: FleetSpec, class_name: str) -> dict[str, Any]:
    """The class's route from the gateway to its InferencePool, by model name when the
    plan has several classes."""
    rule: dict[str, Any] = {
        "backendRefs": [
            {
                "group": "inference.networking.k8s.io",
                "kind": "InferencePool",
                "name": class_release(class_name),
            }
        ]
    }
    if len(fleet.classes) > 1:
        header = {"name": MODEL_HEADER, "value": fleet.served_model_name(class_name)}
        rule["matches"] = [{"headers": [header]}]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": f"route-{dns_label(class_name, 50)}"},
        "spec": {"parentRefs": [{"name": GATEWAY}], "rules": [rule]},
    }


def container(fleet: FleetSpec, pool: PoolSpec, proxied: bool) -> dict[str, Any]:
    """The vLLM container: the plan's flags, the class's model name, the port the
    routing sidecar expects; multi-node replicas start Ray on every pod of the
    LeaderWorkerSet (the plan's launch.per_node) and serve from the leader."""
    port = PROXY_TARGET_PORT if proxied else SERVICE_PORT
    name = fleet.served_model_name(pool.class_name)
    args = [pool.checkpoint, "--port", str(port), "--served-model-name", name]
    args += vllm_flags(pool)
    env: list[dict[str, Any]] = []
    ports = [{"containerPort": port, "protocol": "TCP"}]
    if pool.role != "aggregated":
        args += ["--kv-transfer-config", NIXL_BOTH]
        env += [
            {
                "name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
                "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
            },
            {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_PORT)},
        ]
        ports.append({"containerPort": NIXL_PORT, "protocol": "TCP"})
    out: dict[str, Any] = {"name": "vllm", "image": IMAGES.get(pool.vendor, IMAGES["nvidia"])}
    out["modelCommand"] = "custom"
    if pool.nodes > 1:
        # the plan's per-node commands: Ray's head and the server on node 0 (the
        # LeaderWorkerSet's leader), Ray joining the head on the others
        head = " ".join(pool.per_node[0]["ray"])
        join = " ".join(pool.per_node[1]["ray"]).replace("HEAD_ADDR", "${LWS_LEADER_ADDRESS}")
        serve = " ".join(["vllm", "serve", *(_quote(a) for a in args)])
        script = (
            'if [ "${LWS_WORKER_INDEX:-0}" = "0" ]; then '
            f"{head} && exec {serve} --distributed-executor-backend=ray; "
            f"else exec {join}; fi"
        )
        out["command"], out["args"] = ["/bin/sh", "-c"], [script]
    else:
        out["command"], out["args"] = ["vllm", "serve"], args
    if env:
        out["env"] = env
    gpus = str(pool.gpus_per_node)
    out["ports"] = ports
    out["resources"] = {"limits": {pool.resource: gpus}, "requests": {pool.resource: gpus}}
    out["mountModelVolume"] = True
    return out


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\"'\"'") + "'" if any(c in arg for c in " {}\"'$") else arg


def modelservice_values(fleet: FleetSpec, pool: PoolSpec) -> dict[str, Any]:
    """The ``llm-d-modelservice`` values of one pool's release."""
    proxied = pool.role == "decode"
    section = {
        "create": True,
        "replicas": pool.replicas,
        "annotations": {"fleetplan.io/pool": pool.id, "fleetplan.io/class": pool.class_name},
        "parallelism": {
            "tensor": pool.tp // pool.dp,
            "data": pool.dp,
            "dataLocal": max(1, pool.dp // pool.nodes),
            "workers": pool.nodes,
        },
        "containers": [container(fleet, pool, proxied)],
    }
    values: dict[str, Any] = {
        "fullnameOverride": pool.name,
        "multinode": pool.nodes > 1,
        "modelArtifacts": {
            "name": pool.checkpoint,
            "uri": f"hf://{pool.checkpoint}",
            "size": f"{fleet.checkpoint_gib}Gi",
            "authSecretName": HF_SECRET,
            "labels": pool_labels(fleet, pool.class_name),
        },
        "accelerator": {"type": ACCELERATOR.get(pool.vendor, "nvidia")},
        "routing": {
            "servicePort": SERVICE_PORT,
            "proxy": {"enabled": proxied, "targetPort": PROXY_TARGET_PORT, "connector": "nixlv2"},
        },
        "prefill": section if pool.role == "prefill" else {"create": False},
        "decode": section if pool.role != "prefill" else {"create": False},
    }
    if pool is fleet.class_pools(pool.class_name)[0]:
        values["extraObjects"] = [http_route(fleet, pool.class_name)]
    return values


def llmd_helmfile(fleet: FleetSpec) -> dict[str, Any]:
    releases: list[dict[str, Any]] = []
    for class_name in fleet.classes:
        gaie = class_release(class_name)
        releases.append(
            {
                "name": gaie,
                "namespace": NAMESPACE,
                "chart": INFERENCEPOOL_CHART,
                "labels": {"fleetplan.io/class": dns_label(class_name)},
                "values": [inferencepool_values(fleet, class_name)],
            }
        )
        for pool in fleet.class_pools(class_name):
            releases.append(
                {
                    "name": pool_release(fleet, pool),
                    "namespace": NAMESPACE,
                    "chart": MODELSERVICE_CHART,
                    "version": MODELSERVICE_VERSION,
                    "needs": [gaie],
                    "labels": {"fleetplan.io/class": dns_label(class_name)},
                    "values": [modelservice_values(fleet, pool)],
                }
            )
    return {
        "repositories": [{"name": "llm-d-modelservice", "url": MODELSERVICE_REPO}],
        "releases": releases,
    }


def notes(fleet: FleetSpec) -> list[str]:
    out = [
        f"llm-d helmfile for {fleet.model}: {len(fleet.pools)} pool(s), {fleet.gpus} GPUs "
        "(helmfile apply).",
        f"Needs the Gateway API Inference Extension CRDs, a Gateway {GATEWAY!r} (llm-d-infra) "
        f"with body-based routing, and a Secret {HF_SECRET!r} with HF_TOKEN.",
        "Pools by release: "
        + "; ".join(f"{pool_release(fleet, p)} = {p.id}" for p in fleet.pools)
        + ".",
    ]
    return out
