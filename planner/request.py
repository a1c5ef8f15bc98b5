"""The plan request: model, traffic mix, SLOs, candidates, constraints, objective.

The same document is read from YAML/JSON by the CLI and posted to ``POST
/plans``. Validation is strict (unknown keys are errors) and names the field;
``resolve_request`` then checks it against the catalog and fills defaults, so
the rest of the planner works on a fully specified :class:`ResolvedRequest`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from catalog.schema import (
    Catalog,
    Dtype,
    LengthDist,
    Model,
    Sessions,
    Slo,
    SloMs,
    Tokens,
    Workload,
    no_control_characters,
)
from planner.errors import PlanningError, UnknownEntryError
from planner.kernels import SpecMethod
from planner.procurement.spec import LoadProfileSpec, ProcurementSpec
from planner.request_checks import check_fp4_offer, checked_speculative
from planner.risk import DEFAULT_CONFIDENCE, MAX_CONFIDENCE, MIN_CONFIDENCE
from planner.roofline.replica import PP_OPTIONS
from planner.roofline.speculative import MAX_DRAFT_TOKENS
from planner.variants import check_shape
from solver.problem import Mode, Objective

#: A positive finite number; strict: ``true`` or ``"5"`` is refused, not read as 1 or 5.
PosFloat = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
#: A positive amount with an upper bound far beyond any fleet (money, power, weights).
Amount = Annotated[float, Field(strict=True, gt=0, le=1e12, allow_inf_nan=False)]
Share = Annotated[float, Field(strict=True, ge=0, le=1, allow_inf_nan=False)]
PeakShare = Annotated[float, Field(strict=True, ge=0.01, le=1, allow_inf_nan=False)]  # MFU, MBU

DEFAULT_CHUNK_BUDGETS = (256, 512, 1024, 2048, 4096, 8192)

# Caps on the inputs that multiply planning work. Screening tries every class x GPU
# type x dtype x TP x chunk budget (x prefill link), and a robust plan screens and solves
# every scenario: each cap is a few times what a real request needs, and bounds the
# work one request can ask for (64 chunk budgets took 16.6 s to screen, 1,024 289 s).
#: Chunk budgets per request (6 by default; 16 screen in a few seconds).
MAX_CHUNK_BUDGETS = 16
#: GPU types per request (the shipped catalog has 14; bench/solver_scaling.py plans 50).
MAX_GPU_TYPES = 64
#: Traffic classes per request.
MAX_CLASSES = 50
#: Scenarios of a robust plan (each is screened and solved, and the robust MILP grows
#: with their number).
MAX_SCENARIOS = 12
#: Largest tensor-parallel degree asked for (a replica spans at most a few servers).
MAX_TP = 512

#: A name or label of the request (no control characters: catalog.schema.Name).
PlanName = Annotated[
    str, Field(min_length=1, max_length=200), AfterValidator(no_control_characters)
]
Label = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(no_control_characters)]
#: A catalog id as a request names it (checked against the catalog by resolve_request).
CatalogRef = Annotated[
    str, Field(min_length=1, max_length=64), AfterValidator(no_control_characters)
]
#: Smallest non-zero class rate planned (requests/s): one request every ~3 hours.
MIN_CLASS_RATE_RPS = 1e-4
#: Largest total rate accepted (requests/s): far beyond any single fleet today.
MAX_RATE_RPS = 1_000_000.0
#: Default ``constraints.max_utilization``: no pool runs above 85% of the rate it can
#: carry within its SLO. 15% headroom absorbs forecast error and the queueing model's
#: approximation error (the simulator found pools at 94-100% of capacity missing their
#: percentile under bursty arrivals, issue 11).
DEFAULT_MAX_UTILIZATION = 0.85
#: Default ``operations.usd_per_hour_per_gpu_type`` ($/hour): each GPU type in a fleet
#: needs its own container images and driver/firmware stack (CUDA vs ROCm), its own
#: validation and benchmark runs, its own pool of spare parts and hot spares, and
#: on-call knowledge of its failure modes. About a quarter of an engineer's time
#: (~$200k/year fully loaded x 0.25 / 8,760 h = ~$6/h) plus a held spare server slice
#: and support contract (~$10-15/h) gives ~$20/h per type.
DEFAULT_USD_PER_HOUR_PER_GPU_TYPE = 20.0
#: Default ``operations.usd_per_hour_per_configuration`` ($/hour): every distinct engine
#: configuration (role, GPU, TP, dtype, budgets) is one more set of launch settings to
#: tune, canary, upgrade and alert on: a few engineer-hours a month each, ~$5/h.
DEFAULT_USD_PER_HOUR_PER_CONFIGURATION = 5.0


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SloSpec(Strict):
    """Latency objectives; any field left out falls back to the next level
    (class override -> request default -> the workload's catalog default)."""

    ttft_ms: SloMs | None = None
    tpot_ms: SloMs | None = None
    percentile: Annotated[float, Field(strict=True, ge=50, le=99.9, allow_inf_nan=False)] | None = (
        None
    )


class LengthSpec(Strict):
    mean_tokens: Tokens
    p90_tokens: Tokens


class SpeculativeSpec(Strict):
    """Speculative decoding for a class's decode (and aggregated) pools: ``method``
    proposes ``draft_tokens`` k per step, the target verifies them in one step, and each
    sequence advances ``acceptance_length`` a tokens per step on average (accepted
    drafts + the bonus token, 1 <= a <= k + 1): the user's assumption, typically 2-3 for
    code at k = 3. ``draft_model``: a catalog model id (method draft_model);
    ``draft_repo``: the drafter's Hugging Face repository (default: the catalog's
    EAGLE-3 head for eagle3, the draft model's repository for draft_model)."""

    method: SpecMethod
    draft_tokens: Annotated[int, Field(ge=1, le=MAX_DRAFT_TOKENS)]
    acceptance_length: Annotated[float, Field(ge=1, allow_inf_nan=False)]
    draft_model: str | None = Field(default=None, min_length=1, max_length=64)
    draft_repo: str | None = Field(
        default=None, min_length=3, max_length=200, pattern=r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$"
    )


class ClassSpec(Strict):
    """One traffic class: a catalog workload, its share of requests, overrides."""

    workload: CatalogRef
    share: Share
    slo: SloSpec | None = None
    prefix_hit_rate: (
        Annotated[float, Field(strict=True, ge=0, lt=1, allow_inf_nan=False)] | None
    ) = None
    sessions: Sessions | None = Field(
        default=None,
        description="Session shape behind the prefix hits (think_time_s, turns); defaults "
        "to the workload's. The hit rate a plan counts on then follows from the KV memory "
        "that holds idle sessions' prefixes (effective_prefix_hit_rate).",
    )
    prompt_tokens: LengthSpec | None = None
    output_tokens: LengthSpec | None = None
    modes: list[Mode] | None = Field(default=None, min_length=1, max_length=len(Mode))
    name: Label | None = Field(default=None, description="Label; defaults to the workload id.")
    speculative: SpeculativeSpec | None = None


#: How far class shares may sum from 1 as rounded ones (3 x 0.333): scaled to sum to 1.
SHARE_SUM_TOLERANCE = 2e-3


class Traffic(Strict):
    rate_rps: Annotated[float, Field(strict=True, gt=0, le=MAX_RATE_RPS, allow_inf_nan=False)] = (
        Field(description="Total requests per second over all classes (at most 1,000,000).")
    )
    classes: list[ClassSpec] = Field(min_length=1, max_length=MAX_CLASSES)
    burst_cv: Annotated[float, Field(strict=True, ge=0.05, le=20, allow_inf_nan=False)] = Field(
        default=1.0,
        description="Coefficient of variation of inter-arrival times (1: Poisson, > 1: "
        "bursty). The queueing model scales prefill waits by (ca^2 + cs^2) / 2 "
        "(Allen-Cunneen) and decode-slot headroom by (1 + ca^2) / 2; verification "
        "simulates with it unless verify.burst_cv is given.",
    )

    @model_validator(mode="after")
    def _shares(self) -> Traffic:
        total = sum(c.share for c in self.classes)
        if not math.isclose(total, 1.0, abs_tol=SHARE_SUM_TOLERANCE):
            raise ValueError(f"class shares must sum to 1, got {total:.6g}")
        if abs(total - 1.0) > 1e-9:  # rounded shares (three of 0.333): each over their sum
            scaled = [c.model_copy(update={"share": c.share / total}) for c in self.classes]
            object.__setattr__(self, "classes", scaled)
        names = [c.name or c.workload for c in self.classes]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate class names {sorted(dup)}: give each a distinct name")
        return self


class CandidateSpec(Strict):
    gpus: list[CatalogRef] | None = Field(default=None, min_length=1, max_length=MAX_GPU_TYPES)
    modes: list[Mode] = Field(
        default_factory=lambda: [Mode.AGGREGATED, Mode.DISAGGREGATED],
        min_length=1,
        max_length=len(Mode),
    )
    dtypes: list[Dtype] = Field(
        default_factory=lambda: [Dtype.BF16, Dtype.FP8], min_length=1, max_length=len(Dtype)
    )
    tp: list[Annotated[int, Field(strict=True, le=MAX_TP)]] | None = Field(
        default=None, min_length=1, max_length=10
    )
    kv_dtypes: list[Dtype] | None = Field(
        default=None,
        min_length=1,
        max_length=2,
        description="KV-cache formats to consider with every weight dtype (bf16, fp8; e.g. "
        "BF16 weights with an FP8 KV cache). Default: bf16 KV with bf16 weights, fp8 KV "
        "with fp8 or fp4 weights.",
    )
    pp: list[Annotated[int, Field(strict=True)]] | None = Field(
        default=None,
        min_length=1,
        max_length=len(PP_OPTIONS) + 1,
        description="Pipeline-parallel degrees to consider (1, 2, 4, 8). Default: 1, and "
        "2/4/8 with TP filling a node when the model does not fit one node.",
    )
    ep: list[Annotated[int, Field(strict=True, ge=1, le=1024)]] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        description="Expert-parallel degrees to consider for a mixture-of-experts model "
        "(with data-parallel attention over the same GPUs; 1: plain TP). Each must divide "
        "the model's expert count. Default: 1, and ep = tp where tp divides the experts.",
    )
    chunk_budgets: list[Annotated[int, Field(strict=True, ge=16, le=65536)]] = Field(
        default_factory=lambda: list(DEFAULT_CHUNK_BUDGETS),
        min_length=1,
        max_length=MAX_CHUNK_BUDGETS,
        description=f"Prefill chunk sizes (tokens) screened for aggregated pools; at most "
        f"{MAX_CHUNK_BUDGETS} (each one is screened for every class, GPU type, dtype and TP).",
    )

    @field_validator("kv_dtypes")
    @classmethod
    def _kv_formats(cls, v: list[Dtype] | None) -> list[Dtype] | None:
        for kv in v or []:
            if kv not in (Dtype.BF16, Dtype.FP8):
                raise ValueError(
                    f"{kv.value} is not a KV-cache format engines offer (use bf16 or fp8)"
                )
        return v

    @field_validator("pp")
    @classmethod
    def _stages(cls, v: list[int] | None) -> list[int] | None:
        if v is not None:
            allowed = (1, *PP_OPTIONS)
            for pp in v:
                if pp not in allowed:
                    raise ValueError(
                        f"{pp} is not a pipeline degree the planner offers "
                        f"({', '.join(map(str, allowed))})"
                    )
        return v

    @field_validator("tp")
    @classmethod
    def _pow2(cls, v: list[int] | None) -> list[int] | None:
        if v is not None:
            for tp in v:
                if tp < 1 or tp & (tp - 1):
                    raise ValueError(f"{tp} is not a positive power of two")
        return v


class ConstraintSpec(Strict):
    budget_usd_per_hour: Amount | None = Field(
        default=None,
        description="Most the GPUs may cost, $/hour (the plan's cost_usd_per_hour; "
        "operations costs come on top, in total_cost_usd_per_hour).",
    )
    max_gpus: dict[CatalogRef, Annotated[int, Field(strict=True, ge=0, le=10_000_000)]] = Field(
        default_factory=dict, max_length=MAX_GPU_TYPES
    )
    power_kw: Amount | None = None
    min_replicas_per_pool: Annotated[int, Field(strict=True, ge=1, le=64)] = 1
    max_configurations: Annotated[int, Field(strict=True, ge=1, le=100)] | None = None
    max_utilization: Annotated[float, Field(strict=True, gt=0.05, le=1, allow_inf_nan=False)] = (
        Field(
            default=DEFAULT_MAX_UTILIZATION,
            description="Largest load of any pool: its rate over its capacity within the SLO "
            "(1: run pools up to the SLO-sized limit, no headroom).",
        )
    )
    spare_replicas_per_pool: Annotated[int, Field(strict=True, ge=0, le=16)] = Field(
        default=0,
        description="N+k: every pool still carries its rate within max_utilization with "
        "this many replicas down.",
    )
    max_replicas_per_pool: Annotated[int, Field(strict=True, ge=1, le=4096)] | None = None
    max_gpu_types: Annotated[int, Field(strict=True, ge=1, le=100)] | None = None


class OperationsSpec(Strict):
    """What variety costs to operate, $/hour, added to the MILP objective and reported
    apart from the GPU cost: per GPU type in the fleet and per distinct engine
    configuration (defaults and their reasons: DEFAULT_USD_PER_HOUR_PER_GPU_TYPE and
    DEFAULT_USD_PER_HOUR_PER_CONFIGURATION). 0 switches a term off."""

    usd_per_hour_per_gpu_type: Annotated[
        float, Field(strict=True, ge=0, le=1e9, allow_inf_nan=False)
    ] = DEFAULT_USD_PER_HOUR_PER_GPU_TYPE
    usd_per_hour_per_configuration: Annotated[
        float, Field(strict=True, ge=0, le=1e9, allow_inf_nan=False)
    ] = DEFAULT_USD_PER_HOUR_PER_CONFIGURATION


class SolverSpec(Strict):
    time_limit_s: Annotated[float, Field(strict=True, gt=0, le=600, allow_inf_nan=False)] | None = (
        None
    )
    rel_gap: Annotated[float, Field(strict=True, ge=0, le=0.5, allow_inf_nan=False)] | None = None


class EfficiencySpec(Strict):
    """Override the catalog's efficiency factors for every GPU in this request."""

    prefill_mfu: PeakShare | None = None
    decode_mbu: PeakShare | None = None
    overlap_factor: Share | None = None


class RiskSpec(Strict):
    """How sure the fleet must be of its capacity and latencies (see planner.risk)."""

    confidence: Annotated[
        float, Field(ge=MIN_CONFIDENCE, le=MAX_CONFIDENCE, allow_inf_nan=False)
    ] = Field(
        default=DEFAULT_CONFIDENCE,
        description="Probability that each pool's capacity is at least what the plan "
        "relies on: capacities are derated by exp(-z x sigma), z = Phi^-1(confidence), "
        "with each GPU's own derate spread (derate_sigma_log). 0.5: the nominal plan.",
    )
    hold_latency: bool = Field(
        default=False,
        strict=True,
        description="Hold the TTFT and TPOT SLOs at the same confidence: a GPU's candidates "
        "must meet each SLO x its capacity derate (planner.candidates.confidence). Off: "
        "latencies are checked as predicted, and the plan warns where one would miss.",
    )


class ScenarioSpec(Strict):
    """A future (or present) state of the traffic, as changes to the base request.

    ``mix`` sets class shares by class name (the rest keep their share; the shares
    must then sum to 1, within the rounding ``SHARE_SUM_TOLERANCE`` scales away);
    ``rate_scale`` multiplies the total rate; ``override`` is deep-merged into
    the base request (mappings merge, lists and values replace)."""

    name: Label
    weight: Annotated[float, Field(strict=True, gt=0, le=1e6, allow_inf_nan=False)] = 1.0
    mix: dict[CatalogRef, Share] | None = Field(default=None, max_length=MAX_CLASSES)
    rate_scale: Annotated[float, Field(strict=True, gt=0, le=1000, allow_inf_nan=False)] | None = (
        None
    )
    override: Annotated[dict[str, Any], AfterValidator(check_shape)] | None = None

    @field_validator("override")
    @classmethod
    def _no_nested_scenarios(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None and "scenarios" in v:
            raise ValueError("a scenario cannot override scenarios (they do not nest)")
        return v


class VerifySpec(Strict):
    """Verify the plan by simulating its fleet (planner.simulate) after solving."""

    enabled: Annotated[bool, Field(strict=True)] | None = Field(
        default=None, description="Simulate the plan; unset: on (the planner's default)."
    )
    requests: Annotated[int, Field(strict=True, ge=1000, le=200_000)] = Field(
        default=20_000, description="Requests to simulate (all classes together)."
    )
    seed: Annotated[int, Field(strict=True, ge=0, le=2**32 - 1)] = 1
    burst_cv: Annotated[float, Field(strict=True, ge=0.05, le=20, allow_inf_nan=False)] = Field(
        default=1.0, description="Coefficient of variation of inter-arrival times (1: Poisson)."
    )
    correct: Annotated[bool, Field(strict=True)] = Field(
        default=True, description="When a class misses, re-solve with its pools derated."
    )


class PrefixCacheSpec(Strict):
    """Where idle sessions' prefixes may be kept (:mod:`planner.candidates.sessions`):
    HBM always; with ``host_tier`` also the servers' CPU memory (``host_memory_share``
    of the catalog's ``server.host_memory_gb``), reloaded over the GPU's host link when
    a session's next turn arrives (LMCache, vLLM's native offloading, SGLang HiCache)."""

    host_tier: Annotated[bool, Field(strict=True)] = False
    host_memory_share: Annotated[float, Field(gt=0, le=0.9, strict=True)] = Field(
        default=0.5, description="Share of a server's CPU memory given to the KV host tier."
    )


class PlanRequest(Strict):
    model: CatalogRef
    traffic: Traffic
    slo: SloSpec = Field(default_factory=SloSpec)
    candidates: CandidateSpec = Field(default_factory=CandidateSpec)
    constraints: ConstraintSpec = Field(default_factory=ConstraintSpec)
    objective: Objective = Objective.MIN_COST
    solver: SolverSpec = Field(default_factory=SolverSpec)
    efficiency: EfficiencySpec = Field(default_factory=EfficiencySpec)
    calibration: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9._\-]*$",
        max_length=64,
        description="A stored calibration (fleetplan calibrate) whose fitted efficiency "
        "factors replace the catalog's; the plan records it in assumptions.calibration.",
    )
    name: PlanName | None = None
    scenarios: list[ScenarioSpec] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SCENARIOS,
        description="Buy one fleet that serves every scenario (see planner.scenarios).",
    )
    verify: VerifySpec = Field(default_factory=VerifySpec)
    prefix_cache: PrefixCacheSpec = Field(default_factory=PrefixCacheSpec)
    operations: OperationsSpec = Field(default_factory=OperationsSpec)
    risk: RiskSpec = Field(default_factory=RiskSpec)
    procurement: ProcurementSpec = Field(
        default_factory=ProcurementSpec,
        description="How the plan's total cost of ownership is computed: horizon, energy, "
        "PUE, hosting, buy/rent/hybrid, rent term (planner.procurement.spec).",
    )
    load_profile: LoadProfileSpec | None = Field(
        default=None,
        description="The day's load: 24 hourly factors on traffic.rate_rps, the largest 1 "
        "(the request's rate is the peak hour's). Unset: a flat day.",
    )

    @model_validator(mode="after")
    def _profile_without_scenarios(self) -> PlanRequest:
        if self.load_profile is not None and self.scenarios:
            raise ValueError(
                "load_profile cannot be combined with scenarios (a robust fleet has no "
                "per-pool capacity curve to follow the day's load)"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _burst_to_verify(cls, data: Any) -> Any:
        """traffic.burst_cv is what verification simulates, unless verify.burst_cv is set."""
        if isinstance(data, dict):
            traffic, verify = data.get("traffic"), data.get("verify")
            if (
                isinstance(traffic, dict)
                and "burst_cv" in traffic
                and (verify is None or (isinstance(verify, dict) and "burst_cv" not in verify))
            ):
                data = {**data, "verify": {**(verify or {}), "burst_cv": traffic["burst_cv"]}}
        return data

    @model_validator(mode="after")
    def _goodput_needs_budget(self) -> PlanRequest:
        if self.objective == Objective.MAX_GOODPUT and self.constraints.budget_usd_per_hour is None:
            raise ValueError("objective max_goodput needs constraints.budget_usd_per_hour")
        return self


@dataclass(frozen=True)
class ResolvedClass:
    """A traffic class with every number filled in."""

    name: str
    workload: Workload
    share: float
    rate_rps: float
    prompt: LengthDist
    output: LengthDist
    prefix_hit_rate: float
    slo: Slo
    modes: tuple[Mode, ...]
    sessions: Sessions | None = None
    speculative: SpeculativeSpec | None = None


@dataclass(frozen=True)
class ResolvedRequest:
    request: PlanRequest
    model_id: str
    classes: tuple[ResolvedClass, ...]
    gpus: tuple[str, ...]
    dtypes: tuple[Dtype, ...]
    tps: tuple[int, ...] | None
    chunk_budgets: tuple[int, ...]
    warnings: tuple[str, ...] = ()
    pps: tuple[int, ...] | None = None
    kv_dtypes: tuple[Dtype, ...] | None = None
    eps: tuple[int, ...] | None = None


def _clip(text: str, limit: int = 80) -> str:
    """User text echoed in an error, cut to ``limit`` characters."""
    return text if len(text) <= limit else text[:limit] + "..."


def _merge_slo(base: Slo, *overrides: SloSpec | None) -> Slo:
    data = base.model_dump()
    for o in overrides:
        if o is not None:
            data.update({k: v for k, v in o.model_dump().items() if v is not None})
    return Slo(**data)


#: A class whose requests exceed the model's context more often than this is refused.
MAX_SHARE_OVER_CONTEXT = 0.10


def share_over_context(model: Model, prompt: LengthDist, output: LengthDist) -> float:
    """Share of requests whose prompt + mean output exceed the model's context:
    ``1 - Phi((ln(ctx - G_mean) - mu_P) / sigma_P)`` for a log-normal prompt length
    (dimensionless; 1 when the mean output alone fills the context)."""
    room = model.max_context_tokens - output.mean_tokens
    if room <= 0:
        return 1.0
    z = (math.log(room) - prompt.mu) / prompt.sigma
    return 1.0 - NormalDist().cdf(z)


def check_context(model: Model, prompt: LengthDist, output: LengthDist, field: str) -> str | None:
    """Refuse a class that would not fit the model's context window: when more than
    MAX_SHARE_OVER_CONTEXT of its requests (prompt + mean output) exceed it. Return a
    warning when more than 0.5% do (the engine would reject or truncate those)."""
    share = share_over_context(model, prompt, output)
    if share > MAX_SHARE_OVER_CONTEXT:
        raise PlanningError.for_field(
            field,
            f"{share:.0%} of its requests (prompt mean {prompt.mean_tokens:,.0f}, p90 "
            f"{prompt.p90_tokens:,.0f} tokens, plus {output.mean_tokens:,.0f} output) exceed "
            f"{model.id}'s {model.max_context_tokens:,}-token context; choose a model with a "
            "longer context or override prompt_tokens",
        )
    if share > 0.005:
        return (
            f"{field}: {share:.1%} of requests exceed {model.id}'s "
            f"{model.max_context_tokens:,}-token context (the engine rejects or truncates "
            "them; the plan sizes for the full length distribution)"
        )
    return None


#: Largest p90/mean a log-normal reaches: exp(z90^2 / 2) (at sigma = z90).
LOGNORMAL_MAX_P90_RATIO = math.exp(NormalDist().inv_cdf(0.9) ** 2 / 2)
#: p90/mean of a non-negative length is below 10 (10% of requests above p90 alone
#: bring at least p90 / 10 to the mean); a request at or above it is refused.
MAX_P90_RATIO = 10.0


def length_dist(spec: LengthSpec, field: str) -> tuple[LengthDist, str | None]:
    """A request's length override as the planner's log-normal, and a warning.

    A log-normal's p90/mean cannot exceed LOGNORMAL_MAX_P90_RATIO (about 2.27).
    Heavier tails (up to MAX_P90_RATIO, e.g. 4 for a mix of short and very long
    prompts) are accepted and planned conservatively: the p90 is kept and the mean
    raised to p90 / 2.27 (the log-normal with the heaviest tail that has this p90),
    which overstates the load; the warning says by how much. p90 <= mean and
    p90/mean >= 10 are errors naming the field (tokens)."""
    mean, p90 = spec.mean_tokens, spec.p90_tokens
    ratio = p90 / mean
    if ratio <= 1.0:
        raise PlanningError.for_field(
            f"{field}.p90_tokens",
            f"must exceed mean_tokens ({mean:,.0f}) for a right-skewed length "
            f"distribution, got {p90:,.0f}",
        )
    if ratio >= MAX_P90_RATIO:
        raise PlanningError.for_field(
            f"{field}.p90_tokens",
            f"{p90:,.0f} is {ratio:.1f}x mean_tokens {mean:,.0f}; no distribution of "
            f"non-negative lengths has p90 >= {MAX_P90_RATIO:g}x its mean",
        )
    if ratio <= LOGNORMAL_MAX_P90_RATIO * (1 - 1e-9):
        return LengthDist(mean_tokens=mean, p90_tokens=p90), None
    planned_mean = p90 / (LOGNORMAL_MAX_P90_RATIO * (1 - 1e-6))
    dist = LengthDist(mean_tokens=planned_mean, p90_tokens=p90)
    return dist, (
        f"{field}: p90/mean = {ratio:.2f} is heavier-tailed than the log-normal the planner "
        f"uses allows ({LOGNORMAL_MAX_P90_RATIO:.2f}); planned with the p90 kept "
        f"({p90:,.0f} tokens) and the mean raised from {mean:,.0f} to {planned_mean:,.0f} "
        f"tokens, which overstates this class's load by {planned_mean / mean - 1:.0%}"
    )


def resolve_request(req: PlanRequest, catalog: Catalog) -> ResolvedRequest:
    """Check ids against the catalog and fill defaults; raise PlanningError naming the field."""
    if req.model not in catalog.models:
        raise UnknownEntryError.for_field(
            "model",
            f"unknown model {_clip(req.model)!r}; known: {', '.join(sorted(catalog.models))}",
        )
    classes = []
    warnings: list[str] = []
    for i, spec in enumerate(req.traffic.classes):
        wl = catalog.workloads.get(spec.workload)
        if wl is None:
            raise UnknownEntryError.for_field(
                f"traffic.classes[{i}].workload",
                f"unknown workload {_clip(spec.workload)!r}; "
                f"known: {', '.join(sorted(catalog.workloads))}",
            )
        prompt = output = None
        for which in ("prompt_tokens", "output_tokens"):
            given = getattr(spec, which)
            if given is None:
                continue
            dist, note = length_dist(given, f"traffic.classes[{i}].{which}")
            if note:
                warnings.append(note)
            if which == "prompt_tokens":
                prompt = dist
            else:
                output = dist
        modes = tuple(m for m in (spec.modes or req.candidates.modes) if m in req.candidates.modes)
        if not modes:
            raise PlanningError.for_field(
                f"traffic.classes[{i}].modes", "none of these modes is allowed by candidates.modes"
            )
        class_rate = req.traffic.rate_rps * spec.share
        if 0 < class_rate < MIN_CLASS_RATE_RPS:
            raise PlanningError.for_field(
                f"traffic.classes[{i}].share",
                f"gives {class_rate:.3g} req/s, below the {MIN_CLASS_RATE_RPS} req/s the planner "
                "resolves; set the share to 0 to leave the class out",
            )
        note = check_context(
            catalog.models[req.model],
            prompt or wl.prompt_tokens,
            output or wl.output_tokens,
            f"traffic.classes[{i}]",
        )
        if note:
            warnings.append(note)
        classes.append(
            ResolvedClass(
                name=spec.name or spec.workload,
                workload=wl,
                share=spec.share,
                rate_rps=req.traffic.rate_rps * spec.share,
                prompt=prompt or wl.prompt_tokens,
                output=output or wl.output_tokens,
                prefix_hit_rate=(
                    wl.prefix_hit_rate if spec.prefix_hit_rate is None else spec.prefix_hit_rate
                ),
                slo=_merge_slo(wl.slo, req.slo, spec.slo),
                modes=modes,
                sessions=spec.sessions if spec.sessions is not None else wl.sessions,
                speculative=checked_speculative(
                    catalog,
                    catalog.models[req.model],
                    spec.speculative,
                    f"traffic.classes[{i}].speculative",
                ),
            )
        )
    gpus = req.candidates.gpus or sorted(catalog.gpus)
    for i, g in enumerate(gpus):
        if g not in catalog.gpus:
            raise UnknownEntryError.for_field(
                f"candidates.gpus[{i}]",
                f"unknown GPU {_clip(g)!r}; known: {', '.join(sorted(catalog.gpus))}",
            )
    model = catalog.models[req.model]
    for i, ep in enumerate(req.candidates.ep or []):
        if ep == 1:
            continue
        if model.moe is None:
            raise PlanningError.for_field(
                f"candidates.ep[{i}]",
                f"{ep}: {model.id} is not a mixture of experts (no experts to spread); use 1",
            )
        if model.moe.num_experts % ep:
            raise PlanningError.for_field(
                f"candidates.ep[{i}]",
                f"{ep} does not divide {model.id}'s {model.moe.num_experts} experts",
            )
    for g in req.constraints.max_gpus:
        if g not in catalog.gpus:
            raise UnknownEntryError.for_field(
                f"constraints.max_gpus.{_clip(g)}", f"unknown GPU {_clip(g)!r}"
            )
    check_fp4_offer(req.candidates.dtypes, catalog.models[req.model], catalog, gpus)
    return ResolvedRequest(
        request=req,
        model_id=req.model,
        classes=tuple(classes),
        gpus=tuple(dict.fromkeys(gpus)),
        dtypes=tuple(dict.fromkeys(req.candidates.dtypes)),
        tps=tuple(sorted(set(req.candidates.tp))) if req.candidates.tp else None,
        pps=tuple(sorted(set(req.candidates.pp))) if req.candidates.pp else None,
        kv_dtypes=tuple(dict.fromkeys(req.candidates.kv_dtypes))
        if req.candidates.kv_dtypes
        else None,
        eps=tuple(sorted(set(req.candidates.ep))) if req.candidates.ep else None,
        chunk_budgets=tuple(sorted(set(req.candidates.chunk_budgets))),
        warnings=tuple(warnings),
    )
