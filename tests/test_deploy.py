"""Deployment artifacts (issue 13 item 5, ``planner.deploy``): for the 80/20 example,
a disaggregated plan on one host and the multi-node 405B plan, every target parses
as YAML, validates against its project's published schema (vendored in
tests/data/schemas, sources in its README) and names every pool; replicas, GPUs,
multi-node spans, P/D roles, per-class model names, prefix-aware routing and the
engine arguments come from the plan.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from catalog.loader import load_catalog
from planner.deploy import render_deployment
from planner.deploy.fleet import GPU_RESOURCES
from planner.deploy.llmd import ACCELERATOR
from planner.errors import PlanningError
from planner.service import make_plan

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = Path(__file__).parent / "data" / "schemas"
CAT = load_catalog()
REQUESTS = {
    "80-20": ROOT / "examples" / "chat-agent-80-20.yaml",
    "405b-pp": ROOT / "examples" / "llama-405b-bf16-h100-pp.yaml",
    "disagg": Path(__file__).parent / "data" / "deploy" / "disaggregated-8b-one-host.yaml",
}

DYNAMO_SCHEMA = yaml.safe_load(
    (SCHEMAS / "dynamo-dynamographdeployment-v1alpha1.excerpt.yaml").read_text()
)
MODELSERVICE_SCHEMA = json.loads((SCHEMAS / "llm-d-modelservice.values.schema.json").read_text())
COMPOSE_SCHEMA = json.loads((SCHEMAS / "compose-spec.json").read_text())


@pytest.fixture(scope="module")
def plans() -> dict[str, dict[str, Any]]:
    out = {}
    for key, path in REQUESTS.items():
        request = yaml.safe_load(path.read_text(encoding="utf-8"))
        out[key] = make_plan(request, CAT, alternatives=False, verify=False).to_json_dict()
    return out


def render(plan: dict[str, Any], target: str, **kw: Any) -> tuple[str, Any]:
    text = render_deployment(plan, target, CAT, **kw).text
    return text, yaml.safe_load(text)


def strings(node: Any) -> Iterator[str]:
    """Every string in a parsed document (keys and values)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield str(k)
            yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)
    elif isinstance(node, str):
        yield node


def undeclared(doc: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields of ``doc`` that ``schema`` does not declare (Kubernetes would prune them)."""
    out: list[str] = []
    if isinstance(doc, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in doc.items():
            if props is not None and key in props:
                out += undeclared(value, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += undeclared(value, extra, f"{path}.{key}")
            elif props is not None:
                out.append(f"{path}.{key}")
    elif isinstance(doc, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(doc):
            out += undeclared(item, schema["items"], f"{path}[{i}]")
    return out


def validate_dynamo(doc: dict[str, Any]) -> None:
    jsonschema.Draft7Validator(DYNAMO_SCHEMA).validate(doc)
    assert undeclared(doc, DYNAMO_SCHEMA) == []
    assert doc["apiVersion"] == "nvidia.com/v1alpha1" and doc["kind"] == "DynamoGraphDeployment"


def modelservice_releases(helmfile: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in helmfile["releases"] if r["chart"].endswith("llm-d-modelservice")]


def validate_llmd(helmfile: dict[str, Any]) -> None:
    validator = jsonschema.Draft7Validator(MODELSERVICE_SCHEMA)
    releases = modelservice_releases(helmfile)
    assert releases
    for release in releases:
        for values in release["values"]:
            validator.validate(values)
        assert set(release["needs"]) <= {r["name"] for r in helmfile["releases"]}


def validate_compose(doc: dict[str, Any]) -> None:
    jsonschema.Draft7Validator(COMPOSE_SCHEMA).validate(doc)


VALIDATE = {"dynamo": validate_dynamo, "llm-d": validate_llmd, "compose": validate_compose}


# --------------------------------------------------------------------------- every target


@pytest.mark.parametrize(
    ("key", "target"),
    [
        ("80-20", "dynamo"),
        ("80-20", "llm-d"),
        ("405b-pp", "dynamo"),
        ("405b-pp", "llm-d"),
        ("disagg", "dynamo"),
        ("disagg", "llm-d"),
        ("disagg", "compose"),
    ],
)
def test_targets_parse_validate_and_name_every_pool(plans, key, target):
    plan = plans[key]
    text, doc = render(plan, target)
    assert "&id0" not in text and "*id0" not in text  # no YAML anchors or aliases
    VALIDATE[target](doc)
    found = set(strings(doc))
    for pool in plan["pools"]:
        assert pool["id"] in found, (target, pool["id"])


@pytest.mark.parametrize("target", ["dynamo", "compose"])
def test_sglang_variants_validate_too(plans, target):
    _, doc = render(plans["disagg"], target, engine="sglang")
    VALIDATE[target](doc)
    assert all(p["id"] in set(strings(doc)) for p in plans["disagg"]["pools"])


def test_the_validators_reject_what_the_schemas_forbid(plans):
    """The checks above can fail: wrong types, a one-node multinode, an undeclared
    field and a bad compose key are all caught."""
    _, dyn = render(plans["405b-pp"], "dynamo")
    worker = next(s for s in dyn["spec"]["services"].values() if "multinode" in s)
    for mutate in (
        lambda s: s.update(replicas="five"),
        lambda s: s["multinode"].update(nodeCount=1),
        lambda s: s["resources"]["limits"].update(gpu=8),
    ):
        bad = copy.deepcopy(dyn)
        mutate(next(s for s in bad["spec"]["services"].values() if "multinode" in s))
        with pytest.raises(jsonschema.ValidationError):
            validate_dynamo(bad)
    bad = copy.deepcopy(dyn)
    bad["spec"]["services"]["Frontend"]["replica"] = 1  # a typo Kubernetes would prune
    assert undeclared(bad, DYNAMO_SCHEMA) == [".spec.services.Frontend.replica"]
    assert worker["multinode"] == {"nodeCount": 2}

    _, helmfile = render(plans["405b-pp"], "llm-d")
    bad = copy.deepcopy(helmfile)
    modelservice_releases(bad)[0]["values"][0]["decode"]["parallelism"]["pipeline"] = 2
    with pytest.raises(jsonschema.ValidationError):
        validate_llmd(bad)

    _, compose = render(plans["disagg"], "compose")
    bad = copy.deepcopy(compose)
    next(iter(bad["services"].values()))["gpus_please"] = True
    with pytest.raises(jsonschema.ValidationError):
        validate_compose(bad)


# --------------------------------------------------------------------------- dynamo


def vendor_of(pool: dict[str, Any]) -> str:
    """The pool's GPU vendor as the renderers key it (nvidia, amd, intel)."""
    return CAT.gpus[pool["gpu"]].vendor.lower()


def services_by_pool(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        s["annotations"]["fleetplan.io/pool"]: s
        for s in doc["spec"]["services"].values()
        if s["componentType"] == "worker"
    }


def test_dynamo_80_20_workers_router_and_classes(plans):
    plan = plans["80-20"]
    _, doc = render(plan, "dynamo")
    frontend = doc["spec"]["services"]["Frontend"]
    assert frontend["componentType"] == "frontend"
    # the agent pool counts on prefix hits: KV-aware routing
    assert any(p["effective_prefix_hit_rate"] for p in plan["pools"])
    assert frontend["extraPodSpec"]["mainContainer"]["args"][-2:] == ["--router-mode", "kv"]
    workers = services_by_pool(doc)
    assert set(workers) == {p["id"] for p in plan["pools"]}
    for pool in plan["pools"]:
        svc = workers[pool["id"]]
        args = svc["extraPodSpec"]["mainContainer"]["args"]
        assert svc["replicas"] == pool["replicas"]
        assert svc["resources"]["limits"]["gpu"] == str(pool["tp"])
        # the pool's vendor's device resource (the 80/20 fleet: MI300X and Gaudi 3)
        assert svc["resources"]["limits"]["gpuType"] == GPU_RESOURCES[vendor_of(pool)]
        assert svc["extraPodSpec"]["mainContainer"]["command"] == ["python3", "-m", "dynamo.vllm"]
        assert f"--tensor-parallel-size={pool['tp']}" in args
        assert args[args.index("--served-model-name") + 1] == f"llama-3.1-70b-{pool['class']}"
        if pool["role"] == "aggregated":
            assert "subComponentType" not in svc
            assert "--enable-chunked-prefill" in args
        else:
            assert svc["subComponentType"] == pool["role"]
            assert f"--is-{pool['role']}-worker" in args
            assert not any(a.startswith("--kv-transfer-config") for a in args)
        assert "multinode" not in svc


def test_dynamo_multinode_replicas_span_their_nodes(plans):
    plan = plans["405b-pp"]
    (pool,) = plan["pools"]
    assert pool["pp"] == 2 and pool["launch"]["nodes_per_replica"] == 2
    _, doc = render(plan, "dynamo")
    svc = services_by_pool(doc)[pool["id"]]
    assert svc["multinode"] == {"nodeCount": 2}
    assert svc["resources"]["limits"] == {"gpu": "8"}  # per node: 16 GPUs over 2 nodes
    assert svc["replicas"] == pool["replicas"]
    args = svc["extraPodSpec"]["mainContainer"]["args"]
    assert "--pipeline-parallel-size=2" in args
    assert not any(a.startswith("--distributed-executor-backend") for a in args)
    # no prefix hits counted on: the frontend routes without KV awareness
    assert (
        "--router-mode"
        not in doc["spec"]["services"]["Frontend"]["extraPodSpec"]["mainContainer"]["args"]
    )


def test_dynamo_sglang_workers(plans):
    _, doc = render(plans["disagg"], "dynamo", engine="sglang")
    assert doc["spec"]["backendFramework"] == "sglang"
    for pool_id, svc in services_by_pool(doc).items():
        main = svc["extraPodSpec"]["mainContainer"]
        assert main["command"] == ["python3", "-m", "dynamo.sglang"]
        role = "prefill" if ":prefill" in pool_id else "decode"
        assert f"--disaggregation-mode={role}" in main["args"]


# --------------------------------------------------------------------------- llm-d


def test_llmd_80_20_pools_pd_and_prefix_scoring(plans):
    plan = plans["80-20"]
    text, helmfile = render(plan, "llm-d")
    releases = {r["name"]: r for r in helmfile["releases"]}
    pools = {p["id"]: p for p in plan["pools"]}
    by_pool = {}
    for r in modelservice_releases(helmfile):
        values = r["values"][0]
        section = values["decode"] if values["decode"]["create"] else values["prefill"]
        by_pool[section["annotations"]["fleetplan.io/pool"]] = (values, section)
    assert set(by_pool) == set(pools)
    for pool_id, (values, section) in by_pool.items():
        pool = pools[pool_id]
        role = pool["role"]
        assert section["replicas"] == pool["replicas"]
        assert (role == "prefill") == values["prefill"]["create"]
        assert (role != "prefill") == values["decode"]["create"]
        assert values["routing"]["proxy"]["enabled"] == (role == "decode")
        (container,) = section["containers"]
        resource = GPU_RESOURCES[vendor_of(pool)]
        assert container["resources"]["limits"] == {resource: str(pool["tp"])}
        assert values["accelerator"]["type"] == ACCELERATOR[vendor_of(pool)]
        assert f"--tensor-parallel-size={pool['tp']}" in container["args"]
        label = values["modelArtifacts"]["labels"]["llm-d.ai/model"]
        assert label == f"llama-3.1-70b-{pool['class']}"
        # the class's InferencePool selects these pods
        gaie = releases[f"gaie-{pool['class']}"]["values"][0]
        assert (
            gaie["inferencePool"]["modelServers"]["matchLabels"]
            == values["modelArtifacts"]["labels"]
        )
    configs = {
        c: yaml.safe_load(
            releases[f"gaie-{c}"]["values"][0]["inferenceExtension"]["pluginsCustomConfig"][
                "fleetplan-config.yaml"
            ]
        )
        for c in ("agent", "chat")
    }
    assert "*id0" not in text
    agent = {p["type"] for p in configs["agent"]["plugins"]}
    chat = {p["type"] for p in configs["chat"]["plugins"]}
    assert "prefix-cache-scorer" in agent  # agent sessions reuse their prefixes
    # a class served by prefill and decode pools gets llm-d's P/D handler and filters, an
    # aggregated one none (the plan decides; chat is disaggregated in the 80/20 plan)
    roles = {c: {p["role"] for p in plan["pools"] if p["class"] == c} for c in configs}
    assert "prefill" in roles["chat"]
    for c, plugins in (("agent", agent), ("chat", chat)):
        split = "prefill" in roles[c]
        assert ("pd-profile-handler" in plugins) == split, c
        assert ("prefill-filter" in plugins) == split, c
        if split:
            assert [p["name"] for p in configs[c]["schedulingProfiles"]] == ["prefill", "decode"]
    # one route per class, by model name
    routes = [
        o for r in modelservice_releases(helmfile) for o in r["values"][0].get("extraObjects", [])
    ]
    assert sorted(r["spec"]["rules"][0]["matches"][0]["headers"][0]["value"] for r in routes) == [
        "llama-3.1-70b-agent",
        "llama-3.1-70b-chat",
    ]


def test_llmd_multinode_is_a_leaderworkerset_started_as_the_plan_says(plans):
    plan = plans["405b-pp"]
    (pool,) = plan["pools"]
    _, helmfile = render(plan, "llm-d")
    (release,) = modelservice_releases(helmfile)
    values = release["values"][0]
    assert values["decode"]["replicas"] == pool["replicas"]
    assert values["multinode"] is True
    assert values["decode"]["parallelism"] == {"tensor": 8, "data": 1, "dataLocal": 1, "workers": 2}
    (container,) = values["decode"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    script = container["args"][0]
    assert "ray start --head" in script and "LWS_LEADER_ADDRESS" in script
    assert "--pipeline-parallel-size=2" in script and "--distributed-executor-backend=ray" in script


# --------------------------------------------------------------------------- compose


def test_compose_one_host_replicas_gpus_and_pd_router(plans):
    plan = plans["disagg"]
    _, doc = render(plan, "compose")
    services = doc["services"]
    engines = {n: s for n, s in services.items() if not n.startswith("router-")}
    assert len(engines) == sum(p["replicas"] for p in plan["pools"])
    ids = [
        d
        for s in engines.values()
        for d in s["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"]
    ]
    assert len(ids) == len(set(ids)) == plan["gpus_total"] <= 8
    for s in engines.values():
        assert s["image"].startswith("vllm/vllm-openai")
        assert s["entrypoint"] == ["vllm", "serve"]
    (router,) = [s for n, s in services.items() if n.startswith("router-")]
    command = router["command"][-1]
    assert "--vllm-pd-disaggregation" in command
    assert command.count("--prefill http://") == sum(
        p["replicas"] for p in plan["pools"] if p["role"] == "prefill"
    )
    assert command.count("--decode http://") == sum(
        p["replicas"] for p in plan["pools"] if p["role"] == "decode"
    )
    assert "--policy cache_aware" in command  # the RAG class counts on prefix hits
    assert router["ports"] == ["8000:8000"]


def test_compose_refuses_a_fleet_larger_than_one_host(plans):
    checked = 0
    for key in ("80-20", "405b-pp"):
        if len(plans[key]["gpus_by_type"]) > 1:
            continue  # refused for its GPU types first (the test below)
        checked += 1
        gpus = f"{sum(plans[key]['gpus_by_type'].values()):,}"
        with pytest.raises(PlanningError) as info:
            render_deployment(plans[key], "compose", CAT)
        (field, message), *_ = info.value.issues
        assert field == "target"
        assert f"needs {gpus}" in message and "holds 8" in message
        assert "target=dynamo" in message and "target=llm-d" in message
    assert checked >= 1


def test_compose_amd_gpus_by_visible_devices_and_one_gpu_type_per_host(plans):
    """The same one-host fleet on MI300X (8 per host): ROCm devices, each replica
    seeing its own GPUs; a fleet over two GPU types is refused naming target."""
    amd = copy.deepcopy(plans["disagg"])
    for pool in amd["pools"]:
        pool["gpu"] = "mi300x"
    _, doc = render(amd, "compose")
    validate_compose(doc)
    engines = [s for n, s in doc["services"].items() if not n.startswith("router-")]
    visible = [s["environment"]["HIP_VISIBLE_DEVICES"] for s in engines]
    ids = [i for v in visible for i in v.split(",")]
    assert len(ids) == len(set(ids)) == amd["gpus_total"]
    for s in engines:
        assert s["devices"] == ["/dev/kfd", "/dev/dri"] and "deploy" not in s
        assert s["image"].startswith("vllm/vllm-openai-rocm")
    mixed = copy.deepcopy(plans["disagg"])
    mixed["pools"][0]["gpu"] = "l40s"
    with pytest.raises(PlanningError) as info:
        render_deployment(mixed, "compose", CAT)
    assert info.value.issues[0][0] == "target" and "one GPU type" in info.value.message


# --------------------------------------------------------------------------- bad input


def test_bad_target_engine_and_plans_name_their_field(plans):
    plan = plans["disagg"]
    cases = [
        ({"target": "helm"}, "target"),
        ({"target": "dynamo", "engine": "trtllm"}, "engine"),
        ({"target": "llm-d", "engine": "sglang"}, "engine"),
    ]
    for kw, field in cases:
        with pytest.raises(PlanningError) as info:
            render_deployment(plan, catalog=CAT, **kw)
        assert info.value.issues[0][0] == field
    infeasible = {**plan, "status": "infeasible", "pools": []}
    with pytest.raises(PlanningError) as info:
        render_deployment(infeasible, "dynamo", CAT)
    assert info.value.issues[0][0] == "plan.status"
    broken = [
        (lambda p: p["pools"][0].update(gpu="h900"), "plan.pools[0].gpu"),
        (lambda p: p["pools"][1].update(role="both"), "plan.pools[1].role"),
        (lambda p: p["pools"][0].update(replicas=0), "plan.pools[0].replicas"),
        (lambda p: p["pools"][0]["launch"].update(vllm=["sglang"]), "plan.pools[0].launch.vllm"),
        (lambda p: p.update(pools=["x"]), "plan.pools[0]"),
    ]
    for breaks, field in broken:
        bad = copy.deepcopy(plan)
        breaks(bad)
        with pytest.raises(PlanningError) as info:
            render_deployment(bad, "dynamo", CAT)
        assert info.value.issues[0][0] == field
    no_sglang = copy.deepcopy(plan)
    no_sglang["pools"][0]["launch"]["sglang"] = []
    render_deployment(no_sglang, "dynamo", CAT)  # vLLM needs no SGLang command
    with pytest.raises(PlanningError) as info:
        render_deployment(no_sglang, "dynamo", CAT, engine="sglang")
    assert info.value.issues[0][0] == "plan.pools[0].launch.sglang"
    no_nodes = copy.deepcopy(plans["405b-pp"])
    no_nodes["pools"][0]["launch"]["per_node"] = []
    with pytest.raises(PlanningError) as info:
        render_deployment(no_nodes, "llm-d", CAT)
    assert info.value.issues[0][0] == "plan.pools[0].launch.per_node"
