"""What the simulator runs: per class, its pools with their replicas' cost model.

:func:`build_fleet` re-derives everything from a stored plan (its JSON) and the
request it was planned from, against a catalog: the pool's GPU, TP, dtype and
KV dtype rebuild the replica exactly as screening built it (same efficiency
overrides; decode and aggregated pools with the class's speculative decoding), the
class's lengths, prefix hits and SLOs come from the resolved request. So a plan
stored months ago simulates without the planner's internal state, and the API and
CLI can verify any stored plan.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from catalog.schema import Catalog, Dtype, LengthDist
from planner import roofline as rl
from planner.candidates import (
    KV_STREAM_OVERLAP,
    kv_link_for,
    request_replica,
    speculative_replica,
)
from planner.candidates import sessions as ses
from planner.errors import PlanningError
from planner.request import PlanRequest, ResolvedClass, ResolvedRequest, resolve_request
from planner.simulate.steps import StepModel
from solver.problem import PoolRole


@dataclass(frozen=True)
class LengthModel:
    """Log-normal token lengths: ln L ~ N(mu, sigma^2); sigma = 0 is a constant length."""

    mu: float
    sigma: float

    @classmethod
    def of(cls, dist: LengthDist) -> LengthModel:
        return cls(dist.mu, dist.sigma)

    @classmethod
    def fixed(cls, tokens: float) -> LengthModel:
        return cls(math.log(tokens), 0.0)

    @property
    def mean_tokens(self) -> float:
        return math.exp(self.mu + self.sigma**2 / 2.0)


@dataclass(frozen=True)
class SimPool:
    """One planned pool: ``replicas`` identical replicas of ``steps.replica``.

    ``rate_rps`` and ``step_ms`` are the plan's (used only to warm-start resident
    batches and to estimate prefill work for the router); ``kv_link_gb_per_s`` is
    the bandwidth a prefill replica ships its KV over (all TP shards together).
    """

    id: str
    class_name: str
    role: PoolRole
    replicas: int
    steps: StepModel
    max_batch: int | None = None
    chunk_budget_tokens: int | None = None
    rate_rps: float = 0.0
    step_ms: float | None = None
    kv_link_gb_per_s: float | None = None
    kv_link_latency_us: float = 0.0
    kv_stream_overlap: float = KV_STREAM_OVERLAP


@dataclass(frozen=True)
class SimClass:
    """One traffic class and the pools that serve it."""

    name: str
    rate_rps: float
    prompt: LengthModel
    output: LengthModel
    prefix_hit_rate: float
    ttft_slo_ms: float
    tpot_slo_ms: float
    percentile: float
    max_context_tokens: int
    pools: tuple[SimPool, ...]
    planned_ttft_ms: float | None = None
    planned_tpot_ms: float | None = None
    #: Share of requests whose prefix hit is reloaded from a KV host tier, and the
    #: reload (ms) before their prefill (prefix_cache.host_tier; 0 without).
    reload_share: float = 0.0
    reload_ms: float = 0.0

    @property
    def mode(self) -> str:
        roles = {p.role for p in self.pools}
        if roles == {PoolRole.AGGREGATED}:
            return "aggregated"
        if roles and PoolRole.AGGREGATED not in roles:
            return "disaggregated"
        return "mixed" if roles else "none"


def resolved(request: Mapping[str, Any] | PlanRequest | ResolvedRequest, catalog: Catalog):
    """The request, validated and resolved against ``catalog``."""
    if isinstance(request, ResolvedRequest):
        return request
    req = request if isinstance(request, PlanRequest) else PlanRequest.model_validate(request)
    return resolve_request(req, catalog)


def _pool_class(pool: Mapping[str, Any]) -> str:
    return str(pool.get("class", pool.get("class_name")))


def sim_class_of(
    rc: ResolvedClass, model_max_context: int, pools: tuple[SimPool, ...], **kw: Any
) -> SimClass:
    """A :class:`SimClass` from a resolved class; ``kw`` overrides fields (e.g. the rate)."""
    fields: dict[str, Any] = dict(
        name=rc.name,
        rate_rps=rc.rate_rps,
        prompt=LengthModel.of(rc.prompt),
        output=LengthModel.of(rc.output),
        prefix_hit_rate=rc.prefix_hit_rate,
        ttft_slo_ms=rc.slo.ttft_ms,
        tpot_slo_ms=rc.slo.tpot_ms,
        percentile=rc.slo.percentile,
        max_context_tokens=model_max_context,
        pools=pools,
    )
    fields.update(kw)
    return SimClass(**fields)


def build_fleet(
    plan: Mapping[str, Any],
    request: Mapping[str, Any] | PlanRequest | ResolvedRequest,
    catalog: Catalog,
) -> list[SimClass]:
    """Per class with traffic in the plan, its pools rebuilt from ``catalog``.

    Raises :class:`PlanningError` when the plan names a GPU, link or model the
    catalog does not have (a plan from another catalog).
    """
    req = resolved(request, catalog)
    model = catalog.models[req.model_id]
    if plan.get("model", req.model_id) != req.model_id:
        raise PlanningError.for_field("model", "the plan and its request name different models")
    replicas: dict[tuple[str, int, str, str, int, int, int], rl.Replica] = {}
    by_class: dict[str, list[SimPool]] = {}
    classes = {rc.name: rc for rc in req.classes}
    for pool in plan.get("pools", []):
        n = int(pool["replicas"])
        rate = float(pool.get("rate_rps") or 0.0)
        if n <= 0 or rate <= 0:
            continue
        gpu, tp, dtype, kv = pool["gpu"], int(pool["tp"]), pool["dtype"], pool["kv_dtype"]
        pp = int(pool.get("pp") or 1)
        dp, ep = int(pool.get("dp") or 1), int(pool.get("ep") or 1)
        if gpu not in catalog.gpus:
            raise PlanningError.for_field("pools.gpu", f"the catalog has no GPU {gpu!r}")
        key = (gpu, tp, dtype, kv, pp, dp, ep)
        if key not in replicas:
            replicas[key] = request_replica(
                catalog, req, gpu, Dtype(dtype), Dtype(kv), tp, pp=pp, dp=dp, ep=ep
            )
        role = PoolRole(pool["role"])
        replica = replicas[key]
        rc = classes.get(_pool_class(pool))
        if rc is not None and role != PoolRole.PREFILL:
            # the class's speculative decoding, as screening priced the pool
            replica = speculative_replica(catalog, rc, replica)
        link_bw, link_lat = None, 0.0
        if role == PoolRole.PREFILL:
            link_id = pool.get("kv_transfer_link")
            link = catalog.links[link_id] if link_id in catalog.links else kv_link_for(catalog, gpu)
            link_bw, link_lat = link.bandwidth_gb_per_s * tp * pp, link.latency_us
        by_class.setdefault(_pool_class(pool), []).append(
            SimPool(
                id=str(pool["id"]),
                class_name=_pool_class(pool),
                role=role,
                replicas=n,
                steps=StepModel(replica),
                max_batch=pool.get("max_batch"),
                chunk_budget_tokens=pool.get("chunk_budget_tokens"),
                rate_rps=rate,
                step_ms=pool.get("step_ms"),
                kv_link_gb_per_s=link_bw,
                kv_link_latency_us=link_lat,
            )
        )
    planned = {c.get("name"): c for c in plan.get("classes", [])}
    out = []
    for rc in req.classes:
        pools = tuple(by_class.get(rc.name, ()))
        if not pools:
            continue
        cp = planned.get(rc.name, {})
        # The plan's routing: a max-goodput plan may serve less than the class's rate.
        served = sum(p.rate_rps for p in pools if p.role != PoolRole.DECODE)
        share, reload = host_tier_reload(rc, plan.get("pools", []), pools, catalog)
        out.append(
            sim_class_of(
                rc,
                model.max_context_tokens,
                pools,
                rate_rps=served,
                planned_ttft_ms=cp.get("ttft_ms"),
                planned_tpot_ms=cp.get("tpot_ms"),
                # the hits the plan counts on (idle sessions' prefixes that fit)
                prefix_hit_rate=(
                    rc.prefix_hit_rate
                    if cp.get("effective_prefix_hit_rate") is None
                    else float(cp["effective_prefix_hit_rate"])
                ),
                reload_share=share,
                reload_ms=reload,
            )
        )
    return out


def host_tier_reload(
    rc: ResolvedClass,
    planned_pools: Sequence[Mapping[str, Any]],
    pools: Sequence[SimPool],
    catalog: Catalog,
) -> tuple[float, float]:
    """(share of the class's requests, reload ms) for prefixes found in a KV host tier:
    the rate-weighted ``host_hit_share`` of its prefilling pools, and the longest of their
    reloads (:func:`planner.candidates.sessions.reload_ms` of the session prefix the
    planner priced, ``nominal hit x mean prompt`` tokens, over the GPU's host link)."""
    by_id = {str(p.get("id")): p for p in planned_pools}
    rate = share = reload = 0.0
    for pool in pools:
        planned = by_id.get(pool.id, {})
        hit_share = planned.get("host_hit_share")
        if pool.role == PoolRole.DECODE or not hit_share:
            continue
        replica = pool.steps.replica
        prefix = ses.session_prefix_bytes(replica, rc.prefix_hit_rate, rc.prompt.mean_tokens)
        one, _ = ses.host_reload(catalog, replica, prefix)
        rate += pool.rate_rps
        share += pool.rate_rps * float(hit_share)
        reload = max(reload, one)
    return (share / rate if rate > 0 else 0.0), reload
