"""Do the catalog's spreads hold? How often measured values land where the uncertainty
bands say they should.

A plan prices every pool at its predicted capacity derated by ``exp(-z_c
sigma_down)`` at the request's confidence (``planner.risk.capacity_derate``, default
:data:`planner.risk.DEFAULT_CONFIDENCE` = 0.8) and shows a band of ``exp(+-Z_BAND
sigma_log)`` around it (:data:`planner.risk.BAND_CONFIDENCE` = 90%); ``sigma_log`` is the
GPU's spread and ``sigma_down`` (at most ``sigma_log``) its derate's: the larger of the MAD
term and what its errors' low side needs (``planner.risk.factor_uncertainty``: measured
for measured factors, the analogy prior for both otherwise). The claims can be checked
against the public measurements (``planner.fidelity.evaluate``'s rows, shipped factors):

* **at each confidence** ``c`` of :data:`planner.risk.DERATE_CONFIDENCES` (0.8, 0.9): the
  share of values whose capacity error (:func:`capacity_error`) is at least ``-z_c
  sigma_down``: the capacity the GPU delivered was at least the derated one. The claim
  is ``c``;
* **in the band**: the share with ``|error| <= Z_BAND sigma_log``; the claim is 90%.

A share under its claim says the spread is too narrow for that kind of value (the
plans' margins are thinner than they state); far over it, wider than it needs to be.
The measured spreads are set so that every claim holds on each GPU's fit values
(``planner.calibration.spreads_from_log_errors``), so the fit split shows the estimator
at work and the held-out split tests it. ``bench/fidelity.py`` prints the table and
``docs/calibration.md`` carries it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import median

from catalog.schema import ANALOGY_SIGMA_LOG, Catalog, Dtype
from planner.calibration import capacity_log_error
from planner.fidelity import Row, pct
from planner.risk import (
    BAND_CONFIDENCE,
    DERATE_CONFIDENCES,
    Z_BAND,
    factor_uncertainty,
    z_for_confidence,
)


def capacity_error(r: Row) -> float | None:
    """``ln(true capacity / predicted capacity)`` one measured value implies
    (:func:`planner.calibration.capacity_log_error`: ``ln(measured / predicted)`` for a
    throughput, ``ln(predicted / measured)`` for a time), with the row's *after*
    prediction; None without one. Dimensionless."""
    if r.after is None or r.after <= 0 or r.measured <= 0:
        return None
    return capacity_log_error(r.quantity, r.measured, r.after)


def catalog_sigma(catalog: Catalog) -> Callable[[Row], float]:
    """``sigma_log`` of the factors a row's GPU and weight dtype are priced with in
    ``catalog`` (``planner.risk.factor_uncertainty``: FP4 without factors measured in
    FP4 takes at least the analogy prior)."""

    def sigma(r: Row) -> float:
        return factor_uncertainty(catalog, r.gpu, Dtype(r.dtype)).sigma_log

    return sigma


def catalog_derate_sigma(catalog: Catalog) -> Callable[[Row], float]:
    """The spread the derate of a row's GPU and weight dtype uses in ``catalog``
    (``planner.risk.FactorUncertainty.derate_sigma_log``: the errors' low side when
    measured, else ``sigma_log``)."""

    def sigma(r: Row) -> float:
        return factor_uncertainty(catalog, r.gpu, Dtype(r.dtype)).derate_sigma_log

    return sigma


def spread_kind(sigma_log: float) -> str:
    """``measured`` when the spread is the GPU's own residual spread (narrower than the
    analogy prior), ``prior`` when it is the prior :data:`ANALOGY_SIGMA_LOG` (a GPU by
    analogy, FP4 without FP4 factors, or measured by too few points or publishers)."""
    return "prior" if sigma_log >= ANALOGY_SIGMA_LOG else "measured"


@dataclass(frozen=True)
class Coverage:
    """Of ``values`` measured values of one group and split (those with a prediction):
    per confidence of ``confidences``, the share at or above the derated capacity
    (``at``), the share inside the ``BAND_CONFIDENCE`` band (fractions), and the median
    spreads they were judged with (the band's and the derate's)."""

    key: tuple[str, ...]
    split: str
    values: int
    confidences: tuple[float, ...]
    at: tuple[float, ...]
    in_band: float
    median_sigma_log: float
    median_derate_sigma_log: float

    @property
    def at_confidence(self) -> float:
        """The share at or above the derate at the first confidence (the default 0.8)."""
        return self.at[0]


def band_coverage(
    rows: Sequence[Row],
    sigma_of: Callable[[Row], float],
    key: Callable[[Row, float], tuple[str, ...]],
    confidences: Sequence[float] = DERATE_CONFIDENCES,
    derate_sigma_of: Callable[[Row], float] | None = None,
) -> list[Coverage]:
    """Per ``key(row, sigma)`` and split: per confidence ``c`` the share of values with
    capacity error ``e >= -z_c sigma_down`` (``z_c = Phi^-1(c)``), and the share with
    ``|e| <= Z_BAND sigma``, each value judged with its own ``sigma = sigma_of(row)`` and
    ``sigma_down = derate_sigma_of(row)`` (ln units; None: ``sigma_of``)."""
    down_of = derate_sigma_of or sigma_of
    zs = [z_for_confidence(c) for c in confidences]
    groups: dict[tuple[tuple[str, ...], str], list[tuple[float, float, float]]] = {}
    for r in rows:
        e = capacity_error(r)
        if e is None:
            continue
        s = sigma_of(r)
        groups.setdefault((key(r, s), r.split), []).append((e, s, down_of(r)))
    out = []
    for (k, split), vals in sorted(groups.items()):
        n = len(vals)
        out.append(
            Coverage(
                key=k,
                split=split,
                values=n,
                confidences=tuple(confidences),
                at=tuple(sum(1 for e, _, d in vals if e >= -z * d) / n for z in zs),
                in_band=sum(1 for e, s, _ in vals if abs(e) <= Z_BAND * s) / n,
                median_sigma_log=median(s for _, s, _ in vals),
                median_derate_sigma_log=median(d for _, _, d in vals),
            )
        )
    return out


def by_spread_quantity(r: Row, sigma_log: float) -> tuple[str, ...]:
    """The spread's kind (:func:`spread_kind`) and the measured value's name."""
    return (spread_kind(sigma_log), r.quantity)


def by_gpu_all(r: Row, sigma_log: float) -> tuple[str, ...]:
    """The GPU, its values of every kind together."""
    return (r.gpu,)


def every_value(r: Row, sigma_log: float) -> tuple[str, ...]:
    """One group of every value."""
    return ("all",)


def per_gpu_coverage(
    rows: Sequence[Row],
    sigma_of: Callable[[Row], float],
    derate_sigma_of: Callable[[Row], float] | None = None,
) -> list[Coverage]:
    """:func:`band_coverage` per GPU (every value of it), then of all ``rows`` together
    (key ``all``)."""
    return [
        *band_coverage(rows, sigma_of, by_gpu_all, derate_sigma_of=derate_sigma_of),
        *band_coverage(rows, sigma_of, every_value, derate_sigma_of=derate_sigma_of),
    ]


def coverage_tables(
    rows: Sequence[Row],
    sigma_of: Callable[[Row], float],
    derate_sigma_of: Callable[[Row], float] | None = None,
) -> tuple[list[list[str]], list[list[str]]]:
    """The two tables ``bench/fidelity.py`` prints and ``docs/calibration.md`` carries:
    by the spread's kind and value (:func:`by_spread_quantity`), and per GPU with a
    measured spread (:func:`per_gpu_coverage`), headers first."""
    measured = [r for r in rows if spread_kind(sigma_of(r)) == "measured"]
    by_kind = band_coverage(rows, sigma_of, by_spread_quantity, derate_sigma_of=derate_sigma_of)
    return (
        coverage_table(by_kind, ["spread", "value"]),
        coverage_table(per_gpu_coverage(measured, sigma_of, derate_sigma_of), ["gpu"]),
    )


def coverage_table(coverage: Sequence[Coverage], key_names: Sequence[str]) -> list[list[str]]:
    """Header and rows: key columns, split, values, median spreads (the band's and the
    derate's), and the shares against their claims (the derate at each confidence, then
    the band)."""
    confidences = coverage[0].confidences if coverage else DERATE_CONFIDENCES
    head = [
        *key_names,
        "split",
        "values",
        "median sigma_log",
        "median derate sigma",
        *(f"at or above the derate at {c:.0%}" for c in confidences),
        f"inside the {BAND_CONFIDENCE:.0%} band",
    ]
    body = [
        [
            *c.key,
            c.split,
            str(c.values),
            f"{c.median_sigma_log:.2f}",
            f"{c.median_derate_sigma_log:.2f}",
            *(pct(a) for a in c.at),
            pct(c.in_band),
        ]
        for c in coverage
    ]
    return [head, *body]
