"""What every deployment target reads off a plan: its pools as :class:`PoolSpec`
(replicas, GPUs per replica and per node, the engine arguments of the plan's launch
settings), the classes and their model names, and the catalog facts a manifest
needs (the GPU's vendor and host size, the checkpoint's size). Plus the YAML writer
the targets share.

A plan is read as its JSON document (``Plan.to_json_dict()``, as stored), so stored
plans and ``fleetplan plan --json`` files deploy alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from catalog.schema import Catalog, Gpu
from planner.architecture import total_param_count
from planner.errors import PlanningError
from planner.plan.launch import gpus_per_node
from solver.problem import has_solution

ROLES = ("aggregated", "prefill", "decode")
#: Kubernetes device-plugin resource per GPU vendor (the catalog's ``vendor``).
#: Longest pool name (DNS label): with a 24-character deployment name, the objects a
#: platform names ``<deployment>-<pool>`` stay within Kubernetes' 63 characters.
NAME_LIMIT = 38
DEPLOYMENT_NAME_LIMIT = 24

GPU_RESOURCES = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu", "intel": "habana.ai/gaudi"}


@dataclass(frozen=True)
class PoolSpec:
    """One pool of the plan, as a deployment needs it."""

    index: int  # position in the plan's pools (field names in errors)
    id: str  # the plan's pool id, quoted in every artifact
    name: str  # a DNS-1123 label made from the id (unique within the plan)
    class_name: str
    role: str  # aggregated | prefill | decode
    gpu: str
    vendor: str  # lower-case catalog vendor: nvidia, amd, intel
    tp: int
    pp: int
    dp: int
    ep: int
    replicas: int
    gpus_per_replica: int  # tp x pp
    nodes: int  # hosts one replica spans
    gpus_per_node: int  # GPUs of one replica on each of its hosts
    host_gpus: int  # GPUs one host of this type holds
    vllm: tuple[str, ...]  # the plan's vLLM command (node 0 of a multi-node replica)
    checkpoint: str  # the repository this pool loads (vllm serve's model: per pool, as
    # GPUs of another FP4 format load another checkpoint)
    sglang: tuple[str, ...]  # the plan's SGLang command (node 0)
    per_node: tuple[Mapping[str, Any], ...]  # launch.per_node (multi-node replicas)
    prefix_hit_rate: float  # effective_prefix_hit_rate (0 when none)
    session_router: bool  # the plan put a session-affine router in front

    @property
    def relies_on_prefix(self) -> bool:
        return self.prefix_hit_rate > 0 or self.session_router

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica

    @property
    def resource(self) -> str:
        return GPU_RESOURCES.get(self.vendor, "nvidia.com/gpu")


@dataclass(frozen=True)
class FleetSpec:
    model: str  # catalog id
    checkpoint: str  # Hugging Face repository the first pool loads (each pool's: PoolSpec)
    checkpoint_gib: int  # BF16 checkpoint size (volume sizes)
    pools: tuple[PoolSpec, ...]
    classes: tuple[str, ...]

    def class_pools(self, class_name: str) -> list[PoolSpec]:
        return [p for p in self.pools if p.class_name == class_name]

    def served_model_name(self, class_name: str) -> str:
        """The model name clients send to reach a class (per-class routing): the
        catalog model id and the class, ``llama-3.1-70b-chat``."""
        return f"{self.model}-{dns_label(class_name, 40)}"

    def class_relies_on_prefix(self, class_name: str) -> bool:
        return any(p.relies_on_prefix for p in self.class_pools(class_name))

    def disaggregated(self, class_name: str) -> bool:
        return any(p.role != "aggregated" for p in self.class_pools(class_name))

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.pools)


def dns_label(text: str, limit: int = 63) -> str:
    """``text`` as a DNS-1123 label: lower case, [a-z0-9-], at most ``limit`` characters,
    starting and ending with an alphanumeric."""
    label = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return label or "x"


def _unique_names(bases: Sequence[str], limit: int) -> list[str]:
    """Short DNS labels, made unique by a ``-2``, ``-3``... suffix."""
    names: list[str] = []
    for text in bases:
        base = dns_label(text, limit - 3)
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def _int(pool: Mapping[str, Any], key: str, field: str, default: int | None = None) -> int:
    value = pool.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PlanningError.for_field(f"{field}.{key}", f"a positive integer, got {value!r}")
    return value


def _gpu(catalog: Catalog, gpu_id: str, field: str) -> Gpu:
    gpu = catalog.gpus.get(gpu_id)
    if gpu is None:
        raise PlanningError.for_field(field, f"GPU {gpu_id!r} is not in the catalog")
    return gpu


def fleet_spec(plan: Mapping[str, Any], catalog: Catalog) -> FleetSpec:
    """The plan document's fleet, or a :class:`PlanningError` naming the field when
    the plan has none (infeasible) or is not a plan document."""
    if not isinstance(plan, Mapping) or "pools" not in plan:
        raise PlanningError.for_field("plan", "not a plan document (no pools)")
    if not has_solution(plan.get("status")):
        raise PlanningError.for_field(
            "plan.status", f"the plan is {plan.get('status')}: there is no fleet to deploy"
        )
    raw_pools = plan.get("pools") or []
    if not raw_pools or not isinstance(raw_pools, list):
        raise PlanningError.for_field("plan.pools", "the plan has no pools")
    for i, p in enumerate(raw_pools):
        if not isinstance(p, Mapping) or not isinstance(p.get("id"), str):
            raise PlanningError.for_field(f"plan.pools[{i}]", "not a pool (no id)")
        if p.get("role") not in ROLES:
            raise PlanningError.for_field(
                f"plan.pools[{i}].role", f"one of {', '.join(ROLES)}, got {p.get('role')!r}"
            )
    model = str(plan.get("model", ""))
    # <class>-<role>-<gpu>-tp<tp>: short enough for Kubernetes object names built on
    # them (the full pool id goes in an annotation or label)
    names = _unique_names(
        [f"{p.get('class')}-{p.get('role')}-{p.get('gpu')}-tp{p.get('tp')}" for p in raw_pools],
        NAME_LIMIT,
    )
    pools = []
    checkpoint = ""
    for i, (p, name) in enumerate(zip(raw_pools, names, strict=True)):
        field = f"plan.pools[{i}]"
        launch = p.get("launch") or {}
        vllm = tuple(str(a) for a in launch.get("vllm") or ())
        sglang = tuple(str(a) for a in launch.get("sglang") or ())
        if len(vllm) < 3 or vllm[:2] != ("vllm", "serve"):
            raise PlanningError.for_field(f"{field}.launch.vllm", "not a 'vllm serve' command")
        checkpoint = checkpoint or vllm[2]
        gpu = _gpu(catalog, str(p.get("gpu")), f"{field}.gpu")
        tp, pp = _int(p, "tp", field), _int(p, "pp", field, 1)
        nodes = _int(launch, "nodes_per_replica", f"{field}.launch", 1)
        per_node = tuple(launch.get("per_node") or ())
        if nodes > 1 and len(per_node) != nodes:
            raise PlanningError.for_field(
                f"{field}.launch.per_node", f"a replica of {nodes} nodes needs {nodes} commands"
            )
        pools.append(
            PoolSpec(
                index=i,
                id=str(p["id"]),
                name=name,
                class_name=str(p.get("class")),
                role=str(p.get("role")),
                gpu=gpu.id,
                vendor=gpu.vendor.lower(),
                tp=tp,
                pp=pp,
                dp=_int(p, "dp", field, 1),
                ep=_int(p, "ep", field, 1),
                replicas=_int(p, "replicas", field),
                gpus_per_replica=tp * pp,
                nodes=nodes,
                gpus_per_node=math.ceil(tp * pp / nodes),
                host_gpus=gpus_per_node(gpu),
                vllm=vllm,
                checkpoint=vllm[2],
                sglang=sglang,
                per_node=per_node,
                prefix_hit_rate=float(p.get("effective_prefix_hit_rate") or 0.0),
                session_router=bool(launch.get("router")),
            )
        )
    classes = tuple(dict.fromkeys(p.class_name for p in pools))
    size = 1
    if model in catalog.models:
        size = math.ceil(total_param_count(catalog.models[model]) * 2 * 1.1 / 2**30)
    return FleetSpec(model, checkpoint, size, tuple(pools), classes)


# --------------------------------------------------------------------------- engine flags

#: Flags a platform sets itself (multi-node rendezvous, Ray) and the KV connector
#: a platform configures for its disaggregated workers.
NODE_FLAGS = ("--nnodes=", "--node-rank=", "--dist-init-addr=", "--distributed-executor-backend=")
KV_FLAGS = ("--kv-transfer-config=",)


def engine_flags(command: Sequence[str], skip: int, drop: Sequence[str] = NODE_FLAGS) -> list[str]:
    """The plan's engine flags: ``command`` without its first ``skip`` words (the
    program and the model) and without the flags starting with ``drop``."""
    return [a for a in command[skip:] if not a.startswith(tuple(drop))]


def vllm_flags(pool: PoolSpec, *, keep_kv: bool = False) -> list[str]:
    """``vllm serve MODEL FLAGS``: the flags, less the multi-node ones (and the KV
    connector unless ``keep_kv``)."""
    return engine_flags(pool.vllm, 3, NODE_FLAGS if keep_kv else NODE_FLAGS + KV_FLAGS)


def sglang_flags(pool: PoolSpec) -> list[str]:
    """``python -m sglang.launch_server FLAGS``: the flags (model path included), less
    the multi-node ones."""
    if pool.sglang[:3] != ("python", "-m", "sglang.launch_server"):
        raise PlanningError.for_field(
            f"plan.pools[{pool.index}].launch.sglang",
            "not a 'python -m sglang.launch_server' command",
        )
    return engine_flags(pool.sglang, 3)


# --------------------------------------------------------------------------- YAML


class _Dumper(yaml.SafeDumper):
    """Block style, multi-line strings as literals, and no anchors or aliases (a dict
    used twice is written twice: other tools' YAML readers need not know aliases)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(doc: Any) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def to_yaml(docs: Sequence[Any], notes: Sequence[str] = ()) -> str:
    """YAML documents (``---`` between them), the notes as comments on top."""
    head = "".join(f"# {line}\n" for note in notes for line in note.splitlines())
    return head + "---\n".join(dump_yaml(doc) for doc in docs)
