"""Fit each GPU's per-sequence decode cost to the batch sweeps it was measured in.

A decode step of ``B`` sequences costs the weight GEMMs, the sequences' KV reads, the
all-reduces and a fixed overhead (``planner.kernels``). Where a kernel benchmark
measured the decode attention kernel (aiconfigurator's database: every NVIDIA GPU but
A100 and L40S) it also pays a few ns per (sequence, KV head) per layer. AMD's own vLLM
latency tables for 8 x MI300X (Llama-3.1-70B and 405B, FP8, batch 1-128) grow far
faster with the batch than all of that: from batch 1 to 128 a 70B step goes 8.4 ->
22.7 ms where the model, at the same factors, goes 6.6 -> 12.4 ms, and that growth
does not depend on the context (2,048-token prompts add what their KV reads cost).

For each GPU that no kernel benchmark measures decode attention on (``decode_attention``
unset in its catalog entry) and that has batch sweeps (:func:`batch_sweeps`: runs of
one model, shape, engine and source at three or more batch sizes, all prompts at once),
:func:`fit_us_per_layer` finds the cost per sequence per layer (us,
``decode_sequence_cost.us_per_layer``, :func:`planner.kernels.decode_sequence_ms`) at
which each sweep's measured / predicted throughput is, in the median over its batches,
what it is at the sweep's smallest batch: the slope with the batch, not the level (the
level stays with ``make calibrate-defaults``, which runs before this script and
should run again after a changed fit). Brent's method between 0 and
:data:`MAX_US_PER_LAYER`, fit split only; the held-out runs are the check. ``--write``
stores it in the GPU's YAML, and in the YAML of every GPU named in :data:`SIBLINGS`
(same silicon generation and software stack, no sweep of its own), marked as taken
from the sibling.

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
#: Batch sizes a sweep needs (runs of the same configuration at different batches).
MIN_SWEEP_BATCHES = 3
#: GPUs that take another's fit: same compute die and serving software, no sweep of
#: their own (MI325X: MI300X's CDNA 3 die with more HBM, the same ROCm vLLM builds).
SIBLINGS: dict[str, str] = {"mi325x": "mi300x"}

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


def with_cost(catalog: Catalog, gpu: str, us_per_layer: float | None, points: int = 1) -> Catalog:
    """``catalog`` with ``gpu``'s decode sequence cost set (None: unset)."""
    cost = (
        None
        if us_per_layer is None
        else DecodeSequenceCost(us_per_layer=us_per_layer, points=points, source="trial of the fit")
    )
    return with_gpu(catalog, gpu, decode_sequence_cost=cost)


def slope_log_ratio(sweeps: Sequence[Sequence[cb.Measurement]], catalog: Catalog) -> float:
    """Median over the sweeps' runs above each sweep's smallest batch of
    ``ln((measured / predicted) / (measured / predicted at the smallest batch))``: 0
    when the model's throughput grows with the batch as measured, negative when it
    grows faster (a run the model cannot price counts as 3x over-predicted)."""
    logs = []
    for runs in sweeps:
        ratios = []
        for m in runs:
            assert m.output_tok_s is not None
            p = cb.predict(m, catalog).output_tok_s
            ratios.append(m.output_tok_s / p if p else 1.0 / 3.0)
        logs += [math.log(r / ratios[0]) for r in ratios[1:]]
    return median(logs)


def fit_us_per_layer(
    points: Sequence[cb.Measurement], catalog: Catalog, gpu: str
) -> tuple[float, int] | None:
    """(us per sequence per layer, runs) at which :func:`slope_log_ratio` of ``gpu``'s
    :func:`batch_sweeps` is 0; None without sweeps or with a measured decode attention
    kernel. The bound 0 (or :data:`MAX_US_PER_LAYER`) when the slope does not cross 0
    inside them."""
    from scipy.optimize import brentq

    if catalog.gpus[gpu].decode_attention is not None:
        return None
    sweeps = batch_sweeps(points, catalog, gpu)
    if not sweeps:
        return None
    n = sum(len(s) for s in sweeps)

    def f(us: float) -> float:
        return slope_log_ratio(sweeps, with_cost(catalog, gpu, us))

    if f(0.0) >= 0:
        return 0.0, n
    if f(MAX_US_PER_LAYER) <= 0:
        return MAX_US_PER_LAYER, n
    return brentq(f, 0.0, MAX_US_PER_LAYER, xtol=1e-4), n


def source_text(points: Sequence[cb.Measurement], catalog: Catalog, gpu: str, n: int) -> str:
    """The ``source`` written with a fit: the sweeps and where they come from."""
    sweeps = batch_sweeps(points, catalog, gpu)
    roots = sorted({(s[0].source or "").split(" ")[0] for s in sweeps})
    return (
        f"Fitted by scripts/fit_decode_sequence_cost.py to this GPU's {len(sweeps)} batch "
        f"sweeps ({n} runs, fit split of catalog/measurements/reference.json): the cost at "
        "which each sweep's measured / predicted throughput stays, in the median over its "
        f"batches, what it is at its smallest batch ({'; '.join(roots)})."
    )


def write_cost(gpu: str, us: float, n: int, source: str) -> None:
    """Write ``decode_sequence_cost`` of ``gpu``'s YAML (replacing an earlier one),
    before its ``sources:`` block."""
    path = DATA_DIR / "gpus" / f"{gpu}.yaml"
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^decode_sequence_cost:\n(?:[ ].*\n)+", "", text, flags=re.M)
    block = (
        "decode_sequence_cost:\n"
        + f"  us_per_layer: {us:.3f}\n"
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
    fits: dict[str, tuple[float, int]] = {}
    for gpu in sorted(catalog.gpus):
        base = with_cost(catalog, gpu, None)
        fit = fit_us_per_layer(points, base, gpu)
        if fit is None:
            continue
        fits[gpu] = fit
        us, n = fit
        held = batch_sweeps(points, base, gpu, cb.Split.HOLDOUT)
        check = ""
        if held:
            before = slope_log_ratio(held, base)
            after = slope_log_ratio(held, with_cost(catalog, gpu, us))
            check = f"; held-out slope ln ratio {before:+.3f} -> {after:+.3f}"
        shipped = catalog.gpus[gpu].decode_sequence_cost
        print(
            f"{gpu}: {us:.3f} us per sequence per layer on {n} run(s)"
            f" (shipped: {shipped.us_per_layer if shipped else 'none'}){check}"
        )
        if args.write:
            write_cost(gpu, us, n, source_text(points, base, gpu, n))
    for sibling, of in sorted(SIBLINGS.items()):
        if of in fits and sibling not in fits:
            us, _ = fits[of]
            print(f"{sibling}: {us:.3f} us per sequence per layer, taken from {of}")
            if args.write:
                write_cost(
                    sibling,
                    us,
                    0,
                    f"Not measured on this GPU: {of}'s fit (scripts/fit_decode_sequence_cost.py), "
                    "the same compute die and serving software.",
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
