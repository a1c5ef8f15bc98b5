"""Fit each GPU's per-sequence decode cost and layer floor to its batch sweeps.

A decode step of ``B`` sequences costs the weight GEMMs, the sequences' KV reads, the
all-reduces and a fixed overhead (``planner.kernels``). Where a kernel benchmark
measured the decode attention kernel (aiconfigurator's database: every NVIDIA GPU but
A100 and L40S) it also pays a few ns per (sequence, KV head) per layer. AMD's own vLLM
latency tables for 8 x MI300X (Llama-3.1-70B and 405B, FP8, batch 1-128) are slower
than all of that, at every batch, and grow faster with it: from batch 1 to 128 a 70B
step goes 8.4 -> 22.7 ms where the model, at the same factors without the fitted costs,
goes 6.6 -> 12.8 ms.
At batch 1 the shortfall is 23 us per layer for the 70B and 40 us for the 405B (80 and
126 layers), far closer than their weight bytes per layer (x3.7): a cost per layer per
step more than a slower weight read.

For each GPU that no kernel benchmark measures decode attention on (``decode_attention``
unset in its catalog entry) and that has batch sweeps (:func:`batch_sweeps`: runs of
one model, shape, engine and source at three or more batch sizes, all prompts at once),
:func:`fit_costs` finds the cost per sequence per layer (us,
``decode_sequence_cost.us_per_layer``, :func:`planner.kernels.decode_sequence_ms`) and
the floor per step per layer (us, ``decode_sequence_cost.step_us_per_layer``,
:func:`planner.kernels.step_layer_floor_ms`) of least squares in
``ln(measured / predicted)`` over the sweeps' runs, fit split only; the held-out runs
are the check. Both apply to models without MLA; the per-sequence cost at tp >= 2
only (AMD's tp 1 MLPerf runs show none), the floor at every tp (too small at tp 1's
compute-bound MLPerf steps to tell; conservative). The GPU's level (``make
calibrate-defaults``, which runs before this script) sets its factors first; MI300X's
is capped, so the floor takes what the tp 8 sweeps measure below it. The sweeps'
largest batch is recorded too (``max_batch``): past it the cost is extrapolated.
``--write`` stores them in the GPU's YAML, and in the YAML of every GPU named in
:data:`SIBLINGS` (same silicon generation and software stack, no sweep of its own),
marked as taken from the sibling.

Run: ``.venv/bin/python scripts/fit_decode_sequence_cost.py [--write]``.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_levels import fit_script_inputs, folded, with_gpu

from catalog.kernel_floors import DecodeSequenceCost
from catalog.loader import DATA_DIR
from catalog.schema import Catalog
from planner import calibration as cb

#: Upper bound of the fit (us per sequence per layer): 100x what the NVIDIA decode
#: attention kernels pay per (sequence, KV head) at the slowest.
MAX_US_PER_LAYER = 5.0
#: Upper bound of the layer floor's fit (us per step per layer): ten times MI300X's
#: 40 us at batch 1 of AMD's 405B sweeps.
MAX_STEP_US_PER_LAYER = 400.0
#: Batch sizes a sweep needs (runs of the same configuration at different batches).
MIN_SWEEP_BATCHES = 3
#: GPUs that take another's fit, no sweep of their own, with why: MI325X is MI300X's
#: CDNA 3 die with more HBM and the same ROCm vLLM builds; MI355X (CDNA 4) runs the
#: same ROCm serving software on a new die, and takes MI300X's costs as an assumption
#: (its runs are all DeepSeek, whose MLA floor prices the step instead): a cost that
#: makes it slower, never faster, than a GPU measured without it.
SIBLINGS: dict[str, tuple[str, str]] = {
    "mi325x": ("mi300x", "the same compute die and serving software."),
    "mi355x": (
        "mi300x",
        "the same ROCm serving software on a new die (CDNA 4), assumed: no dense-model "
        "batch sweep of its own.",
    ),
}

SweepKey = tuple[str, str, int, str, int, int, str, str]


def sweep_key(m: cb.Measurement) -> SweepKey:
    """What the runs of one batch sweep share: model, dtype, tp, engine, shape, source."""
    return (
        m.model,
        m.dtype.value,
        m.tp,
        m.engine or "-",
        m.isl or 0,
        m.osl or 0,
        (m.source or "").split(" ")[0],
        m.gpu,
    )


def batch_sweeps(
    points: Sequence[cb.Measurement], catalog: Catalog, gpu: str, split: cb.Split = cb.Split.FIT
) -> list[list[cb.Measurement]]:
    """``gpu``'s batch sweeps in ``split``: usable runs of a model without MLA, all
    prompts at once (an offline batch of ``num_requests``), grouped by
    :func:`sweep_key`, with at least :data:`MIN_SWEEP_BATCHES` batch sizes; each sorted
    by batch."""
    groups: dict[SweepKey, list[cb.Measurement]] = {}
    for m in points:
        if (
            m.gpu != gpu
            or not m.usable
            or (m.split or cb.Split.FIT) != split
            or m.output_tok_s is None
            or m.disaggregated
            or m.request_rate_rps != math.inf
            or not m.num_requests
            or catalog.models[m.model].mla is not None
        ):
            continue
        groups.setdefault(sweep_key(m), []).append(m)
    return [
        sorted(runs, key=lambda m: m.num_requests or 0)
        for _, runs in sorted(groups.items())
        if len({m.num_requests for m in runs}) >= MIN_SWEEP_BATCHES
    ]


def with_cost(
    catalog: Catalog,
    gpu: str,
    us_per_layer: float | None,
    points: int = 1,
    step_us_per_layer: float = 0.0,
) -> Catalog:
    """``catalog`` with ``gpu``'s decode sequence cost and layer floor set (None: unset)."""
    cost = (
        None
        if us_per_layer is None
        else DecodeSequenceCost(
            us_per_layer=us_per_layer,
            step_us_per_layer=step_us_per_layer,
            points=points,
            source="trial of the fit",
        )
    )
    return with_gpu(catalog, gpu, decode_sequence_cost=cost)


def slope_log_ratio(sweeps: Sequence[Sequence[cb.Measurement]], catalog: Catalog) -> float:
    """Median over the sweeps' runs above each sweep's smallest batch of
    ``ln((measured / predicted) / (measured / predicted at the smallest batch))``: 0
    when the model's throughput grows with the batch as measured, negative when it
    grows faster (a run the model cannot price counts as 3x over-predicted)."""
    logs: list[float] = []
    for runs in sweeps:
        errors = log_errors(runs, catalog)
        logs += [e - errors[0] for e in errors[1:]]
    return median(logs)


def log_errors(runs: Sequence[cb.Measurement], catalog: Catalog) -> list[float]:
    """``ln(measured / predicted)`` of each run's output throughput (a run the model
    cannot price counts as 3x over-predicted)."""
    out = []
    for m in runs:
        assert m.output_tok_s is not None
        p = cb.predict(m, catalog).output_tok_s
        out.append(math.log(m.output_tok_s / p if p else 1.0 / 3.0))
    return out


def fit_costs(
    points: Sequence[cb.Measurement], catalog: Catalog, gpu: str
) -> tuple[float, float, int] | None:
    """(us per sequence per layer, us per step per layer, runs) fitted to ``gpu``'s
    :func:`batch_sweeps` in the fit split; None without sweeps or with a measured decode
    attention kernel. Least squares in ``ln(measured / predicted)`` over every run of
    the sweeps (``scipy.optimize.least_squares``, from 0.5 us and 20 us, within
    ``[0, MAX_US_PER_LAYER]`` and ``[0, MAX_STEP_US_PER_LAYER]``): the layer floor
    carries the sweeps' level at small batches, the per-sequence cost their growth with
    the batch."""
    from scipy.optimize import least_squares

    if catalog.gpus[gpu].decode_attention is not None:
        return None
    runs = [m for sweep in batch_sweeps(points, catalog, gpu) for m in sweep]
    if not runs:
        return None

    def residuals(x: Sequence[float]) -> list[float]:
        us, step_us = (max(0.0, float(v)) for v in x)
        return log_errors(runs, with_cost(catalog, gpu, us, 1, step_us))

    fit = least_squares(
        residuals,
        [0.5, 20.0],
        bounds=([0.0, 0.0], [MAX_US_PER_LAYER, MAX_STEP_US_PER_LAYER]),
        diff_step=1e-3,
    )
    return float(fit.x[0]), float(fit.x[1]), len(runs)


def max_sweep_batch(sweeps: Sequence[Sequence[cb.Measurement]]) -> int:
    """The largest batch (``num_requests``) among the sweeps' runs."""
    return max(m.num_requests or 0 for runs in sweeps for m in runs)


def median_log_ratio(sweeps: Sequence[Sequence[cb.Measurement]], catalog: Catalog) -> float:
    """Median of ``ln(measured / predicted)`` over every run of the sweeps (the check
    on held-out sweeps: 0 when they are priced as measured, in the median)."""
    return median(log_errors([m for runs in sweeps for m in runs], catalog))


def source_text(sweeps: Sequence[Sequence[cb.Measurement]], n: int) -> str:
    """The ``source`` written with a fit: the sweeps and where they come from."""
    roots = sorted({(s[0].source or "").split(" ")[0] for s in sweeps})
    return (
        f"Fitted by scripts/fit_decode_sequence_cost.py to this GPU's {len(sweeps)} batch "
        f"sweeps ({n} runs, fit split of catalog/measurements/reference.json): the "
        "per-sequence cost and layer floor of least squares in ln(measured / predicted) "
        f"throughput over their runs ({'; '.join(roots)})."
    )


def write_cost(
    gpu: str, us: float, step_us: float, n: int, source: str, max_batch: int | None = None
) -> None:
    """Write ``decode_sequence_cost`` of ``gpu``'s YAML (replacing an earlier one),
    before its ``sources:`` block."""
    path = DATA_DIR / "gpus" / f"{gpu}.yaml"
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^decode_sequence_cost:\n(?:[ ].*\n)+", "", text, flags=re.M)
    block = (
        "decode_sequence_cost:\n"
        + f"  us_per_layer: {us:.3f}\n"
        + f"  step_us_per_layer: {step_us:.2f}\n"
        + (f"  max_batch: {max_batch}\n" if max_batch else "")
        + f"  points: {n}\n"
        + "  source: >-\n"
        + "\n".join(folded(source.split(), indent=4))
        + "\n"
    )
    if not re.search(r"^sources:", text, flags=re.M):
        raise SystemExit(f"{path}: no sources block")
    text = re.sub(r"^sources:", lambda _: block + "sources:", text, count=1, flags=re.M)
    path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    args, catalog, points = fit_script_inputs(argv, __doc__)
    fits: dict[str, tuple[float, float, int]] = {}
    largest: dict[str, int] = {}
    for gpu in sorted(catalog.gpus):
        base = with_cost(catalog, gpu, None)
        fit = fit_costs(points, base, gpu)
        if fit is None:
            continue
        fits[gpu] = fit
        us, step_us, n = fit
        sweeps = batch_sweeps(points, base, gpu)
        largest[gpu] = max_sweep_batch(sweeps)
        held = batch_sweeps(points, base, gpu, cb.Split.HOLDOUT)
        check = ""
        if held:
            fitted = with_cost(catalog, gpu, us, 1, step_us)
            check = (
                f"; held out: slope ln ratio {slope_log_ratio(held, base):+.3f} -> "
                f"{slope_log_ratio(held, fitted):+.3f}, median ln(measured / predicted) "
                f"{median_log_ratio(held, base):+.3f} -> {median_log_ratio(held, fitted):+.3f}"
            )
        shipped = catalog.gpus[gpu].decode_sequence_cost
        print(
            f"{gpu}: {us:.3f} us per sequence and {step_us:.2f} us per step, per layer, on "
            f"{n} run(s) (shipped: "
            + (f"{shipped.us_per_layer} / {shipped.step_us_per_layer}" if shipped else "none")
            + f"){check}"
        )
        if args.write:
            write_cost(gpu, us, step_us, n, source_text(sweeps, n), largest[gpu])
    for sibling, (of, why) in sorted(SIBLINGS.items()):
        if of in fits and sibling not in fits:
            us, step_us, _ = fits[of]
            print(f"{sibling}: {us:.3f} / {step_us:.2f} us per layer, taken from {of}")
            if args.write:
                write_cost(
                    sibling,
                    us,
                    step_us,
                    0,
                    f"Not measured on this GPU: {of}'s fit (scripts/fit_decode_sequence_cost.py), "
                    + why,
                    largest[of],
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
