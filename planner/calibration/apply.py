"""Applying a calibration: a catalog whose GPUs carry its fitted factors (per dtype),
provenance ``fitted``, re-hashed (:func:`apply_calibration`).
"""

from __future__ import annotations

from typing import Any

from catalog.loader import build_catalog
from catalog.schema import ANALOGY_SIGMA_LOG, Catalog, Dtype, DtypeEfficiency, Provenance
from planner.calibration.fit import Calibration, GroupFit, Spreads, residual_spreads
from planner.errors import PlanningError, UnknownEntryError


def group_spreads(calibration: Calibration, fit: GroupFit) -> Spreads:
    """The spreads of one group of a calibration (ln units, :class:`Spreads`):
    :func:`residual_spreads` of the group's stored residuals after the fit (as the
    current estimator takes them, also for a calibration stored when ``sigma_log`` was the
    MAD alone: recomputed, not trusted); without stored residuals the fit's recorded
    spreads (the downside one at most ``sigma_log``, ``sigma_log`` itself when not
    recorded); with neither, the analogy prior :data:`catalog.schema.ANALOGY_SIGMA_LOG`
    for both (nothing says the fit is any tighter)."""
    mine = [
        r
        for r in calibration.residuals
        if r.gpu == fit.gpu
        and (fit.dtype is None or r.dtype == fit.dtype)
        and (fit.engine is None or r.engine == fit.engine)
    ]
    got = residual_spreads(mine, fitted_factors=sum(fit.determined.values()))
    if got is not None:
        return got
    sigma = fit.sigma_log if fit.sigma_log is not None else ANALOGY_SIGMA_LOG
    down = fit.downside_sigma_log if fit.sigma_log is not None else None
    return Spreads(sigma, sigma if down is None else min(down, sigma))


def group_sigma_log(calibration: Calibration, fit: GroupFit) -> float:
    """The band's spread of one group of a calibration (:func:`group_spreads`; ln
    units)."""
    return group_spreads(calibration, fit).sigma_log


def apply_calibration(
    catalog: Catalog, calibration: Calibration, engine: str | None = None
) -> Catalog:
    """``catalog`` with the calibration's factors as each GPU's per-dtype efficiency
    (``Efficiency.by_dtype``; a group fitted over all dtypes sets the GPU's defaults),
    re-hashed. With several engines for one (GPU, dtype), ``engine`` picks one.
    Calibrated factors are ``provenance: fitted`` with the group's points and its
    residual spread (:func:`group_sigma_log`). A GPU whose calibrated groups measured an
    MoE LLM (or FP4 weights, or data-parallel attention) carries no public
    ``moe_level_ratio`` (``fp4_level_ratio``, ``dp_attention_level_ratio``) any more:
    its own fit, on :func:`planner.calibration.predict.unscaled_catalog`,
    prices them; a GPU calibrated on dense LLMs only keeps the public MoE ratio."""
    chosen: dict[tuple[str, Dtype | None], GroupFit] = {}
    for f in calibration.factors:
        if engine is not None and f.engine not in (None, engine):
            continue
        k = (f.gpu, f.dtype)
        if k in chosen and chosen[k].engine != f.engine:
            raise PlanningError.for_field(
                "calibration",
                f"{calibration.name!r} has factors for several engines on {f.gpu} "
                f"{f.dtype or ''}: name the engine",
            )
        chosen[k] = f
    gpus = dict(catalog.gpus)
    reason = f"calibration {calibration.name!r} ({calibration.created_at})"
    for (gpu_id, dtype), f in chosen.items():
        gpu = gpus.get(gpu_id)
        if gpu is None:
            raise UnknownEntryError.for_field(
                "calibration", f"{calibration.name!r} calibrates unknown gpu {gpu_id!r}"
            )
        eff = gpu.efficiency
        spreads = group_spreads(calibration, f)
        spread: dict[str, Any] = {
            "provenance": Provenance.FITTED,
            "points": max(f.points, 1),
            "sigma_log": spreads.sigma_log,
            "downside_sigma_log": spreads.downside_sigma_log,
        }
        if dtype is None:
            eff = eff.model_copy(
                update={
                    "prefill_mfu": f.prefill_mfu,
                    "decode_mbu": f.decode_mbu,
                    "step_overhead_ms": f.step_overhead_ms,
                    "reason": reason,
                    **spread,
                }
            )
        else:
            by = dict(eff.by_dtype)
            by[dtype] = DtypeEfficiency(
                prefill_mfu=f.prefill_mfu,
                decode_mbu=f.decode_mbu,
                step_overhead_ms=f.step_overhead_ms,
                reason=f"{reason}, fitted on {f.points} {dtype} measurements",
                **spread,
            )
            eff = eff.model_copy(update={"by_dtype": by})
        gpus[gpu_id] = gpu.model_copy(update={"efficiency": eff})
    for gpu_id in {g for g, _ in chosen}:
        mine = [r for r in calibration.residuals if r.gpu == gpu_id]
        moe = any(m.is_moe for r in mine if (m := catalog.models.get(r.model)) is not None)
        fp4 = any(r.dtype == Dtype.FP4 for r in mine)
        dp = any(r.dp_attention is not False for r in mine)
        eff = gpus[gpu_id].efficiency
        eff = eff.model_copy(
            update={
                "moe_level_ratio": 1.0 if moe else eff.moe_level_ratio,
                "fp4_level_ratio": 1.0 if fp4 else eff.fp4_level_ratio,
                "dp_attention_level_ratio": 1.0 if dp else eff.dp_attention_level_ratio,
            }
        )
        gpus[gpu_id] = gpus[gpu_id].model_copy(update={"efficiency": eff})
    return build_catalog(
        {
            "gpus": gpus,
            "models": catalog.models,
            "workloads": catalog.workloads,
            "links": catalog.links,
        }
    )
