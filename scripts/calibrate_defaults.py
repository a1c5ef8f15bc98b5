"""Fit the shipped catalog's default efficiency factors to the public measurements.

``make calibrate-defaults`` runs this. For every GPU with measurements in
``catalog/measurements/reference.json`` it fits (prefill MFU, decode MBU, step
overhead) over all of that GPU's points (every engine and dtype: the catalog
keeps one set per SKU), starting from and pulled weakly toward the factors the
catalog had before any calibration (``planner.calibration.UNCALIBRATED_DEFAULTS``,
so reruns are reproducible), and measures:

- the error before (those factors) and after the fit, over the fitted points;
- the leave-one-out error: each point predicted by a fit on all the others.

A GPU's YAML defaults are replaced only when the fit is well-determined and helps:
at least ``MIN_POINTS`` points, a leave-one-out median error at least
``MIN_GAIN`` (relative) below the error before, and a leave-one-out worst error no
larger than the worst before.
Factors the data does not determine stay at their previous value. Then it writes
``docs/calibration.md``. Deterministic: the same data gives the same files.

    .venv/bin/python scripts/calibrate_defaults.py [--dry-run]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from catalog.loader import DATA_DIR, load_catalog  # noqa: E402
from planner import calibration as cb  # noqa: E402

MIN_POINTS = 10
MIN_GAIN = 0.10
DOC = ROOT / "docs" / "calibration.md"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def fit_gpu(catalog, gpu: str, points: list[cb.Measurement]) -> dict:
    prior = cb.UNCALIBRATED_DEFAULTS.get(gpu) or cb._prior(catalog, gpu, None)
    key = (gpu, None, None)
    t0 = time.perf_counter()
    res = cb.fit_group(points, catalog, key, prior=prior)
    loo = cb.leave_one_out(points, catalog, key, res.fit, prior=prior)
    before = [r.ape_before for r in res.residuals if r.ape_before is not None]
    fit = res.fit
    adopt = (
        len(points) >= MIN_POINTS
        and bool(loo)
        and median(loo) <= (1.0 - MIN_GAIN) * median(before)
        and max(loo) <= max(before)
    )
    engines: dict[str, int] = {}
    for m in points:
        engines[m.engine or "-"] = engines.get(m.engine or "-", 0) + 1
    return {
        "gpu": gpu,
        "prior": prior,
        "fit": fit,
        "residuals": res.residuals,
        "loo_median": median(loo) if loo else None,
        "loo_worst": max(loo) if loo else None,
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
        f"public measurements in catalog/measurements/reference.json ({engines}), replacing "
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
    lines, cur = [], "   "
    for w in words:
        if len(cur) + 1 + len(w) > 94:
            lines.append(cur)
            cur = "   "
        cur += " " + w
    lines.append(cur)
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


def spread(r: dict) -> float:
    """``sigma_log`` of the factors the catalog keeps for this GPU: the residual spread
    (``planner.calibration.residual_sigma_log``) of the fit when adopted, else of the
    factors kept (the prediction before the fit) on the same points."""
    fit: cb.GroupFit = r["fit"]
    if r["adopt"]:
        return cb.residual_sigma_log(r["residuals"], fitted_factors=sum(fit.determined.values()))
    return cb.residual_sigma_log(r["residuals"], after=False)


def write_uncertainty(r: dict) -> None:
    """Set ``provenance: fitted``, ``points`` and ``sigma_log`` in the GPU's efficiency
    block (after ``overlap_factor``), replacing earlier values."""
    path = DATA_DIR / "gpus" / f"{r['gpu']}.yaml"
    text = path.read_text(encoding="utf-8")
    m = re.search(r"^efficiency:\n((?:[ ].*\n|\n)*?)(?=^\S)", text, flags=re.M)
    if m is None:
        raise SystemExit(f"{path}: no efficiency block")
    block = re.sub(r"^  (provenance|points|sigma_log):.*\n", "", m.group(0), flags=re.M)
    lines = f"  provenance: fitted\n  points: {r['fit'].points}\n  sigma_log: {spread(r):.3f}\n"
    new, n = re.subn(r"^(  overlap_factor:.*\n)", lambda x: x.group(1) + lines, block, flags=re.M)
    if n != 1:
        raise SystemExit(f"{path}: no overlap_factor in the efficiency block")
    path.write_text(text.replace(m.group(0), new), encoding="utf-8")


def render_doc(results: list[dict], reference: dict) -> str:
    out = [
        "# Calibration of the default efficiency factors",
        "",
        "Generated by `make calibrate-defaults` (`scripts/calibrate_defaults.py`); do not edit.",
        "",
        "The cost model prices every step with three efficiency factors per GPU: prefill MFU",
        "(achieved / peak FLOP/s), decode MBU (achieved / peak HBM bandwidth) and a fixed",
        "per-step overhead (ms). Before calibration they were set by analogy. This page fits",
        "them to the public measurements in `catalog/measurements/reference.json`",
        f"({reference['imported']} usable points imported by",
        "`scripts/import_reference_measurements.py`, each with its source), and says how far",
        "the predictions are from the measurements.",
        "",
        "Error = absolute percentage error |predicted / measured - 1| over every measured",
        "value of the GPU's points (output tokens/s, mean TTFT, mean TPOT, kernel time).",
        "*Before*: the analogy factors; *after*: the fit, on the same points (in-sample);",
        "*leave-one-out*: each point predicted by a fit on all the other points of its GPU.",
        f"A GPU's defaults are replaced when it has at least {MIN_POINTS} points and the",
        f"leave-one-out median error is at least {100 * MIN_GAIN:.0f}% (relative) below the",
        "error before, with a worst error no larger.",
        "",
        "How a point is predicted: a serving run by `planner.capacity.replica_capacity`",
        "(a closed loop at the measured concurrency; an open loop at the request rate, a run",
        "of N requests priced with its ramp-down and never more than N at once); a kernel",
        "timing by `planner.calibration.kernel_layer_ms` (the layer's linear layers: FLOPs",
        "over effective FLOP/s, or weight bytes over effective bandwidth).",
        "",
        "How the fit works (`planner.calibration.fit_group`): `scipy.optimize.least_squares`",
        f"on ln(predicted / measured), soft-L1 loss at scale {cb.LOSS_SCALE:g} (a few points",
        "the model cannot represent do not dominate), a weak pull toward the analogy factors",
        f"(weight {cb.PRIOR_WEIGHT:g} per factor against 1 per measured value), started at those",
        "factors and at the best point of a coarse grid. A factor whose standard error (from",
        f"the Jacobian) exceeds {100 * cb.MAX_REL_STD_ERROR:.0f}% of its value (overhead: "
        f"{cb.MAX_OVERHEAD_STD_ERROR_MS:g} ms) is held",
        "at its previous value and the others are refitted: *(kept)* below.",
        "",
        "| GPU | points (values) | fitted MFU / MBU / overhead ms | before median / worst | "
        "after median / worst | leave-one-out median / worst | defaults |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        f: cb.GroupFit = r["fit"]
        factors = " / ".join(
            f"{v:g}" + ("" if f.determined[p] else " (kept)")
            for p, v in zip(cb.PARAMS, f.factors, strict=True)
        )
        out.append(
            f"| {r['gpu']} | {f.points} ({f.values}) | {factors} | "
            f"{pct(f.median_ape_before)} / {pct(f.worst_ape_before)} | "
            f"{pct(f.median_ape_after)} / {pct(f.worst_ape_after)} | "
            f"{pct(r['loo_median'])} / {pct(r['loo_worst'])} | "
            f"{'replaced' if r['adopt'] else 'kept'} |"
        )
    out += ["", "## Per GPU", ""]
    for r in results:
        f = r["fit"]
        engines = ", ".join(f"{n} {e}" for e, n in sorted(r["engines"].items()))
        out += [f"### {r['gpu']}", "", f"Points: {engines}. Sources:", ""]
        out += [f"- {s}" for s in r["sources"]]
        out += [""]
        errs = ", ".join(f"{p} {'-' if e is None else f'{e:.3g}'}" for p, e in f.std_errors.items())
        out.append(f"Standard errors of the fit: {errs}.")
        out.append(
            f"Spread recorded in the catalog (`sigma_log`, residual standard deviation of "
            f"ln(measured / predicted) with the factors kept): {spread(r):.3f}."
        )
        if r["adopt"]:
            out.append(
                f"The catalog's defaults were replaced: {f.points} points, a leave-one-out "
                f"median error ({pct(r['loo_median'])}) well below the analogy factors' "
                f"({pct(f.median_ape_before)}) and a worst one no larger."
            )
        else:
            if f.points < MIN_POINTS:
                why = f"only {f.points} points (fewer than {MIN_POINTS})"
            else:
                why = (
                    f"the leave-one-out error (median {pct(r['loo_median'])}, worst "
                    f"{pct(r['loo_worst'])}) is not {100 * MIN_GAIN:.0f}% below the analogy "
                    f"factors' median ({pct(f.median_ape_before)}) with a worst no larger "
                    f"({pct(f.worst_ape_before)})"
                )
            out.append(f"The catalog's defaults were kept: {why}.")
        by: dict[str, list[cb.Residual]] = {}
        for x in r["residuals"]:
            by.setdefault(f"{x.engine or '-'} {x.quantity}", []).append(x)
        out += [
            "",
            "| engine, quantity | values | before median (bias) | after median (bias) |",
            "|---|---|---|---|",
        ]
        for k, xs in sorted(by.items()):
            b = [x.ape_before for x in xs if x.ape_before is not None]
            a = [x.ape_after for x in xs if x.ape_after is not None]
            sb = [x.predicted_before / x.measured - 1 for x in xs if x.predicted_before]
            sa = [x.predicted_after / x.measured - 1 for x in xs if x.predicted_after]
            bias_b = "-" if not sb else f"{100 * median(sb):+.1f}%"
            bias_a = "-" if not sa else f"{100 * median(sa):+.1f}%"
            out.append(
                f"| {k} | {len(xs)} | {pct(median(b)) if b else '-'} ({bias_b}) | "
                f"{pct(median(a)) if a else '-'} ({bias_a}) |"
            )
        out.append("")
    skipped = reference.get("skipped", {})
    out += [
        "## What was not used",
        "",
        f"Of the shared file's entries, {sum(skipped.values())} were skipped:",
        "",
    ]
    out += [f"- {n}: {why}" for why, n in sorted(skipped.items())]
    out += [
        f"- TTFT of {reference.get('ttft_dropped_overloaded', 0)} overloaded open-loop points "
        "(rate unlimited, or TTFT over 5x the sweep's lowest): the queue grew through the run, "
        "so TTFT measured the run's length; their throughput and TPOT are kept.",
        "",
        "## What limits the fit",
        "",
        "- Three factors per GPU cannot absorb effects the roofline leaves out: the measured",
        "  TTFT of TensorRT-LLM's Triton server is above the predicted one at light load",
        "  (request handling the model does not price) while its TPOT is below it, so the",
        "  two pull the fit in opposite directions; tensor-parallel replicas (70B on 4 GPUs)",
        "  lose more per step than the link model's all-reduce times say.",
        "- Open-loop runs of a finite number of requests (TensorRT-LLM's 500) are priced as",
        "  such (the ramp-down, at most N requests at once), but at saturation the engines'",
        "  own limits (max batch, scheduler) shape the measured throughput and TPOT.",
        "- Leave-one-out removes one point at a time; points of one sweep are correlated, so",
        "  it is an optimistic estimate of the error on a new model or engine.",
        "",
        "Per-point predicted vs measured values, before and after a fit per GPU and dtype:",
        "`.venv/bin/python bench/fidelity.py`.",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="print, change no file")
    args = ap.parse_args(argv)
    import json

    reference = json.loads(cb.REFERENCE_PATH.read_text(encoding="utf-8"))
    catalog = load_catalog()
    measurements = cb.load_reference_measurements(catalog)
    groups = cb.group_measurements(measurements, ("gpu",))
    results = []
    for (gpu, _, _), points in groups.items():
        r = fit_gpu(catalog, gpu, points)
        f = r["fit"]
        print(
            f"{gpu}: {f.points} points, MFU {f.prefill_mfu:g} MBU {f.decode_mbu:g} "
            f"overhead {f.step_overhead_ms:g} ms; median error before {pct(f.median_ape_before)}, "
            f"after {pct(f.median_ape_after)}, leave-one-out {pct(r['loo_median'])}; worst "
            f"{pct(f.worst_ape_before)} / {pct(f.worst_ape_after)} / {pct(r['loo_worst'])} -> "
            f"{'replace defaults' if r['adopt'] else 'keep defaults'} ({r['seconds']:.0f} s)"
        )
        results.append(r)
    if args.dry_run:
        return 0
    for r in results:
        if r["adopt"]:
            write_yaml(r)
        write_uncertainty(r)
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(render_doc(results, reference), encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
