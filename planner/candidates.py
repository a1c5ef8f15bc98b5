"""Enumerate pool configurations per traffic class, screen them, keep the reasons.

For each class k and each (GPU, TP, dtype) the planner considers three roles:

* ``decode`` (disaggregated): the largest batch B that fits in memory and
  keeps the decode step within the class's TPOT SLO;
* ``prefill`` (disaggregated): one prompt at a time at full speed, its KV
  cache shipped to a decode replica (the exposed part of the transfer adds to
  TTFT);
* ``aggregated`` (chunked prefill, stall-free batching) for every chunk
  budget T: the largest B whose mixed step (B decodes + one chunk of T)
  stays within the TPOT SLO; a prompt takes ceil(P_new / T) such steps.

A configuration is rejected when the model does not fit, a single sequence's
KV does not fit, the TPOT SLO is out of reach even at batch 1, or the
prompt at the SLO percentile cannot be prefilled within the TTFT SLO even on
an idle replica. Survivors are pruned by cost per request/s (keeping each
GPU type's best, so the plan can say why another GPU lost), and the rest get
their queueing curves, which become the MILP's capacity rows.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from statistics import NormalDist

import numpy as np

from catalog.schema import Catalog, Dtype
from planner import architecture as arch
from planner import queueing
from planner import roofline as rl
from planner.errors import PlanningError
from planner.request import ResolvedClass, ResolvedRequest
from solver.problem import CapacityCut, Mode, PoolCandidate, PoolRole, Segment

#: Most replicas one pool may have; a class needing more on one config is rejected there.
MAX_REPLICAS_PER_POOL = 4096
#: Largest TP considered by default (beyond 8 only on rack-scale domains like NVL72).
DEFAULT_MAX_TP = 16
#: Share of the KV transfer hidden behind the prefill by layer-wise streaming.
KV_STREAM_OVERLAP = 0.9
#: Candidates kept per (class, role, GPU type) after dominance pruning.
KEEP_PER_GPU = 2
#: Gauss-Hermite nodes for expectations over log-normal prompt lengths.
_GH_X, _GH_W = np.polynomial.hermite.hermgauss(8)


def kv_dtype_for(dtype: Dtype) -> Dtype:
    """KV-cache format served with weights in ``dtype``: FP8 KV with FP8/FP4 weights."""
    return Dtype.BF16 if dtype == Dtype.BF16 else Dtype.FP8


@dataclass(frozen=True)
class ClassFigures:
    """Per-class token figures used by every candidate (tokens)."""

    prompt_mean_tokens: float
    prompt_q_tokens: float
    output_mean_tokens: float
    prefix_hit_rate: float
    decode_context_tokens: float  # mean resident context: P + G/2
    chunk_context_tokens: float  # mean context a prefill chunk sees
    quantile: float  # SLO percentile / 100
    prompt_nodes_tokens: tuple[float, ...]  # Gauss-Hermite nodes of the prompt length
    prompt_weights: tuple[float, ...]

    @classmethod
    def of(cls, c: ResolvedClass) -> ClassFigures:
        q = c.slo.percentile / 100.0
        p, g, h = c.prompt.mean_tokens, c.output.mean_tokens, c.prefix_hit_rate
        nodes = np.exp(c.prompt.mu + c.prompt.sigma * math.sqrt(2.0) * _GH_X)
        weights = _GH_W / math.sqrt(math.pi)
        return cls(
            prompt_mean_tokens=p,
            prompt_q_tokens=c.prompt.quantile_tokens(q),
            output_mean_tokens=g,
            prefix_hit_rate=h,
            decode_context_tokens=p + g / 2.0,
            chunk_context_tokens=p * h + p * (1.0 - h) / 2.0,
            quantile=q,
            prompt_nodes_tokens=tuple(float(x) for x in np.maximum(nodes, 1.0)),
            prompt_weights=tuple(float(w) for w in weights),
        )


@dataclass(frozen=True)
class PoolConfig:
    """An engine configuration (what the launch settings encode)."""

    role: PoolRole
    gpu: str
    tp: int
    dtype: Dtype
    kv_dtype: Dtype
    chunk_budget_tokens: int | None = None
    max_batch: int | None = None

    @property
    def key(self) -> str:
        parts = [self.role.value, self.gpu, f"tp{self.tp}", self.dtype.value]
        if self.chunk_budget_tokens:
            parts.append(f"T{self.chunk_budget_tokens}")
        if self.max_batch:
            parts.append(f"B{self.max_batch}")
        return "-".join(parts)


@dataclass
class Candidate:
    """A screened pool configuration for one class, with its predicted behaviour.

    Times in ms; rates in requests/s; ``service_*`` describe the prefill
    server (a disaggregated prefill replica, or an aggregated replica's chunk
    slot); ``decode_*`` the decode slots.
    """

    class_name: str
    config: PoolConfig
    replica: rl.Replica
    rate_rps: float
    quantile: float
    ttft_slo_ms: float
    tpot_slo_ms: float
    output_mean_tokens: float
    step_ms: float | None = None  # decode or mixed step at max_batch (= TPOT)
    service_mean_ms: float | None = None
    service_cv2: float | None = None
    service_q_ms: float | None = None  # prefill of the percentile prompt, unloaded
    transfer_exposed_ms: float = 0.0
    kv_transfer_link: str | None = None
    cost_usd_per_hour: float = 0.0
    power_kw: float = 0.0
    segments: tuple[Segment, ...] = ()
    cuts: tuple[CapacityCut, ...] = ()
    max_replicas: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.class_name}:{self.config.key}"

    @property
    def gpus_per_replica(self) -> int:
        return self.config.tp

    @property
    def wait_budget_ms(self) -> float:
        """TTFT SLO minus the unloaded prefill of the percentile prompt and transfer (ms)."""
        return self.ttft_slo_ms - (self.service_q_ms or 0.0) - self.transfer_exposed_ms

    @property
    def decode_rps_per_replica(self) -> float | None:
        """Little's law at full slots: B / (G x step) (requests/s per replica)."""
        if self.config.max_batch is None or self.step_ms is None:
            return None
        return self.config.max_batch / (self.output_mean_tokens * self.step_ms / 1000.0)

    @property
    def prefill_rps_per_replica(self) -> float | None:
        """1 / mean service time at 100% utilization (requests/s per replica)."""
        if self.service_mean_ms is None:
            return None
        return 1000.0 / self.service_mean_ms

    @cached_property
    def asymptotic_rps_per_replica(self) -> float:
        """Capacity per replica with no queueing headroom (requests/s): the min of
        the prefill and decode rates that apply to the role."""
        rates = [r for r in (self.decode_rps_per_replica, self.prefill_rps_per_replica) if r]
        return min(rates) if rates else 0.0

    @property
    def usd_per_rps(self) -> float:
        """Cost per hour of one request/s of capacity at full utilization ($/h per rps)."""
        return self.cost_usd_per_hour / max(self.asymptotic_rps_per_replica, 1e-12)

    # ------------------------------------------------------------ queueing curves

    def prefill_capacity_rps(self, replicas: int) -> float:
        """Largest arrival rate (requests/s) at which the percentile wait of an
        M/G/c queue with c = ``replicas`` prefill servers (mean service
        ``service_mean_ms``, squared CV ``service_cv2``) stays within
        ``wait_budget_ms``: c x rho_max(c) / service_s."""
        if self.service_mean_ms is None:
            return math.inf
        if replicas <= 0:
            return 0.0
        rho = queueing.max_utilization_for_wait(
            replicas,
            self.service_mean_ms / 1000.0,
            self.quantile,
            self.wait_budget_ms / 1000.0,
            self.service_cv2 or 0.0,
        )
        return replicas * rho * 1000.0 / self.service_mean_ms

    def decode_capacity_rps(self, replicas: int) -> float:
        """Largest rate (requests/s) whose resident sequences L = rate x G x step fit
        ``replicas`` x B slots at the SLO percentile: L <= S - z_q sqrt(S), with
        S = B x replicas (normal approximation of the Poisson number resident)."""
        if self.config.max_batch is None or self.step_ms is None:
            return math.inf
        slots = self.config.max_batch * replicas
        z = NormalDist().inv_cdf(self.quantile)
        residents = max(0.0, slots - z * math.sqrt(slots))
        return residents / (self.output_mean_tokens * self.step_ms / 1000.0)

    def capacity_rps(self, replicas: int) -> float:
        """min(prefill queue capacity, decode slot capacity) at ``replicas`` (requests/s)."""
        return min(self.prefill_capacity_rps(replicas), self.decode_capacity_rps(replicas))

    def to_pool_candidate(self) -> PoolCandidate:
        return PoolCandidate(
            id=self.id,
            class_id=self.class_name,
            role=self.config.role,
            gpu=self.config.gpu,
            gpus_per_replica=self.config.tp,
            cost_usd_per_hour_per_replica=self.cost_usd_per_hour,
            power_kw_per_replica=self.power_kw,
            cuts=self.cuts,
            segments=self.segments,
            max_replicas=self.max_replicas,
            config_key=self.config.key,
        )


@dataclass(frozen=True)
class Rejection:
    class_name: str
    role: PoolRole
    gpu: str
    tp: int | None
    dtype: str | None
    chunk_budget_tokens: int | None
    reason: str  # a short code
    detail: str


@dataclass
class Screening:
    candidates: list[Candidate]
    pruned: list[Candidate]
    rejections: list[Rejection]
    considered: int

    def rejected_by_reason(self) -> dict[str, int]:
        counts = Counter(r.reason for r in self.rejections)
        counts["dominated"] += len(self.pruned)
        return {k: v for k, v in sorted(counts.items()) if v}


# --------------------------------------------------------------------------- helpers


def replica_cost_usd_per_hour(catalog: Catalog, gpu_id: str, tp: int) -> float:
    """tp x on-demand price per GPU-hour ($/hour)."""
    return tp * catalog.gpus[gpu_id].price.usd_per_hour


def replica_power_kw(catalog: Catalog, gpu_id: str, tp: int) -> float:
    """tp x (TDP + server overhead / GPUs per server) / 1000 (kW at full load)."""
    gpu = catalog.gpus[gpu_id]
    per_gpu_w = gpu.tdp_w + gpu.server.server_overhead_w / gpu.server.gpus_per_server
    return tp * per_gpu_w / 1000.0


def tp_options(catalog: Catalog, gpu_id: str, wanted: tuple[int, ...] | None) -> list[int]:
    """Powers of two up to the GPU's scale-up domain (and DEFAULT_MAX_TP unless asked)."""
    domain = catalog.gpus[gpu_id].scale_up_domain_size
    if wanted:
        return [t for t in wanted if t <= domain]
    out, t = [], 1
    while t <= min(domain, DEFAULT_MAX_TP):
        out.append(t)
        t *= 2
    return out


def kv_link_for(catalog: Catalog, gpu_id: str):
    """Link the KV cache crosses from a prefill to a decode replica: the scale-up
    link on rack-scale domains (>= 16 GPUs, e.g. NVL72), else the GPU's NIC."""
    gpu = catalog.gpus[gpu_id]
    if gpu.scale_up_link and gpu.scale_up_domain_size >= 16:
        return catalog.links[gpu.scale_up_link]
    return catalog.links[gpu.network_link]


def _expect(fig: ClassFigures, fn) -> tuple[float, float]:
    """E[fn(P)] and Var[fn(P)]/E^2 over the log-normal prompt length (GH quadrature)."""
    vals = np.array([fn(p) for p in fig.prompt_nodes_tokens])
    w = np.array(fig.prompt_weights)
    mean = float(np.dot(w, vals))
    var = float(np.dot(w, (vals - mean) ** 2))
    return mean, (var / (mean * mean) if mean > 0 else 0.0)


def largest_batch(limit: int, step_of, tpot_ms: float) -> tuple[int, float] | None:
    """Largest B in [1, limit] with step_of(B) <= tpot_ms (step time grows with B)."""
    if limit < 1:
        return None
    s1 = step_of(1)
    if s1 > tpot_ms:
        return None
    lo, hi = 1, limit
    if step_of(hi) <= tpot_ms:
        return hi, step_of(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if step_of(mid) <= tpot_ms:
            lo = mid
        else:
            hi = mid
    return lo, step_of(lo)


def fast_chunked_ttft_ms(
    replica: rl.Replica, prompt_tokens: float, budget_tokens: int, step_ms: float, cached: float
) -> float:
    """TTFT of a prompt in fixed chunks on an idle stall-free replica (ms):
    ``sum_i max(step_ms, chunk_compute_ms(T, s_i))`` over ceil(P_new / T) chunks.

    Chunk compute is taken linear in its start context between the first and
    the last full chunk (exact for full attention, where attention FLOPs grow
    linearly with context; within a few percent for sliding-window layers), so
    it costs three cost-model calls instead of one per chunk. The exact loop is
    :func:`planner.roofline.chunked_prefill_ttft_ms`.
    """
    new = max(prompt_tokens - cached, 0.0)
    if new <= 0:
        return 0.0
    k = math.ceil(new / budget_tokens)
    last = new - (k - 1) * budget_tokens
    tail = max(step_ms, rl.chunk_compute_ms(replica, last, cached + (k - 1) * budget_tokens))
    if k == 1:
        return tail
    c0 = rl.chunk_compute_ms(replica, budget_tokens, cached)
    c1 = rl.chunk_compute_ms(replica, budget_tokens, cached + (k - 2) * budget_tokens)
    return sum_max_linear(step_ms, c0, c1, k - 1) + tail


def sum_max_linear(floor: float, first: float, last: float, count: int) -> float:
    """sum_{i=0}^{count-1} max(floor, first + (last - first) i / (count - 1)), closed form."""
    if count <= 0:
        return 0.0
    if count == 1:
        return max(floor, first)
    if first >= floor and last >= floor:
        return count * (first + last) / 2.0
    if first <= floor and last <= floor:
        return count * floor
    step = (last - first) / (count - 1)
    # indices whose value is below the floor form a prefix (step > 0) or suffix (step < 0)
    below = (
        math.floor((floor - first) / step) + 1
        if step > 0
        else count - (math.floor((floor - first) / step) + 1)
    )
    below = min(max(below, 0), count)
    if step > 0:
        lo, hi = below, count - 1
    else:
        lo, hi = 0, count - below - 1
    above = hi - lo + 1
    above_sum = above * (2 * first + step * (lo + hi)) / 2.0 if above > 0 else 0.0
    return below * floor + above_sum


# --------------------------------------------------------------------------- screening


def _screen_config(
    catalog: Catalog,
    req: ResolvedRequest,
    cls: ResolvedClass,
    fig: ClassFigures,
    replica: rl.Replica,
    role: PoolRole,
    budget: int | None,
) -> Candidate | Rejection:
    gpu, tp, dtype = replica.gpu.id, replica.tp, replica.weight_dtype
    slo = cls.slo

    def reject(reason: str, detail: str) -> Rejection:
        return Rejection(cls.name, role, gpu, tp, dtype.value, budget, reason, detail)

    h = fig.prefix_hit_rate
    b_mem = rl.max_resident_batch(replica, fig.decode_context_tokens)
    cand = Candidate(
        class_name=cls.name,
        config=PoolConfig(role, gpu, tp, dtype, replica.kv_dtype, budget, None),
        replica=replica,
        rate_rps=cls.rate_rps,
        quantile=fig.quantile,
        ttft_slo_ms=slo.ttft_ms,
        tpot_slo_ms=slo.tpot_ms,
        output_mean_tokens=fig.output_mean_tokens,
        cost_usd_per_hour=replica_cost_usd_per_hour(catalog, gpu, tp),
        power_kw=replica_power_kw(catalog, gpu, tp),
    )
    if role in (PoolRole.DECODE, PoolRole.AGGREGATED) and b_mem < 1:
        return reject(
            "kv_exceeds_memory",
            f"one sequence of {fig.decode_context_tokens:,.0f} tokens needs more KV memory "
            f"than the {rl.kv_capacity_bytes(replica) / 1e9:.1f} GB left after weights",
        )
    if role == PoolRole.DECODE:
        best = largest_batch(
            b_mem, lambda b: rl.decode_step_ms(replica, b, fig.decode_context_tokens), slo.tpot_ms
        )
        if best is None:
            step1 = rl.decode_step_ms(replica, 1, fig.decode_context_tokens)
            return reject(
                "tpot_unreachable",
                f"decode step {step1:.1f} ms at batch 1 exceeds the TPOT SLO {slo.tpot_ms:g} ms",
            )
        b, step = best
        cand.config = PoolConfig(role, gpu, tp, dtype, replica.kv_dtype, None, b)
        cand.step_ms = step
        return cand

    if role == PoolRole.PREFILL:

        def service(p: float) -> float:
            return rl.prefill_ms(replica, p, p * h)

        mean, cv2 = _expect(fig, service)
        p_q = fig.prompt_q_tokens
        s_q = service(p_q)
        link = kv_link_for(catalog, gpu)
        kv_bytes = arch.kv_bytes_for_sequence(replica.model, p_q, replica.kv_dtype)
        # Each of the tp GPUs ships its shard over its own link.
        transfer = rl.kv_transfer_ms(kv_bytes, link.bandwidth_gb_per_s * tp, link.latency_us)
        exposed = rl.exposed_transfer_ms(
            transfer, s_q, KV_STREAM_OVERLAP, num_layers=replica.model.num_layers
        )
        cand.service_mean_ms, cand.service_cv2, cand.service_q_ms = mean, cv2, s_q
        cand.transfer_exposed_ms, cand.kv_transfer_link = exposed, link.id
        if cand.wait_budget_ms <= 0:
            return reject(
                "ttft_unreachable",
                f"prefill of a p{slo.percentile:g} prompt ({p_q:,.0f} tokens) takes "
                f"{s_q:.0f} ms + {exposed:.0f} ms KV transfer, over the TTFT SLO "
                f"{slo.ttft_ms:g} ms",
            )
        return cand

    # aggregated: B decodes + one chunk of `budget` tokens per step
    assert budget is not None

    def step_of(b: int) -> float:
        return rl.mixed_step_ms(
            replica, b, fig.decode_context_tokens, budget, fig.chunk_context_tokens
        )

    best = largest_batch(b_mem, step_of, slo.tpot_ms)
    if best is None:
        return reject(
            "tpot_unreachable",
            f"a mixed step with a {budget}-token chunk takes {step_of(1):.1f} ms at batch 1, "
            f"over the TPOT SLO {slo.tpot_ms:g} ms",
        )
    b, step = best

    def service_agg(p: float) -> float:
        return fast_chunked_ttft_ms(replica, p, budget, step, p * h)

    mean, cv2 = _expect(fig, service_agg)
    s_q = service_agg(fig.prompt_q_tokens)
    cand.config = PoolConfig(role, gpu, tp, dtype, replica.kv_dtype, budget, b)
    cand.step_ms = step
    cand.service_mean_ms, cand.service_cv2, cand.service_q_ms = mean, cv2, s_q
    if cand.wait_budget_ms <= 0:
        return reject(
            "ttft_unreachable",
            f"a p{slo.percentile:g} prompt ({fig.prompt_q_tokens:,.0f} tokens) needs "
            f"{s_q:.0f} ms of {budget}-token chunks, over the TTFT SLO {slo.ttft_ms:g} ms",
        )
    return cand


def _roles_for(cls: ResolvedClass) -> list[PoolRole]:
    roles = []
    if Mode.AGGREGATED in cls.modes:
        roles.append(PoolRole.AGGREGATED)
    if Mode.DISAGGREGATED in cls.modes:
        roles += [PoolRole.PREFILL, PoolRole.DECODE]
    return roles


def screen_candidates(
    req: ResolvedRequest, catalog: Catalog, *, cross_gpu_prune: bool = True
) -> Screening:
    """Enumerate role x GPU x TP x dtype (x chunk budget) per class; screen; prune.

    ``cross_gpu_prune=False`` keeps candidates that another GPU type beats on cost
    (needed when GPUs are bought once for several scenarios: then the GPU type
    itself matters, not just the cost of the pool)."""
    eff = req.request.efficiency
    kept: list[Candidate] = []
    rejections: list[Rejection] = []
    considered = 0
    for cls in req.classes:
        if cls.rate_rps <= 0:
            continue
        fig = ClassFigures.of(cls)
        roles = _roles_for(cls)
        for gpu_id in req.gpus:
            gpu = catalog.gpus[gpu_id]
            for dtype in req.dtypes:
                if (
                    gpu.peak_tflops(dtype) is None
                    or dtype not in catalog.models[req.model_id].weight_dtypes
                ):
                    considered += len(roles)
                    why = (
                        f"{gpu_id} has no {dtype} tensor cores"
                        if gpu.peak_tflops(dtype) is None
                        else f"{req.model_id} is not served in {dtype}"
                    )
                    for role in roles:
                        rejections.append(
                            Rejection(
                                cls.name,
                                role,
                                gpu_id,
                                None,
                                dtype.value,
                                None,
                                "dtype_unsupported",
                                why,
                            )
                        )
                    continue
                for tp in tp_options(catalog, gpu_id, req.tps):
                    try:
                        replica = rl.build_replica(
                            catalog,
                            req.model_id,
                            gpu_id,
                            tp=tp,
                            dtype=dtype,
                            kv_dtype=kv_dtype_for(dtype),
                            mfu=eff.prefill_mfu,
                            mbu=eff.decode_mbu,
                            overlap_factor=eff.overlap_factor,
                        )
                    except PlanningError as err:
                        considered += len(roles)
                        reason = "does_not_fit" if err.code == "does_not_fit" else "invalid"
                        for role in roles:
                            rejections.append(
                                Rejection(
                                    cls.name,
                                    role,
                                    gpu_id,
                                    tp,
                                    dtype.value,
                                    None,
                                    reason,
                                    err.message,
                                )
                            )
                        continue
                    for role in roles:
                        budgets = req.chunk_budgets if role == PoolRole.AGGREGATED else (None,)
                        for budget in budgets:
                            considered += 1
                            out = _screen_config(catalog, req, cls, fig, replica, role, budget)
                            if isinstance(out, Rejection):
                                rejections.append(out)
                            else:
                                kept.append(out)
    survivors, pruned = prune(kept)
    final: list[Candidate] = []
    for cand in survivors:
        err = attach_capacity(cand)
        if err is None:
            final.append(cand)
        else:
            rejections.append(err)
    final, dominated = prune_by_cost_curves(final, req) if cross_gpu_prune else (final, [])
    return Screening(final, pruned + dominated, rejections, considered)


def dominates(a: Candidate, b: Candidate) -> bool:
    """True when ``a`` is at least as good as ``b`` in every respect the MILP sees:
    same class, role and GPU type; no more GPUs, cost or power per replica; and at
    least the capacity at every replica count (prefill: no longer mean service
    time, no less wait budget, no more service variability; decode: at least as
    many slots, each turning over at least as fast)."""
    if (a.class_name, a.config.role, a.config.gpu) != (b.class_name, b.config.role, b.config.gpu):
        return False
    if a.config.tp > b.config.tp or a.cost_usd_per_hour > b.cost_usd_per_hour:
        return False
    if a.power_kw > b.power_kw:
        return False
    if b.service_mean_ms is not None:
        if a.service_mean_ms is None or a.service_mean_ms > b.service_mean_ms:
            return False
        if a.wait_budget_ms < b.wait_budget_ms or (a.service_cv2 or 0) > (b.service_cv2 or 0):
            return False
    if b.config.max_batch is not None:
        if a.config.max_batch is None or a.step_ms is None or b.step_ms is None:
            return False
        if a.config.max_batch < b.config.max_batch or a.step_ms > b.step_ms:
            return False
    return True


def prune(cands: list[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """Drop dominated candidates (see :func:`dominates`), then keep per (class,
    role, GPU type) the KEEP_PER_GPU cheapest per request/s of capacity.

    Pruning never looks across GPU types, so offering more GPU types only adds
    candidates (a plan can only get cheaper), and every GPU type keeps its
    best configurations for stock limits and for the "why not" explanation.
    """
    groups: dict[tuple[str, PoolRole, str], list[Candidate]] = {}
    for c in cands:
        groups.setdefault((c.class_name, c.config.role, c.config.gpu), []).append(c)
    keep, drop = [], []
    for group in groups.values():
        group.sort(key=lambda c: (c.usd_per_rps, c.config.tp, c.config.key))
        alive: list[Candidate] = []
        for c in group:
            if any(dominates(k, c) for k in alive):
                drop.append(c)
            else:
                alive.append(c)
        keep += alive[:KEEP_PER_GPU]
        drop += alive[KEEP_PER_GPU:]
    return keep, drop


def _capacity_table(pc: PoolCandidate) -> np.ndarray:
    """Best capacity_rps(k) over k <= n, for n = 1..max_replicas (requests/s): the
    smallest n reaching a rate is the same as with the raw table."""
    caps = np.array([pc.capacity_rps(n) for n in range(1, pc.max_replicas + 1)])
    return np.maximum.accumulate(caps)  # monotone, for searchsorted


def prune_by_cost_curves(
    cands: list[Candidate], req: ResolvedRequest
) -> tuple[list[Candidate], list[Candidate]]:
    """Drop a candidate B when another candidate A of the same class and role can
    carry every rate B can carry for no more money (and no more power when a
    power limit is set): for every replica count n of B, the fewest replicas m
    of A with capacity_A(m) >= capacity_B(n) cost c_A m <= c_B n.

    Any fleet using B then has a fleet at most as expensive using A instead
    (capacities are superadditive, up to the segment approximation). Not applied
    to GPU types with a stock limit, nor when the number of configurations is
    limited (swapping configurations could break those rules).
    """
    lim = req.request.constraints
    if lim.max_configurations is not None:
        return cands, []
    limited = set(lim.max_gpus)
    power = lim.power_kw is not None
    m0 = lim.min_replicas_per_pool
    groups: dict[tuple[str, PoolRole], list[Candidate]] = {}
    for c in cands:
        groups.setdefault((c.class_name, c.config.role), []).append(c)
    keep: list[Candidate] = []
    drop: list[Candidate] = []
    for group in groups.values():
        free = [c for c in group if c.config.gpu not in limited]
        keep += [c for c in group if c.config.gpu in limited]
        tables = {id(c): _capacity_table(c.to_pool_candidate()) for c in free}
        free.sort(key=lambda c: (c.usd_per_rps, c.config.key))
        alive: list[Candidate] = []
        for b in free:
            cap_b = tables[id(b)]
            n_b = np.maximum(np.arange(1, len(cap_b) + 1), m0)
            r_b = np.minimum(cap_b, b.rate_rps)
            beaten = False
            for a in alive:
                cap_a = tables[id(a)]
                m = np.searchsorted(cap_a, r_b * (1 - 1e-12), side="left") + 1
                if (m > len(cap_a)).any():
                    continue
                m = np.maximum(m, m0)
                if (a.cost_usd_per_hour * m > b.cost_usd_per_hour * n_b + 1e-9).any():
                    continue
                if power and (a.power_kw * m > b.power_kw * n_b + 1e-12).any():
                    continue
                beaten = True
                break
            (drop if beaten else alive).append(b)
        keep += alive
    return keep, drop


def _breakpoints(limit: int) -> list[int]:
    """0, 1, 2, 3, 4, 6, 8, 12, 16, ... up to ``limit`` (replica counts)."""
    pts, a = [0, 1, 2, 3], 4
    while a < limit:
        pts.append(a)
        pts.append(a + a // 2)
        a *= 2
    return sorted({p for p in pts if p < limit})


def attach_capacity(cand: Candidate) -> Rejection | None:
    """Give ``cand`` its MILP capacity rows: chords of its convex capacity curve
    at replica counts (a, a+1) for breakpoints a, and the replica cap that carries
    the whole class. Decode slots on aggregated replicas become one linear cut
    (a chord at the replica count that carries the class: exact there,
    conservative elsewhere)."""
    rate = cand.rate_rps
    # Replicas needed for the whole class on this candidate alone.
    n = max(1, math.ceil(rate / max(cand.asymptotic_rps_per_replica, 1e-12)))
    while cand.capacity_rps(n) < rate:
        n = math.ceil(n * 1.25) + 1
        if n > MAX_REPLICAS_PER_POOL:
            return Rejection(
                cand.class_name,
                cand.config.role,
                cand.config.gpu,
                cand.config.tp,
                cand.config.dtype.value,
                cand.config.chunk_budget_tokens,
                "too_many_replicas",
                f"needs more than {MAX_REPLICAS_PER_POOL} replicas for {rate:g} req/s",
            )
    # binary search the smallest n carrying the class
    lo_n, hi_n = 0, n
    while hi_n - lo_n > 1:
        mid = (lo_n + hi_n) // 2
        if cand.capacity_rps(mid) >= rate:
            hi_n = mid
        else:
            lo_n = mid
    n = hi_n
    cand.max_replicas = n
    role = cand.config.role
    if role == PoolRole.PREFILL:
        curve = cand.prefill_capacity_rps
    elif role == PoolRole.DECODE:
        curve = cand.decode_capacity_rps
    else:
        curve = cand.prefill_capacity_rps
        a = max(0, n - 1)
        f0, f1 = cand.decode_capacity_rps(a), cand.decode_capacity_rps(a + 1)
        cand.cuts = (CapacityCut(f0 - (f1 - f0) * a, f1 - f0),)
    cand.segments = segments_for(curve, n)
    return None


def segments_for(curve, n_max: int) -> tuple[Segment, ...]:
    """Segments [a_s, a_{s+1}] over breakpoints a < n_max (the last ends at n_max),
    each with the chord of ``curve`` through (a_s, a_s + 1), lowered where needed so
    it never exceeds the curve at the segment's tabulated replica counts."""
    points = _breakpoints(n_max)
    values: dict[int, float] = {}

    def f(x: int) -> float:
        if x not in values:
            values[x] = 0.0 if x == 0 else min(curve(x), 1e12)
        return values[x]

    out = []
    for i, a in enumerate(points):
        hi = points[i + 1] if i + 1 < len(points) else n_max
        slope = f(a + 1) - f(a)
        intercept = f(a) - slope * a
        check = [x for x in (a, a + 1, hi) if a <= x <= hi]
        excess = max(intercept + slope * x - f(x) for x in check)
        if excess > 1e-9:
            intercept -= excess
        out.append(Segment(a, hi, intercept, slope))
    return tuple(out)
