"""Fit the shipped catalog's default efficiency factors to the public measurements.

``make calibrate-defaults`` runs this. For every GPU with measurements in
``catalog/measurements/reference.json`` it fits (prefill MFU, decode MBU, step
overhead) over the GPU's ``split: fit`` points (every engine and dtype: the catalog
keeps one set per SKU; points with a ``skip_reason`` are never fitted), starting
from and pulled weakly toward the factors the catalog had before any calibration
(``planner.calibration.UNCALIBRATED_DEFAULTS``, so reruns are reproducible), and
measures (``planner.fidelity``):

- the error before (those factors) and after the fit, in-sample (fit split) and on
  the held-out split, per GPU and dtype;
- the leave-one-out error: each fit point predicted by a fit on the GPU's other
  fit points.

A GPU's YAML defaults are replaced only when the fit is well-determined, plausible
and helps: fit points from at least ``MIN_SOURCES`` publishers, at least
``MIN_POINTS`` fit points, factors in the plausible ranges, a leave-one-out median
error at least
``MIN_GAIN`` (relative) below the in-sample error before, and a leave-one-out worst
error no larger than the worst before. The rule reads the fit split only, so the
held-out error stays an independent check of it. Elsewhere the analogy factors are
scaled to the GPU's measured level (:func:`level_plan`). Then it writes
``docs/calibration.md``.
Deterministic: the same data gives the same files.

    .venv/bin/python scripts/calibrate_defaults.py [--dry-run] [--no-catalog]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from catalog.loader import DATA_DIR, load_catalog  # noqa: E402
from catalog.schema import ANALOGY_LEVEL_SCALE  # noqa: E402
from planner import band_coverage as bc  # noqa: E402
from planner import calibration as cb  # noqa: E402
from planner import fidelity as fd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration_levels import (  # noqa: E402
    MIN_POINTS,
    MIN_SOURCES,
    downside_line,
    folded,
    level_of,
    level_plan,
    ratios_catalog,
    write_level,
)

MIN_GAIN = 0.10
DOC = ROOT / "docs" / "calibration.md"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _med(xs: list[float]) -> float | None:
    return median(xs) if xs else None


#: Factors a mainstream engine plausibly reaches (as tests/test_catalog.py checks the
#: shipped defaults): a fit outside compensates for what the cost model leaves out
#: (MoE, MLA, engine bottlenecks of one benchmark) rather than measuring the GPU, and
#: is not adopted; its spread is still recorded (on the factors kept).
PLAUSIBLE_MFU = (0.3, 0.65)
PLAUSIBLE_MBU = (0.55, 0.8)


def plausible(factors) -> bool:
    """True when fitted (MFU, MBU, overhead) lie in the plausible ranges above."""
    mfu, mbu = factors[0], factors[1]
    return (
        PLAUSIBLE_MFU[0] <= mfu <= PLAUSIBLE_MFU[1] and PLAUSIBLE_MBU[0] <= mbu <= PLAUSIBLE_MBU[1]
    )


def fit_gpu(catalog, gpu: str, res: cb._GroupResult, points: list[cb.Measurement]) -> dict:
    """The fit of one GPU with its leave-one-out errors and the adoption decision."""
    t0 = time.perf_counter()
    loo = fd.leave_one_out(points, catalog, res.fit)
    before = [r.ape_before for r in res.residuals if r.ape_before is not None]
    fit = res.fit
    loo_apes = [x.ape for x in loo]
    adopt = (
        len(fd.source_roots(points)) >= MIN_SOURCES
        and any(fit.determined.values())
        and plausible(fit.factors)
        and len(points) >= MIN_POINTS
        and bool(loo_apes)
        and median(loo_apes) <= (1.0 - MIN_GAIN) * median(before)
        and max(loo_apes) <= max(before)
    )
    engines: dict[str, int] = {}
    for m in points:
        engines[m.engine or "-"] = engines.get(m.engine or "-", 0) + 1
    return {
        "gpu": gpu,
        "prior": fd.prior_factors(catalog, gpu),
        "fit": fit,
        "residuals": res.residuals,
        "loo": loo,
        "loo_median": _med(loo_apes),
        "loo_worst": max(loo_apes) if loo_apes else None,
        "adopt": adopt,
        "engines": engines,
        "sources": sorted({m.source for m in points if m.source}),
        "seconds": time.perf_counter() - t0,
    }


def reason_text(r: dict) -> str:
    fit: cb.GroupFit = r["fit"]
    engines = ", ".join(f"{n} {e}" for e, n in sorted(r["engines"].items()))
    kept = [p for p in cb.PARAMS if not fit.determined[p]]
    held = (
        f" {', '.join(kept)} not determined by these data: kept at its previous value."
        if kept
        else ""
    )
    prior = r["prior"]
    return (
        f"Fitted by `make calibrate-defaults` (scripts/calibrate_defaults.py) to {fit.points} "
        f"public measurements (fit split) in catalog/measurements/reference.json ({engines}), "
        "replacing "
        f"the analogy values MFU {prior[0]:g} / MBU {prior[1]:g} / {prior[2]:g} ms.{held} "
        f"Median abs. error {pct(fit.median_ape_before)} before, {pct(fit.median_ape_after)} "
        f"after, {pct(r['loo_median'])} leave-one-out (docs/calibration.md)."
    )


def write_yaml(r: dict) -> None:
    path = DATA_DIR / "gpus" / f"{r['gpu']}.yaml"
    text = path.read_text(encoding="utf-8")
    fit: cb.GroupFit = r["fit"]
    m = re.search(r"^efficiency:\n((?:[ ].*\n|\n)*?)(?=^\S)", text, flags=re.M)
    if m is None:
        raise SystemExit(f"{path}: no efficiency block")
    block = m.group(0)
    overlap = re.search(r"overlap_factor:\s*([0-9.]+)", block)
    words = reason_text(r).split()
    lines = folded(words)
    values = [
        v if fit.determined[p] else prior
        for p, v, prior in zip(cb.PARAMS, fit.factors, r["prior"], strict=True)
    ]
    new = (
        "efficiency:\n"
        f"  prefill_mfu: {values[0]:g}\n"
        f"  decode_mbu: {values[1]:g}\n"
        f"  step_overhead_ms: {float(values[2]):.1f}\n"
        f"  overlap_factor: {overlap.group(1) if overlap else '0.8'}\n"
        "  reason: >-\n" + "\n".join(lines) + "\n"
    )
    path.write_text(text.replace(block, new), encoding="utf-8")


def spread(r: dict) -> cb.Spreads:
    """The spreads of the factors the catalog keeps for this GPU: the residual spreads
    (``planner.calibration.residual_spreads``) of the fit when adopted, else of the
    factors kept (the prediction before the fit) on the same points."""
    fit: cb.GroupFit = r["fit"]
    if r["adopt"]:
        got = cb.residual_spreads(r["residuals"], fitted_factors=sum(fit.determined.values()))
    else:
        got = cb.residual_spreads(r["residuals"], after=False)
    return cb.Spreads(cb.MIN_SIGMA_LOG, cb.MIN_SIGMA_LOG) if got is None else got


def write_uncertainty(r: dict) -> None:
    """Set ``provenance: fitted``, ``points``, ``sigma_log`` and (when narrower)
    ``downside_sigma_log`` in the GPU's efficiency block (after ``overlap_factor``),
    replacing earlier values."""
    path = DATA_DIR / "gpus" / f"{r['gpu']}.yaml"
    text = path.read_text(encoding="utf-8")
    m = re.search(r"^efficiency:\n((?:[ ].*\n|\n)*?)(?=^\S)", text, flags=re.M)
    if m is None:
        raise SystemExit(f"{path}: no efficiency block")
    block = re.sub(
        r"^  (provenance|points|sigma_log|downside_sigma_log):.*\n", "", m.group(0), flags=re.M
    )
    s = spread(r)
    lines = f"  provenance: fitted\n  points: {r['fit'].points}\n  sigma_log: {s.sigma_log:.3f}\n"
    lines += downside_line(s.sigma_log, s.downside_sigma_log)
    new, n = re.subn(r"^(  overlap_factor:.*\n)", lambda x: x.group(1) + lines, block, flags=re.M)
    if n != 1:
        raise SystemExit(f"{path}: no overlap_factor in the efficiency block")
    path.write_text(text.replace(m.group(0), new), encoding="utf-8")


def gpu_dtype_table(
    results: dict[str, dict],
    rows: list[fd.Row],
    all_points: list[cb.Measurement],
    levels: dict[str, dict],
) -> list[list[str]]:
    """Per GPU and dtype: points (fit / holdout / recorded only), in-sample and held-out
    median |error| before and after, leave-one-out median |error|, and the defaults."""
    keys = sorted({(m.gpu, m.dtype.value) for m in all_points})
    summ = {(s.key, s.split): s for s in fd.summarize(rows, fd.by_gpu_dtype)}
    head = [
        "GPU",
        "dtype",
        "points fit / holdout / recorded",
        "in-sample before",
        "in-sample after",
        "held-out before",
        "held-out after",
        "leave-one-out",
        "defaults",
    ]
    body = []
    for gpu, dtype in keys:
        pts = [m for m in all_points if (m.gpu, m.dtype.value) == (gpu, dtype)]
        nf = sum(1 for m in pts if m.in_fit)
        nh = len(cb.holdout_points(pts))
        nr = sum(1 for m in pts if not m.usable)
        fit_s, hold_s = summ.get(((gpu, dtype), "fit")), summ.get(((gpu, dtype), "holdout"))
        r = results.get(gpu)
        loo = [x.ape for x in r["loo"] if x.dtype == dtype] if r else []
        e = levels.get(gpu)
        if r is not None and r["adopt"]:
            action = "fitted"
        elif e is not None and e["provenance"] == "scaled":
            action = f"scaled x{e['level'].scale:.2f}"
        elif e is not None:
            action = f"by analogy x{e['level']:.2f}"
        else:
            action = "kept"
        if nf + nh == 0:
            action += " (recorded only)"
        body.append(
            [
                gpu,
                dtype,
                f"{nf} / {nh} / {nr}",
                fd.pct(fit_s.median_abs_before) if fit_s else "-",
                fd.pct(fit_s.median_abs_after) if fit_s else "-",
                fd.pct(hold_s.median_abs_before) if hold_s else "-",
                fd.pct(hold_s.median_abs_after) if hold_s else "-",
                fd.pct(_med(loo)),
                action,
            ]
        )
    return [head, *body]


def coverage_section(rows: list[fd.Row], catalog) -> list[str]:
    """The doc's "Uncertainty bands against the measurements" section: each value judged
    with the spread ``catalog`` prices its GPU and dtype with (``planner.band_coverage``)."""
    by_kind, per_gpu = bc.coverage_tables(
        rows, bc.catalog_sigma(catalog), bc.catalog_derate_sigma(catalog)
    )
    out = [
        "",
        "## Uncertainty bands against the measurements",
        "",
        "Plans derate each pool's capacity by `exp(-z_c sigma_down)` at the request's",
        "confidence (0.8 by default) and show a 90% band `exp(+-1.645 sigma_log)`",
        "(`planner.risk`); `sigma_down`, at most `sigma_log`, is the spread of the errors'",
        "low side. Of the values below, the share whose capacity (throughput as measured;",
        "a time the other way round: a longer step serves less) is at least the derated",
        "one at the confidences 0.8 and 0.9, and the share inside the band",
        "(`planner.band_coverage`); the claims are 80%, 90% and 90%. A spread is",
        "*measured* (the GPU's own residual spreads,",
        "`planner.calibration.spreads_from_log_errors`) or the analogy *prior*.",
        "",
    ]
    out += fd.markdown(by_kind)
    out += ["", "Per GPU with a measured spread, every value:", ""]
    out += fd.markdown(per_gpu)
    return out


def render_doc(
    results: dict[str, dict],
    levels: dict[str, dict],
    rows: list[fd.Row],
    all_points: list[cb.Measurement],
    reference: dict,
    catalog,
    wrote_catalog: bool = True,
    sigma_catalog=None,
) -> str:
    usable = [m for m in all_points if m.usable]
    n_fit = len(cb.fit_points(usable))
    n_hold = len(cb.holdout_points(usable))
    no_data = fd.gpus_without_data(catalog, all_points)
    undetermined = sorted(g for g, e in levels.items() if e["provenance"] == "analogy")
    undetermined = [g for g in undetermined if g in results]
    out = [
        "# Calibration of the default efficiency factors",
        "",
        "Generated by `make calibrate-defaults` (`scripts/calibrate_defaults.py`, tables from",
        "`planner/fidelity.py`, as `bench/fidelity.py` prints them); do not edit.",
        "",
        "The cost model prices every step with three efficiency factors per GPU: prefill MFU",
        "(achieved / peak FLOP/s), decode MBU (achieved / peak HBM bandwidth) and a fixed",
        "per-step overhead (ms). Before calibration they were set by analogy. This page fits",
        "them to the public measurements in `catalog/measurements/reference.json`",
        f"({len(all_points)} points imported by `scripts/import_reference_measurements.py`,",
        f"each with its source: {n_fit} fit, {n_hold} held out, "
        f"{len(all_points) - len(usable)} recorded only),",
        "and says how far the predictions are from the measurements.",
        "",
        "**Split.** Every point has `split: fit` or `split: holdout`, chosen by",
        "`planner.calibration.assign_splits`: per GPU and kind (serving, kernel), the",
        f"{100 * cb.HOLDOUT_SHARE:.0f}% of ids with the lowest SHA-256 rank are held out"
        f" (strata of at least {cb.MIN_POINTS_FOR_HOLDOUT} points; a GPU with at least",
        f"{cb.MIN_POINTS_FOR_HOLDOUT} points always has one). The fit reads the fit split"
        " only; the adoption rule",
        "below reads the fit split only, so the held-out error is an independent check.",
        "Points of one sweep are correlated: a held-out point usually has neighbours of its",
        "sweep in the fit split, so the held-out error is optimistic for a new engine.",
        "",
        "**Errors.** Relative error = predicted / measured - 1 over every measured value",
        "(output tokens/s, mean TTFT, mean TPOT, kernel time); tables give the median of its",
        "absolute value and, in parentheses, the median signed error (positive: predicted",
        "throughput too high or latency too long). *Before*: the analogy factors; *after*:",
        "the factors the catalog keeps (the GPU's fit where adopted, else the analogy scaled",
        "to its measured level, below). *Leave-one-out*: each fit point predicted by a fit",
        "on the GPU's other fit points.",
        f"A GPU's defaults are replaced when its fit determined a factor, its fit points come "
        f"from at least {MIN_SOURCES} publishers (`planner.fidelity.source_roots`), it has at "
        f"least {MIN_POINTS} fit points, the factors are plausible (MFU {PLAUSIBLE_MFU[0]}-"
        f"{PLAUSIBLE_MFU[1]}, MBU {PLAUSIBLE_MBU[0]}-{PLAUSIBLE_MBU[1]}),",
        f"and the leave-one-out median error is at least {100 * MIN_GAIN:.0f}% (relative) "
        "below the in-sample",
        "error before, with a worst error no larger.",
        "",
        "How a point is predicted: a serving run by `planner.capacity.replica_capacity`",
        "(a closed loop at the measured concurrency; an open loop at the request rate, a run",
        "of N requests priced with its ramp-down and never more than N at once; offline",
        "MLPerf-style runs as N requests at once); a disaggregated run (InferenceMAX's",
        "prefill and decode workers, their layout read from its notes) by",
        "`planner.calibration.disagg.disaggregated_closed_loop`: the closed loop of its users",
        "on its decode workers, with the measured TTFT taken as it was (the hand-over, router",
        "and scheduling delays of a multi-node deployment, 0.3-35 s measured, are not",
        "priced), so its throughput and TPOT check the decode workers; a kernel timing by",
        "`planner.calibration.kernel_layer_ms`.",
        "",
        "Tensor parallelism past NVLink (L40S, A10G, H100 NVL beyond a pair) crosses PCIe:",
        "its all-reduce bus bandwidth at tp 8 is fitted per GPU to that GPU's own tp 8 runs",
        "(`scripts/fit_pcie_allreduce.py`, run by `make calibrate-defaults` after this",
        "script; `server.pcie_allreduce`): "
        + (
            ", ".join(
                f"{g.id} {g.server.pcie_allreduce.tp8_bus_gb_per_s:g} GB/s"
                f" ({g.server.pcie_allreduce.points}"
                f" run{'s' if g.server.pcie_allreduce.points != 1 else ''})"
                for g in sorted(catalog.gpus.values(), key=lambda g: g.id)
                if g.server.pcie_allreduce is not None
            )
            or "none"
        )
        + "; other GPUs keep the conservative 9.78 GB/s (`planner.collectives`).",
        "",
        "Where no kernel benchmark measures the decode attention kernel and a GPU's runs",
        "include batch sweeps, every decoding sequence pays a fitted cost per layer beyond",
        "its KV read, and every step a fitted floor per layer beyond its kernels",
        "(`scripts/fit_decode_sequence_cost.py`, run by `make calibrate-defaults` after this",
        "script; `decode_sequence_cost`, `planner.kernels.decode_sequence_ms` and",
        "`step_layer_floor_ms`): "
        + (
            ", ".join(
                f"{g.id} {g.decode_sequence_cost.us_per_layer:g} us per sequence and "
                f"{g.decode_sequence_cost.step_us_per_layer:g} us per step"
                + (
                    f" ({g.decode_sequence_cost.points} runs)"
                    if g.decode_sequence_cost.points
                    else " (taken from its sibling)"
                )
                for g in sorted(catalog.gpus.values(), key=lambda g: g.id)
                if g.decode_sequence_cost is not None
            )
            or "none"
        )
        + "; these factors were fitted with it.",
        "",
        "How the fit works (`planner.calibration.fit_group`): `scipy.optimize.least_squares`",
        f"on ln(predicted / measured), soft-L1 loss at scale {cb.LOSS_SCALE:g}, a weak pull",
        f"toward the analogy factors (weight {cb.PRIOR_WEIGHT:g} per factor against 1 per "
        "measured value),",
        "started at those factors and at the best point of a coarse grid. A factor whose",
        f"standard error exceeds {100 * cb.MAX_REL_STD_ERROR:.0f}% of its value (overhead: "
        f"{cb.MAX_OVERHEAD_STD_ERROR_MS:g} ms) is held",
        "at its previous value: *(kept)* below.",
        "",
        "This run "
        + (
            "wrote the replaced defaults into `catalog/data/gpus`."
            if wrote_catalog
            else "did not write `catalog/data/gpus` (`--no-catalog`): *replaced* below marks "
            "what the rule would write; the YAML files keep their current values."
        ),
        "",
        "## Summary",
        "",
    ]
    out += fd.markdown(fd.summary_table(fd.summarize(rows, fd.overall), ["values of"]))
    out += ["", "By serving engine and measured value:", ""]
    out += fd.markdown(
        fd.summary_table(fd.summarize(rows, fd.by_engine_quantity), ["engine", "value"])
    )
    out += ["", "Output tokens/s by shape (decode-heavy: output >= 4x prompt) and engine:", ""]
    out += fd.markdown(fd.summary_table(fd.throughput_by_shape(rows), ["shape", "engine"]))
    out += ["", "## Per GPU and dtype", ""]
    out += fd.markdown(gpu_dtype_table(results, rows, all_points, levels))
    out += [
        "",
        "## Levels: analogy factors scaled to measured throughput",
        "",
        "Where the two-factor fit is not adopted, the catalog keeps the analogy's split",
        "between prefill MFU and decode MBU and scales both by one level",
        "(`planner.fidelity.level_scale`), from the GPU's saturated throughputs (offline,",
        "all-at-once or closed-loop runs of its fit split; a finite request rate measures the",
        "offered load, not the GPU). The reference GPUs",
        f"({', '.join(fd.LEVEL_REFERENCE_GPUS)}) get the level at which their throughputs",
        "are predicted as measured; every other GPU the level at which the model errs on it",
        "as it errs on the reference GPUs for the same LLM (`planner.fidelity.level_targets`),",
        "so a miss of the model on one LLM (Llama-3.1-405B on an old engine, DeepSeek's MoE",
        "kernels) is not charged to the GPU measured on it, and the GPU's throughput relative",
        "to the reference's is what was measured. Per LLM a fixed point (FP4 runs apart);",
        "the GPU's level is the median over its LLMs, or over its dense LLMs where that is",
        "higher (MoE LLMs measured below the dense ones do not pull it down: the MoE ratio",
        "prices them), never above the ceiling",
        "(`planner.fidelity.level_ceiling`: 1, or where the analogy guess was set below the",
        "reference GPUs' MFU / MBU, the level at which both reach theirs), and each factor",
        "at most the reference GPUs' (`planner.fidelity.scaled_factors`: MFU 0.5, MBU 0.7;",
        "no GPU is rated a larger share of its peak than the best-measured ones, factor by",
        "factor). Two measured ratios to that level:",
        "`moe_level_ratio`, the median level of its MoE LLMs over it (at most 1, when it",
        "has dense LLMs too; MFU and MBU x it on MoE models; measured against the capped",
        "factors where one is capped), and `fp4_level_ratio`, the",
        "median level of its FP4 runs over it (the FP4 derates x it, each capped",
        "at 1). A GPU measured on MoE LLMs only takes its dense level from a sibling of its",
        "architecture measured on both (`planner.fidelity.borrowed_dense_level`: the",
        "sibling's level times the GPU's level relative to it on runs published for both",
        "(`planner.fidelity.paired_level`, at least `MIN_MATCHED_RUNS` of one LLM), else",
        "its MoE level over the sibling's MoE ratio; never above the sibling's level), its",
        "MoE ratio keeping its MoE LLMs at their measured level.",
        "A GPU without such points is scaled by the median level of the scaled GPUs",
        f"(`catalog.schema.ANALOGY_LEVEL_SCALE` = {ANALOGY_LEVEL_SCALE}) or by a lower level",
        "of a measured GPU of its architecture (`planner.fidelity.analogy_level_scale`),",
        "so a guessed GPU never looks better than a measured one.",
        "",
        "| GPU | provenance | level | per LLM | MoE ratio | FP4 ratio | saturated values | "
        "measured / predicted with the analogy | MFU / MBU / overhead ms | sigma_log "
        "(band) | downside (derate) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for gpu, e in sorted(levels.items()):
        fac = e["factors"]
        lv = e["level"]
        scaled = e["provenance"] == "scaled"
        out.append(
            f"| {gpu} | {e['provenance']} | {(lv.scale if scaled else lv):.3f} | "
            + (", ".join(f"{m} {v:.2f}" for m, v in lv.by_model) if scaled else "-")
            + f" | {e['moe_ratio']:.3f} | {e['fp4_ratio']:.3f} | "
            f"{lv.values if scaled else '-'} | {f'{lv.median_ratio:.2f}' if scaled else '-'} | "
            f"{fac[0]:.4g} / {fac[1]:.4g} / {fac[2]:g} | {e['sigma_log']:.2f} | "
            f"{e.get('downside_sigma_log') or e['sigma_log']:.2f} |"
        )
    out += [
        "",
        "## GPUs by analogy",
        "",
        "Their factors are the analogy values scaled by the analogy level (above); the",
        "optimizer treats them as guesses (spread `ANALOGY_SIGMA_LOG`):",
        "",
    ]
    for g in no_data:
        n_rec = sum(1 for m in all_points if m.gpu == g)
        why = (
            f"{n_rec} points recorded, none the planner can price (see below)"
            if n_rec
            else "no usable public measurement found"
        )
        out.append(f"- {g}: {why}")
    for g in undetermined:
        out.append(
            f"- {g}: {results[g]['fit'].points} fit points, but no saturated throughput "
            "to scale the level to"
        )
    out += ["", "## Fitted factors", ""]
    out += [
        "| GPU | fit points (values) | fitted MFU / MBU / overhead ms | standard errors | "
        "leave-one-out median / worst | defaults |",
        "|---|---|---|---|---|---|",
    ]
    for gpu, r in results.items():
        f: cb.GroupFit = r["fit"]
        factors = " / ".join(
            f"{v:g}" + ("" if f.determined[p] else " (kept)")
            for p, v in zip(cb.PARAMS, f.factors, strict=True)
        )
        errs = ", ".join("-" if e is None else f"{e:.3g}" for e in f.std_errors.values())
        out.append(
            f"| {gpu} | {f.points} ({f.values}) | {factors} | {errs} | "
            f"{pct(r['loo_median'])} / {pct(r['loo_worst'])} | "
            f"{'replaced' if r['adopt'] else 'not adopted'} |"
        )
    out += ["", "## Per GPU, model and dtype", ""]
    out += fd.markdown(
        fd.summary_table(fd.summarize(rows, fd.by_gpu_model_dtype), ["GPU", "model", "dtype"])
    )
    out += [
        "",
        "## Cross-vendor ratios",
        "",
        f"Output tokens/s per GPU of each GPU over {fd.REFERENCE_GPU}'s on the same model and",
        "shape (both splits), measured and predicted; a ratio the model gets wrong is what",
        "makes the optimizer buy the wrong GPU.",
        "",
    ]
    ratios = fd.cross_vendor_ratios(rows)
    out += fd.markdown(fd.ratio_table(ratios)) if ratios else ["(no shared model and shape)"]
    out += coverage_section(rows, sigma_catalog or catalog)
    out += ["", "## Sources", ""]
    for gpu in sorted({m.gpu for m in all_points}):
        srcs = sorted({m.source for m in all_points if m.gpu == gpu and m.source})
        out += [f"### {gpu}", ""] + [f"- {x}" for x in srcs] + [""]
    recorded: dict[str, int] = {}
    for m in all_points:
        if not m.usable:
            recorded[m.skip_reason or ""] = recorded.get(m.skip_reason or "", 0) + 1
    skipped = reference.get("skipped", {})
    out += ["## What was not used", "", "Recorded with their fields, never fitted:", ""]
    out += [f"- {n}: {why}" for why, n in sorted(recorded.items(), key=lambda kv: -kv[1])]
    out += ["", f"Not imported ({sum(skipped.values())} entries of the shared files):", ""]
    out += [f"- {n}: {why}" for why, n in sorted(skipped.items())]
    out += [
        f"- TTFT of {reference.get('ttft_dropped_overloaded', 0)} overloaded open-loop points "
        "(rate unlimited, or TTFT over 5x the sweep's lowest): the queue grew through the run, "
        "so TTFT measured the run's length; their throughput and TPOT are kept.",
        "- MLPerf Inference v4.1: the Llama-2-70B Offline and Server results of H100 SXM,",
        "  H200, H100 NVL, L40S, MI300X and B200 systems are imported per replica",
        "  (`scripts/extract_mlperf_v41.py`), L40S at tp 4 over PCIe and B200 in FP4 among",
        "  them (both recorded only until the catalog priced TP over PCIe and FP4 weights).",
        "  Mixtral-8x7B results were not imported: no stored source states the mean prompt",
        "  length of its set.",
        "- MLPerf Inference v5.0/v5.1 and TensorRT-LLM's offline throughput tables are the",
        "  project's validation set and are not imported.",
        "",
        "## What limits the fit",
        "",
        "- Three factors per GPU cannot absorb effects the roofline leaves out: engine",
        "  request handling at light load (TTFT above the prediction) while TPOT is below it;",
        "  MoE grouped GEMMs far below peak at small per-expert batch (DeepSeek on MI300X /",
        "  MI325X / B200 / H200 is slower than predicted); old engine versions (vLLM 0.6 on",
        "  8 x H100 for Llama-3.1-405B, twice as slow as predicted) pull a GPU's factors away",
        "  from the newer engines measured on it.",
        "- One set of factors per GPU over every engine and dtype: where the engines disagree",
        "  the fit lands between them and the held-out error can grow (see the table).",
        "",
        "Per-point predicted vs measured values: `.venv/bin/python bench/fidelity.py`",
        "(`--summary` for the tables only).",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="print, change no file")
    ap.add_argument(
        "--no-catalog", action="store_true", help="write the doc, leave catalog/data/gpus"
    )
    args = ap.parse_args(argv)
    reference = json.loads(cb.REFERENCE_PATH.read_text(encoding="utf-8"))
    # fits and levels are measured against the model as the analogy prices it: no
    # measured ratio of an earlier run applied (planner.fidelity.unscaled_catalog)
    catalog = fd.unscaled_catalog(load_catalog())
    all_points = cb.load_reference_measurements(catalog, include_skipped=True)
    points = [m for m in all_points if m.usable]
    fits = fd.fit_per_gpu(points, catalog)
    results = {}
    for gpu, res in fits.items():
        pts = [m for m in cb.fit_points(points) if m.gpu == gpu]
        r = fit_gpu(catalog, gpu, res, pts)
        f = r["fit"]
        print(
            f"{gpu}: {f.points} fit points, MFU {f.prefill_mfu:g} MBU {f.decode_mbu:g} "
            f"overhead {f.step_overhead_ms:g} ms; median error before {pct(f.median_ape_before)}, "
            f"after {pct(f.median_ape_after)}, leave-one-out {pct(r['loo_median'])}; worst "
            f"{pct(f.worst_ape_before)} / {pct(f.worst_ape_after)} / {pct(r['loo_worst'])} -> "
            f"{'replace defaults' if r['adopt'] else 'keep defaults'} ({r['seconds']:.0f} s)",
            flush=True,
        )
        results[gpu] = r
    levels = level_plan(catalog, results, points)
    for gpu, e in levels.items():
        f = e["factors"]
        print(
            f"{gpu}: {e['provenance']} x{level_of(e):.3f}"
            f" -> MFU {f[0]:.4g} MBU {f[1]:.4g}, sigma_log {e['sigma_log']:.3f}"
            f" (downside {e.get('downside_sigma_log') or e['sigma_log']:.3f})",
            flush=True,
        )
    # "after": the factors the catalog keeps (an earlier adopted fit stays as it is)
    kept = dict(fd.shipped_factors(catalog))
    kept.update({g: r["fit"].factors for g, r in results.items() if r["adopt"]})
    kept.update({g: e["factors"] for g, e in levels.items()})
    rows = fd.evaluate(points, ratios_catalog(catalog, levels), kept)
    if args.dry_run:
        return 0
    if not args.no_catalog:
        for r in results.values():
            if r["adopt"]:
                write_yaml(r)
                write_uncertainty(r)
        for gpu, e in levels.items():
            write_level(gpu, e)
    DOC.parent.mkdir(parents=True, exist_ok=True)
    # the spreads as written (the catalog re-read from disk), for the coverage section
    sigma_catalog = None if args.no_catalog else load_catalog(DATA_DIR)
    doc = render_doc(
        results, levels, rows, all_points, reference, catalog, not args.no_catalog, sigma_catalog
    )
    DOC.write_text(doc, encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
