"""How far the cost model's predictions are from measured serving, before and after
calibration, on the fit and held-out splits.

For every priceable point of ``catalog/measurements/reference.json`` (public
measurements, each with its source and ``split``) it prints, per GPU, model, dtype
and shape, the measured output tokens/s, mean TTFT and mean TPOT (or a kernel's time)
next to the prediction

- *before*: with the analogy factors the catalog had before any calibration
  (``planner.calibration.UNCALIBRATED_DEFAULTS``);
- *after*: with the factors the shipped catalog prices plans with
  (``planner.fidelity.shipped_factors``: what ``docs/calibration.md`` calls "after");
  with ``--free-fit``, with factors fitted per GPU on the ``fit`` split only instead
  (``planner.fidelity.fit_per_gpu``, the unconstrained fit that
  ``make calibrate-defaults`` adopts only where it passes its rule, since it overfits);

with the signed error ``predicted / measured - 1``; then the median absolute and
median signed error per GPU, model and dtype and overall, separately for the fit
and held-out splits, and each GPU's throughput per GPU relative to H100 SXM on the
same model and shape, predicted and measured (``planner.fidelity``, the functions
``docs/calibration.md`` is written with); every catalog GPU's predicted best throughput
per GPU on one workload (MLPerf's Llama-2-70B shape) relative to H100 SXM, with what its
factors rest on (``planner.gpu_ranking``: predictions only, for the GPUs no measured
ratio covers); and how often the values fall inside the uncertainty bands the catalog's
spreads give (``planner.band_coverage``).

Run: ``.venv/bin/python bench/fidelity.py [--summary] [--free-fit]`` (under a minute
on 2 cores; ``--free-fit`` a few minutes).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog.loader import load_catalog
from planner import band_coverage as bc
from planner import calibration as cb
from planner import fidelity as fd
from planner import gpu_ranking as gr
from planner.report.text import render_table

SHORT = {"output_tok_s": "tok/s", "ttft_ms": "TTFT", "tpot_ms": "TPOT", "layer_ms": "layer"}


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def point_table(rows: list[fd.Row]) -> list[list[str]]:
    """Header and one row per measured value: its point, measured, predicted before and
    after, signed errors."""
    head = [
        "id",
        "gpu",
        "model",
        "tp",
        "dtype",
        "engine",
        "shape",
        "split",
        "qty",
        "measured",
        "before",
        "after",
        "err before",
        "err after",
    ]
    body = [
        [
            r.id,
            r.gpu,
            r.model,
            str(r.tp),
            r.dtype,
            r.engine,
            r.shape,
            r.split,
            SHORT[r.quantity],
            _fmt(r.measured),
            _fmt(r.before),
            _fmt(r.after),
            fd.pct(r.signed_before, True),
            fd.pct(r.signed_after, True),
        ]
        for r in sorted(rows, key=lambda r: (r.gpu, r.model, r.dtype, r.shape, r.id, r.quantity))
    ]
    return [head, *body]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summary", action="store_true", help="print the summary tables only")
    ap.add_argument(
        "--free-fit",
        action="store_true",
        help="'after' = factors fitted per GPU on the fit split, not the shipped catalog's",
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    catalog = load_catalog()
    all_points = cb.load_reference_measurements(catalog, include_skipped=True)
    points = [m for m in all_points if m.usable]
    if args.free_fit:
        fits = fd.fit_per_gpu(points, catalog)
        after: dict[str, tuple[float, ...]] = {g: r.fit.factors for g, r in fits.items()}
        what = "factors fitted per GPU on the fit split (--free-fit; not what plans use)"
    else:
        after = dict(fd.shipped_factors(catalog))
        what = "the shipped catalog's factors (what plans are priced with)"
    rows = fd.evaluate(points, catalog, after)
    print(f"before: the analogy factors (uncalibrated); after: {what}")
    print()

    def show(table: list[list[str]]) -> None:
        print(render_table(table[0], table[1:]))
        print()

    if not args.summary:
        show(point_table(rows))
    if args.free_fit:
        print("fitted factors per GPU on the fit split (MFU / MBU / step overhead ms):")
        for gpu, r in fits.items():
            f = r.fit
            held = [p for p in cb.PARAMS if not f.determined[p]]
            note = f" ({', '.join(held)} held at the analogy value)" if held else ""
            print(
                f"  {gpu}: {f.prefill_mfu:g} / {f.decode_mbu:g} / {f.step_overhead_ms:g}"
                f"{note}, {f.points} fit points"
            )
    else:
        print("shipped factors per GPU (MFU / MBU / step overhead ms):")
        for gpu, (mfu, mbu, ovh) in after.items():
            print(f"  {gpu}: {mfu:.4g} / {mbu:.4g} / {ovh:g}")
    print()
    print("error by GPU, model and dtype (median |predicted/measured - 1|, median signed):")
    show(fd.summary_table(fd.summarize(rows, fd.by_gpu_model_dtype), ["gpu", "model", "dtype"]))
    print("error by GPU and dtype:")
    show(fd.summary_table(fd.summarize(rows, fd.by_gpu_dtype), ["gpu", "dtype"]))
    print("error by GPU and publisher (the source's host or GitHub repository):")
    show(fd.summary_table(fd.summarize(rows, fd.by_gpu_publisher), ["gpu", "publisher"]))
    print("overall:")
    show(fd.summary_table(fd.summarize(rows, fd.overall), ["values of"]))
    print("by engine and measured value:")
    show(fd.summary_table(fd.summarize(rows, fd.by_engine_quantity), ["engine", "value"]))
    print("output tokens/s by shape (decode-heavy: output >= 4x prompt) and engine:")
    show(fd.summary_table(fd.throughput_by_shape(rows), ["shape", "engine"]))
    print(f"output tokens/s per GPU relative to {fd.REFERENCE_GPU} (same model and shape):")
    ratios = fd.cross_vendor_ratios(rows)
    if ratios:
        show(fd.ratio_table(ratios))
    else:
        print("  (no shared model and shape)\n")
    print(
        f"predicted for every catalog GPU ({gr.RANKING_MODEL}, {gr.RANKING_PROMPT_TOKENS}/"
        f"{gr.RANKING_OUTPUT_TOKENS} tokens, every prompt queued, best tp and dtype; "
        "planner.gpu_ranking, shipped factors):"
    )
    show(gr.ranking_table(gr.gpu_ranking(catalog)))
    if not args.free_fit:
        sigma = bc.catalog_sigma(catalog)
        print(
            "uncertainty bands against the measurements (planner.band_coverage): the share of"
            " values whose capacity is at least the derated one at the confidences 0.8 and 0.9"
            " (with the spread of the errors' low side), and inside the 90% band (the claims:"
            " 80%, 90% and 90%); by the spread's kind"
            " (measured, or the analogy prior) and value:"
        )
        by_kind, per_gpu = bc.coverage_tables(rows, sigma, bc.catalog_derate_sigma(catalog))
        show(by_kind)
        print("per GPU with a measured spread, every value:")
        show(per_gpu)
    no_data = fd.gpus_without_data(catalog, all_points)
    print(f"GPUs by analogy (no priceable measurement): {', '.join(no_data) or 'none'}")
    n_rec = len(all_points) - len(points)
    print(
        f"({len(points)} priceable points: {len(cb.fit_points(points))} fit, "
        f"{len(cb.holdout_points(points))} held out; {n_rec} recorded only; "
        f"{len(rows)} values; {time.perf_counter() - t0:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
