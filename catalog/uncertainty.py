"""Provenance and spread of efficiency factors (split from :mod:`catalog.schema`, which
re-exports every name): where a set of factors comes from (fitted, scaled to a measured
level, or set by analogy), how far its predictions were off, and the priors used where
nothing was measured.

This module imports nothing of the project but :mod:`catalog.fields`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from catalog.fields import Frozen

#: Largest level (:attr:`Uncertainty.level_scale`) a catalog entry may carry: a measured
#: level lifts an analogy guess at most to the reference GPUs' factors
#: (planner.fidelity.level_ceiling), which no guess in the catalog is half of.
MAX_CATALOG_LEVEL_SCALE = 2.0


class Provenance(StrEnum):
    """Where a set of efficiency factors comes from: ``fitted`` to measurements (its
    ``points`` and the fit's residual spread); ``scaled``: the analogy's split between
    compute and bandwidth with its level scaled to the GPU's measured throughput
    (``level_scale``; ``points`` and the spread of the scaled factors on them); or set by
    ``analogy`` with another SKU (no measurement: level :data:`ANALOGY_LEVEL_SCALE` or
    lower, the wide prior :data:`ANALOGY_SIGMA_LOG`)."""

    FITTED = "fitted"
    SCALED = "scaled"
    ANALOGY = "analogy"

    @property
    def measured(self) -> bool:
        """True when measurements back the factors (fitted or scaled)."""
        return self != Provenance.ANALOGY


#: Spread (standard deviation of ln(measured / predicted)) assumed for factors set by
#: analogy. Where analogy factors could be checked against the public measurements
#: under cost model v2 (scripts/calibrate_defaults.py: the robust spread of the
#: prediction with the analogy factors), they were off by 0.25 (A100 80GB), 0.32
#: (H200), 0.37 (H100 SXM), 0.73 (L40S), 0.85 (MI300X), 1.11 (H100 NVL) and 1.24
#: (MI325X): median 0.73 over the seven GPUs checked. A GPU never checked is known no
#: better than the median checked one, so 0.73 (a 90% band of x0.30 to x3.3 on its
#: capacity; at the default risk confidence 0.8 it is derated x0.54). Smaller would let
#: an unmeasured GPU look more certain than a measured one (with 0.30, the 80/20 example
#: bought only unmeasured GB200 because measured H100/H200 spreads were wider).
ANALOGY_SIGMA_LOG = 0.73

#: Level (the factor on prefill MFU and decode MBU) of factors set by analogy. Where the
#: analogy guesses could be checked against measured saturated throughput on a dense LLM,
#: relative to the reference GPUs on the same LLM (planner.fidelity.level_scale over the
#: fit split; docs/calibration.md), with GEMMs (FP4 too) and all-reduces at their measured
#: kernel rates, TP over PCIe at its servers' fitted all-reduce, and each checkpoint's
#: BF16 layers counted: A100 40GB 0.71, H100 NVL 0.76, B200 0.84 (its Llama-2-70B measured
#: in FP4 only, over the FP4 ratio of its DeepSeek runs), H100 PCIe 0.87 (MLPerf v4.0's
#: Llama-2-70B), L4 0.97, H100 SXM 0.97, A100 80GB 0.99, and A10G, Gaudi 3, H200, L40S and
#: MI300X at or past their guesses, each counted as 1: median 0.98 (make calibrate-defaults
#: computes it; 0.99 before the checkpoints' BF16 layers lowered B200's, L4's and A100
#: 40GB's). GPUs measured on MoE
#: LLMs only (MI325X, MI355X, GB200, B300, GB300) are left out since their dense levels are
#: borrowed, not measured; counted at their MoE levels, as before MI355X, B300 and GB300
#: joined, the median was 0.98 (and would now be 0.97). Earlier: 0.95 before the measured
#: kernel rates, 0.99 before the measured FP4 GEMMs lowered B200's and GB200's levels, 0.98
#: before the PCIe fits lifted A10G's and L40S's, 0.99 before H100 PCIe was measured on a
#: 70B. A GPU never checked is scaled by it, or by the lowest level of a checked GPU of its
#: architecture when lower (planner.fidelity.analogy_level_scale): an unmeasured GPU must
#: not look better than a measured one.
ANALOGY_LEVEL_SCALE = 0.98

SigmaLog = Annotated[float, Field(gt=0, le=2.0, allow_inf_nan=False, strict=True)]


class Uncertainty(Frozen):
    """Provenance and spread of a set of efficiency factors.

    ``provenance``: ``fitted`` or ``scaled`` (to ``points`` measured points), or ``analogy``.
    ``points``: measured points the factors were fitted or scaled to (0 for analogy).
    ``sigma_log``: standard deviation of ln(measured / predicted) over those points'
    measured values (dimensionless, natural log): the fit's residual spread; for
    analogy the prior :data:`ANALOGY_SIGMA_LOG`. It sets the capacity band.
    ``downside_sigma_log``: the spread the derate at a confidence uses (dimensionless, at
    most ``sigma_log``; None: ``sigma_log``): the larger of the MAD term and the spreads
    the capacity errors' low side needs (``planner.calibration.spreads_from_log_errors``).
    Measured factors on which the model errs on the safe side (predicts less than was
    measured) have a narrower one than ``sigma_log``: their band stays wide, but the
    plans that buy them are not derated for the model's pessimism.
    ``level_scale``: the factor the analogy guesses of MFU and MBU were multiplied by
    to give these factors (dimensionless, at most :data:`MAX_CATALOG_LEVEL_SCALE`;
    ``prefill_mfu`` and ``decode_mbu`` already include it): measured for ``scaled``
    (above 1 only where measurements lift a guess set below the reference GPUs'
    factors, :func:`planner.fidelity.level_ceiling`), :data:`ANALOGY_LEVEL_SCALE` or
    lower for ``analogy``, 1 for ``fitted`` and hand-set factors.
    """

    provenance: Provenance = Provenance.ANALOGY
    points: Annotated[int, Field(ge=0, le=1_000_000, strict=True)] = 0
    sigma_log: SigmaLog = ANALOGY_SIGMA_LOG
    downside_sigma_log: SigmaLog | None = None
    level_scale: Annotated[
        float, Field(gt=0, le=MAX_CATALOG_LEVEL_SCALE, allow_inf_nan=False, strict=True)
    ] = 1.0

    @model_validator(mode="after")
    def _points_match(self) -> Uncertainty:
        if self.provenance.measured and self.points < 1:
            raise ValueError(
                f"provenance {self.provenance.value} needs points >= 1 (the measured points)"
            )
        if self.provenance == Provenance.ANALOGY and self.points:
            raise ValueError("provenance analogy has no measured points (points: 0)")
        if self.downside_sigma_log is not None:
            if self.downside_sigma_log > self.sigma_log:
                raise ValueError(
                    f"downside_sigma_log ({self.downside_sigma_log:g}) exceeds sigma_log "
                    f"({self.sigma_log:g}): the band must hold the derate"
                )
            if self.provenance == Provenance.ANALOGY:
                raise ValueError(
                    "provenance analogy has no measured downside spread (downside_sigma_log: "
                    "omit it; the prior sigma_log serves both)"
                )
        return self

    @property
    def derate_sigma_log(self) -> float:
        """The spread the derate at a confidence uses (dimensionless):
        ``downside_sigma_log`` when measured, else ``sigma_log``."""
        return self.sigma_log if self.downside_sigma_log is None else self.downside_sigma_log


#: Most LLMs an efficiency block may carry own-run checks for (a bounded entry).
MAX_OWN_LLM_CHECKS = 64


class OwnLlmCheck(Frozen):
    """How a GPU's own measured runs of one LLM compare with what its factors predict
    (:attr:`Efficiency.own_llm_ratio`).

    ``ratio``: the median measured / predicted saturated output tokens/s of those runs
    with the GPU's shipped factors, over the same median of the reference GPUs on that
    LLM (absolute for the reference GPUs themselves; dimensionless: below 1 the factors
    over-rate this LLM on this GPU). ``points``: how many fit-split runs it rests on;
    ``publishers``: from how many publishers (planner.fidelity.source_root: one publisher's
    runs are usually one sweep on one stack)."""

    ratio: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False, strict=True)]
    points: Annotated[int, Field(ge=1, le=1_000_000, strict=True)]
    publishers: Annotated[int, Field(ge=1, le=1_000_000, strict=True)] = 1

    @model_validator(mode="after")
    def _publishers_at_most_points(self) -> OwnLlmCheck:
        if self.publishers > self.points:
            raise ValueError(f"publishers ({self.publishers}) exceed points ({self.points})")
        return self
