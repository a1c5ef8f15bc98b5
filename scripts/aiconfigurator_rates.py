"""Rates read from aiconfigurator's per-operation database by
``scripts/extract_aiconfigurator.py`` (split out to keep that script small):

* :func:`gemm_peak_share`: the share of its dense peak a dense GEMM reaches at
  :data:`SHARE_TOKENS` tokens (the token count the cost model's GEMM gain curve starts
  from), per dtype, the median over LLM-layer weight shapes;
* :func:`allreduce_slowdown`: per message size from 1 MB to 1 GB, the measured time over
  the alpha-beta time of the link at its nominal bandwidth (the cost model's
  ``planner.collectives.allreduce_ms`` before the curve), the median over engines and GPU
  counts (:func:`allreduce_slowdown_by_gpus`: per GPU count, for comparison);
* :func:`weight_stream_share`: the share of peak HBM bandwidth at which a decode step's
  GEMMs stream their weights (a few tokens, weights larger than any L2 cache).

All take plain row dicts (the parquet rows), so they are tested without pyarrow.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

#: Token count at which a GEMM's share of peak is read (the base of the gain curve,
#: ``GAIN_BASE_TOKENS`` in the extract script).
SHARE_TOKENS = 512
#: Weight dimensions (N and K) of the GEMMs read: LLM layer shards.
SHARE_SHAPES = (4096, 16384)
#: Token counts (m) of the memory-bound GEMMs read by :func:`weight_stream_share`: a
#: decode step's few tokens per GEMM.
STREAM_TOKENS = (8, 16, 32)
#: Least weight bytes of the GEMMs read by :func:`weight_stream_share`: past every L2
#: cache (L40S 96 MB, B200 126 MB), which the database's repeated runs of one GEMM would
#: otherwise read from (L40S's 4,096 x 4,096 BF16 GEMM at one token reads 1.04x its HBM
#: peak), as a decode step does not (every layer's weights between two reads of one).
STREAM_MIN_BYTES = 256e6
#: Message sizes (MiB) at which the all-reduce's slowdown is read: 1 MiB to 1 GiB.
SLOWDOWN_MIB = tuple(2**k for k in range(11))


def gemm_peak_share(
    rows: Iterable[dict[str, Any]], bf16_peak_tflops: float, fp4_peak_tflops: float | None = None
) -> dict[str, float]:
    """Per dtype (``bf16``, ``fp8``, ``fp4``): ``2 m N K / t / peak`` at ``m =``
    :data:`SHARE_TOKENS` (dimensionless), the median over weight shapes with N and K in
    :data:`SHARE_SHAPES`; the FP8 peak is twice ``bf16_peak_tflops``, the FP4 peak (the
    database's ``nvfp4`` GEMMs, per-16-value FP8 block scales, W4A4) ``fp4_peak_tflops``
    (the catalog's ``fp4_dense_tflops``: Blackwell Ultra's is more than four times its
    BF16 peak), four times the BF16 peak when not given. Rows of one shape are averaged
    (the median latency, ms); a dtype with no such shape is left out."""
    lo, hi = SHARE_SHAPES
    peaks = {
        "bfloat16": ("bf16", bf16_peak_tflops),
        "fp8": ("fp8", 2.0 * bf16_peak_tflops),
        "nvfp4": ("fp4", fp4_peak_tflops or 4.0 * bf16_peak_tflops),
    }
    lat: dict[str, dict[tuple[int, int], list[float]]] = {}
    for r in rows:
        dt = str(r.get("gemm_dtype"))
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        if dt in peaks and m == SHARE_TOKENS and lo <= n <= hi and lo <= k <= hi:
            lat.setdefault(dt, {}).setdefault((n, k), []).append(float(r["latency"]))
    out = {}
    for dt, shapes in lat.items():
        name, peak = peaks[dt]
        shares = [
            2.0 * SHARE_TOKENS * n * k / (statistics.median(t) * 1e-3) / (peak * 1e12)
            for (n, k), t in shapes.items()
        ]
        out[name] = round(statistics.median(shares), 3)
    return out


def weight_stream_share(rows: Iterable[dict[str, Any]], peak_tb_per_s: float) -> float | None:
    """The share of ``peak_tb_per_s`` (peak HBM bandwidth, TB/s) at which BF16 GEMMs of
    :data:`STREAM_TOKENS` tokens stream their weights (dimensionless): ``2 N K / t /
    peak`` (``t`` the latency, ms), the median over rows whose weights ``2 N K`` bytes are
    at least :data:`STREAM_MIN_BYTES`. What a decode step's weight read reaches on this
    GPU's memory system and this engine's GEMM kernels (H100: 0.83 in TensorRT-LLM;
    L40S: 0.80). None without such rows."""
    shares = [
        2.0 * int(r["n"]) * int(r["k"]) / (float(r["latency"]) * 1e-3) / (peak_tb_per_s * 1e12)
        for r in rows
        if str(r.get("gemm_dtype")) == "bfloat16"
        and int(r["m"]) in STREAM_TOKENS
        and 2.0 * int(r["n"]) * int(r["k"]) >= STREAM_MIN_BYTES
    ]
    return round(statistics.median(shares), 3) if shares else None


def alpha_beta_ms(latency_us: float, link_gb_per_s: float, tp: int, nbytes: float) -> float:
    """The cost model's all-reduce on a scale-up link at its nominal bandwidth (ms): the
    least of ring ``2 (tp-1) a + 2 (tp-1)/tp M b``, one-shot ``a + (tp-1) M b`` and
    two-shot ``2 a + 2 (tp-1)/tp M b`` (``planner.collectives.allreduce_ms`` with a
    slowdown of 1; checked equal in tests/test_gemm_peak_share.py)."""
    a, b = latency_us * 1e-3, 1e3 / (link_gb_per_s * 1e9)
    ring = 2 * (tp - 1) * a + 2.0 * (tp - 1) / tp * nbytes * b
    return min(ring, a + (tp - 1) * nbytes * b, 2 * a + 2.0 * (tp - 1) / tp * nbytes * b)


def allreduce_ratios(
    rows: Iterable[dict[str, Any]], latency_us: float, link_gb_per_s: float
) -> list[tuple[int, int, float]]:
    """``(GPU count, MiB, measured over alpha-beta)`` for each bf16 all-reduce in a CUDA
    graph over 2 or more GPUs at a message size of :data:`SLOWDOWN_MIB` (the latency, ms,
    over :func:`alpha_beta_ms` at the link's nominal latency and bandwidth); eager runs,
    other dtypes and other sizes are skipped."""
    out = []
    for r in rows:
        if r.get("allreduce_dtype") != "bfloat16":
            continue
        if str(r.get("backend") or "graph").endswith("_eager"):
            continue
        tp, nbytes, ms = int(r["num_gpus"]), 2 * int(r["message_size"]), float(r["latency"])
        mib = nbytes / 2**20
        if tp >= 2 and mib in SLOWDOWN_MIB:
            out.append((tp, int(mib), ms / alpha_beta_ms(latency_us, link_gb_per_s, tp, nbytes)))
    return out


def allreduce_slowdown(
    rows: Iterable[dict[str, Any]], latency_us: float, link_gb_per_s: float
) -> dict[int, float]:
    """Per message size of :data:`SLOWDOWN_MIB` (MiB): the median over bf16 all-reduces in
    a CUDA graph over 2-8 GPUs (every engine's rows passed) of the measured latency over
    :func:`alpha_beta_ms` (dimensionless, :func:`allreduce_ratios`); sizes without rows
    are left out."""
    ratios: dict[int, list[float]] = {}
    for _, mib, ratio in allreduce_ratios(rows, latency_us, link_gb_per_s):
        ratios.setdefault(mib, []).append(ratio)
    return {m: round(statistics.median(v), 3) for m, v in sorted(ratios.items())}


def allreduce_slowdown_by_gpus(
    rows: Iterable[dict[str, Any]], latency_us: float, link_gb_per_s: float
) -> dict[int, dict[int, float]]:
    """Per GPU count, then per message size (MiB): the median over engines (and the
    link's GPUs) of the measured latency over :func:`alpha_beta_ms` (dimensionless), the
    curve :func:`allreduce_slowdown` takes the median of over GPU counts (NVLink 4 at 64
    MiB: 1.65 at tp 2, 1.20 at tp 8, against the median's 1.41). Written to the extracted
    file for comparison, not priced: taken per count, the serving runs' median error grew
    (docs/design.md, "Per-count NVLink all-reduce curves, measured and not adopted")."""
    ratios: dict[int, dict[int, list[float]]] = {}
    for tp, mib, ratio in allreduce_ratios(rows, latency_us, link_gb_per_s):
        ratios.setdefault(tp, {}).setdefault(mib, []).append(ratio)
    return {
        tp: {m: round(statistics.median(v), 3) for m, v in sorted(by.items())}
        for tp, by in sorted(ratios.items())
    }
