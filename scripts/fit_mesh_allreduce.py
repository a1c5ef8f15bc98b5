"""Fit a switchless scale-up link's all-reduce to measured timings (MI300X's xGMI mesh).

``catalog/measurements/sources/mi300x-allreduce.json`` holds public all-reduce timings on
one 8 x MI300X node at 2, 4 and 8 GPUs (vLLM's custom all-reduce, QuickReduce, RCCL in
graph mode; each run with its source). From them:

* ``latency_us``: per GPU count, the fastest time measured at 64 KiB or less (the
  one-shot's fixed cost), the median over GPU counts (7.18 us: 7.07 at tp 2, 7.18 at
  tp 4, 7.64 at tp 8);
* ``allreduce.slowdown_by_gpus``: at each power-of-two size from 1 to 64 MiB, per GPU
  count the fastest measured time over the alpha-beta time of
  :func:`planner.collectives.allreduce_ms` (that latency, the group's mesh bandwidth
  :func:`planner.collectives.group_bandwidth_gb_per_s`, no slowdown): 1.2-1.3 at tp 2,
  1.5-1.8 at tp 8 from 4 MiB; ``allreduce.slowdown_by_mib`` the median over GPU counts.

Run: ``.venv/bin/python scripts/fit_mesh_allreduce.py`` prints both for the catalog link
``infinity-fabric-mi300``; ``tests/test_mesh_allreduce.py`` checks the catalog against it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aiconfigurator_rates import alpha_beta_ms  # noqa: E402

from catalog.loader import load_catalog  # noqa: E402
from catalog.schema import Link  # noqa: E402
from planner.collectives import group_bandwidth_gb_per_s  # noqa: E402

SOURCE = ROOT / "catalog/measurements/sources/mi300x-allreduce.json"
LINK = "infinity-fabric-mi300"
#: Messages up to this size (bytes) set the latency: a one-shot's fixed cost.
LATENCY_MAX_BYTES = 64 * 1024
MIB_POINTS = (1, 2, 4, 8, 16, 32, 64)


def fastest_by_gpus(runs: list[dict]) -> dict[int, dict[int, float]]:
    """Per GPU count, per message size (bytes), the fastest time measured (us) over the
    runs of that GPU count (the kernel an engine would pick)."""
    out: dict[int, dict[int, float]] = {}
    for run in runs:
        best = out.setdefault(int(run["gpus"]), {})
        for size, t in run["time_us"].items():
            b = int(size)
            best[b] = min(best.get(b, float("inf")), float(t))
    return out


def fitted_latency_us(best: dict[int, dict[int, float]]) -> float:
    """The median over GPU counts of the fastest time at or below
    :data:`LATENCY_MAX_BYTES` (us)."""
    return median(
        min(t for b, t in times.items() if b <= LATENCY_MAX_BYTES) for times in best.values()
    )


def slowdown_by_gpus(link: Link, best: dict[int, dict[int, float]]) -> dict[int, dict[int, float]]:
    """Per GPU count, per MiB in :data:`MIB_POINTS` it measured, the fastest measured time
    over the alpha-beta time on ``link`` (its latency and the group's mesh bandwidth, no
    slowdown), rounded to 3 decimals."""
    out: dict[int, dict[int, float]] = {}
    for gpus, times in sorted(best.items()):
        curve = {
            mib: round(times[mib * 2**20] / alpha_beta_us(link, gpus, mib * 2**20), 3)
            for mib in MIB_POINTS
            if mib * 2**20 in times
        }
        if curve:
            out[gpus] = curve
    return out


def median_curve(by_gpus: dict[int, dict[int, float]]) -> dict[int, float]:
    """Per MiB, the median over the GPU counts that measured it (``slowdown_by_mib``, for
    a caller that does not say the group's size)."""
    sizes = sorted({m for c in by_gpus.values() for m in c})
    return {m: round(median(c[m] for c in by_gpus.values() if m in c), 3) for m in sizes}


def alpha_beta_us(link: Link, gpus: int, message_bytes: float) -> float:
    """The alpha-beta all-reduce time (us) over ``gpus`` GPUs of ``link`` without any
    measured slowdown: ``aiconfigurator_rates.alpha_beta_ms`` (the least of ring, one-shot
    and two-shot, as planner.collectives.allreduce_ms prices them) at the link's latency
    and the group's mesh bandwidth (planner.collectives.group_bandwidth_gb_per_s)."""
    bandwidth = group_bandwidth_gb_per_s(link, gpus)
    return alpha_beta_ms(link.latency_us, bandwidth, gpus, message_bytes) * 1e3


def fit(link: Link, doc: dict) -> tuple[float, dict[int, float], dict[int, dict[int, float]]]:
    """(latency us, slowdown_by_mib, slowdown_by_gpus) of ``link`` fitted to the runs of
    ``doc``."""
    best = fastest_by_gpus(doc["runs"])
    latency = fitted_latency_us(best)
    at_latency = link.model_copy(update={"latency_us": latency})
    by_gpus = slowdown_by_gpus(at_latency, best)
    return latency, median_curve(by_gpus), by_gpus


def _flow(curve: dict[int, float]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in curve.items()) + "}"


def main() -> int:
    catalog = load_catalog()
    link = catalog.links[LINK]
    latency, curve, by_gpus = fit(link, json.loads(SOURCE.read_text()))
    print(f"{LINK}: latency_us {latency:g}")
    print(f"  slowdown_by_mib: {_flow(curve)}")
    print("  slowdown_by_gpus:")
    for gpus, c in by_gpus.items():
        print(f"    {gpus}: {_flow(c)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
