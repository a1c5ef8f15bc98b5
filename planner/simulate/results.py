"""What a simulation reports: per class latency percentiles, SLO attainment and
goodput; per pool utilization, batch and queues. Also the plan's verification
section (:class:`Verification`), which ``planner.plan.Plan`` carries."""

from __future__ import annotations

import math

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from planner.simulate.engine import ClassRun
from solver.problem import PoolRole

#: Student t (19 degrees of freedom, 97.5%) for a 95% interval over 20 batch means.
_T19 = 2.093
_BATCHES = 20


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Percentiles(Out):
    """A latency distribution (ms); ``None`` when no request finished (or an
    unbounded tail: requests that never got a first token count as infinite)."""

    p50: float | None
    p90: float | None
    p99: float | None
    at_target: float | None = Field(description="at the class's SLO percentile")
    mean: float | None


class ClassSimulation(Out):
    name: str
    mode: str
    rate_rps: float = Field(description="simulated arrival rate in the measured window")
    requests: int = Field(description="requests measured (arrived in the window)")
    slo_ttft_ms: float
    slo_tpot_ms: float
    percentile: float
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    planned_ttft_ms: float | None = None
    planned_tpot_ms: float | None = None
    attainment: float = Field(description="share of requests meeting both TTFT and TPOT SLOs")
    attainment_ci95: float | None = Field(
        description="half-width of a 95% interval (batch means over 20 time slices)"
    )
    attainment_ttft: float
    attainment_tpot: float
    goodput_rps: float = Field(description="requests per second meeting both SLOs")
    meets_slo: bool = Field(
        description="attainment >= the SLO percentile (so the p-percentile TTFT and TPOT are "
        "each within the SLO)"
    )
    mean_prefill_wait_ms: float | None
    mean_decode_slot_wait_ms: float | None = None


class PoolSimulation(Out):
    id: str
    class_name: str = Field(serialization_alias="class")
    role: PoolRole
    replicas: int
    rate_rps: float
    utilization: float = Field(
        description="prefill and aggregated pools: share of time the prefill (chunk) slot is "
        "busy; decode pools: mean resident batch / max batch"
    )
    busy: float = Field(description="share of replica time spent on steps")
    mean_batch: float | None
    max_batch: int | None
    mean_queue: float = Field(description="time-average requests waiting (whole pool)")
    max_queue: int
    mean_wait_ms: float | None
    p90_wait_ms: float | None


class SimulationResult(Out):
    requests: int = Field(description="requests simulated (all classes, warm-up included)")
    measured: int
    seed: int
    burst_cv: float
    horizon_s: float
    warmup_s: float
    wall_time_s: float
    events: int
    classes: list[ClassSimulation]
    pools: list[PoolSimulation]
    meets_slo: bool
    notes: list[str] = []

    def to_json_dict(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)


# --------------------------------------------------------------------------- verification


class ClassVerification(Out):
    name: str
    scenario: str | None = Field(default=None, description="robust plans: the scenario")
    percentile: float
    slo_ttft_ms: float
    slo_tpot_ms: float
    ttft_ms: float | None = Field(description="simulated TTFT at the SLO percentile")
    tpot_ms: float | None = Field(description="simulated TPOT at the SLO percentile")
    planned_ttft_ms: float | None
    planned_tpot_ms: float | None
    attainment: float
    attainment_ci95: float | None
    goodput_rps: float
    status: str = Field(
        description="meets (attainment >= target), within_noise (below the target, but its 95% "
        "interval reaches it: a miss a longer run may undo) or misses"
    )
    meets_slo: bool = Field(description="attainment >= the target percentile")
    verdict: str


class FamilyCorrection(Out):
    """A correction of the optimizer's capacity model learned by simulation: every
    candidate pool of the family (same class, role and GPU type; the role fixes
    the mode) has the curve of ``side`` scaled by ``factor`` (requests/s at every
    replica count become factor x requests/s)."""

    class_name: str = Field(
        validation_alias=AliasChoices("class", "class_name"), serialization_alias="class"
    )
    role: str
    mode: str
    gpu: str
    side: str = Field(description="'prefill' (prefill queue curve) or 'decode' (decode slots)")
    factor: float = Field(description="share of the queueing model's capacity the family may use")
    reason: str
    learned: str = Field(
        description="'this plan' (learned while verifying it) or 'inherited' (learned by the "
        "plan this one is a variant of, and reused)"
    )
    metric_ms: float | None = Field(
        default=None,
        description="the class's simulated percentile TTFT (prefill side) or TPOT (decode "
        "side) in the round that set this factor (ms; null: unbounded or not recorded)",
    )

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.class_name, self.role, self.gpu, self.side)


class CorrectionRound(Out):
    """One plan the correction solved and simulated; round 0 is the plan as first
    solved (under the inherited corrections only)."""

    round: int
    cost_usd_per_hour: float | None
    passed: bool | None
    attainment: dict[str, float] = Field(
        description="per class, the share of simulated requests meeting both SLOs"
    )
    kept: bool = Field(description="the plan returned")


class Correction(Out):
    """How the optimizer corrected a plan whose simulation missed (the corrections
    the plan returned was solved with are ``Verification.corrections``)."""

    iterations: int
    derate: dict[str, dict[str, float]] | None = Field(
        default=None,
        description="plans stored before family corrections only: per class, the factors "
        "that applied to all its pools",
    )
    original_cost_usd_per_hour: float | None
    cost_usd_per_hour: float | None = Field(
        description="the best corrected plan's cost (the one compared with the original; "
        "the plan returned when ``kept`` is 'corrected'); null when none could be solved"
    )
    original: list[ClassVerification]
    note: str
    kept: str = Field(
        default="corrected",
        description="'corrected' (the plan returned is a re-solve under "
        "verification.corrections) or 'original' (the plan as first solved: no corrected "
        "fleet could be solved, or none attained more of its SLOs)",
    )
    rounds: list[CorrectionRound] = Field(
        default=[], description="every plan solved and simulated, the original first"
    )
    tried_corrections: list[FamilyCorrection] = Field(
        default=[],
        description="corrections the simulation asked for that the plan returned was not "
        "solved with (its plan was not kept); variants do not inherit them",
    )


class Verification(Out):
    enabled: bool = True
    requests: int
    seed: int
    burst_cv: float
    wall_time_s: float
    passed: bool | None
    summary: str
    classes: list[ClassVerification] = []
    correction: Correction | None = None
    corrections: list[FamilyCorrection] = Field(
        default=[],
        description="the capacity-model corrections the plan was solved with (learned by "
        "simulation, or inherited from the plan this one is a variant of)",
    )


# --------------------------------------------------------------------------- summaries


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def percentiles(values: np.ndarray, target: float) -> Percentiles:
    """p50/p90/p99 and the target percentile of ``values`` (nan and inf: unbounded)."""
    if len(values) == 0:
        return Percentiles(p50=None, p90=None, p99=None, at_target=None, mean=None)
    v = np.where(np.isfinite(values), values, 1e300)
    qs = np.percentile(v, [50, 90, 99, target], method="linear")
    out = [_finite(q) if q < 1e299 else None for q in qs]
    mean = float(v.mean()) if np.isfinite(values).all() else None
    return Percentiles(p50=out[0], p90=out[1], p99=out[2], at_target=out[3], mean=mean)


def batch_ci(ok: np.ndarray) -> float | None:
    """Half-width of a 95% interval of a share from 20 contiguous batch means."""
    if len(ok) < 2 * _BATCHES:
        return None
    means = np.array([b.mean() for b in np.array_split(ok.astype(float), _BATCHES)])
    return float(_T19 * means.std(ddof=1) / math.sqrt(_BATCHES))


def summarize_class(run: ClassRun) -> ClassSimulation:
    """Percentiles, attainment and goodput of one class's measured requests."""
    cls = run.cls
    m = run.measured
    arr = run.arrival_ms[m]
    first = run.first_ms[m]
    last = run.last_ms[m]
    out = run.output_tokens[m]
    ttft = np.where(np.isnan(first), np.inf, first - arr)
    multi = out > 1
    tpot_all = np.where(
        np.isnan(last) | np.isnan(first), np.inf, (last - first) / np.maximum(out - 1, 1)
    )
    tpot = tpot_all[multi]
    ok_ttft = ttft <= cls.ttft_slo_ms
    ok_tpot = np.where(multi, tpot_all <= cls.tpot_slo_ms, True)
    ok = ok_ttft & ok_tpot
    n = int(m.sum())
    t_lo, t_hi = run.window_ms[0], run.window_ms[1] - _margin(run)
    span_s = max(t_hi - t_lo, 1e-9) / 1000.0
    t_pct = percentiles(ttft, cls.percentile)
    p_pct = percentiles(tpot, cls.percentile)
    meets = n > 0 and float(ok.mean()) >= cls.percentile / 100.0
    waits = run.wait_ms[m]
    slot = run.slot_wait_ms[m]
    return ClassSimulation(
        name=cls.name,
        mode=cls.mode,
        rate_rps=n / span_s,
        requests=n,
        slo_ttft_ms=cls.ttft_slo_ms,
        slo_tpot_ms=cls.tpot_slo_ms,
        percentile=cls.percentile,
        ttft_ms=t_pct,
        tpot_ms=p_pct,
        planned_ttft_ms=cls.planned_ttft_ms,
        planned_tpot_ms=cls.planned_tpot_ms,
        attainment=float(ok.mean()) if n else 0.0,
        attainment_ci95=batch_ci(ok),
        attainment_ttft=float(ok_ttft.mean()) if n else 0.0,
        attainment_tpot=float(ok_tpot.mean()) if n else 0.0,
        goodput_rps=float(ok.sum()) / span_s,
        meets_slo=bool(meets),
        mean_prefill_wait_ms=(
            _finite(float(np.nanmean(waits))) if np.isfinite(waits).any() else None
        ),
        mean_decode_slot_wait_ms=(
            _finite(float(np.nanmean(slot))) if np.isfinite(slot).any() else None
        ),
    )


def _margin(run: ClassRun) -> float:
    return min(2.0 * run.cls.ttft_slo_ms, 0.2 * run.horizon_ms)


def summarize_pools(run: ClassRun) -> list[PoolSimulation]:
    cls = run.cls
    m = run.measured
    t_lo, t_hi = run.window_ms[0], run.window_ms[1] - _margin(run)
    span_s = max(t_hi - t_lo, 1e-9) / 1000.0
    out = []
    for st in run.pool_stats:
        pi = st["pool_index"]
        pool = cls.pools[pi]
        if pool.role == PoolRole.DECODE:
            mine = m & (run.decode_pool_of == pi)
            waits = run.slot_wait_ms[mine]
        else:
            mine = m & (run.pool_of == pi)
            waits = run.wait_ms[mine]
        waits = waits[np.isfinite(waits)]
        if pool.role == PoolRole.DECODE and pool.max_batch:
            util = (st["mean_batch"] or 0.0) / pool.max_batch
        else:
            util = st["busy"]
        out.append(
            PoolSimulation(
                id=pool.id,
                class_name=pool.class_name,
                role=pool.role,
                replicas=pool.replicas,
                rate_rps=float(mine.sum()) / span_s,
                utilization=util,
                busy=st["busy"],
                mean_batch=st["mean_batch"],
                max_batch=pool.max_batch,
                mean_queue=st["mean_queue"],
                max_queue=int(st["max_queue"]),
                mean_wait_ms=float(waits.mean()) if len(waits) else None,
                p90_wait_ms=float(np.percentile(waits, 90)) if len(waits) else None,
            )
        )
    return out
