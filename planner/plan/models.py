"""What a plan says, as data: :class:`Plan` and its parts (pools with launch settings,
classes, margins, operations cost, KV pairs, alternatives, why-not rows, risk, solver
info). Everything else in :mod:`planner.plan` computes them.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from planner.procurement.models import Tco
from planner.simulate.results import Verification
from solver.problem import Mode, PoolRole, SolveStatus

HOURS_PER_MONTH = 730.0


#: The words a plan's warning opens its reason with when a GPU's dense-LLM factors rest
#: on runs of mixture-of-experts LLMs only (planner.plan.assemble.borrowed_level_warnings);
#: the report finds such warnings by them.
BORROWED_LEVEL_MARK = "measured on mixture-of-experts LLMs only"


def fp4_analogy_on_scaled_level(provenance: object, dtype: object, level_scale: object) -> bool:
    """True for a pool priced by analogy only for its FP4 weights: ``provenance``
    ``"analogy"`` (no factors fitted in FP4, planner.risk.factor_uncertainty), an FP4
    ``dtype``, and a GPU level scaled to measurements (``level_scale`` set and not 1; a
    hand-set efficiency or a GPU set by analogy has 1). Read from a pool's fields, as a
    :class:`PoolPlan` or its JSON (planner.report.borrowed)."""
    return (
        provenance == "analogy"
        and str(dtype or "").startswith("fp4")
        and level_scale not in (None, 1.0)
    )


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
    #: Nodes (servers) one replica spans: tp x pp / GPUs per node, 1 for a single server.
    nodes_per_replica: int = 1
    #: Multi-node replicas: one command per node, with its rank (empty otherwise).
    per_node: list[NodeLaunch] = []
    #: Pools that count on sessions' own prefix hits: the router in front of the pool's
    #: replicas, keeping a session on the replica that holds its prefix, per engine
    #: (``vllm``, ``sglang``); empty otherwise. WORKER_URLS stands for the replicas.
    router: dict[str, list[str]] = {}


class PoolPlan(Out):
    id: str
    class_name: str = Field(serialization_alias="class")
    role: PoolRole
    gpu: str
    tp: int
    #: Pipeline stages per replica (1: none); a replica has tp x pp GPUs.
    pp: int = 1
    #: MoE: data-parallel attention ranks and expert-parallel GPUs within tp (1: unused).
    dp: int = 1
    ep: int = 1
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
    # The serving stack's latency in predicted_ttft_ms at the SLO percentile's prompt
    # (planner.serving_stack; prefill and aggregated pools; 0 for models without MLA).
    serving_stack_ms: float | None = None
    # Aggregated pools: the step already scheduled that a request arriving at a busy
    # replica waits for, in predicted_ttft_ms (overlap / async scheduling,
    # planner.engines.busy_wait_ms; Candidate.overlap_ttft_ms); None for other roles.
    scheduled_step_ms: float | None = None
    # Uncertainty (planner.risk): the GPU's factor provenance and spread (sigma_log sets
    # the bands, derate_sigma_log the derate: the errors' low side), the derate applied
    # to capacity_rps at the request's confidence, and the 90% bands.
    provenance: str | None = None
    factor_points: int | None = None
    level_scale: float | None = None
    sigma_log: float | None = None
    derate_sigma_log: float | None = None
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
    #: Prefix hit rate the pool's figures assume (aggregated and prefill pools): the
    #: class's nominal rate, or less where idle sessions' prefixes do not all fit.
    effective_prefix_hit_rate: float | None = None
    #: KV host tier per replica (GB of CPU memory; prefix_cache.host_tier) and the share
    #: of the pool's prefix hits served from it (reloaded over the host link); None without.
    host_cache_gb: float | None = None
    host_hit_share: float | None = None
    #: Speculative decoding on the pool (decode and aggregated pools of a class that asks
    #: for it): method, draft_tokens, acceptance_length (assumed), draft_repo and
    #: verification_step_ms (the engine step; step_ms is per output token, step / a).
    speculative: dict[str, Any] | None = None


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
    #: The nominal prefix hit rate (request or workload) and the one the plan counts on:
    #: the rate-weighted hit rate of its prefilling pools, never above the nominal.
    prefix_hit_rate: float | None = None
    effective_prefix_hit_rate: float | None = None
    #: The session shape behind the hits (think_time_s, turns), when the class has one.
    sessions: dict[str, float] | None = None


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
    #: TTFT and TPOT SLOs held at the confidence too (risk.hold_latency).
    hold_latency: bool = False
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
    cost_band_with_prices_usd_per_hour: tuple[float, float] | None = Field(
        default=None,
        description="[low, high]: cost_band_usd_per_hour with every GPU's price at the ends "
        "of its catalog range too (planner.risk.price_band_usd_per_hour)",
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
    alternatives_status: str = Field(
        default="not_requested",
        description="ready: `alternatives` are computed; pending: not yet (the service "
        "computes them in the background after answering, or on `GET "
        "/plans/{id}/alternatives`); not_requested: planned without them",
    )
    why_not: list[WhyNot] = []
    infeasible_reasons: list[str] = []
    warnings: list[str] = []
    relaxation: dict[str, float] = {}
    relaxation_alone: dict[str, float] = Field(
        default_factory=dict,
        description="Infeasible with two or more budget, power or stock limits: how far each "
        "of them alone must move, the others held, for a fleet to exist (its units; a limit "
        "that cannot do it alone is absent). 'relaxation' is one combination.",
    )
    solver: SolverInfo
    assumptions: dict[str, Any] = {}
    assumed_notes: list[str] = Field(
        default_factory=list,
        description="What the plan assumed rather than measured, one line each (the TTFT "
        "of disaggregated classes, speculative decoding, FP4 weights): the lines the "
        "reports print under 'Assumed' (planner.plan.notes)",
    )
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
    #: Capital cost of the servers the chosen purchase buys (whole servers and racks,
    #: with networking; $), tco.capex_usd; 0 when renting.
    capex_usd: float | None = None
    #: Servers bought per GPU type under the chosen purchase (whole servers; count).
    servers_by_type: dict[str, int] = {}
    tco: Tco | None = Field(
        default=None,
        description="Total cost of ownership over procurement.horizon_years for "
        "procurement.purchase, with buy, rent and hybrid side by side (planner.procurement)",
    )

    #: The solved model a plan with pending alternatives keeps in memory to solve them
    #: later (planner.alternatives.SolvedModel); never serialized.
    _solved: Any = PrivateAttr(default=None)

    def solved_model(self) -> Any:
        """The kept :class:`planner.alternatives.SolvedModel`, or None."""
        return self._solved

    def keep_solved_model(self, model: Any) -> None:
        self._solved = model

    def to_json_dict(self) -> dict[str, Any]:
        return json.loads(self.model_dump_json(by_alias=True))
