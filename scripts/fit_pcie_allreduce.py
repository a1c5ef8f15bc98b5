"""Fit the all-reduce over PCIe of each GPU's servers to its own tensor-parallel runs.

A GPU without NVLink (L40S), or one whose NVLink joins only pairs (H100 NVL), runs
tensor parallelism past its scale-up domain over PCIe. ``planner.collectives`` prices
that with NCCL figures measured on one 8 x L40S server whose tp 8 ring crossed its CPU
sockets without peer-to-peer, halved again at tp 8 to be safe
(``PCIE_ALLREDUCE_MEASURED``: 9.78 GB/s). The servers that published runs at tp 8 did
better: NVIDIA's DLI course ran Llama-2-70B FP8 at tp 8 on L40S and H100 NVL at 1.2-1.5x
and 1.5-2.4x what that figure predicts.

For each such GPU, :func:`fit_tp8_bus_gb_per_s` finds the tp 8 bus bandwidth (GB/s) at
which the model's median measured / predicted output tokens/s over the GPU's saturated
tp 8 runs over PCIe (fit split of catalog/measurements/reference.json) is 1, with the
catalog's factors for everything else (Brent's method in log bandwidth between 1 GB/s
and the link's own bandwidth). ``--write`` stores it in the GPU's ``server.pcie_allreduce``
(catalog/data/gpus/<gpu>.yaml); the held-out runs are the check.

Run: ``.venv/bin/python scripts/fit_pcie_allreduce.py [--write]``.
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

from catalog.loader import DATA_DIR
from catalog.schema import Catalog, LinkKind, PcieAllReduce
from planner import calibration as cb
from planner.levels import saturated_throughput
from planner.roofline import tp_link_id

#: The tensor-parallel size whose bus bandwidth is fitted (the largest ring of an
#: 8-GPU PCIe server; smaller rings keep their measured figure, never below this one).
FIT_TP = 8
#: Bounds of the fit (GB/s): below 1 no NCCL ring over PCIe has been reported; above,
#: the link's own per-direction bandwidth.
MIN_BUS_GB_PER_S = 1.0


def tp8_runs(points: Sequence[cb.Measurement], catalog: Catalog, gpu: str) -> list[cb.Measurement]:
    """``gpu``'s usable, saturated (:func:`planner.levels.saturated_throughput`) fit-split
    runs at tp :data:`FIT_TP` whose collectives cross PCIe."""
    g = catalog.gpus[gpu]
    link = tp_link_id(g, FIT_TP)
    if link is None or catalog.links[link].kind != LinkKind.PCIE:
        return []
    return [
        m
        for m in points
        if m.gpu == gpu
        and m.usable
        and m.tp == FIT_TP
        and (m.split or cb.Split.FIT) == cb.Split.FIT
        and saturated_throughput(m)
        and not m.disaggregated
    ]


def with_bus(catalog: Catalog, gpu: str, bus_gb_per_s: float | None, points: int = 1) -> Catalog:
    """``catalog`` with ``gpu``'s servers' tp 8 PCIe bus bandwidth set (None: unset)."""
    g = catalog.gpus[gpu]
    fit = (
        None
        if bus_gb_per_s is None
        else PcieAllReduce(tp8_bus_gb_per_s=bus_gb_per_s, points=points, source="trial of the fit")
    )
    return with_gpu(catalog, gpu, server=g.server.model_copy(update={"pcie_allreduce": fit}))


def throughput_ratio(runs: Sequence[cb.Measurement], catalog: Catalog) -> float:
    """Median measured / predicted output tokens/s of ``runs`` on ``catalog``
    (dimensionless; a run the model cannot price counts as 3x under-predicted)."""
    ratios = []
    for m in runs:
        assert m.output_tok_s is not None
        p = cb.predict(m, catalog).output_tok_s
        ratios.append(3.0 if not p else m.output_tok_s / p)
    return median(ratios)


def fit_tp8_bus_gb_per_s(
    points: Sequence[cb.Measurement], catalog: Catalog, gpu: str
) -> tuple[float, int] | None:
    """(bus bandwidth GB/s, runs) at which :func:`throughput_ratio` of ``gpu``'s
    :func:`tp8_runs` is 1; None without such runs. A bound of
    [:data:`MIN_BUS_GB_PER_S`, the link's bandwidth] when the ratio does not cross 1
    inside it."""
    from scipy.optimize import brentq

    runs = tp8_runs(points, catalog, gpu)
    if not runs:
        return None
    link_id = tp_link_id(catalog.gpus[gpu], FIT_TP)
    assert link_id is not None
    top = catalog.links[link_id].bandwidth_gb_per_s

    def f(log_bus: float) -> float:
        return math.log(throughput_ratio(runs, with_bus(catalog, gpu, math.exp(log_bus))))

    lo, hi = math.log(MIN_BUS_GB_PER_S), math.log(top)
    if f(hi) >= 0:
        return top, len(runs)
    if f(lo) <= 0:
        return MIN_BUS_GB_PER_S, len(runs)
    return math.exp(brentq(f, lo, hi, xtol=1e-4)), len(runs)


def source_text(catalog: Catalog, points: Sequence[cb.Measurement], gpu: str, n: int) -> str:
    """The ``source`` written with a fit: the runs and where they come from."""
    runs = tp8_runs(points, catalog, gpu)
    roots = sorted({(m.source or "").split(" ")[0] for m in runs})
    return (
        f"Fitted by scripts/fit_pcie_allreduce.py to this GPU's {n} saturated tp {FIT_TP} "
        f"run{'s' if n != 1 else ''} over PCIe in catalog/measurements/reference.json "
        "(fit split; median measured "
        f"/ predicted 1 with the catalog's factors): {', '.join(m.label for m in runs)} "
        f"({'; '.join(roots)})."
    )


def write_fit(gpu: str, bus: float, n: int, source: str) -> None:
    """Write ``server.pcie_allreduce`` of ``gpu``'s YAML (replacing an earlier one)."""
    path = DATA_DIR / "gpus" / f"{gpu}.yaml"
    text = path.read_text(encoding="utf-8")
    m = re.search(r"^server:\n((?:[ ].*\n)*)", text, flags=re.M)
    if m is None:
        raise SystemExit(f"{path}: no server block")
    block = re.sub(r"^  pcie_allreduce:\n(?:    .*\n)+", "", m.group(0), flags=re.M)
    lines = folded(source.split(), indent=6)
    new = (
        block
        + "  pcie_allreduce:\n"
        + f"    tp8_bus_gb_per_s: {bus:.3g}\n"
        + f"    points: {n}\n"
        + "    source: >-\n"
        + "\n".join(lines)
        + "\n"
    )
    path.write_text(text.replace(m.group(0), new), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    args, catalog, points = fit_script_inputs(argv, __doc__)
    for gpu in sorted(catalog.gpus):
        base = with_bus(catalog, gpu, None)
        fit = fit_tp8_bus_gb_per_s(points, base, gpu)
        if fit is None:
            continue
        bus, n = fit
        shipped = catalog.gpus[gpu].server.pcie_allreduce
        print(
            f"{gpu}: tp {FIT_TP} bus {bus:.3g} GB/s on {n} run(s) "
            f"(shipped: {shipped.tp8_bus_gb_per_s if shipped else 'none'})"
        )
        if args.write:
            write_fit(gpu, bus, n, source_text(catalog, points, gpu, n))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
