"""Fitting (prefill MFU, decode MBU, per-step overhead) per (GPU, dtype[, engine]) by
robust least squares on the log-ratio residuals, with a weak pull toward the catalog's
factors (:func:`fit_calibration`, :func:`fit_group`); the named result
(:class:`Calibration`) and its residual spread.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from statistics import median
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from catalog.schema import Catalog, Dtype
from planner.calibration.measurements import Measurement, MeasurementError, fit_points
from planner.calibration.predict import (
    Prediction,
    ape,
    base_replica,
    predict,
    predict_with,
    prefill_replica,
    unscaled_catalog,
    with_factors,
)
from planner.errors import PlanningError
from planner.risk import BAND_CONFIDENCE, DERATE_CONFIDENCES, Z_BAND, z_for_confidence

#: Parameter bounds of the fit: prefill MFU, decode MBU, per-step overhead (ms).
LOWER = (0.05, 0.05, 0.0)
UPPER = (1.0, 1.0, 50.0)
PARAMS = ("prefill_mfu", "decode_mbu", "step_overhead_ms")
#: Weight of the pull toward the catalog's factors (per parameter, in log units for
#: MFU/MBU and per OVERHEAD_SCALE_MS for the overhead), against 1 per measured value.
PRIOR_WEIGHT = 0.05
OVERHEAD_SCALE_MS = 2.0
#: Residual of a measured value the model cannot predict at some factors (the model
#: says the open loop is overloaded, so no TTFT): ln 3, i.e. "off by 200%".
MISSING_PENALTY = math.log(3.0)
#: Robust loss of the fit: residuals beyond LOSS_SCALE (a log ratio, ~20%) count
#: linearly, not squared, so a few points the model cannot represent (an engine limit
#: it does not know) do not drag the factors away from the bulk of the data.
LOSS = "soft_l1"
LOSS_SCALE = 0.2
#: Coarse grid the fit starts from (its best points), per factor.
GRID = ((0.3, 0.45, 0.6, 0.75, 0.9), (0.4, 0.55, 0.7, 0.85), (0.5, 2.0, 6.0))
#: A factor is determined by the data when its standard error (from the Jacobian of
#: the data residuals at the fit) is below this share of its value (overhead: ms).
MAX_REL_STD_ERROR = 0.25
MAX_OVERHEAD_STD_ERROR_MS = 1.0


#: A calibration name. ``$`` is right for pydantic's ``pattern`` (a Rust regex: the end
#: of the text); Python's ``re`` must use it with ``re.fullmatch`` (``re.match`` lets
#: ``$`` match before a trailing newline, so "name\n" passed and became a file name).
NAME_PATTERN = r"^[a-z0-9][a-z0-9._\-]*$"


#: The analogy factors the shipped catalog had before ``make calibrate-defaults`` fitted
#: them (prefill MFU, decode MBU, step overhead ms), kept so "before calibration" stays
#: reproducible once the YAML files hold the fitted values.
#: Every GPU of the shipped catalog is listed (the values its YAML had when it was set
#: by analogy), so a GPU whose defaults a later fit replaces keeps its "before".
UNCALIBRATED_DEFAULTS: dict[str, tuple[float, float, float]] = {
    "a100-40gb": (0.55, 0.7, 2.0),
    "a100-sxm-80gb": (0.55, 0.7, 2.0),
    "a10g": (0.45, 0.6, 2.0),
    "b200": (0.45, 0.65, 2.0),
    "b300": (0.45, 0.65, 2.0),
    "gaudi3": (0.4, 0.6, 3.0),
    "gb200-per-gpu": (0.45, 0.65, 2.0),
    "gb300-per-gpu": (0.45, 0.65, 2.0),
    "h100-nvl-94gb": (0.5, 0.7, 2.0),
    "h100-pcie-80gb": (0.5, 0.7, 2.0),
    "h100-sxm5-80gb": (0.5, 0.7, 2.0),
    "h200-sxm-141gb": (0.5, 0.7, 2.0),
    "l4": (0.4, 0.6, 2.0),
    "l40s": (0.45, 0.6, 2.0),
    "mi300x": (0.4, 0.6, 3.0),
    "mi325x": (0.4, 0.6, 3.0),
    "mi355x": (0.4, 0.6, 3.0),
}


def source_weights(points: Sequence[Measurement]) -> list[float]:
    """Least-squares weight of each point (dimensionless): ``1 / sqrt(n)`` with ``n`` the
    number of points sharing its source and model, so a sweep of many correlated points
    from one benchmark counts like about sqrt(n) independent ones rather than n (one
    long sweep with an engine-specific bottleneck does not set a GPU's factors alone).
    Measured on the shipped data with cost model v2 (bench/fidelity.py): 1/sqrt(n) takes
    the held-out median error from 21.3% (analogy factors) to 19.0%; 1/n (every
    benchmark once) to 21.9%."""
    groups: dict[tuple[str, str], int] = {}
    for m in points:
        k = (m.source or m.id or "", m.model)
        groups[k] = groups.get(k, 0) + 1
    return [1.0 / math.sqrt(groups[(m.source or m.id or "", m.model)]) for m in points]


class GroupFit(BaseModel):
    """Fitted factors of one (GPU, dtype[, engine]) group, with the errors before
    (the catalog's factors) and after the fit over the group's measured values."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str
    dtype: Dtype | None
    engine: str | None
    prefill_mfu: float
    decode_mbu: float
    step_overhead_ms: float
    determined: dict[str, bool]
    std_errors: dict[str, float | None]
    points: int
    values: int
    median_ape_before: float | None
    worst_ape_before: float | None
    median_ape_after: float | None
    worst_ape_after: float | None
    sigma_log: float | None = Field(
        default=None,
        description="Residual spread of the fit: residual_sigma_log of its values after "
        "the fit (None in calibrations stored before it was recorded).",
    )
    downside_sigma_log: float | None = Field(
        default=None,
        description="The spread of the residuals' low side, which the derate uses "
        "(residual_spreads; None in calibrations stored before it was recorded).",
    )

    @property
    def factors(self) -> tuple[float, float, float]:
        return (self.prefill_mfu, self.decode_mbu, self.step_overhead_ms)


class Residual(BaseModel):
    """One measured value against its predictions before and after the fit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    point: str
    gpu: str
    dtype: Dtype
    engine: str | None
    model: str
    quantity: str
    measured: float
    predicted_before: float | None
    predicted_after: float | None
    ape_before: float | None
    ape_after: float | None
    #: the run's prefill or decode workers ran data-parallel attention (None: stored
    #: before this was recorded; counted as if so, as such a calibration priced them)
    dp_attention: bool | None = None


class Calibration(BaseModel):
    """A named set of fitted efficiency factors (per GPU and dtype, optionally engine)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, max_length=64)
    created_at: str
    description: str = ""
    factors: list[GroupFit] = Field(min_length=1)
    residuals: list[Residual] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "created_at": self.created_at,
            "groups": [
                {"gpu": f.gpu, "dtype": f.dtype, "engine": f.engine, "points": f.points}
                for f in self.factors
            ],
        }


GroupKey = tuple[str, Dtype | None, str | None]


def group_key(m: Measurement, by: Sequence[str]) -> GroupKey:
    return (
        m.gpu,
        m.dtype if "dtype" in by else None,
        (m.engine or None) if "engine" in by else None,
    )


def _prior(catalog: Catalog, gpu: str, dtype: Dtype | None) -> tuple[float, float, float]:
    eff = catalog.gpus[gpu].efficiency_for(dtype) if dtype else catalog.gpus[gpu].efficiency
    return (eff.prefill_mfu, eff.decode_mbu, eff.step_overhead_ms)


class _Problem:
    """Residuals of one group's measurements as a function of the free factors."""

    def __init__(self, points: Sequence[Measurement], catalog: Catalog, prior: Sequence[float]):
        self.points = list(points)
        self.replicas = [base_replica(m, catalog) for m in self.points]
        self.prefills = [prefill_replica(m, catalog) for m in self.points]
        self.measured = [m.quantities() for m in self.points]
        self.weights = [math.sqrt(w) for w in source_weights(self.points)]
        self.prior = tuple(float(x) for x in prior)

    def predictions(self, factors: Sequence[float]) -> list[Prediction]:
        return [
            predict_with(m, with_factors(r, factors), p and with_factors(p, factors))
            for m, r, p in zip(self.points, self.replicas, self.prefills, strict=True)
        ]

    def data_residuals(self, factors: Sequence[float]) -> np.ndarray:
        out = []
        preds = self.predictions(factors)
        for pred, meas, w in zip(preds, self.measured, self.weights, strict=True):
            for name, value in meas.items():
                p = pred.get(name)
                r = math.log(p / value) if p is not None and p > 0 else MISSING_PENALTY
                out.append(w * r)  # w = sqrt(source weight): squared, it is the weight
        return np.array(out)

    def prior_residuals(self, factors: Sequence[float]) -> np.ndarray:
        mfu, mbu, oh = factors
        return PRIOR_WEIGHT * np.array(
            [
                math.log(mfu / self.prior[0]),
                math.log(mbu / self.prior[1]),
                (oh - self.prior[2]) / OVERHEAD_SCALE_MS,
            ]
        )

    def full(
        self, free: Sequence[bool], x: np.ndarray | Sequence[float]
    ) -> tuple[float, float, float]:
        it = iter(x)
        vals = [float(next(it)) if f else self.prior[i] for i, f in enumerate(free)]
        return (vals[0], vals[1], vals[2])

    def solve(self, free: Sequence[bool], starts: Iterable[Sequence[float]]) -> tuple[float, ...]:
        lo = [LOWER[i] for i in range(3) if free[i]]
        hi = [UPPER[i] for i in range(3) if free[i]]
        if not lo:
            return self.prior

        def fun(x: np.ndarray) -> np.ndarray:
            f = self.full(free, x)
            return np.concatenate([self.data_residuals(f), self.prior_residuals(f)])

        from scipy.optimize import least_squares  # imported on use: the CLI starts faster

        best = None
        for start in starts:
            x0 = np.clip([start[i] for i in range(3) if free[i]], lo, hi)
            x0 = np.minimum(np.maximum(x0, np.array(lo) + 1e-6), np.array(hi) - 1e-6)
            res = least_squares(
                fun,
                x0,
                bounds=(lo, hi),
                diff_step=1e-4,
                x_scale="jac",
                max_nfev=200,
                loss=LOSS,
                f_scale=LOSS_SCALE,
            )
            if best is None or res.cost < best.cost:
                best = res
        assert best is not None
        return self.full(free, best.x)

    def cost(self, factors: Sequence[float]) -> float:
        r = np.concatenate([self.data_residuals(factors), self.prior_residuals(factors)])
        z = (r / LOSS_SCALE) ** 2
        return float(np.sum(2.0 * (np.sqrt(1.0 + z) - 1.0)))  # soft_l1, as the solver's

    def best_starts(
        self, free: Sequence[bool], extra: Sequence[Sequence[float]], keep: int = 1
    ) -> list[Sequence[float]]:
        """``extra`` plus the ``keep`` best points of a coarse grid (the max() of the
        roofline makes the cost piecewise: a local search alone can stall where one
        factor has no effect, e.g. MBU while every point is compute-bound)."""
        axes = [GRID[i] if free[i] else (self.prior[i],) for i in range(3)]
        grid = [(a, b, c) for a in axes[0] for b in axes[1] for c in axes[2]]
        grid.sort(key=self.cost)
        return [*extra, *grid[:keep]]

    def std_errors(
        self, factors: Sequence[float], free: Sequence[bool] = (True, True, True)
    ) -> list[float | None]:
        """Standard errors of the free factors (None for held ones, and for factors
        the data cannot separate): ``sqrt(diag(s^2 (J^T J)^-1))`` with ``J`` the
        Jacobian of the data residuals in the free factors and ``s^2`` their variance."""
        base = self.data_residuals(factors)
        idx = [i for i in range(3) if free[i]]
        cols = []
        for i in idx:
            h = max(abs(factors[i]) * 1e-3, 1e-3 if i == 2 else 1e-4)
            f = list(factors)
            f[i] = f[i] + h if f[i] + h <= UPPER[i] else f[i] - h
            cols.append((self.data_residuals(f) - base) / (f[i] - factors[i]))
        out: list[float | None] = [None, None, None]
        if not cols:
            return out
        jac = np.column_stack(cols)
        s2 = float(base @ base) / max(len(base) - len(idx), 1)
        info = jac.T @ jac
        if not np.all(np.isfinite(info)) or np.linalg.cond(info) > 1e12:
            return out
        cov = np.linalg.inv(info) * s2
        for k, i in enumerate(idx):
            out[i] = math.sqrt(max(float(cov[k, k]), 0.0))
        return out


def _se_limit(i: int, factors: Sequence[float]) -> float:
    return MAX_OVERHEAD_STD_ERROR_MS if i == 2 else MAX_REL_STD_ERROR * factors[i]


def _looseness(err: float | None, limit: float) -> float:
    """How far a factor's standard error is past its limit (inf when undetermined)."""
    return math.inf if err is None else err / limit


def _free(mask: Sequence[bool], factors: Sequence[float]) -> list[float]:
    return [f for m, f in zip(mask, factors, strict=True) if m]


def _determined(factors: Sequence[float], errs: Sequence[float | None]) -> list[bool]:
    """Whether each factor's standard error is within its limit (:func:`_se_limit`)."""
    return [
        e is not None and math.isfinite(e) and e <= _se_limit(i, factors)
        for i, e in enumerate(errs)
    ]


#: Smallest spread recorded for fitted factors: a fit that happens to match a handful of
#: points exactly still predicts new models and loads only this well (ln units, ~5%).
MIN_SIGMA_LOG = 0.05


#: Normal-consistency constant of the median absolute deviation: for normal errors
#: ``MAD_TO_SIGMA x median |x|`` estimates their standard deviation.
MAD_TO_SIGMA = 1.4826


#: Measured values whose larger value means less capacity (times: TTFT, TPOT, a kernel's
#: layer time) and those whose larger value means more (throughputs).
TIME_QUANTITIES = frozenset({"ttft_ms", "tpot_ms", "layer_ms"})
RATE_QUANTITIES = frozenset({"output_tok_s"})


def capacity_log_error(quantity: str, measured: float, predicted: float) -> float:
    """``ln(true capacity / predicted capacity)`` one measured value implies
    (dimensionless): ``ln(measured / predicted)`` for a throughput
    (:data:`RATE_QUANTITIES`), ``ln(predicted / measured)`` for a time
    (:data:`TIME_QUANTITIES`: a step that takes longer than predicted serves less). Both
    values positive; a quantity of neither kind is refused (ValueError), so a new one
    cannot take a sign by default."""
    e = math.log(measured / predicted)
    if quantity in TIME_QUANTITIES:
        return -e
    if quantity in RATE_QUANTITIES:
        return e
    raise ValueError(
        f"quantity {quantity!r}: not a known time {sorted(TIME_QUANTITIES)} "
        f"or rate {sorted(RATE_QUANTITIES)}"
    )


def residual_spreads(
    residuals: Sequence[Residual], *, after: bool = True, fitted_factors: int = 0
) -> Spreads | None:
    """The spreads of a fit in log space (:func:`spreads_from_log_errors`) over the
    capacity errors (:func:`capacity_log_error`) of the ``n`` measured values that were
    predicted (after the fit, or with ``after=False`` before it), with ``k =
    fitted_factors`` degrees of freedom used by the fit. Dimensionless (natural log); None
    without values.

    The errors are taken about zero, not about their mean: a bias of the model is part
    of its error. Robust statistics, not a root mean square, so that a few points the
    model cannot represent (a benchmark with its own bottleneck, 2-6x off) widen the
    band no more than their share: with a root mean square one such sweep made every
    fitted GPU look less certain than a GPU set by analogy. These are
    ``Efficiency.sigma_log`` and ``downside_sigma_log`` of fitted factors."""
    errors = [
        capacity_log_error(r.quantity, r.measured, p)
        for r in residuals
        if (p := (r.predicted_after if after else r.predicted_before)) is not None
        and p > 0
        and r.measured > 0
    ]
    return spreads_from_log_errors(errors, fitted_factors)


def residual_sigma_log(
    residuals: Sequence[Residual], *, after: bool = True, fitted_factors: int = 0
) -> float | None:
    """The band's spread ``sigma_log`` of :func:`residual_spreads` (ln units; None
    without values)."""
    got = residual_spreads(residuals, after=after, fitted_factors=fitted_factors)
    return None if got is None else got.sigma_log


def allowed_misses(share: float, n: int) -> int:
    """How many of ``n`` values may fall outside a claim that holds for a ``share`` of
    them (a count): ``floor((1 - share) n)``, rounding error aside (0.2 x 10 is 2)."""
    return math.floor((1.0 - share) * n + 1e-9)


@dataclasses.dataclass(frozen=True)
class Spreads:
    """The two spreads of a set of capacity errors (ln units, :func:`spreads_from_log_errors`):
    ``sigma_log`` sets the capacity band, ``downside_sigma_log`` (at most ``sigma_log``)
    the derate at a confidence."""

    sigma_log: float
    downside_sigma_log: float


def spreads_from_log_errors(errors: Sequence[float], fitted_factors: int = 0) -> Spreads | None:
    """The spreads of ``n`` capacity errors ``e = ln(true / predicted capacity)``
    (:func:`capacity_log_error`; dimensionless, None without values), from three kinds of
    term:

    - ``1.4826 x median |e|``, the normal-consistent median absolute deviation: the spread
      if the errors were normal;
    - ``|e|_(n - m_b) / Z_BAND``, the ``m_b``-th largest |e| with ``m_b`` =
      :func:`allowed_misses` ``(BAND_CONFIDENCE, n)``: the least spread whose band
      (``planner.risk.capacity_band_rps``, ``exp(+-Z_BAND sigma)``, 90%) holds at least
      90% of the values;
    - per confidence ``c`` of :data:`planner.risk.DERATE_CONFIDENCES` (0.8 and 0.9),
      ``-e_(m_c + 1) / z_c``, the ``m_c + 1``-th smallest ``e`` with ``m_c`` =
      ``allowed_misses(c, n)``: the least spread whose derate at ``c``
      (``planner.risk.capacity_derate``, ``exp(-z_c sigma)``) is cleared by at least a
      share ``c`` of the values (0 when the model is pessimistic on more than that share).

    ``downside_sigma_log`` is the largest of the MAD and the derate terms; ``sigma_log``
    the largest of all, so the band always holds the derate. Both times ``sqrt(n / (n -
    k))`` with ``k = fitted_factors`` (``n - k`` at least 1), floored at
    :data:`MIN_SIGMA_LOG`.

    The model's errors have heavier tails than a normal law and lean one way on some GPUs:
    H100 SXM's 158 fit values give 0.171 by the MAD, a band of which held 80% of them and
    a derate cleared by 72%. Where the model errs on the safe side (values measured well
    above the prediction), the band's term is wide and the derate terms small: the band
    shows that the GPU may do much better than priced, and the derate does not charge the
    plans that buy it for the model's pessimism (MI300X: 0.264 against 0.266). The
    quantiles ignore the worst tenth (fifth, for the derate at 0.8), so a sweep the model
    cannot represent widens a spread only when it is more than that share of the values.
    ``planner.band_coverage`` checks every claim on the fit and held-out splits."""
    if not errors:
        return None
    n = len(errors)
    scale = math.sqrt(n / max(n - fitted_factors, 1))
    signed = np.sort(np.asarray(errors, dtype=float))
    absolute = np.sort(np.abs(signed))
    mad = MAD_TO_SIGMA * float(np.median(absolute))
    band = float(absolute[n - 1 - allowed_misses(BAND_CONFIDENCE, n)]) / Z_BAND
    derate = max(
        max(0.0, -float(signed[allowed_misses(c, n)])) / z_for_confidence(c)
        for c in DERATE_CONFIDENCES
    )
    downside = max(max(mad, derate) * scale, MIN_SIGMA_LOG)
    return Spreads(max(band * scale, downside), downside)


def sigma_from_log_errors(errors: Sequence[float], fitted_factors: int = 0) -> float | None:
    """The band's spread ``sigma_log`` of :func:`spreads_from_log_errors` (ln units;
    None without values)."""
    got = spreads_from_log_errors(errors, fitted_factors)
    return None if got is None else got.sigma_log


def _errors(
    points: Sequence[Measurement], preds: Sequence[Prediction]
) -> tuple[float | None, float | None]:
    apes = [
        a
        for m, p in zip(points, preds, strict=True)
        for name, value in m.quantities().items()
        if (a := ape(p.get(name), value)) is not None
    ]
    if not apes:
        return None, None
    return median(apes), max(apes)


@dataclasses.dataclass
class _GroupResult:
    fit: GroupFit
    residuals: list[Residual]


def fit_group(
    points: Sequence[Measurement],
    catalog: Catalog,
    key: GroupKey,
    prior: Sequence[float] | None = None,
    free: Sequence[bool] | None = None,
) -> _GroupResult:
    """Fit one group's factors; ``prior`` defaults to the catalog's factors.

    Least squares from the prior and from the best point of a coarse grid. A factor
    the data do not determine (standard error from the Jacobian of the data
    residuals above :func:`_se_limit`) is held at the prior and the others refitted,
    the overhead first, until every fitted factor is determined; ``determined``
    records which were fitted. ``free`` fixes the fitted factors instead.
    """
    gpu, dtype, engine = key
    prior = tuple(prior) if prior is not None else _prior(catalog, gpu, dtype)
    prob = _Problem(points, catalog, prior)
    starts = [prior]
    mask = list(free) if free is not None else [True, True, True]
    fitted = prob.solve(mask, prob.best_starts(mask, starts))
    errs = prob.std_errors(fitted, mask)
    det = _determined(fitted, errs)
    while free is None and any(m and not d for m, d in zip(mask, det, strict=True)):
        # Hold one undetermined factor at the prior and refit the others: the overhead
        # first (it trades off against both MBU and MFU), else the least determined.
        loose = [i for i in range(3) if mask[i] and not det[i]]
        worst = (
            2
            if 2 in loose
            else max(
                loose,
                key=lambda i: _looseness(errs[i], _se_limit(i, fitted)),
            )
        )
        mask[worst] = False
        fitted = prob.solve(mask, prob.best_starts(mask, [prob.full(mask, _free(mask, fitted))]))
        errs = prob.std_errors(fitted, mask)
        det = [d and m for d, m in zip(_determined(fitted, errs), mask, strict=True)]
    det = [d and m for d, m in zip(det, mask, strict=True)]
    fitted = (round(fitted[0], 4), round(fitted[1], 4), round(fitted[2], 3))
    before = prob.predictions(prior)
    after = prob.predictions(fitted)
    residuals = [
        Residual(
            point=m.label,
            gpu=m.gpu,
            dtype=m.dtype,
            engine=m.engine,
            model=m.model,
            quantity=name,
            measured=value,
            predicted_before=b.get(name),
            predicted_after=a.get(name),
            ape_before=ape(b.get(name), value),
            ape_after=ape(a.get(name), value),
            dp_attention=bool(m.dp_attention or m.prefill_dp_attention),
        )
        for m, b, a in zip(points, before, after, strict=True)
        for name, value in m.quantities().items()
    ]
    spreads = residual_spreads(residuals, fitted_factors=sum(det))
    mb, wb = _errors(points, before)
    ma, wa = _errors(points, after)
    fit = GroupFit(
        gpu=gpu,
        dtype=dtype,
        engine=engine,
        prefill_mfu=fitted[0],
        decode_mbu=fitted[1],
        step_overhead_ms=fitted[2],
        determined=dict(zip(PARAMS, det, strict=True)),
        std_errors=dict(zip(PARAMS, errs, strict=True)),
        points=len(points),
        values=len(residuals),
        median_ape_before=mb,
        worst_ape_before=wb,
        median_ape_after=ma,
        worst_ape_after=wa,
        sigma_log=spreads.sigma_log if spreads else None,
        downside_sigma_log=spreads.downside_sigma_log if spreads else None,
    )
    return _GroupResult(fit, residuals)


def group_measurements(
    measurements: Sequence[Measurement], by: Sequence[str]
) -> dict[GroupKey, list[Measurement]]:
    groups: dict[GroupKey, list[Measurement]] = {}
    for m in measurements:
        groups.setdefault(group_key(m, by), []).append(m)
    return dict(sorted(groups.items(), key=lambda kv: tuple(str(k) for k in kv[0])))


def fit_calibration(
    name: str,
    measurements: Sequence[Measurement],
    catalog: Catalog,
    *,
    per_engine: bool = False,
    description: str = "",
) -> Calibration:
    """Fit factors per (GPU, dtype) — and engine with ``per_engine`` — and return the
    named calibration with every fitted value's residuals before and after. Only
    :func:`fit_points` are fitted: points held out (``split: holdout``) or marked
    with a ``skip_reason`` are left out. Fitted on :func:`unscaled_catalog`: the
    factors describe the runs measured, whatever LLMs and formats they cover, and
    :func:`planner.calibration.apply_calibration` drops the public MoE and FP4 ratios of
    a GPU whose group measured MoE LLMs or FP4 weights itself."""
    catalog = unscaled_catalog(catalog)
    if not re.fullmatch(NAME_PATTERN, name) or len(name) > 64:
        raise PlanningError.for_field(
            "name", f"{name!r} is not a valid name (lowercase letters, digits, '.', '-', '_')"
        )
    measurements = fit_points(measurements)
    if not measurements:
        raise MeasurementError.for_field("files", "no measurements to fit")
    by = ("gpu", "dtype", "engine") if per_engine else ("gpu", "dtype")
    fits: list[GroupFit] = []
    residuals: list[Residual] = []
    for key, points in group_measurements(measurements, by).items():
        res = fit_group(points, catalog, key)
        fits.append(res.fit)
        residuals += res.residuals
    sources = sorted({m.source or (m.where or "").rsplit(":", 1)[0] for m in measurements} - {""})
    return Calibration(
        name=name,
        created_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
        description=description,
        factors=fits,
        residuals=residuals,
        sources=sources,
    )


def leave_one_out(
    points: Sequence[Measurement],
    catalog: Catalog,
    key: GroupKey,
    full: GroupFit,
    prior: Sequence[float] | None = None,
) -> list[float]:
    """APEs of every measured value predicted by a fit on all the other points (the
    factors ``full`` fitted, warm-started at its values; the others held)."""
    free = [full.determined[p] for p in PARAMS]
    out: list[float] = []
    prior = tuple(prior) if prior is not None else _prior(catalog, key[0], key[1])
    for i, m in enumerate(points):
        rest = [p for j, p in enumerate(points) if j != i]
        prob = _Problem(rest, catalog, prior)
        fitted = prob.solve(free, [full.factors])
        pred = predict(m, catalog, fitted)
        out += [a for n, v in m.quantities().items() if (a := ape(pred.get(n), v)) is not None]
    return out
