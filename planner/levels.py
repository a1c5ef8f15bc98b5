"""Levels of the analogy factors, measured (split from :mod:`planner.fidelity`, which
re-exports every name): per GPU, the factor on its analogy MFU and MBU at which the model
errs on its saturated throughputs as it errs on the reference GPUs for the same LLM
(:func:`level_scale`), the ceiling a measurement may lift it to (:func:`level_ceiling`),
the measured ratios of its MoE LLMs and FP4 runs to that level, the spread of the scaled
factors (:func:`factor_spread`) and the level of a GPU never measured
(:func:`analogy_level_scale`). ``make calibrate-defaults`` writes them to the catalog.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median

from catalog.schema import Catalog, Dtype
from planner import calibration as cb
from planner.calibration.predict import unscaled_catalog


def prior_factors(catalog: Catalog, gpu: str) -> tuple[float, float, float]:
    """The analogy factors of ``gpu`` (prefill MFU, decode MBU, step overhead ms): the
    values before any calibration, else the catalog's."""
    return cb.UNCALIBRATED_DEFAULTS.get(gpu) or cb._prior(catalog, gpu, None)


#: An analogy guess is never scaled up by measurements past the reference GPUs' factors
#: (:func:`level_ceiling`), and never past this when it was set at or above them: the
#: planner must not buy a GPU because a few benchmarks ran well.
MAX_LEVEL_SCALE = 1.0
#: Fewer saturated-throughput values than this determine no level.
MIN_LEVEL_VALUES = 1


def saturated_throughput(m: cb.Measurement) -> bool:
    """True when ``m`` measures a serving engine's throughput at saturation: offline
    (no rate, no concurrency), an open loop with every request at once (``inf``), or a
    closed loop. A finite open-loop rate measures the offered load, not the GPU (its
    throughput is ``rate x output tokens`` whatever the factors), so it is excluded, also
    as the closed loop of its occupancy (``offered_rate_rps``: an MLPerf Server run)."""
    if m.kind == cb.MeasurementKind.KERNEL or m.output_tok_s is None:
        return False
    if m.offered_rate_rps is not None:
        return False
    rate = m.request_rate_rps
    return rate is None or math.isinf(rate) or m.concurrency is not None


#: GPUs whose level is absolute (their measured throughput against the prediction):
#: the well-measured Hopper pair. Every other GPU's level is relative to theirs on the
#: same LLM (:func:`level_scale`), so that a miss of the model on one LLM (Llama-3.1-
#: 405B on an old engine, DeepSeek's MoE kernels) is not charged to the GPU measured
#: on it.
LEVEL_REFERENCE_GPUS = ("h100-sxm5-80gb", "h200-sxm-141gb")


def factor_caps(catalog: Catalog, prior: Sequence[float]) -> tuple[float, float]:
    """The highest prefill MFU and decode MBU (fractions of peak) a level may give a GPU
    with analogy factors ``prior``: per factor, the least of the
    :data:`LEVEL_REFERENCE_GPUS`' analogy factors (H100/H200: 0.5 / 0.7, the best-measured
    shares of peak), or the guess times :data:`MAX_LEVEL_SCALE` where that is higher (a
    guess set above theirs, A100 80GB's MFU 0.55, is kept, never lifted). Measurements
    rate no GPU a larger share of its peak than the best-measured ones, factor by factor.
    The reference GPUs' own GEMMs run faster still, at their measured kernel rates
    (:func:`planner.kernel_floors.dense_gemm_lift`: x1.17-1.59 on H100), so a GPU capped
    at their analogy MFU is still rated below them."""
    refs = [prior_factors(catalog, g) for g in LEVEL_REFERENCE_GPUS if g in catalog.gpus]
    if not refs:
        return prior[0] * MAX_LEVEL_SCALE, prior[1] * MAX_LEVEL_SCALE
    mfu_ref, mbu_ref = min(r[0] for r in refs), min(r[1] for r in refs)
    return max(mfu_ref, prior[0] * MAX_LEVEL_SCALE), max(mbu_ref, prior[1] * MAX_LEVEL_SCALE)


def level_ceiling(catalog: Catalog, prior: Sequence[float]) -> float:
    """The highest level a GPU with analogy factors ``prior`` (prefill MFU, decode MBU)
    may be given (dimensionless): ``max(MAX_LEVEL_SCALE, cap_mfu / mfu, cap_mbu / mbu)``
    with the :func:`factor_caps`, the level past which neither factor rises
    (:func:`scaled_factors` holds each at its cap). Measurements may lift a guess that
    was set below the reference GPUs' (MI300X's 0.4 / 0.6, whose Llama-2-70B MLPerf
    throughput is H100's) up to theirs, never past them: MI300X's ceiling is 1.25, its
    MFU reaching 0.5 while its MBU stops at 0.7 from level 1.167."""
    caps = factor_caps(catalog, prior)
    return max(MAX_LEVEL_SCALE, caps[0] / prior[0], caps[1] / prior[1])


def scaled_factors(
    catalog: Catalog, prior: Sequence[float], level: float
) -> tuple[float, float, float]:
    """The factors a GPU with analogy factors ``prior`` (prefill MFU, decode MBU, step
    overhead ms) is priced with at ``level``: ``(min(mfu x level, cap_mfu), min(mbu x
    level, cap_mbu), overhead)`` with the :func:`factor_caps`. Below the caps (every
    level up to 1 on the shipped guesses) the analogy's split times the level; MI300X at
    1.25: 0.5 / 0.7 (not 0.5 / 0.75)."""
    caps = factor_caps(catalog, prior)
    return min(prior[0] * level, caps[0]), min(prior[1] * level, caps[1]), prior[2]


def capped(catalog: Catalog, prior: Sequence[float], level: float) -> bool:
    """True when :func:`scaled_factors` at ``level`` holds a factor at its cap (the
    split is no longer the analogy's)."""
    caps = factor_caps(catalog, prior)
    return prior[0] * level > caps[0] or prior[1] * level > caps[1]


def moe_ratio_capped(
    points: Sequence[cb.Measurement],
    catalog: Catalog,
    gpu: str,
    prior: Sequence[float],
    level: float,
    targets: Mapping[str, float] | None = None,
) -> float | None:
    """The MoE ratio of a GPU whose dense factors :func:`scaled_factors` caps at
    ``level``: the median over its MoE LLMs of the ``r`` at which its saturated
    throughputs of that LLM (non-FP4, fit points as given), priced with the capped factors
    times ``r`` on :func:`unscaled_catalog`, are off as the reference GPUs are on that LLM
    (``targets``, :func:`level_targets`; 1 without): the level of :func:`level_scale` per
    MoE LLM, measured against the capped split instead of the analogy's, so a cap on the
    dense factors does not move the MoE LLMs off what they measured. At most 1; None when
    nothing is capped or no MoE LLM was run (the ratio is then the MoE level over
    ``level``)."""
    if not capped(catalog, prior, level):
        return None
    factors = scaled_factors(catalog, prior, level)
    sat = [
        m
        for m in points
        if m.gpu == gpu
        and m.usable
        and saturated_throughput(m)
        and m.dtype != Dtype.FP4
        and catalog.models[m.model].is_moe
    ]
    if not sat:
        return None
    plain = unscaled_catalog(catalog)
    tg = targets or {}
    ratios = []
    for llm in sorted({m.model for m in sat}):
        pts = [m for m in sat if m.model == llm]
        ratios.append(_group_level(pts, plain, factors, tg.get(llm, 1.0)))
    return min(1.0, median(ratios))


@dataclass(frozen=True)
class LevelScale:
    """The level of a GPU's analogy factors checked against its measurements.

    ``scale``: the factor both prefill MFU and decode MBU are multiplied by
    (dimensionless, at most :func:`level_ceiling`); ``values``: saturated-throughput
    values it rests on; ``median_ratio``: median measured / predicted output tokens/s
    with the unscaled factors (below 1: the guess is optimistic); ``by_model``: the
    level each LLM's values alone give (its FP4 values apart, as ``"<llm> fp4"``);
    ``moe_ratio``: the median level of its MoE LLMs over ``scale``, at most 1 (1 when
    it has none, or no dense LLM; measured against the capped factors where
    :func:`scaled_factors` caps one, :func:`moe_ratio_capped`); ``fp4_ratio``: its FP4
    runs' level over its other formats' (1 when it has none; :func:`_per_llm_levels`);
    ``measured``: the median before the ceiling (``scale`` is less where a guess was
    lifted to the reference GPUs' factors); ``dense``: a dense LLM is among those it rests on."""

    gpu: str
    scale: float
    values: int
    median_ratio: float
    by_model: tuple[tuple[str, float], ...] = ()
    moe_ratio: float = 1.0
    fp4_ratio: float = 1.0
    measured: float = 1.0
    dense: bool = False


def _throughput_ratio(
    sat: Sequence[cb.Measurement], catalog: Catalog, factors: Sequence[float], s: float
) -> float:
    """Median measured / predicted output tokens/s of ``sat`` with MFU and MBU x ``s``."""
    out = []
    for m in sat:
        pred = cb.predict(m, catalog, (factors[0] * s, factors[1] * s, factors[2]))
        got = pred.get("output_tok_s")
        if got and m.output_tok_s:
            out.append(m.output_tok_s / got)
    return median(out) if out else 1.0


#: The least level a group of points is given (a guess 20x optimistic is not a guess).
MIN_GROUP_LEVEL = 0.05


def _group_level(
    pts: Sequence[cb.Measurement], catalog: Catalog, factors: Sequence[float], target: float
) -> float:
    """The ``s`` in [:data:`MIN_GROUP_LEVEL`, ``1 / max(mfu, mbu)``] (factors above 1
    are not factors) at which :func:`_throughput_ratio` of ``pts`` equals ``target``:
    Brent's method on ``ln(ratio(s) / target)`` in ``ln s`` (throughput grows with the
    factors, less than in proportion where step overheads, floors or the load bound it,
    so a fixed point ``s <- s x ratio`` converges slowly there). A bound where the
    ratio does not cross the target inside. Dimensionless."""

    def f(log_s: float) -> float:
        return math.log(_throughput_ratio(pts, catalog, factors, math.exp(log_s)) / target)

    return _root_in_log(f, math.log(MIN_GROUP_LEVEL), math.log(1.0 / max(factors[0], factors[1])))


def _root_in_log(f: Callable[[float], float], lo: float, hi: float) -> float:
    """``exp`` of the root of ``f`` (increasing in its argument, a log level) in
    ``[lo, hi]`` by Brent's method (``xtol`` 1e-4): ``exp(hi)`` where ``f(hi) >= 0``
    (measured faster than even the largest level predicts), ``exp(lo)`` where
    ``f(lo) <= 0``. Dimensionless."""
    from scipy.optimize import brentq  # imported on use: the CLI starts faster

    if f(hi) >= 0:
        return math.exp(hi)
    if f(lo) <= 0:
        return math.exp(lo)
    return math.exp(brentq(f, lo, hi, xtol=1e-4))


def level_targets(
    points: Sequence[cb.Measurement],
    catalog: Catalog,
    factors_by_gpu: Mapping[str, Sequence[float]],
    reference: Sequence[str] = LEVEL_REFERENCE_GPUS,
) -> dict[str, float]:
    """Per LLM, how far the model is off on the reference GPUs: the median measured /
    predicted saturated throughput of the ``reference`` GPUs' ``points`` of that LLM,
    predicted with their factors in ``factors_by_gpu`` (their own levels applied) on
    :func:`unscaled_catalog`. Dimensionless; an LLM no reference GPU was measured on
    is absent (target 1)."""
    plain = unscaled_catalog(catalog)
    by_model: dict[str, list[float]] = {}
    for m in points:
        if m.gpu not in reference or not m.usable or not saturated_throughput(m):
            continue
        pred = cb.predict(m, plain, tuple(factors_by_gpu[m.gpu])).get("output_tok_s")
        if pred and m.output_tok_s:
            by_model.setdefault(m.model, []).append(m.output_tok_s / pred)
    return {k: median(v) for k, v in by_model.items()}


def level_group(m: cb.Measurement) -> str:
    """A point's level group: its LLM, with ``" fp4"`` for FP4 weights."""
    return f"{m.model} fp4" if m.dtype == Dtype.FP4 else m.model


def level_scale(
    points: Sequence[cb.Measurement],
    catalog: Catalog,
    gpu: str,
    factors: Sequence[float],
    targets: Mapping[str, float] | None = None,
) -> LevelScale | None:
    """The level ``s`` of ``gpu``'s analogy ``factors`` (prefill MFU, decode MBU, step
    overhead ms): the factor on MFU and MBU at which the model errs on this GPU's
    saturated throughputs (:func:`saturated_throughput` over ``points`` of ``gpu``;
    output tokens/s, measured) as it errs on the reference GPUs for the same LLM,
    priced on :func:`unscaled_catalog` (no measured ratio applied).

    Per group ``g`` (an LLM; its FP4 points a group of their own) it is the ``s`` at
    which ``median(measured / predicted(s)) = t`` (:func:`_group_level`: a root in
    log s; between :data:`MIN_GROUP_LEVEL` and the level at which MFU or MBU would
    pass 1), with ``t = targets[llm]`` (:func:`level_targets`; 1 without a target: the
    absolute level, as for the reference GPUs themselves). The FP4 ratio (the assumed
    FP4 derates against its FP4 runs) and each LLM's level in its other formats come
    from the groups
    (:func:`_per_llm_levels`); the GPU's level is the median over its LLMs (each counts
    once, however many points its sweep has), or over its dense LLMs where that is
    higher, then capped at :func:`level_ceiling` (an LLM on which the GPU beats the
    guess still counts, so the median is not pulled down by capping each LLM first). The
    GPU's throughput relative to the reference's on each LLM, the ratio that decides
    what the optimizer buys, is then what was measured.

    ``moe_ratio``: the median level of its MoE LLMs over the level, at most 1, when it
    has both MoE and dense LLMs (MI300X: DeepSeek-V3 0.63 against Llama 1.36-1.42); where
    the level holds a factor at its cap (:func:`scaled_factors`) the ratio is measured
    against the capped factors (:func:`moe_ratio_capped`), so the MoE LLMs keep what they
    measured. MoE
    LLMs measured below the dense ones are priced by that ratio and do not pull the dense
    level down (B200: Llama-2-70B at 0.94, DeepSeek-V3 at 0.81; the median over both,
    0.875, priced its Llama below what it measured); measured above them they count in
    the median as any LLM (H200: DeepSeek-V3 and Mixtral at 1.09-1.11 beside dense LLMs
    at 0.63-1.43), since a ratio of at most 1 would otherwise price them below both.

    One parameter, the level, is what such data determine well even where the
    two-factor fit is ill-conditioned (MI300X: MFU 0.17 / MBU 0.32, outside what an
    engine plausibly reaches); the split between compute and bandwidth stays the
    analogy's. None with fewer than :data:`MIN_LEVEL_VALUES` values, or with FP4 runs
    only (they would carry the assumed FP4 derates' error into every other format)."""
    sat = [m for m in points if m.gpu == gpu and m.usable and saturated_throughput(m)]
    if len(sat) < MIN_LEVEL_VALUES:
        return None
    plain = unscaled_catalog(catalog)
    tg = targets or {}
    per_group: list[tuple[str, float]] = []
    for group in sorted({level_group(m) for m in sat}):
        pts = [m for m in sat if level_group(m) == group]
        per_group.append((group, _group_level(pts, plain, factors, tg.get(pts[0].model, 1.0))))
    if all(g.endswith(" fp4") for g, _ in per_group):
        return None  # FP4 runs alone measure the assumed FP4 derates, not the GPU's level
    ratio, by_llm = _per_llm_levels(per_group)
    moe = [v for g, v in by_llm if catalog.models[g].is_moe]
    dense = [v for g, v in by_llm if not catalog.models[g].is_moe]
    measured = max(median(v for _, v in by_llm), median(dense) if dense else 0.0)
    level = min(measured, level_ceiling(catalog, factors))
    first = _throughput_ratio(sat, plain, factors, 1.0)
    moe_ratio = min(1.0, median(moe) / level) if moe and dense else 1.0
    if moe and dense:
        at_cap = moe_ratio_capped(sat, catalog, gpu, factors, level, targets)
        moe_ratio = moe_ratio if at_cap is None else at_cap
    return LevelScale(
        gpu,
        level,
        len(sat),
        first,
        tuple(per_group),
        moe_ratio=moe_ratio,
        fp4_ratio=ratio,
        measured=measured,
        dense=bool(dense),
    )


#: Fewest data-parallel-attention saturated values :func:`dp_attention_ratio` measures a
#: ratio from (it only ever lowers a GPU's factors there), and fewest for their median:
#: below it, the run the model over-rates most sets the ratio.
MIN_DP_VALUES = 2
MIN_DP_MEDIAN_VALUES = 3


def uses_dp_attention(m: cb.Measurement) -> bool:
    """Whether a run's decode workers or its prefill workers run data-parallel attention
    (with wide expert parallelism)."""
    return bool(m.dp_attention or m.prefill_dp_attention)


def _dp_level(
    pts: Sequence[cb.Measurement], catalog: Catalog, gpu: str, factors: Sequence[float]
) -> float:
    """The ``r`` in [:data:`MIN_GROUP_LEVEL`, 1] at which the median measured / predicted
    output tokens/s of ``pts`` is 1, with ``gpu``'s ``dp_attention_level_ratio`` set to
    ``r`` (so each worker with ``dp > 1`` is priced at it, as plans price it) and its
    ``factors``: Brent's method in ``ln r``; 1 where they measure at or above the
    prediction unscaled."""
    g = catalog.gpus[gpu]

    def f(log_r: float) -> float:
        eff = g.efficiency.model_copy(update={"dp_attention_level_ratio": math.exp(log_r)})
        cat = catalog.model_copy(
            update={"gpus": {**catalog.gpus, gpu: g.model_copy(update={"efficiency": eff})}}
        )
        return math.log(_throughput_ratio(pts, cat, factors, 1.0))

    return _root_in_log(f, math.log(MIN_GROUP_LEVEL), 0.0)


def dp_attention_ratio(
    points: Sequence[cb.Measurement], catalog: Catalog, gpu: str, factors: Sequence[float]
) -> tuple[float, int]:
    """How ``gpu``'s runs with data-parallel attention measure against its ``factors``
    (prefill MFU, decode MBU, step overhead ms; its measured MoE and FP4 ratios as
    ``catalog`` has them): the ``dp_attention_level_ratio`` at which its saturated
    data-parallel-attention ``points`` (:func:`saturated_throughput`,
    :func:`uses_dp_attention`) are predicted as measured (:func:`_dp_level`: the median
    of measured / predicted output tokens/s is 1, each worker with ``dp > 1`` priced at
    it as plans price it); with fewer than :data:`MIN_DP_MEDIAN_VALUES` values, the
    least of their levels one by one (the run the model over-rates most); at most 1. And
    how many values it rests on. ``(1, n)`` with fewer than :data:`MIN_DP_VALUES`.
    Dimensionless. MI355X: its two fit runs at 4,096 users measured at 0.64 and 0.78 of
    what its level predicts; NVIDIA's (B200, GB200, GB300, H200) at or above it, so 1."""
    pts = [
        m
        for m in points
        if m.gpu == gpu
        and m.usable
        and saturated_throughput(m)
        and uses_dp_attention(m)
        and m.output_tok_s
    ]
    if len(pts) < MIN_DP_VALUES:
        return 1.0, len(pts)
    if len(pts) < MIN_DP_MEDIAN_VALUES:
        # a run with data-parallel attention on its prefill side only barely responds to
        # the ratio: at the floor it says nothing, so it does not set the least
        levels = [_dp_level([m], catalog, gpu, factors) for m in pts]
        told = [
            v for v, m in zip(levels, pts, strict=True) if v > MIN_GROUP_LEVEL or m.dp_attention
        ]
        return (min(told) if told else 1.0), len(pts)
    return _dp_level(pts, catalog, gpu, factors), len(pts)


def _per_llm_levels(
    per_group: Sequence[tuple[str, float]],
) -> tuple[float, list[tuple[str, float]]]:
    """From the groups' levels (``"<llm>"`` and ``"<llm> fp4"``): the FP4 ratio and the
    level of each LLM in its non-FP4 formats.

    The FP4 ratio is the median of ``fp4 / non-FP4`` over the LLMs measured both ways
    (the format's effect on one LLM, B200's DeepSeek-V3: 1.01 / 0.84); with none, the
    median FP4 level over the median non-FP4 one; 1 without FP4 groups (or without
    others). An LLM measured in FP4 only counts at its FP4 level over that ratio (B200's
    Llama-2-70B), so a GPU's level and its MoE ratio rest on every LLM it ran."""
    base = {g: v for g, v in per_group if not g.endswith(" fp4")}
    fp4 = {g.removesuffix(" fp4"): v for g, v in per_group if g.endswith(" fp4")}
    pairs = [fp4[g] / base[g] for g in fp4 if g in base]
    if pairs:
        ratio = median(pairs)
    elif fp4 and base:
        ratio = median(fp4.values()) / median(base.values())
    else:
        ratio = 1.0
    by_llm = dict(base)
    for g, v in fp4.items():
        by_llm.setdefault(g, v / ratio)
    return ratio, sorted(by_llm.items())


#: Matched runs (:func:`matched_runs`) of one LLM a level relative to a sibling needs;
#: with fewer the sibling's dense-to-MoE gap is borrowed instead
#: (:func:`borrowed_dense_level`).
MIN_MATCHED_RUNS = 3


def run_key(m: cb.Measurement) -> tuple[object, ...]:
    """What a run is matched on across GPUs: its publisher (:func:`source_root`), LLM,
    formats, engine, parallelism, disaggregation, shape and load; everything but the
    GPU, the measured values and the run's own id or file."""
    return (
        source_root(m.source),
        m.model,
        m.dtype,
        m.kv_dtype,
        m.engine,
        m.kind,
        m.tp,
        m.ep,
        m.pp,
        m.dp_attention,
        m.num_gpus,
        m.prefill_workers,
        m.prefill_tp,
        m.prefill_ep,
        m.prefill_dp_attention,
        m.decode_workers,
        m.isl,
        m.osl,
        m.concurrency,
        m.request_rate_rps,
        m.num_requests,
        m.token_budget,
        m.max_batch,
    )


def matched_runs(
    points: Sequence[cb.Measurement], gpu: str, sibling: str
) -> list[tuple[cb.Measurement, cb.Measurement]]:
    """Pairs ``(run on gpu, run on sibling)`` of usable saturated-throughput points
    (:func:`saturated_throughput`) with the same :func:`run_key`: one publisher's sweep
    run on both GPUs, so that what differs between the two is the GPU (InferenceMAX's
    DeepSeek-V3 SGLang sweep on MI300X and MI325X). Each sibling run is used once."""
    theirs: dict[tuple[object, ...], list[cb.Measurement]] = {}
    for m in points:
        if m.gpu == sibling and m.usable and saturated_throughput(m) and m.source:
            theirs.setdefault(run_key(m), []).append(m)
    pairs = []
    for m in points:
        if m.gpu != gpu or not m.usable or not saturated_throughput(m) or not m.source:
            continue
        same = theirs.get(run_key(m))
        if same:
            pairs.append((m, same.pop(0)))
    return pairs


def paired_level(
    pairs: Sequence[tuple[cb.Measurement, cb.Measurement]],
    catalog: Catalog,
    factors: Sequence[float],
    sibling_factors: Sequence[float],
    sibling_level: float,
) -> float:
    """The level of a GPU's analogy ``factors`` on matched runs ``pairs`` (its run, the
    sibling's; :func:`matched_runs`): the ``s`` at which the model's ratio of the two
    GPUs is what was measured, run by run: ``median_i [(measured_i / predicted_i(s)) /
    (measured'_i / predicted'_i)] = 1``, the sibling's runs priced with its analogy
    ``sibling_factors`` at ``sibling_level``, both on :func:`unscaled_catalog`; a root
    in ``ln s`` (Brent) between :data:`MIN_GROUP_LEVEL` and the level at which MFU or
    MBU would pass 1, a bound where the ratio does not cross 1 inside. Dimensionless.

    ``paired_level / sibling_level`` is the GPU's level relative to the sibling measured
    on the same software, shapes and loads, free of what else either was measured on
    (MI300X's DeepSeek-V3 level rests on three publishers, MI325X's on InferenceMAX's
    sweep alone). Pairs either of whose predictions is missing are left out; none left:
    ``sibling_level``."""
    from scipy.optimize import brentq  # imported on use: the CLI starts faster

    plain = unscaled_catalog(catalog)
    theirs_f = (sibling_factors[0] * sibling_level, sibling_factors[1] * sibling_level)
    base: list[tuple[cb.Measurement, float]] = []
    for a, b in pairs:
        pb = cb.predict(b, plain, (*theirs_f, sibling_factors[2])).get("output_tok_s")
        if pb and a.output_tok_s and b.output_tok_s:
            base.append((a, b.output_tok_s / pb))
    if not base:
        return sibling_level

    def f(log_s: float) -> float:
        s = math.exp(log_s)
        out = []
        for a, err_b in base:
            pa = cb.predict(a, plain, (factors[0] * s, factors[1] * s, factors[2]))
            got = pa.get("output_tok_s")
            if got and a.output_tok_s:
                out.append(a.output_tok_s / got / err_b)
        return math.log(median(out)) if out else 0.0

    lo, hi = math.log(MIN_GROUP_LEVEL), math.log(1.0 / max(factors[0], factors[1]))
    f_lo, f_hi = f(lo), f(hi)
    if f_hi >= 0:
        return math.exp(hi)
    if f_lo <= 0:
        return math.exp(lo)
    return math.exp(brentq(f, lo, hi, xtol=1e-4))


def held_at(level: float, judge_level: float, ceiling: float) -> bool:
    """Whether a GPU measured on MoE LLMs only at ``level`` is held at the level of the
    measured GPU it is judged by (``judge_level``, at most ``ceiling``): its MoE runs
    measure above it (:func:`borrowed_dense_level`). Dimensionless levels."""
    return level > min(judge_level, ceiling)


def borrowed_dense_level(
    level: float,
    sibling_level: float,
    sibling_moe_ratio: float,
    ceiling: float,
    matched_ratio: float | None = None,
) -> tuple[float, float]:
    """The dense-LLM level of a GPU measured on MoE LLMs only (at ``level``), from a
    measured sibling of its architecture whose MoE LLMs run at ``sibling_moe_ratio`` of
    its dense level ``sibling_level``: ``dense = max(level, min(level /
    sibling_moe_ratio, sibling_level, ceiling, MAX_LEVEL_SCALE))`` (the sibling's
    measured gap between dense and MoE kernels on the same software stack, never above
    the sibling's own level, :func:`level_ceiling`, nor the analogy guess itself: no dense
    run lifts it), and the MoE ratio ``level / dense`` that keeps its MoE LLMs at the
    level they were measured at (but see below: never above the sibling's level).
    Dimensionless; returns ``(dense, moe_ratio)``. MI325X:
    DeepSeek-V3 measured at 0.57 and MI300X's DeepSeek-V3 at 0.54 of its Llama level give
    a Llama level of 1.06, taken at 1, against 0.57 without: the same die with faster HBM
    would otherwise be rated at half MI300X's share of peak on dense LLMs.

    With ``matched_ratio`` (the GPU's :func:`paired_level` over the sibling's level on
    the same LLM, from at least :data:`MIN_MATCHED_RUNS` matched runs) the two were
    measured side by side, and the sibling's measured dense level carries over in that
    ratio: ``dense = max(level, min(sibling_level x matched_ratio, sibling_level,
    ceiling))``. The analogy guess no longer caps it (the sibling's dense runs measured
    the stack), but the sibling's level still does: a GPU is never rated a larger share
    of peak than the sibling it is judged by. MI325X runs InferenceMAX's DeepSeek-V3
    sweep at 0.96 of MI300X's level on the same runs (5 fit runs): its Llama level is
    1.167 x 0.96 = 1.12 (MI300X's 1.167), not the guess's 1.

    A GPU whose MoE runs measure above the sibling's own level (``level >
    min(sibling_level, ceiling)``) is held there on every LLM: ``dense = min(sibling_level,
    ceiling)`` with MoE ratio 1, so its MoE LLMs are priced below what they measured. Its
    dense LLMs are unmeasured and must not be rated a larger share of peak than the
    measured sibling they are judged by, and a MoE ratio above 1 (MoE LLMs priced above
    the dense level) is not allowed (:func:`planner.roofline.moe_level_ratio`). B300's
    DeepSeek runs measure at 0.886 against B200's dense 0.879: both are priced at 0.879
    on B300."""
    if held_at(level, sibling_level, ceiling):
        return min(sibling_level, ceiling), 1.0
    if matched_ratio is not None:
        dense = max(level, min(sibling_level * matched_ratio, sibling_level, ceiling))
    else:
        dense = max(level, min(level / sibling_moe_ratio, sibling_level, ceiling, MAX_LEVEL_SCALE))
    return dense, level / dense


def factor_spread(
    points: Sequence[cb.Measurement],
    catalog: Catalog,
    factors: Sequence[float],
    fitted_factors: int = 1,
) -> cb.Spreads | None:
    """The spreads (``sigma_log`` for the band, ``downside_sigma_log`` for the derate) of
    ``factors`` (prefill MFU, decode MBU, step overhead ms) on ``points`` (every measured
    value: throughput, TTFT, TPOT, kernel times): as
    :func:`planner.calibration.residual_spreads`,
    :func:`planner.calibration.spreads_from_log_errors` of the capacity errors
    (:func:`planner.calibration.capacity_log_error`: the normal-consistent MAD, the
    spread whose 90% band holds 90% of the values and those whose derates at 0.8 and 0.9
    are cleared by 80% and 90%) with ``k = fitted_factors`` (1: the level of
    :func:`level_scale`).
    Dimensionless; None when nothing is predicted."""
    errors: list[float] = []
    for m in points:
        if not m.usable:
            continue
        pred = cb.predict(m, catalog, tuple(factors))
        for q, v in m.quantities().items():
            p = pred.get(q)
            if p is not None and p > 0 and v > 0:
                errors.append(cb.capacity_log_error(q, v, p))
    return cb.spreads_from_log_errors(errors, fitted_factors)


def own_llm_ratios(
    points: Sequence[cb.Measurement],
    catalog: Catalog,
    gpu: str,
    factors: Sequence[float],
    targets: Mapping[str, float] | None = None,
) -> dict[str, tuple[float, int, int]]:
    """Per LLM ``gpu`` was measured on: ``(ratio, n, publishers)``, ``ratio`` the median
    measured / predicted output tokens/s of its ``n`` usable saturated-throughput points
    of that LLM (:func:`saturated_throughput`; FP4 runs left out: they measure the FP4
    derates) predicted with ``factors`` on ``catalog`` (the GPU's measured MoE and FP4 ratios
    applied, as plans price it), over ``targets[llm]`` (:func:`level_targets`: the
    reference GPUs' median on that LLM; 1 where absent or without ``targets``, as for the
    reference GPUs themselves). Dimensionless; below 1 the factors, which rest on the
    median over the GPU's LLMs (:func:`level_scale`), over-rate that LLM on this GPU
    relative to the reference (MI300X's Llama-3.1-70B on AMD's table: 0.80).
    ``publishers``: the distinct :func:`source_root` of those points (a point without a
    source counts as one publisher)."""
    tg = targets or {}
    by_llm: dict[str, list[float]] = {}
    roots: dict[str, set[str]] = {}
    for m in points:
        if m.gpu != gpu or not m.usable or not saturated_throughput(m) or m.dtype == Dtype.FP4:
            continue
        pred = cb.predict(m, catalog, tuple(factors)).get("output_tok_s")
        if pred and m.output_tok_s:
            by_llm.setdefault(m.model, []).append(m.output_tok_s / pred)
            roots.setdefault(m.model, set()).add(source_root(m.source))
    return {
        llm: (median(v) / tg.get(llm, 1.0), len(v), len(roots[llm]))
        for llm, v in sorted(by_llm.items())
    }


def analogy_level_scale(
    gpu: str, catalog: Catalog, levels: Mapping[str, float], default: float
) -> float:
    """The level for ``gpu``'s analogy factors when no measurement scales them
    (dimensionless): ``default`` (:data:`catalog.schema.ANALOGY_LEVEL_SCALE`, the median
    level of the checked GPUs), or the lowest level in ``levels`` (measured, by GPU id)
    of a GPU of the same architecture (``Gpu.arch``) when that is lower, so that a
    GPU guessed from a sibling never looks better than the measured sibling (GB200
    is never rated above B200)."""
    arch = catalog.gpus[gpu].arch
    sib = [s for g, s in levels.items() if g != gpu and catalog.gpus[g].arch == arch]
    return min([default, *sib])


#: GitHub organisations that publish a vendor's own figures, and the vendor's host they
#: count as (one publisher): AMD's ROCm/vllm benchmark tables are AMD's, as its
#: performance page is.
VENDOR_GITHUB_ORGS: dict[str, str] = {"ROCm": "amd.com"}


def source_root(source: str | None) -> str:
    """Where a measurement was published, coarsely: ``github.com/owner/repo`` for a
    GitHub address (the vendor's host for an organisation in :data:`VENDOR_GITHUB_ORGS`),
    else the host (``intel.com``), without ``www.``, query or anchor;
    ``""`` when unknown. Points with one root are one publisher's runs, usually one
    sweep: they do not vary independently."""
    if not source:
        return ""
    s = source.strip().split(" ")[0]
    s = s.split("#")[0].split("?")[0]
    for prefix in ("https://", "http://"):
        if s.startswith(prefix):
            s = s[len(prefix) :]
    if s.startswith("www."):
        s = s[4:]
    parts = s.split("/")
    if parts[0] == "github.com" and len(parts) > 1 and parts[1] in VENDOR_GITHUB_ORGS:
        return VENDOR_GITHUB_ORGS[parts[1]]
    return "/".join(parts[:3]) if parts[0] == "github.com" else parts[0]


def source_roots(points: Sequence[cb.Measurement]) -> set[str]:
    """The distinct :func:`source_root` of ``points`` (unknown sources left out)."""
    return {r for m in points if (r := source_root(m.source))}
