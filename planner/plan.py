"""The Plan: what to run, what it costs, what it predicts, and why.

``plan_from_result`` turns a solver result and the screened candidates into
a :class:`Plan`. Every number in it comes from a named function here or in
the cost model (``roofline``, ``queueing``), whose docstring gives the
formula and units.
"""

from __future__ import annotations

import json
import math
from statistics import NormalDist
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from planner import engines, queueing, risk, sizing
from planner import roofline as rl
from planner.candidates import Candidate, ClassFigures, Rejection, Screening
from planner.request import ResolvedRequest
from planner.simulate.results import Verification
from solver.problem import Mode, PoolRole, SolveResult, SolveStatus
from solver.variables import safe_name

HOURS_PER_MONTH = 730.0


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NodeLaunch(Out):
    """Commands for one node of a multi-node replica."""

    node_rank: int
    #: vLLM: the Ray command that joins this node to the replica's cluster.
    ray: list[str]
    #: vLLM: the server, started on node 0 once every node has joined (empty elsewhere).
    vllm: list[str]
    sglang: list[str]


class LaunchSettings(Out):
    vllm: list[str]
    sglang: list[str]
    #: Nodes (servers) one replica spans: tp / GPUs per node, 1 for a single server.
    nodes_per_replica: int = 1
    #: Multi-node replicas: one command per node, with its rank (empty otherwise).
    per_node: list[NodeLaunch] = []


class PoolPlan(Out):
    id: str
    class_name: str = Field(serialization_alias="class")
    role: PoolRole
    gpu: str
    tp: int
    dtype: str
    kv_dtype: str
    replicas: int
    gpus: int
    chunk_budget_tokens: int | None
    max_batch: int | None
    rate_rps: float
    capacity_rps: float
    utilization: float
    cost_usd_per_hour: float
    power_kw: float
    predicted_ttft_ms: float | None
    predicted_tpot_ms: float | None
    step_ms: float | None
    kv_transfer_link: str | None = None
    kv_transfer_exposed_ms: float | None = None
    # Uncertainty (planner.risk): the GPU's factor provenance and spread, the derate
    # applied to capacity_rps at the request's confidence, and the 90% bands.
    provenance: str | None = None
    factor_points: int | None = None
    sigma_log: float | None = None
    capacity_derate: float | None = None
    capacity_band_rps: tuple[float, float] | None = None
    cost_band_usd_per_hour: tuple[float, float] | None = None
    launch: LaunchSettings
    #: The rate the optimizer let the pool carry: max_utilization x capacity with
    #: spare_replicas down (requests/s).
    planned_capacity_rps: float | None = None
    spare_replicas: int = 0
    #: SLO capacity with spare_replicas replicas down (requests/s).
    capacity_with_spares_down_rps: float | None = None


class KvPair(Out):
    """A prefill pool handing KV caches to a decode pool of the same class."""

    class_name: str = Field(serialization_alias="class")
    prefill_pool: str
    decode_pool: str
    link: str  # the link this pair actually uses (kv_pair_link)
    priced_link: str  # the link the prefill pool's TTFT was priced on
    exposed_ms: float | None  # exposed transfer time in the prefill pool's TTFT


class Margins(Out):
    """The safety margins the plan carries."""

    max_utilization: float
    spare_replicas_per_pool: int
    burst_cv: float
    max_pool_load: float | None  # highest rate / SLO capacity over the pools
    min_headroom: float | None  # 1 - max_pool_load


class OperationsCost(Out):
    """What running this variety of hardware and configurations costs ($/hour)."""

    gpu_types: int
    configurations: int
    usd_per_hour_per_gpu_type: float
    usd_per_hour_per_configuration: float
    cost_usd_per_hour: float


class SloOut(Out):
    ttft_ms: float
    tpot_ms: float
    percentile: float


class ClassPlan(Out):
    name: str
    workload: str
    mode: Mode | None
    rate_rps: float
    served_rps: float
    slo: SloOut
    ttft_ms: float | None
    tpot_ms: float | None
    meets_slo: bool | None
    pools: list[str]
    prefill_gpus: int
    decode_gpus: int
    aggregated_gpus: int
    prefill_gpu_s_per_request: float | None = None
    decode_gpu_s_per_request: float | None = None
    prefill_load_share: float | None = None
    mode_reason: str = ""


class BindingConstraint(Out):
    name: str
    detail: str


class Alternative(Out):
    name: str
    status: str
    cost_usd_per_hour: float | None
    delta_usd_per_hour: float | None
    note: str = ""
    class_name: str | None = Field(default=None, serialization_alias="class")
    verified: bool = Field(
        default=False,
        description="simulated and meeting every SLO; alternatives are solved on the plan's "
        "corrected model (verification.corrections) but not simulated",
    )


class WhyNot(Out):
    class_name: str = Field(serialization_alias="class")
    gpu: str
    reason: str
    detail: str


class RiskOut(Out):
    """How the plan treats the cost model's uncertainty (planner.risk)."""

    confidence: float
    z: float
    band_confidence: float
    z_band: float
    note: str = ""


class SolverInfo(Out):
    status: SolveStatus
    gap: float | None
    runtime_s: float
    solver: str
    time_limit_s: float
    rel_gap: float
    candidates_considered: int
    candidates_in_model: int
    candidates_rejected: dict[str, int]
    variables: int
    constraints: int
    message: str = ""


class Plan(Out):
    status: SolveStatus
    objective: str
    objective_value: float | None
    model: str
    catalog_hash: str
    cost_usd_per_hour: float | None
    cost_usd_per_month: float | None
    cost_usd_per_million_tokens: float | None
    cost_band_usd_per_hour: tuple[float, float] | None = Field(
        default=None,
        description="[low, high]: the cost of right-sizing every pool at the ends of its "
        "90% capacity band (planner.risk.cost_band_usd_per_hour)",
    )
    unmeasured_gpus: list[str] = Field(
        default_factory=list,
        description="GPU types in the plan whose efficiency factors rest on no measurement "
        "(provenance analogy)",
    )
    risk: RiskOut | None = None
    gpus_total: int
    gpus_by_type: dict[str, int]
    power_kw: float
    pool_ratio_prefill_to_decode: float | None
    pools: list[PoolPlan]
    classes: list[ClassPlan]
    binding: list[BindingConstraint]
    alternatives: list[Alternative] = []
    why_not: list[WhyNot] = []
    infeasible_reasons: list[str] = []
    warnings: list[str] = []
    relaxation: dict[str, float] = {}
    solver: SolverInfo
    assumptions: dict[str, Any] = {}
    verification: Verification | None = Field(
        default=None,
        description="The planned fleet simulated under load (planner.simulate.verify)",
    )
    margins: Margins | None = None
    operations: OperationsCost | None = None
    #: GPU cost + operations cost ($/hour); cost_usd_per_hour is the GPUs alone.
    total_cost_usd_per_hour: float | None = None
    kv_pairs: list[KvPair] = []
    scenarios: list[dict[str, Any]] | None = None  # robust plans: planner.scenarios

    def to_json_dict(self) -> dict[str, Any]:
        return json.loads(self.model_dump_json(by_alias=True))


# --------------------------------------------------------------------------- numbers


def pool_ttft_ms(cand: Candidate, rate_rps: float, replicas: int) -> float | None:
    """Predicted TTFT at the SLO percentile for a pool carrying ``rate_rps`` (ms):

    ``wait_q(M/G/c, c = replicas) + prefill of the percentile prompt + exposed KV
    transfer``; None for decode pools (their class's TTFT is set by prefill).
    """
    if cand.service_mean_ms is None:
        return None
    wait_s = queueing.mgc_wait_quantile_s(
        rate_rps,
        cand.service_mean_ms / 1000.0,
        max(1, replicas),
        cand.quantile,
        cand.service_cv2 or 0.0,
    )
    return wait_s * 1000.0 + (cand.service_q_ms or 0.0) + cand.transfer_exposed_ms


def percentile_batch(cand: Candidate, rate_rps: float, replicas: int) -> float:
    """Resident sequences per replica at the SLO percentile:
    ``min(B, L + z_q sqrt(L))`` with ``L = rate x G x step / replicas`` (Little)."""
    if cand.config.max_batch is None or cand.step_ms is None:
        return 0.0
    mean = queueing.littles_law_resident(rate_rps, cand.output_mean_tokens, cand.step_ms)
    mean /= max(1, replicas)
    z = NormalDist().inv_cdf(cand.quantile)
    return max(1.0, min(float(cand.config.max_batch), mean + z * math.sqrt(max(mean, 0.0))))


def pool_tpot_ms(
    cand: Candidate, fig: ClassFigures, rate_rps: float, replicas: int
) -> float | None:
    """Predicted TPOT at the SLO percentile (ms): the decode (or mixed, with the
    pool's chunk budget) step at :func:`percentile_batch` resident sequences."""
    if cand.config.max_batch is None:
        return None
    b = percentile_batch(cand, rate_rps, replicas)
    if cand.config.role == PoolRole.AGGREGATED:
        return rl.mixed_step_ms(
            cand.replica,
            b,
            fig.decode_context_tokens,
            cand.config.chunk_budget_tokens or 0,
            fig.chunk_context_tokens,
        )
    return rl.decode_step_ms(cand.replica, b, fig.decode_context_tokens)


def tokens_per_hour(req: ResolvedRequest) -> float:
    """Prompt + output tokens processed per hour at the requested rates (tokens/hour)."""
    return 3600.0 * sum(
        c.rate_rps * (c.prompt.mean_tokens + c.output.mean_tokens) for c in req.classes
    )


def cost_per_million_tokens(cost_usd_per_hour: float, req: ResolvedRequest) -> float:
    """$/hour / (tokens per hour / 1e6): US dollars per million prompt+output tokens."""
    tph = tokens_per_hour(req)
    return cost_usd_per_hour / (tph / 1e6) if tph > 0 else math.inf


def launch_settings(cand: Candidate, model_id: str) -> LaunchSettings:
    """Engine arguments for vLLM and SGLang that realize the pool's configuration
    (the model's Hugging Face repository when the catalog names one). Token budgets
    follow each engine's semantics (:func:`planner.engines.launch_token_budget`):
    vLLM's ``--max-num-batched-tokens`` is the chunk plus the max batch, SGLang's
    ``--chunked-prefill-size`` the chunk alone (with ``--enable-mixed-chunk`` so decodes
    share the prefill step, as the plan assumes)."""
    cfg = cand.config
    model_id = cand.replica.model.hf_repo or model_id
    v = [
        "vllm",
        "serve",
        model_id,
        f"--tensor-parallel-size={cfg.tp}",
        f"--gpu-memory-utilization={cand.replica.memory_utilization}",
    ]
    s = [
        "python",
        "-m",
        "sglang.launch_server",
        f"--model-path={model_id}",
        f"--tp-size={cfg.tp}",
        f"--mem-fraction-static={cand.replica.memory_utilization}",
    ]
    if cfg.dtype.value in ("fp8", "fp4"):
        v.append("--quantization=fp8" if cfg.dtype.value == "fp8" else "--quantization=mxfp4")
        s.append("--quantization=fp8" if cfg.dtype.value == "fp8" else "--quantization=mxfp4")
    if cfg.kv_dtype.value == "fp8":
        v.append("--kv-cache-dtype=fp8")
        s.append("--kv-cache-dtype=fp8_e4m3")
    if cfg.max_batch:
        v.append(f"--max-num-seqs={cfg.max_batch}")
        s.append(f"--max-running-requests={cfg.max_batch}")
    if cfg.role == PoolRole.AGGREGATED:
        assert cfg.chunk_budget_tokens is not None
        batch = cfg.max_batch or 0
        vllm_budget = engines.launch_token_budget(
            engines.engine_profile("vllm"), cfg.chunk_budget_tokens, batch
        )
        sglang_budget = engines.launch_token_budget(
            engines.engine_profile("sglang"), cfg.chunk_budget_tokens, batch
        )
        # vLLM counts every running decode in its budget: chunk + max batch
        v += ["--enable-chunked-prefill", f"--max-num-batched-tokens={vllm_budget}"]
        s += [f"--chunked-prefill-size={sglang_budget}", "--enable-mixed-chunk"]
    elif cfg.role == PoolRole.PREFILL:
        v.append('--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_producer"}')
        s.append("--disaggregation-mode=prefill")
    else:
        v.append('--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_consumer"}')
        s.append("--disaggregation-mode=decode")
    nodes = nodes_per_replica(cfg.tp, gpus_per_node(cand.replica.gpu))
    if nodes == 1:
        return LaunchSettings(vllm=v, sglang=s)
    per_node = []
    v_ray = [*v, "--distributed-executor-backend=ray"]
    for rank in range(nodes):
        # vLLM: one Ray cluster per replica (head on node 0), the server on the head.
        ray = (
            ["ray", "start", "--head", "--port=6379"]
            if rank == 0
            else ["ray", "start", "--address=HEAD_ADDR:6379", "--block"]
        )
        sr = [*s, f"--nnodes={nodes}", f"--node-rank={rank}", "--dist-init-addr=HEAD_ADDR:5000"]
        per_node.append(
            NodeLaunch(node_rank=rank, ray=ray, vllm=v_ray if rank == 0 else [], sglang=sr)
        )
    return LaunchSettings(
        vllm=v_ray,
        sglang=per_node[0].sglang,
        nodes_per_replica=nodes,
        per_node=per_node,
    )


def gpus_per_node(gpu) -> int:
    """GPUs one host (one OS instance) holds: the catalog's ``server.gpus_per_node``
    when set (a GB200 NVL72 compute tray holds 4 of the rack's 72), else
    ``server.gpus_per_server``."""
    return gpu.server.gpus_per_node or gpu.server.gpus_per_server


def nodes_per_replica(tp: int, per_node: int) -> int:
    """Hosts one replica of ``tp`` GPUs spans: ceil(tp / GPUs per node) (>= 1)."""
    return max(1, math.ceil(tp / max(1, per_node)))


def binding_detail(name: str, req: ResolvedRequest) -> str:
    lim = req.request.constraints
    if name == "budget":
        return f"budget of ${lim.budget_usd_per_hour:,.2f}/h is fully used"
    if name == "power":
        return f"power limit of {lim.power_kw:,.1f} kW is fully used"
    if name.startswith("stock__"):
        for gpu, cap in lim.max_gpus.items():
            if name == f"stock__{safe_name(gpu)}":
                return f"all {cap} {gpu} GPUs in stock are used"
    if name == "max_configurations":
        return f"at most {lim.max_configurations} distinct configurations"
    if name == "max_gpu_types":
        return f"at most {lim.max_gpu_types} GPU types"
    return name


def plan_from_result(
    req: ResolvedRequest,
    screening: Screening,
    result: SolveResult,
    catalog_hash: str,
    time_limit_s: float,
    rel_gap: float,
) -> Plan:
    """Assemble the Plan from the solve: pools with predictions, classes, binding limits."""
    by_id = {c.id: c for c in screening.candidates}
    figs = {c.name: ClassFigures.of(c) for c in req.classes}
    pools: list[PoolPlan] = []
    for cid, n in sorted(result.replicas.items()):
        cand = by_id[cid]
        rate = result.rates_rps.get(cid, 0.0)
        cap, planned, spares_down = pool_capacities(cand, n)
        fig = figs[cand.class_name]
        cap_band = risk.capacity_band_rps(cap / cand.risk_derate, cand.sigma_log)
        cost_band = risk.pool_cost_band_usd_per_hour(
            n,
            cand.cost_usd_per_hour,
            cand.risk_derate,
            cand.sigma_log,
            min_replicas=cand.min_replicas,
        )
        pools.append(
            PoolPlan(
                id=cid,
                class_name=cand.class_name,
                role=cand.config.role,
                gpu=cand.config.gpu,
                tp=cand.config.tp,
                dtype=cand.config.dtype.value,
                kv_dtype=cand.config.kv_dtype.value,
                replicas=n,
                gpus=n * cand.config.tp,
                chunk_budget_tokens=cand.config.chunk_budget_tokens,
                max_batch=cand.config.max_batch,
                rate_rps=rate,
                capacity_rps=cap,
                utilization=rate / cap if cap > 0 else 0.0,
                cost_usd_per_hour=n * cand.cost_usd_per_hour,
                power_kw=n * cand.power_kw,
                predicted_ttft_ms=pool_ttft_ms(cand, rate, n) if rate > 0 else None,
                predicted_tpot_ms=pool_tpot_ms(cand, fig, rate, n) if rate > 0 else None,
                step_ms=cand.step_ms,
                kv_transfer_link=cand.kv_transfer_link,
                kv_transfer_exposed_ms=(
                    cand.transfer_exposed_ms if cand.config.role == PoolRole.PREFILL else None
                ),
                provenance=cand.provenance,
                factor_points=cand.factor_points,
                sigma_log=cand.sigma_log,
                capacity_derate=cand.risk_derate,
                capacity_band_rps=cap_band,
                cost_band_usd_per_hour=cost_band,
                launch=launch_settings(cand, req.model_id),
                planned_capacity_rps=planned,
                spare_replicas=cand.spare_replicas,
                capacity_with_spares_down_rps=spares_down,
            )
        )
    solved = result.status.has_solution
    classes: list[ClassPlan] = []
    for cls in req.classes:
        mine = [p for p in pools if p.class_name == cls.name and p.rate_rps > 0]
        ttfts = [p.predicted_ttft_ms for p in mine if p.predicted_ttft_ms is not None]
        tpots = [p.predicted_tpot_ms for p in mine if p.predicted_tpot_ms is not None]
        ttft = max(ttfts) if ttfts else None
        tpot = max(tpots) if tpots else None
        meets = None
        if solved and (ttft is not None and tpot is not None):
            meets = ttft <= cls.slo.ttft_ms * (1 + 1e-6) and tpot <= cls.slo.tpot_ms * (1 + 1e-6)
        served = result.served_rps.get(cls.name, cls.rate_rps if solved else 0.0)

        def gpus_of(role: PoolRole, mine=mine) -> int:
            return sum(p.gpus for p in mine if p.role == role)

        classes.append(
            ClassPlan(
                name=cls.name,
                workload=cls.workload.id,
                mode=result.modes.get(cls.name) if solved and cls.rate_rps > 0 else None,
                rate_rps=cls.rate_rps,
                served_rps=served if cls.rate_rps > 0 else 0.0,
                slo=SloOut(**cls.slo.model_dump()),
                ttft_ms=ttft,
                tpot_ms=tpot,
                meets_slo=meets,
                pools=[p.id for p in mine],
                prefill_gpus=gpus_of(PoolRole.PREFILL),
                decode_gpus=gpus_of(PoolRole.DECODE),
                aggregated_gpus=gpus_of(PoolRole.AGGREGATED),
            )
        )
    fill_gpu_seconds(classes, pools, by_id, req)
    gpus_by_type: dict[str, int] = {}
    for p in pools:
        gpus_by_type[p.gpu] = gpus_by_type.get(p.gpu, 0) + p.gpus
    pre = sum(p.gpus for p in pools if p.role == PoolRole.PREFILL)
    dec = sum(p.gpus for p in pools if p.role == PoolRole.DECODE)
    cost = sum(p.cost_usd_per_hour for p in pools) if solved else None
    ops = operations_cost(req, screening, result) if solved else None
    band = (
        risk.cost_band_usd_per_hour(
            p.cost_band_usd_per_hour for p in pools if p.cost_band_usd_per_hour
        )
        if solved
        else None
    )
    infeasible: list[str] = []
    if result.status == SolveStatus.INFEASIBLE:
        infeasible = infeasibility_reasons(req, screening)
        if result.relaxation:
            infeasible += [relaxation_text(k, v, req) for k, v in result.relaxation.items()]
        if not infeasible:
            infeasible = [result.message]
    return Plan(
        status=result.status,
        objective=req.request.objective.value,
        objective_value=result.objective,
        model=req.model_id,
        catalog_hash=catalog_hash,
        cost_usd_per_hour=cost,
        cost_usd_per_month=cost * HOURS_PER_MONTH if cost is not None else None,
        cost_usd_per_million_tokens=cost_per_million_tokens(cost, req) if cost else None,
        cost_band_usd_per_hour=band,
        unmeasured_gpus=unmeasured_gpus(pools),
        risk=risk_out(req.request.risk.confidence),
        gpus_total=sum(gpus_by_type.values()),
        gpus_by_type=dict(sorted(gpus_by_type.items())),
        power_kw=sum(p.power_kw for p in pools),
        pool_ratio_prefill_to_decode=(pre / dec) if dec else None,
        pools=pools,
        classes=classes,
        binding=[BindingConstraint(name=b, detail=binding_detail(b, req)) for b in result.binding],
        why_not=why_not(screening, pools),
        infeasible_reasons=infeasible,
        warnings=list(req.warnings),
        relaxation=result.relaxation,
        margins=plan_margins(req, pools),
        operations=ops,
        total_cost_usd_per_hour=(cost + ops.cost_usd_per_hour)
        if ops and cost is not None
        else None,
        kv_pairs=kv_pairs(pools, by_id),
        solver=SolverInfo(
            status=result.status,
            gap=result.gap,
            runtime_s=result.runtime_s,
            solver=result.solver,
            time_limit_s=time_limit_s,
            rel_gap=rel_gap,
            candidates_considered=screening.considered,
            candidates_in_model=len(screening.candidates),
            candidates_rejected=screening.rejected_by_reason(),
            variables=result.num_variables,
            constraints=result.num_constraints,
            message=result.message,
        ),
    )


def unmeasured_gpus(pools: list[PoolPlan]) -> list[str]:
    """GPU types of the plan's pools whose efficiency factors (for the pool's dtype)
    were set by analogy, not fitted to measurements (sorted ids)."""
    return sorted({p.gpu for p in pools if p.provenance == "analogy"})


def risk_out(confidence: float) -> RiskOut:
    """The plan's risk settings: the request's confidence and its z (planner.risk
    .z_for_confidence), and the band's confidence and z (planner.risk.Z_BAND)."""
    return RiskOut(
        confidence=confidence,
        z=risk.z_for_confidence(confidence),
        band_confidence=risk.BAND_CONFIDENCE,
        z_band=risk.Z_BAND,
        note=(
            f"capacities derated by exp(-{risk.z_for_confidence(confidence):.3f} x sigma_log) "
            f"per GPU; bands at {risk.BAND_CONFIDENCE:.0%} (exp(+/-{risk.Z_BAND:.3f} x "
            "sigma_log)), replicas scaled as 1/capacity and rounded up"
        ),
    )


def pool_capacities(cand: Candidate, replicas: int) -> tuple[float, float, float | None]:
    """(SLO capacity, planned capacity, SLO capacity with the spares down), requests/s,
    of a pool of ``replicas``: ``cand.capacity_rps(n)`` (the queueing curves: the
    largest rate meeting the SLO percentile), the MILP's own capacity rows
    (``max_utilization x`` capacity at ``n - spare_replicas``, chords of the curve),
    and ``cand.capacity_rps(n - spare_replicas)`` (None without spares)."""
    cap = cand.capacity_rps(replicas)
    planned = cand.to_pool_candidate().capacity_rps(replicas)
    k = cand.spare_replicas
    down = cand.capacity_rps(replicas - k) if k and replicas > k else (0.0 if k else None)
    return cap, planned, down


def plan_margins(req: ResolvedRequest, pools: list[PoolPlan]) -> Margins:
    """The request's margins and the highest pool load (rate / SLO capacity)."""
    lim = req.request.constraints
    loads = [p.utilization for p in pools if p.rate_rps > 0]
    top = max(loads) if loads else None
    return Margins(
        max_utilization=lim.max_utilization,
        spare_replicas_per_pool=lim.spare_replicas_per_pool,
        burst_cv=req.request.traffic.burst_cv,
        max_pool_load=top,
        min_headroom=(1.0 - top) if top is not None else None,
    )


def operations_cost(
    req: ResolvedRequest, screening: Screening, result: SolveResult
) -> OperationsCost:
    """Operations cost of the solved fleet ($/hour): ``usd_per_hour_per_gpu_type x``
    GPU types + ``usd_per_hour_per_configuration x`` distinct configurations
    (``PoolConfig.key``; pools of several classes with one configuration count
    once), with the request's ``operations`` prices."""
    by_id = {c.id: c for c in screening.candidates}
    used = [by_id[k] for k, n in result.replicas.items() if n > 0 and k in by_id]
    ops = req.request.operations
    types = len({c.config.gpu for c in used})
    configs = len({c.config.key for c in used})
    return OperationsCost(
        gpu_types=types,
        configurations=configs,
        usd_per_hour_per_gpu_type=ops.usd_per_hour_per_gpu_type,
        usd_per_hour_per_configuration=ops.usd_per_hour_per_configuration,
        cost_usd_per_hour=ops.usd_per_hour_per_gpu_type * types
        + ops.usd_per_hour_per_configuration * configs,
    )


def kv_pairs(pools: list[PoolPlan], by_id: dict[str, Candidate]) -> list[KvPair]:
    """Every (prefill pool, decode pool) of a class carrying load: the link the pair
    uses (``candidates.kv_pair_link``, recorded at screening) and the one the prefill
    pool's TTFT was priced on (the same or slower, by the MILP's kv_pair rows)."""
    out = []
    for pre in pools:
        if pre.role != PoolRole.PREFILL or pre.rate_rps <= 0:
            continue
        cand = by_id[pre.id]
        for dec in pools:
            if dec.role != PoolRole.DECODE or dec.class_name != pre.class_name:
                continue
            if dec.rate_rps <= 0:
                continue
            out.append(
                KvPair(
                    class_name=pre.class_name,
                    prefill_pool=pre.id,
                    decode_pool=dec.id,
                    link=cand.pair_links.get(dec.gpu, pre.kv_transfer_link or ""),
                    priced_link=pre.kv_transfer_link or "",
                    exposed_ms=pre.kv_transfer_exposed_ms,
                )
            )
    return out


#: Limits that count things (configurations, GPU types, replicas): moved in whole units.
_COUNT_LIMITS = {
    "max_configurations": ("max_configurations", "configurations"),
    "max_gpu_types": ("max_gpu_types", "GPU types"),
}


def relaxation_text(name: str, amount: float, req: ResolvedRequest) -> str:
    """A fleet limit that must move for any fleet to meet the SLOs, and by how much,
    in its units (counts rounded up to whole units)."""
    lim = req.request.constraints
    if name in _COUNT_LIMITS:
        field, what = _COUNT_LIMITS[name]
        cur = getattr(lim, field)
        return (
            f"raise {field} from {cur} to {cur + math.ceil(amount - 1e-6)} "
            f"(no fleet meeting the SLOs has {cur} or fewer {what})"
        )
    if name == "max_replicas_per_pool":
        cur = lim.max_replicas_per_pool
        assert cur is not None  # the row exists only when the limit is set
        return (
            f"allow {cur + math.ceil(amount - 1e-6)} replicas per pool instead of {cur} "
            "(constraints.max_replicas_per_pool)"
        )
    if name == "min_replicas_per_pool":
        cur = lim.min_replicas_per_pool
        new = max(1, cur - math.ceil(amount - 1e-6))
        return (
            f"lower min_replicas_per_pool from {cur} to {new} "
            "(the replica minimum leaves no fleet within the other limits)"
        )
    if name == "budget":
        assert lim.budget_usd_per_hour is not None  # the row exists only with a budget
        return (
            f"budget ${lim.budget_usd_per_hour:,.2f}/h is short by ${amount:,.2f}/h "
            f"(the cheapest fleet meeting the SLOs needs about "
            f"${lim.budget_usd_per_hour + amount:,.2f}/h)"
        )
    if name == "power":
        return f"power limit {lim.power_kw:,.1f} kW is short by {amount:,.1f} kW"
    for gpu, cap in lim.max_gpus.items():
        if name == f"stock__{safe_name(gpu)}":
            return f"{gpu} stock of {cap} GPUs is short by {amount:,.0f} GPUs"
    return f"{name} short by {amount:.4g}"


def fill_gpu_seconds(
    classes: list[ClassPlan], pools: list[PoolPlan], by_id: dict[str, Candidate], req
) -> None:
    """Per class, rate-weighted over its pools: prefill GPU-seconds per request
    (``sizing.prefill_gpu_s`` of the mean prompt after prefix hits) and decode
    GPU-seconds per request (``sizing.decode_gpu_s`` at the pool's step and max
    batch), and each class's share of the fleet's prefill load."""
    res = {c.name: c for c in req.classes}
    for cp in classes:
        rc = res[cp.name]
        pre, dec, w_pre, w_dec = 0.0, 0.0, 0.0, 0.0
        for p in pools:
            if p.class_name != cp.name or p.rate_rps <= 0:
                continue
            cand = by_id[p.id]
            if p.role in (PoolRole.PREFILL, PoolRole.AGGREGATED):
                pre += p.rate_rps * sizing.prefill_gpu_s(
                    cand.replica, rc.prompt.mean_tokens, rc.prefix_hit_rate
                )
                w_pre += p.rate_rps
            if p.role in (PoolRole.DECODE, PoolRole.AGGREGATED) and cand.step_ms:
                dec += p.rate_rps * sizing.decode_gpu_s(
                    cand.config.tp, rc.output.mean_tokens, cand.step_ms, cand.config.max_batch or 1
                )
                w_dec += p.rate_rps
        cp.prefill_gpu_s_per_request = pre / w_pre if w_pre else None
        cp.decode_gpu_s_per_request = dec / w_dec if w_dec else None
    total = sum((c.prefill_gpu_s_per_request or 0.0) * c.served_rps for c in classes)
    for cp in classes:
        if total > 0 and cp.prefill_gpu_s_per_request is not None:
            cp.prefill_load_share = cp.prefill_gpu_s_per_request * cp.served_rps / total


def _most_capable(rejections: list[Rejection]) -> Rejection:
    """The rejection of the most capable configuration tried: largest TP, then FP8."""
    return max(rejections, key=lambda r: (r.tp or 0, r.dtype == "fp8", r.chunk_budget_tokens or 0))


def infeasibility_reasons(req: ResolvedRequest, screening: Screening) -> list[str]:
    """For each class that no mode can serve: per missing pool role, why even the
    most capable configuration tried (largest TP, FP8) was rejected."""
    out = []
    have = {(c.class_name, c.config.role) for c in screening.candidates}
    for cls in req.classes:
        if cls.rate_rps <= 0:
            continue
        agg_ok = Mode.AGGREGATED in cls.modes and (cls.name, PoolRole.AGGREGATED) in have
        dis_ok = (
            Mode.DISAGGREGATED in cls.modes
            and {
                (cls.name, PoolRole.PREFILL),
                (cls.name, PoolRole.DECODE),
            }
            <= have
        )
        if agg_ok or dis_ok:
            continue
        roles = []
        if Mode.AGGREGATED in cls.modes:
            roles.append(PoolRole.AGGREGATED)
        if Mode.DISAGGREGATED in cls.modes:
            roles += [PoolRole.PREFILL, PoolRole.DECODE]
        parts = []
        for role in roles:
            if (cls.name, role) in have:
                continue
            rej = [r for r in screening.rejections if r.class_name == cls.name and r.role == role]
            if not rej:
                parts.append(f"no {role.value} configurations were offered")
                continue
            fit = {"does_not_fit", "dtype_unsupported", "invalid"}
            if any(r.reason not in fit for r in rej):  # the SLO is what binds
                rej = [r for r in rej if r.reason not in fit]
            reasons = []
            for reason in dict.fromkeys(r.reason for r in rej):
                best = _most_capable([r for r in rej if r.reason == reason])
                budget = f" T={best.chunk_budget_tokens}" if best.chunk_budget_tokens else ""
                tp = f" tp{best.tp}" if best.tp else ""
                reasons.append(f"{best.gpu}{tp} {best.dtype}{budget}: {best.detail}")
            parts.append(f"no {role.value} pool (" + "; ".join(reasons[:3]) + ")")
        out.append(
            f"class {cls.name} (p{cls.slo.percentile:g} TTFT {cls.slo.ttft_ms:g} ms, "
            f"TPOT {cls.slo.tpot_ms:g} ms) cannot be served: " + "; ".join(parts)
        )
    return out


def _derate_note(c: Candidate) -> str:
    """Words for a candidate whose capacity a simulation-learned correction derated
    (planner.simulate.verify.DeratedCandidate); empty otherwise."""
    sides = [
        f"{side} x{f:.3g}"
        for side, f in (
            ("prefill", getattr(c, "prefill_derate", 1.0)),
            ("decode", getattr(c, "decode_derate", 1.0)),
        )
        if f < 1.0
    ]
    return f" (capacity corrected by simulation: {', '.join(sides)})" if sides else ""


def why_not(screening: Screening, pools: list[PoolPlan]) -> list[WhyNot]:
    """Per class and GPU type not in the plan: why (rejected, or dominated on cost)."""
    used = {(p.class_name, p.gpu) for p in pools}
    out: dict[tuple[str, str], WhyNot] = {}
    for c in screening.candidates + screening.pruned:
        key = (c.class_name, c.config.gpu)
        if key in used or key in out:
            continue
        in_model = c in screening.candidates
        out[key] = WhyNot(
            class_name=c.class_name,
            gpu=c.config.gpu,
            reason="more_expensive" if in_model else "dominated",
            detail=(
                f"best config {c.config.key} costs ${c.usd_per_rps:,.2f}/h per req/s "
                "at full utilization"
                + _derate_note(c)
                + (
                    f" (capacity derated x{c.risk_derate:.2f}: factors "
                    + (
                        f"fitted to {c.factor_points} points, sigma {c.sigma_log:.2f})"
                        if c.provenance == "fitted"
                        else f"by analogy, sigma {c.sigma_log:.2f})"
                    )
                    if c.risk_derate < 1.0
                    else ""
                )
            ),
        )
    for r in screening.rejections:
        key = (r.class_name, r.gpu)
        if key in used or key in out:
            continue
        out[key] = WhyNot(class_name=r.class_name, gpu=r.gpu, reason=r.reason, detail=r.detail)
    return [out[k] for k in sorted(out)]
