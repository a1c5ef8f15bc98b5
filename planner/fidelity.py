"""How far the cost model is from public measurements, on the fit and held-out splits.

``bench/fidelity.py`` prints these tables and ``scripts/calibrate_defaults.py`` writes
them into ``docs/calibration.md``; both call the functions here, so the two agree.

* :func:`fit_per_gpu` — one set of factors per GPU (what the catalog holds), fitted
  on the GPU's ``split: fit`` points only (:func:`planner.calibration.fit_points`),
  started at and pulled toward the analogy factors
  (:data:`planner.calibration.UNCALIBRATED_DEFAULTS`);
* :func:`shipped_factors` — the factors the catalog prices plans with (what
  ``bench/fidelity.py`` and ``docs/calibration.md`` call *after*);
* :func:`evaluate` — every measured value of every priceable point with its
  prediction *before* (analogy factors) and *after* (given factors: the shipped
  ones, or a fit);
* :func:`summarize` — per group and split: values, median absolute and median
  signed error, before and after;
* :func:`cross_vendor_ratios` — per-GPU throughput of each GPU relative to H100 SXM
  on the same model and shape, predicted and measured.

Errors are relative: signed ``predicted / measured - 1`` (positive: the model is
optimistic for throughput, pessimistic for latency), absolute its magnitude.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median

from catalog.schema import Catalog
from planner import calibration as cb
from planner.levels import (  # noqa: F401  (re-exported)
    LEVEL_REFERENCE_GPUS,
    MAX_LEVEL_SCALE,
    MIN_DP_VALUES,
    MIN_LEVEL_VALUES,
    MIN_MATCHED_RUNS,
    LevelScale,
    analogy_level_scale,
    borrowed_dense_level,
    capped,
    dp_attention_ratio,
    factor_caps,
    factor_spread,
    held_at,
    level_ceiling,
    level_group,
    level_scale,
    level_targets,
    matched_runs,
    moe_ratio_capped,
    own_llm_ratios,
    paired_level,
    prior_factors,
    saturated_throughput,
    scaled_factors,
    source_root,
    source_roots,
    unscaled_catalog,
    uses_dp_attention,
)

#: The GPU the cross-vendor ratios are relative to.
REFERENCE_GPU = "h100-sxm5-80gb"
SPLITS = ("fit", "holdout")


def shipped_factors(catalog: Catalog) -> dict[str, tuple[float, float, float]]:
    """Per GPU of ``catalog``, the factors its plans are priced with (prefill MFU, decode
    MBU as fractions of peak; step overhead in ms): the catalog's own efficiency entry,
    as ``make calibrate-defaults`` last wrote it (a fit where adopted, else the analogy
    scaled to the GPU's measured level; docs/calibration.md says which)."""
    return {g: cb._prior(catalog, g, None) for g in sorted(catalog.gpus)}


def fit_per_gpu(points: Sequence[cb.Measurement], catalog: Catalog) -> dict[str, cb._GroupResult]:
    """Per GPU, :func:`planner.calibration.fit_group` over its ``fit`` points (every
    dtype and engine: the catalog keeps one set of factors per SKU), from and toward
    :func:`prior_factors`. GPUs without a fit point are absent."""
    by_gpu: dict[str, list[cb.Measurement]] = {}
    for m in cb.fit_points(points):
        by_gpu.setdefault(m.gpu, []).append(m)
    return {
        gpu: cb.fit_group(pts, catalog, (gpu, None, None), prior=prior_factors(catalog, gpu))
        for gpu, pts in sorted(by_gpu.items())
    }


def load(m: cb.Measurement) -> str:
    """A point's load: ``C=`` closed-loop concurrency, ``rate=`` open-loop requests/s
    (``N=`` requests of the run), ``offline``, or ``kernel``."""
    if m.kind == cb.MeasurementKind.KERNEL:
        return "kernel"
    return shape(m).split(" ", 1)[1]


def round_sig(x: float, digits: int = 2) -> float:
    """``x`` rounded to ``digits`` significant digits (0 stays 0)."""
    if x == 0:
        return 0.0
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def shape(m: cb.Measurement) -> str:
    """A point's workload: ``isl/osl`` and its load (``C=`` closed-loop concurrency,
    ``rate=`` open-loop requests/s, ``N=`` requests of the run, ``offline``), or the
    kernel's token count."""
    if m.kind == cb.MeasurementKind.KERNEL:
        return f"kernel {m.tokens} tok"
    if m.concurrency is not None:
        load = f"C={m.concurrency:g}"
    elif m.request_rate_rps is not None:
        load = "rate=inf" if math.isinf(m.request_rate_rps) else f"rate={m.request_rate_rps:g}"
        if m.num_requests is not None:
            load += f" N={m.num_requests}"
    else:
        load = "offline"
    return f"{m.isl}/{m.osl} {load}"


@dataclass(frozen=True)
class Row:
    """One measured value and its predictions. ``before``/``after``: the prediction
    with the analogy factors and with the factors :func:`evaluate` was given (shipped
    or fitted) (None when the model
    predicts none, e.g. TTFT of an overloaded open loop)."""

    id: str
    gpu: str
    model: str
    dtype: str
    tp: int
    engine: str
    shape: str
    split: str
    quantity: str
    measured: float
    before: float | None
    after: float | None
    isl: int = 0
    osl: int = 0
    load: str = ""
    #: Where the value was published (:func:`planner.levels.source_root` of its source).
    family: str = ""

    @property
    def signed_before(self) -> float | None:
        return signed_error(self.before, self.measured)

    @property
    def signed_after(self) -> float | None:
        return signed_error(self.after, self.measured)


def signed_error(predicted: float | None, measured: float) -> float | None:
    """``predicted / measured - 1`` (dimensionless; None when not predicted)."""
    return None if predicted is None else predicted / measured - 1.0


def evaluate(
    points: Sequence[cb.Measurement],
    catalog: Catalog,
    fitted: Mapping[str, Sequence[float]],
) -> list[Row]:
    """Every measured value of every priceable point (both splits), predicted with the
    analogy factors (:func:`prior_factors`) and with ``fitted[gpu]`` (the analogy
    factors again for a GPU without a fit); *before* on :func:`unscaled_catalog` (the
    analogy as it was: no measured ratio)."""
    rows: list[Row] = []
    plain = unscaled_catalog(catalog)
    for m in points:
        if not m.usable:
            continue
        prior = prior_factors(catalog, m.gpu)
        before = cb.predict(m, plain, prior)
        after = cb.predict(m, catalog, fitted.get(m.gpu, prior))
        for q, value in m.quantities().items():
            rows.append(
                Row(
                    id=m.label,
                    gpu=m.gpu,
                    model=m.model,
                    dtype=m.dtype.value,
                    tp=m.tp,
                    engine=m.engine or "-",
                    shape=shape(m),
                    split=(m.split or cb.Split.FIT).value,
                    quantity=q,
                    measured=value,
                    before=before.get(q),
                    after=after.get(q),
                    isl=m.isl or 0,
                    osl=m.osl or 0,
                    load=load(m),
                    family=source_root(m.source),
                )
            )
    return rows


@dataclass(frozen=True)
class Summary:
    """Errors of a group of values of one split: ``values`` measured values, of which
    ``predicted`` have a prediction after the fit; medians of |error| and of the
    signed error (fractions), before and after."""

    key: tuple[str, ...]
    split: str
    values: int
    predicted: int
    median_abs_before: float | None
    median_abs_after: float | None
    median_signed_before: float | None
    median_signed_after: float | None


def _med(xs: Iterable[float | None], absolute: bool) -> float | None:
    v = [abs(x) if absolute else x for x in xs if x is not None]
    return median(v) if v else None


def summarize(
    rows: Sequence[Row], key: Callable[[Row], tuple[str, ...]], splits: Sequence[str] = SPLITS
) -> list[Summary]:
    """Per ``key(row)`` and split: median absolute and median signed error before and
    after (over every measured value of the group with a prediction)."""
    groups: dict[tuple[tuple[str, ...], str], list[Row]] = {}
    for r in rows:
        if r.split in splits:
            groups.setdefault((key(r), r.split), []).append(r)
    out = []
    for (k, split), rs in sorted(groups.items()):
        sb = [r.signed_before for r in rs]
        sa = [r.signed_after for r in rs]
        out.append(
            Summary(
                key=k,
                split=split,
                values=len(rs),
                predicted=sum(1 for x in sa if x is not None),
                median_abs_before=_med(sb, True),
                median_abs_after=_med(sa, True),
                median_signed_before=_med(sb, False),
                median_signed_after=_med(sa, False),
            )
        )
    return out


@dataclass(frozen=True)
class Ratio:
    """Output tokens/s per GPU of ``gpu`` divided by the reference GPU's on the same
    model and shape (dimensionless), measured and predicted (after the fit and
    before it)."""

    gpu: str
    model: str
    shape: str
    dtype: str
    reference_dtype: str
    measured: float
    predicted_before: float | None
    predicted_after: float | None


def ratio_key(r: Row) -> tuple[str, str, float, float]:
    """Rows with the same key are the same workload for a cross-vendor ratio: model,
    load, and prompt / output lengths to 2 significant digits (MLPerf's generated
    lengths differ by a few tokens between systems)."""
    return (r.model, r.load, round_sig(r.isl), round_sig(r.osl))


def cross_vendor_ratios(rows: Sequence[Row], reference: str = REFERENCE_GPU) -> list[Ratio]:
    """For every workload (:func:`ratio_key`) measured on ``reference`` and on another
    GPU: the ratio of output tokens/s per GPU, ``(tok_s / tp)_gpu / (tok_s /
    tp)_reference``, measured and predicted. Several points of one GPU on one workload
    (e.g. two engines or dtypes) each give a ratio against the reference's first (by id)
    of the same publication (:func:`planner.levels.source_root`: the same MLPerf round's
    results, the same benchmark repository), else its first of any."""
    tput = [r for r in rows if r.quantity == "output_tok_s"]
    refs: dict[tuple[str, str, float, float], Row] = {}
    same: dict[tuple[tuple[str, str, float, float], str], Row] = {}
    for r in sorted(tput, key=lambda r: r.id):
        if r.gpu == reference:
            refs.setdefault(ratio_key(r), r)
            same.setdefault((ratio_key(r), r.family), r)
    out = []
    for r in sorted(tput, key=lambda r: (r.model, r.shape, r.gpu, r.id)):
        ref = same.get((ratio_key(r), r.family)) or refs.get(ratio_key(r))
        if r.gpu == reference or ref is None:
            continue

        def per_gpu(x: float | None, row: Row) -> float | None:
            return None if x is None else x / row.tp

        def ratio(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None or b <= 0 else a / b

        out.append(
            Ratio(
                gpu=r.gpu,
                model=r.model,
                shape=r.shape,
                dtype=r.dtype,
                reference_dtype=ref.dtype,
                measured=r.measured / r.tp / (ref.measured / ref.tp),
                predicted_before=ratio(per_gpu(r.before, r), per_gpu(ref.before, ref)),
                predicted_after=ratio(per_gpu(r.after, r), per_gpu(ref.after, ref)),
            )
        )
    return out


# --------------------------------------------------------------------------- tables


def pct(x: float | None, signed: bool = False) -> str:
    """A fraction as a percentage (``-`` for None)."""
    if x is None:
        return "-"
    return f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%"


def summary_table(summaries: Sequence[Summary], key_names: Sequence[str]) -> list[list[str]]:
    """Header and rows of a summary table: key columns, split, values, and median
    absolute (signed) error before and after."""
    head = [
        *key_names,
        "split",
        "values",
        "before: median |err| (signed)",
        "after: median |err| (signed)",
    ]
    body = [
        [
            *s.key,
            s.split,
            str(s.values),
            f"{pct(s.median_abs_before)} ({pct(s.median_signed_before, True)})",
            f"{pct(s.median_abs_after)} ({pct(s.median_signed_after, True)})",
        ]
        for s in summaries
    ]
    return [head, *body]


def ratio_table(ratios: Sequence[Ratio]) -> list[list[str]]:
    """Header and rows of the cross-vendor table (ratios to 3 significant digits)."""

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3g}"

    head = [
        "gpu",
        "model",
        "shape",
        "dtype (ref)",
        "measured",
        "predicted before",
        "predicted after",
    ]
    body = [
        [
            r.gpu,
            r.model,
            r.shape,
            f"{r.dtype} ({r.reference_dtype})",
            f(r.measured),
            f(r.predicted_before),
            f(r.predicted_after),
        ]
        for r in ratios
    ]
    return [head, *body]


def markdown(table: Sequence[Sequence[str]]) -> list[str]:
    """A table (header first) as Markdown lines."""
    head, *body = table
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(row) + " |" for row in body),
    ]


def by_gpu_dtype(r: Row) -> tuple[str, ...]:
    return (r.gpu, r.dtype)


def by_gpu_model_dtype(r: Row) -> tuple[str, ...]:
    return (r.gpu, r.model, r.dtype)


def by_gpu_publisher(r: Row) -> tuple[str, ...]:
    """The GPU and where the value was published (``Row.family``,
    :func:`planner.levels.source_root`; ``-`` when unknown): one publisher's runs share
    a harness and a software version, so a bias that follows the publisher rather than
    the GPU shows here (MI300X: AMD's tables against dstack's vLLM 0.6 runs)."""
    return (r.gpu, r.family or "-")


def overall(r: Row) -> tuple[str, ...]:
    return ("all",)


def by_engine_quantity(r: Row) -> tuple[str, ...]:
    """The serving engine of the run (``-`` when the source names none) and the value
    measured (output tokens/s, mean TTFT or TPOT, a kernel's layer time)."""
    return (r.engine, r.quantity)


#: A shape is decode-heavy when its output is at least this many times its prompt (128 /
#: 2,048, 500 / 2,000), prefill-heavy when its prompt is this many times its output.
SHAPE_CLASS_RATIO = 4.0


def shape_class(isl: int, osl: int) -> str:
    """``decode-heavy`` (``osl >= 4 isl``), ``prefill-heavy`` (``isl >= 4 osl``) or
    ``balanced``: where a first-order model is most optimistic (decode-heavy shapes, the
    issue's +40-50% on 128/2,048 and 128/4,096) is tracked separately."""
    if osl >= SHAPE_CLASS_RATIO * isl:
        return "decode-heavy"
    if isl >= SHAPE_CLASS_RATIO * osl:
        return "prefill-heavy"
    return "balanced"


def throughput_by_shape(rows: Sequence[Row]) -> list[Summary]:
    """:func:`summarize` of the output-throughput values (every load) per shape class
    (:func:`shape_class`) and engine."""
    tput = [r for r in rows if r.quantity == "output_tok_s" and r.isl and r.osl]
    return summarize(tput, lambda r: (shape_class(r.isl, r.osl), r.engine))


def gpus_without_data(catalog: Catalog, points: Sequence[cb.Measurement]) -> list[str]:
    """Catalog GPUs with no priceable measurement: their factors stay by analogy."""
    have = {m.gpu for m in points if m.usable}
    return sorted(g for g in catalog.gpus if g not in have)


@dataclass(frozen=True)
class LooValue:
    """One measured value of a fit point predicted by a fit on all the other fit
    points of its GPU: ``ape`` = |predicted / measured - 1|."""

    id: str
    gpu: str
    dtype: str
    quantity: str
    ape: float


def leave_one_out(
    points: Sequence[cb.Measurement], catalog: Catalog, fit: cb.GroupFit
) -> list[LooValue]:
    """For each of one GPU's fit ``points``: refit the factors ``fit`` determined on
    the others (warm-started at ``fit``'s values, the rest held) and predict the point
    (as :func:`planner.calibration.leave_one_out`, keeping each value's point)."""
    free = [fit.determined[p] for p in cb.PARAMS]
    prior = prior_factors(catalog, fit.gpu)
    out: list[LooValue] = []
    for i, m in enumerate(points):
        rest = [p for j, p in enumerate(points) if j != i]
        factors = cb._Problem(rest, catalog, prior).solve(free, [fit.factors]) if rest else prior
        pred = cb.predict(m, catalog, factors)
        for q, v in m.quantities().items():
            a = cb.ape(pred.get(q), v)
            if a is not None:
                out.append(LooValue(m.label, m.gpu, m.dtype.value, q, a))
    return out


@dataclass(frozen=True)
class TtftExcess:
    """A measured mean TTFT against the cost model's (ms): ``excess_ms = measured -
    predicted`` for point ``id`` of ``source`` (its publisher, :func:`source_root`)."""

    id: str
    source: str
    gpu: str
    engine: str
    users: float
    measured_ms: float
    predicted_ms: float

    @property
    def excess_ms(self) -> float:
        return self.measured_ms - self.predicted_ms


def ttft_excess_at_low_load(
    points: Sequence[cb.Measurement],
    catalog: Catalog,
    factors: Mapping[str, Sequence[float]],
    max_users: float = 8,
) -> list[TtftExcess]:
    """Every priceable aggregated closed-loop point of at most ``max_users`` users with a
    measured mean TTFT, against its prediction with ``factors[gpu]``: at so few users a
    queue explains little, so the excess is what the serving stack adds to queue +
    prefill (what :data:`planner.plan.notes.MEASURED_AGG_TTFT_EXTRA_MS` is read from)."""
    out = []
    for m in points:
        if (
            not m.usable
            or m.disaggregated
            or m.ttft_ms is None
            or m.concurrency is None
            or m.concurrency > max_users
        ):
            continue
        predicted = cb.predict(m, catalog, factors[m.gpu]).ttft_ms
        if predicted is None:
            continue
        out.append(
            TtftExcess(
                m.label,
                source_root(m.source),
                m.gpu,
                m.engine or "-",
                m.concurrency,
                m.ttft_ms,
                predicted,
            )
        )
    return out
