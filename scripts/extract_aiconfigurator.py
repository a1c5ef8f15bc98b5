"""Extract kernel floors from aiconfigurator's per-operation silicon database into
``catalog/measurements/sources/aiconfigurator-kernels.json``.

aiconfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) ships kernel timings
measured on NVIDIA GPUs per serving engine (``aic-core/src/aiconfigurator_core/systems/
data/<system>/<op>/<engine>/<version>/*.parquet``). The cost model reads from it:

* **all-reduce floor** (``custom_allreduce_perf``): the engine's custom all-reduce of a
  small bf16 message (at most :data:`SMALL_MESSAGE_ELEMENTS` elements, a decode step's
  activations) over ``tp`` GPUs: the median latency (us) per GPU, engine and tp, inside
  a CUDA graph (how decode steps run) and, where the database has it, eager (how
  prefill passes run: 20-30 us, launch included).
* **MoE layer floor** (``moe_perf``): a DeepSeek-V3 routed-expert layer (hidden 7,168,
  expert FFN 2,048, 256 experts, top-8, fp8 block-scaled, ``moe_tp_size`` 8, one token):
  its latency minus the time to read the 8 experts' weights at the GPU's peak HBM
  bandwidth, ``floor_us = latency(1 token) - 8 x 3 x 7168 x 2048 / 8 B / peak``: the
  part of the layer no weight read explains (routing, permutes, launches, quantization).
  The same with **few experts** (:func:`few_experts_floor_us`): Mixtral's layer shape
  (hidden 4,096, expert FFN 14,336, 8 experts, top-2), also fp8 block-scaled at
  ``moe_tp_size`` 8 and one token, less its 2 experts' read at peak. The fixed cost
  grows with the experts a GPU holds (TensorRT-LLM's block-scaled layer on H100 at one
  token: 108 us with 256 experts per GPU, 64 with 128, 45 with 64, 35 with 32), so the
  cost model interpolates between the two in the layer's experts
  (``planner.kernel_floors.moe_layer_floor_us``).
* **expert reads against dense reads** (``moe_perf`` and ``gemm_perf`` of the same
  engine): at 4-64 tokens, the share of peak HBM bandwidth at which the DeepSeek-V3
  layer reads the experts its tokens touch (``E (1 - (1 - k/E)^n)`` of them, as the cost
  model counts them; the latency less the floor) over the share a dense fp8 GEMM of
  4,096-16,384 x 4,096-16,384 weights reaches at the same ``m = n`` (the median over such
  shapes): the median of that ratio over the token counts (:func:`expert_read_vs_dense`).
  The cost model's ``expert_read_efficiency`` is this ratio's least value over the
  engines, capped at 1 (the excess is mostly routing skew, fewer experts than the uniform
  count: priced as the model's ``moe.routing``, ``scripts/moe_routing.py``).

* **grouped expert GEMMs' saturated rate** (``moe_perf``): the rate (FLOP/s) a
  routed-expert layer reaches once every expert has enough tokens (``m = n k / E >=
  128``, balanced routing, fp8 block-scaled, no expert parallelism) as a share of the FP8
  dense peak, per **expert width per GPU** ``w = expert FFN / moe_tp_size``: the median
  over every layer shape of that width the database times (DeepSeek-V3, Qwen3, Mixtral,
  gpt-oss... at tp 1-32), at the widths of :data:`GROUPED_WIDTHS`
  (:func:`grouped_gemm_peak_share`). One curve holds across shapes (H200 with SGLang:
  0.11 of the peak at w = 128, 0.17 at 256, 0.33 at 2,048, about a third of a dense
  GEMM's rate at 256 and 60% at 2,048), so the cost model caps a layer's expert GEMMs at
  it (``planner.kernel_floors.grouped_gemm_peak_share``): a DeepSeek-V3 prefill at tp 8
  (w = 256) runs its experts at a third of the dense rate.

* **MLA attention floor** (``generation_mla_perf``, SGLang and TensorRT-LLM; vLLM's
  database has only the whole attention module): the latency (us) of one MLA decode
  attention kernel at batch 1 and a one-token context with DeepSeek-V3's 16 heads per
  GPU at tp 8 and an fp8 KV cache, where no KV read explains it: the fixed part every
  MLA layer pays per step (:func:`mla_floor_us`).

* **FP8 GEMMs against BF16 GEMMs** (``gemm_perf``): at 1,024-8,192 tokens (prefill
  chunks and large decode batches, where weight GEMMs are compute-bound) and weights of
  4,096-16,384 x 4,096-16,384, the share of the FP8 dense peak an FP8 (per-tensor
  scaled) GEMM reaches over the share of the BF16 peak the same BF16 GEMM reaches:
  ``(t_bf16 / t_fp8) / 2`` (the FP8 dense peak is twice the BF16 one on every GPU the
  database covers), the median over shapes (:func:`fp8_gemm_vs_bf16`), per engine. Also
  read for L40S (:data:`GEMM_ONLY_SYSTEMS`), whose other tables are not used.

* **GEMM rate against tokens per step** (``gemm_perf``, bf16 and fp8): a dense GEMM of
  4,096-16,384 x 4,096-16,384 weights runs faster per FLOP as its token count grows past
  the 512 of a decode-heavy step (fuller tiles and waves): its rate at 1,024, 2,048, 4,096
  and 8,192 tokens over its rate at 512, the median over shapes, floored at 1
  (:func:`gemm_token_gain`; H100 with TensorRT-LLM: fp8 1.14 / 1.21 / 1.24 / 1.26, bf16
  1.04-1.10). Also read for L40S and A100 (whose newest collected versions differ,
  :data:`SYSTEM_ENGINE_VERSIONS`).

* **all-reduce over PCIe** (``nccl_perf`` of L40S, NCCL 2.27.3, an 8-GPU PCIe server
  without NVLink): per GPU count, the median latency of fp16 all-reduces of at most
  :data:`SMALL_MESSAGE_ELEMENTS` elements and the median bus bandwidth
  ``2 (tp-1)/tp x bytes / latency`` of those of 1-64 MB (a decode batch's to a prefill
  chunk's activations) (:func:`pcie_allreduce_fit`).

* **expert-parallel all-to-all** (``wideep_deepep_ll_perf``, SGLang 0.5.12's DeepEP
  low-latency kernels, one node of 8 GPUs, DeepSeek-V3's hidden 7,168 and top-8 of 256):
  the per-operation latency at one token (mean of dispatch and combine) and the share of
  the scale-up link's bandwidth the pair reaches at 1,024 tokens,
  ``f = 2 x B x 7/8 / (link GB/s x (S(1024) - S(1)))`` with ``B = 1024 x 8 x 7168 x 2``
  bytes per rank and ``S`` = dispatch + combine (see :func:`all_to_all_fit`).

The repository never reads aiconfigurator at run or test time: this script reads a
checkout (``git show`` of the parquet files, so a bare mirror works) and needs
``pyarrow``, which is not a dependency of fleetplan (install it in a scratch venv)::

    python scripts/extract_aiconfigurator.py /path/to/aiconfigurator [--out PATH]

The summary functions (:func:`allreduce_floors` and the others here and in
``aiconfigurator_rates``) take plain row dicts and are tested without pyarrow.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aiconfigurator_rates import (
    allreduce_slowdown,
    allreduce_slowdown_by_gpus,
    gemm_peak_share,
    weight_stream_share,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "catalog" / "measurements" / "sources" / "aiconfigurator-kernels.json"
DATA = "aic-core/src/aiconfigurator_core/systems/data"

#: aiconfigurator system directory -> (catalog GPU id, peak HBM TB/s, FP8 and FP4 dense
#: peaks TFLOP/s (None: no FP4), scale-up link id, its per-direction GB/s): the catalog's.
SYSTEMS = {
    "h100_sxm": ("h100-sxm5-80gb", 3.35, 1978.9, None, "nvlink4", 450.0),
    "h200_sxm": ("h200-sxm-141gb", 4.8, 1978.9, None, "nvlink4", 450.0),
    "b200_sxm": ("b200", 8.0, 4500.0, 9000.0, "nvlink5", 900.0),
    "gb200": ("gb200-per-gpu", 8.0, 5000.0, 10000.0, "nvlink5", 900.0),
    "b300_sxm": ("b300", 7.7, 4500.0, 13125.0, "nvlink5", 900.0),
    "gb300": ("gb300-per-gpu", 8.0, 5000.0, 15000.0, "nvlink5", 900.0),
}
#: Systems read for their GEMM tables only, the FP8-against-BF16 ratio and the gain by
#: token count (aiconfigurator system -> catalog GPU id; the JSON's ``fp8_gemm_only``).
GEMM_ONLY_SYSTEMS = {"l40s": "l40s", "a100_sxm": "a100-sxm-80gb"}
#: Their BF16 dense peaks (TFLOP/s, the catalog's) and, with NVLink, its per-direction GB/s.
GEMM_ONLY_BF16_PEAK_TFLOPS = {"l40s": 362.05, "a100_sxm": 312.0}
GEMM_ONLY_LINKS = {"a100_sxm": "nvlink3"}
#: Their peak memory bandwidth (TB/s, the catalog's mem_bw_tbps).
GEMM_ONLY_HBM_TB_PER_S = {"l40s": 0.864, "a100_sxm": 2.039}
#: Scale-up links whose all-reduce slowdown is read (:func:`allreduce_slowdown`): their
#: per-direction GB/s and latency (us), the catalog's (catalog/data/links).
SCALE_UP_LINKS = {"nvlink4": (450.0, 3.5), "nvlink5": (900.0, 5.6), "nvlink3": (300.0, 5.8)}
#: Engine versions read where a system lacks :data:`ENGINE_VERSIONS`' (the newest collected).
SYSTEM_ENGINE_VERSIONS = {"a100_sxm": {"sglang": "0.5.10", "vllm": "0.14.0", "trtllm": "1.0.0"}}
#: The NCCL table read for all-reduce over PCIe (system, NCCL version).
PCIE_NCCL = ("l40s", "2.27.3")
#: Message sizes (bytes) over which the PCIe all-reduce's bus bandwidth is read.
PCIE_BUS_BYTES = (2**20, 2**26)
#: Token counts (m) and weight dimensions (N, K) over which FP8 GEMMs are compared with
#: BF16 ones (:func:`fp8_gemm_vs_bf16`): compute-bound GEMMs of LLM layer shards.
FP8_COMPARE_TOKENS = (1024, 8192)
FP8_COMPARE_SHAPES = (4096, 16384)
#: FP8 dense peak over BF16 dense peak (Hopper, Ada, Blackwell datasheets).
FP8_PEAK_OVER_BF16 = 2.0
#: Token counts (m) at which a dense GEMM's rate is compared with its rate at
#: :data:`GAIN_BASE_TOKENS` (:func:`gemm_token_gain`; planner.kernel_floors.GEMM_GAIN_TOKENS).
GAIN_BASE_TOKENS = 512
GAIN_TOKENS = (1024, 2048, 4096, 8192)
#: The DeepEP low-latency table read (the only collected version).
DEEPEP_VERSION = "0.5.12"
EP_RANKS = 8
EP_TOKENS = 1024
#: Bytes one rank sends in a dispatch (or combine) of :data:`EP_TOKENS` tokens: each token
#: to its 8 experts, 7,168 bf16 values each.
EP_BYTES_PER_RANK = EP_TOKENS * 8 * 7168 * 2
#: The newest collected version of each engine read (the directory names in the database).
ENGINE_VERSIONS = {"sglang": "0.5.14", "vllm": "0.24.0", "trtllm": "1.3.0rc20"}

#: A decode step's all-reduce: at most this many bf16 elements (about one 7K hidden state).
SMALL_MESSAGE_ELEMENTS = 8192

#: DeepSeek-V3's routed-expert layer shape in moe_perf.
DEEPSEEK_MOE = {"hidden_size": 7168, "inter_size": 2048, "num_experts": 256, "topk": 8}
MOE_TP = 8
#: Bytes of one expert's fp8 weights (gate, up, down) per GPU of the tp-8 DeepSeek-V3 layer.
ONE_EXPERT_BYTES_PER_GPU = 3 * 7168 * 2048 / MOE_TP
#: Weight bytes of the experts one token touches (its top-8), per GPU of the tp-8 layer.
ONE_TOKEN_EXPERT_BYTES_PER_GPU = DEEPSEEK_MOE["topk"] * ONE_EXPERT_BYTES_PER_GPU

#: Token counts at which expert reads are compared with dense reads (decode batches).
READ_TOKENS = (4, 8, 16, 32, 64)
#: Dense GEMM shapes compared (weights of N x K with both in this range, fp8).
DENSE_SHAPE_RANGE = (4096, 16384)

#: Expert widths per GPU (expert FFN / moe_tp_size) at which the grouped GEMMs' saturated
#: share of the dense rate is read (:func:`grouped_gemm_share`).
GROUPED_WIDTHS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
#: Tokens per expert from which a grouped GEMM counts as saturated.
GROUPED_SATURATED_TOKENS = 128


def is_deepseek_layer(row: dict[str, Any], shape: dict[str, int] = DEEPSEEK_MOE) -> bool:
    """A moe_perf row of a routed-expert layer of ``shape`` (DeepSeek-V3's by default) as
    the floors are read: fp8 block-scaled, tp :data:`MOE_TP`, no expert parallelism."""
    return (
        row.get("moe_dtype") == "fp8_block"
        and all(row.get(k) == v for k, v in shape.items())
        and row.get("moe_tp_size") == MOE_TP
        and row.get("moe_ep_size") == 1
    )


def expert_read_vs_dense(
    moe_rows: Iterable[dict[str, Any]],
    gemm_rows: Iterable[dict[str, Any]],
    peak_tb_per_s: float,
    floor_us: float,
) -> float | None:
    """Median over :data:`READ_TOKENS` of ``s_moe(n) / s_dense(n)`` (dimensionless):
    ``s_moe(n) = E (1 - (1 - k/E)^n) x ONE_EXPERT_BYTES_PER_GPU / ((latency(n) - floor) x
    peak)``, the layer's latency the mean over the database's routing distributions;
    ``s_dense(n) = N x K / (latency x peak)``, the median over fp8 GEMMs with ``m = n``
    and N, K in :data:`DENSE_SHAPE_RANGE`. Latencies in ms, peak in TB/s (1e6 bytes/us);
    None without both tables' rows at some token count."""
    e, k = DEEPSEEK_MOE["num_experts"], DEEPSEEK_MOE["topk"]
    lat: dict[int, list[float]] = {}
    for r in moe_rows:
        if is_deepseek_layer(r):
            lat.setdefault(int(r["num_tokens"]), []).append(float(r["latency"]) * 1e3)
    lo, hi = DENSE_SHAPE_RANGE
    dense: dict[int, list[float]] = {}
    for r in gemm_rows:
        if r.get("gemm_dtype") == "fp8" and lo <= r["n"] <= hi and lo <= r["k"] <= hi:
            share = r["n"] * r["k"] / (float(r["latency"]) * 1e3 * peak_tb_per_s * 1e6)
            dense.setdefault(int(r["m"]), []).append(share)
    ratios = []
    for n in READ_TOKENS:
        if n not in lat or n not in dense:
            return None
        read_us = statistics.fmean(lat[n]) - floor_us
        if read_us <= 0:
            return None
        touched = e * (1.0 - (1.0 - k / e) ** n)
        s_moe = touched * ONE_EXPERT_BYTES_PER_GPU / (read_us * peak_tb_per_s * 1e6)
        ratios.append(s_moe / statistics.median(dense[n]))
    return round(statistics.median(ratios), 2)


def grouped_gemm_peak_share(
    moe_rows: Iterable[dict[str, Any]], fp8_peak_tflops: float
) -> dict[int, float] | None:
    """Saturated rate of grouped expert GEMMs as a share of the FP8 dense peak, per
    expert width per GPU (dimensionless): for every fp8 block-scaled layer shape (hidden
    h, expert FFN i, E experts, top-k) at ``moe_tp_size`` t without expert parallelism,
    balanced routing, its rate ``n k x 2 x 3 h i / t / latency`` at each token count ``n``
    with ``n k / E >= GROUPED_SATURATED_TOKENS``, the median over those counts, over
    ``fp8_peak_tflops``; then per width ``w = i / t`` in :data:`GROUPED_WIDTHS` the median
    over the shapes of that width (rounded to 0.001). None without such shapes."""
    shapes: dict[tuple[int, int, int, int, int], dict[int, list[float]]] = {}
    for r in moe_rows:
        if (
            r.get("moe_dtype") != "fp8_block"
            or r.get("moe_ep_size") != 1
            or r.get("distribution") != "balanced"
        ):
            continue
        key = (r["hidden_size"], r["inter_size"], r["num_experts"], r["topk"], r["moe_tp_size"])
        shapes.setdefault(key, {}).setdefault(int(r["num_tokens"]), []).append(float(r["latency"]))
    by_width: dict[int, list[float]] = {}
    for (h, i, e, k, t), lat in shapes.items():
        rates = [
            n * k * 2 * 3 * h * i / t / (statistics.fmean(v) * 1e9)
            for n, v in lat.items()
            if n * k / e >= GROUPED_SATURATED_TOKENS
        ]
        if len(rates) >= 2 and i % t == 0 and i // t in GROUPED_WIDTHS:
            by_width.setdefault(i // t, []).append(statistics.median(rates) / fp8_peak_tflops)
    return {w: round(statistics.median(v), 3) for w, v in sorted(by_width.items())} or None


def fp8_gemm_vs_bf16(rows: Iterable[dict[str, Any]]) -> float | None:
    """Median over GEMM shapes (m in :data:`FP8_COMPARE_TOKENS`, N and K in
    :data:`FP8_COMPARE_SHAPES`, both dtypes measured) of ``(t_bf16 / t_fp8) /
    FP8_PEAK_OVER_BF16`` (dimensionless): the share of its dense peak an FP8 GEMM reaches
    over the share a BF16 GEMM of the same shape reaches. Rows of one shape and dtype are
    averaged (the median latency); None without a shape measured in both dtypes."""
    m_lo, m_hi = FP8_COMPARE_TOKENS
    lo, hi = FP8_COMPARE_SHAPES
    lat: dict[tuple[int, int, int], dict[str, list[float]]] = {}
    for r in rows:
        dt = r.get("gemm_dtype")
        if dt not in ("fp8", "bfloat16"):
            continue
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        if m_lo <= m <= m_hi and lo <= n <= hi and lo <= k <= hi:
            lat.setdefault((m, n, k), {}).setdefault(dt, []).append(float(r["latency"]))
    ratios = [
        statistics.median(d["bfloat16"]) / statistics.median(d["fp8"]) / FP8_PEAK_OVER_BF16
        for d in lat.values()
        if "fp8" in d and "bfloat16" in d
    ]
    return round(statistics.median(ratios), 3) if ratios else None


def gemm_token_gain(rows: Iterable[dict[str, Any]]) -> dict[str, list[float]]:
    """Per dtype (``bf16``, ``fp8``, ``fp4``: the database's ``nvfp4``): a dense GEMM's
    rate (FLOP/s) at each of :data:`GAIN_TOKENS` tokens over its rate at
    :data:`GAIN_BASE_TOKENS`, the median over
    weight shapes (N and K in :data:`FP8_COMPARE_SHAPES`, both token counts measured),
    floored at 1 (dimensionless): ``(m / 512) x t(512) / t(m)``. Rows of one shape, dtype
    and m are averaged (the median latency); a dtype with no such shape is left out."""
    lo, hi = FP8_COMPARE_SHAPES
    names = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "fp4"}
    lat: dict[str, dict[tuple[int, int], dict[int, list[float]]]] = {}
    wanted = {GAIN_BASE_TOKENS, *GAIN_TOKENS}
    for r in rows:
        dt = names.get(str(r.get("gemm_dtype")))
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        if dt is None or m not in wanted or not (lo <= n <= hi and lo <= k <= hi):
            continue
        lat.setdefault(dt, {}).setdefault((n, k), {}).setdefault(m, []).append(float(r["latency"]))
    out: dict[str, list[float]] = {}
    for dt, shapes in lat.items():
        gains = []
        for m in GAIN_TOKENS:
            base = GAIN_BASE_TOKENS
            ratios = [
                m / base * statistics.median(t[base]) / statistics.median(t[m])
                for t in shapes.values()
                if base in t and m in t
            ]
            if not ratios:
                break
            gains.append(round(max(1.0, statistics.median(ratios)), 3))
        if len(gains) == len(GAIN_TOKENS):
            out[dt] = gains
    return out


def pcie_allreduce_fit(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per GPU count (keys "2", "4", "8"): ``latency_us``, the median latency (us) of fp16
    all-reduces of at most :data:`SMALL_MESSAGE_ELEMENTS` elements, and ``bus_gb_per_s``,
    the median of ``2 (tp-1)/tp x bytes / latency`` (GB/s) over those of
    :data:`PCIE_BUS_BYTES` (the database's latencies in ms, sizes in elements)."""
    small: dict[int, list[float]] = {}
    bus: dict[int, list[float]] = {}
    lo, hi = PCIE_BUS_BYTES
    for r in rows:
        if r.get("op_name") != "all_reduce" or r.get("nccl_dtype") != "half":
            continue
        tp, elements, ms = int(r["num_gpus"]), int(r["message_size"]), float(r["latency"])
        if elements <= SMALL_MESSAGE_ELEMENTS:
            small.setdefault(tp, []).append(ms * 1e3)
        nbytes = 2 * elements
        if lo <= nbytes <= hi:
            bus.setdefault(tp, []).append(2 * (tp - 1) / tp * nbytes / (ms * 1e-3) / 1e9)
    return {
        str(tp): {
            "latency_us": round(statistics.median(small[tp]), 2),
            "bus_gb_per_s": round(statistics.median(bus[tp]), 2),
        }
        for tp in sorted(small)
        if tp in bus
    }


def allreduce_floors(rows: Iterable[dict[str, Any]], eager: bool = False) -> dict[str, float]:
    """Median latency (us) of bf16 all-reduces of at most :data:`SMALL_MESSAGE_ELEMENTS`
    elements, per GPU count (keys "2", "4", "8"), of the rows run in a CUDA graph
    (``backend`` ending in ``_graph``; TensorRT-LLM's rows name no backend and are taken
    as graph) or, with ``eager``, of the eager rows; the database's latencies are in ms."""
    by_tp: dict[int, list[float]] = {}
    for r in rows:
        if r.get("allreduce_dtype") != "bfloat16" or r["message_size"] > SMALL_MESSAGE_ELEMENTS:
            continue
        if str(r.get("backend") or "graph").endswith("_eager") != eager:
            continue
        by_tp.setdefault(int(r["num_gpus"]), []).append(float(r["latency"]) * 1e3)
    return {str(tp): round(statistics.median(v), 2) for tp, v in sorted(by_tp.items()) if v}


def _one_token_mean_us(rows: Iterable[dict[str, Any]], shape: dict[str, int]) -> float | None:
    """Mean latency (us, unrounded) of the layer of ``shape`` at one token over the
    database's routing distributions (:func:`is_deepseek_layer` rows); None without rows."""
    got = [
        float(r["latency"]) * 1e3
        for r in rows
        if is_deepseek_layer(r, shape) and r["num_tokens"] == 1
    ]
    return statistics.fmean(got) if got else None


def moe_one_token_us(rows: Iterable[dict[str, Any]]) -> float | None:
    """Latency (us) of the DeepSeek-V3 routed-expert layer (fp8 block-scaled, tp 8, no
    expert parallelism) for one token: the mean over the database's routing
    distributions; None when the database has no such row."""
    got = _one_token_mean_us(rows, DEEPSEEK_MOE)
    return round(got, 2) if got is not None else None


#: DeepSeek-V3's attention heads per GPU at tp 8 (128 / 8), as generation_mla_perf counts them.
MLA_HEADS_PER_GPU = 16


def mla_floor_us(rows: Iterable[dict[str, Any]]) -> float | None:
    """Median latency (us) of the MLA decode attention kernel at batch 1 and context 1
    (``step`` 1) with :data:`MLA_HEADS_PER_GPU` heads and an fp8 KV cache; None when the
    table has no such row (the database's latencies are in ms)."""
    got = [
        float(r["latency"]) * 1e3
        for r in rows
        if r.get("batch_size") == 1
        and r.get("step") == 1
        and r.get("num_heads") == MLA_HEADS_PER_GPU
        and r.get("kv_cache_dtype") == "fp8"
    ]
    return round(statistics.median(got), 1) if got else None


#: Mixtral-8x7B's routed-expert layer shape in moe_perf: few (8) experts per GPU.
FEW_EXPERTS_MOE = {"hidden_size": 4096, "inter_size": 14336, "num_experts": 8, "topk": 2}


def few_experts_floor_us(rows: Iterable[dict[str, Any]], peak_tb_per_s: float) -> float | None:
    """The MoE layer floor (us) with :data:`FEW_EXPERTS_MOE`'s 8 experts per GPU, read as
    DeepSeek's (:func:`moe_floor_us`) so that only the experts per GPU differ: fp8
    block-scaled, ``moe_tp_size`` :data:`MOE_TP`, no expert parallelism, one token (the
    mean over the database's routing distributions), less its top-2 experts' weights per
    GPU (``2 x 3 x 4096 x 14336 / 8`` bytes) read at peak HBM bandwidth; never below 0.
    None when the table has no such row."""
    shape = FEW_EXPERTS_MOE
    one_token_us = _one_token_mean_us(rows, shape)
    if one_token_us is None:
        return None
    read = shape["topk"] * 3 * shape["hidden_size"] * shape["inter_size"] / MOE_TP
    return round(max(one_token_us - read / (peak_tb_per_s * 1e6), 0.0), 1)


def moe_floor_us(one_token_us: float, peak_tb_per_s: float) -> float:
    """The MoE layer's floor (us): ``latency(1 token) - ONE_TOKEN_EXPERT_BYTES_PER_GPU /
    peak HBM bandwidth`` (44 MB per GPU at tp 8; 1 TB/s = 1e6 bytes/us), never below 0."""
    read_us = ONE_TOKEN_EXPERT_BYTES_PER_GPU / (peak_tb_per_s * 1e6)
    return round(max(one_token_us - read_us, 0.0), 1)


def all_to_all_fit(rows: Iterable[dict[str, Any]], link_gb_per_s: float) -> dict[str, float] | None:
    """(``latency_us``, ``bandwidth_fraction``) of DeepEP's low-latency dispatch and
    combine for DeepSeek-V3's shape on one 8-GPU node: the mean of the two at one token
    (us per operation), and ``2 x EP_BYTES_PER_RANK x 7/8 / (link bytes/us x (S(1024) -
    S(1)))`` with ``S`` = dispatch + combine (us); None without both rows."""
    by_tokens = {
        r["num_token"]: float(r["dispatch_avg_t_us"]) + float(r["combine_avg_t_us"])
        for r in rows
        if r.get("hidden_size") == 7168
        and r.get("num_topk") == 8
        and r.get("num_experts") == 256
        and r.get("node_num") == 1
    }
    if 1 not in by_tokens or EP_TOKENS not in by_tokens or by_tokens[EP_TOKENS] <= by_tokens[1]:
        return None
    moved = 2 * EP_BYTES_PER_RANK * (EP_RANKS - 1) / EP_RANKS
    fraction = moved / (link_gb_per_s * 1e3 * (by_tokens[EP_TOKENS] - by_tokens[1]))
    return {"latency_us": round(by_tokens[1] / 2, 1), "bandwidth_fraction": round(fraction, 2)}


#: Decode attention rows fitted (:func:`decode_attention_fit`): head size 128, no sliding
#: window, GQA groups of 1-8 query heads per KV head, at least this many (sequence, KV
#: head) pairs per kernel (the GPU filled) and contexts in this range (tokens).
ATTENTION_MIN_PAIRS = 64
ATTENTION_CONTEXTS = (128, 16384)
ATTENTION_GROUPS = (1, 2, 4, 8)
#: aiconfigurator KV-cache dtype -> the catalog's.
ATTENTION_KV_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}


def decode_attention_fit(
    rows: Iterable[dict[str, Any]], peak_tb_per_s: float
) -> dict[str, dict[str, float]]:
    """Per KV dtype, the decode attention kernel (``generation_attention_perf``) as
    ``t_us = launch_us + pairs x pair_ns / 1e3 + KV bytes / (peak x saturated_share)``,
    fitted by non-negative least squares on relative error over the rows with
    :data:`ATTENTION_MIN_PAIRS` or more (sequence, KV head) pairs and contexts in
    :data:`ATTENTION_CONTEXTS`; KV bytes = ``batch x context x kv_heads x 128 x 2 x``
    the dtype's bytes. ``pair_ns``: the cost per pair beyond its bytes (page lookups,
    softmax and output per head, split-KV reduction); ``saturated_share``: the share of
    peak HBM bandwidth at which its bytes stream (FP8 KV pays dequantization: 0.51-0.83
    on H100 and H200, against 0.83-0.92 in BF16); ``launch_us`` is reported, not used
    (the step overhead carries launches). With ``rows`` (the fit's) and
    ``median_abs_error`` of the fit."""
    import numpy as np
    from scipy.optimize import nnls

    out: dict[str, dict[str, float]] = {}
    for aic_dtype, dtype in ATTENTION_KV_DTYPES.items():
        sel = []
        for r in rows:
            heads, kv = r.get("num_heads"), r.get("num_key_value_heads")
            ctx = r.get("isl", 0) + r.get("step", 0)
            if (
                r.get("kv_cache_dtype") != aic_dtype
                or r.get("head_dim") != 128
                or r.get("window_size") not in (0, None)
                or not heads
                or not kv
                or heads % kv
                or heads // kv not in ATTENTION_GROUPS
                or r["batch_size"] * kv < ATTENTION_MIN_PAIRS
                or not ATTENTION_CONTEXTS[0] <= ctx <= ATTENTION_CONTEXTS[1]
            ):
                continue
            nbytes = r["batch_size"] * ctx * kv * 128 * 2 * (1 if dtype == "fp8" else 2)
            sel.append((r["batch_size"] * kv, nbytes, r["latency"] * 1e3))
        if len(sel) < 10:
            continue
        pairs, nbytes, t_us = (np.array(x, dtype=float) for x in zip(*sel, strict=True))
        a = np.stack([np.ones_like(t_us), pairs, nbytes / (peak_tb_per_s * 1e6)], axis=1)
        x, _ = nnls(a / t_us[:, None], np.ones_like(t_us))
        if x[2] <= 0:
            continue
        err = np.median(np.abs(a @ x / t_us - 1.0))
        out[dtype] = {
            "pair_ns": round(float(x[1]) * 1e3, 2),
            "saturated_share": round(min(1.0, 1.0 / float(x[2])), 3),
            "launch_us": round(float(x[0]), 1),
            "rows": len(sel),
            "median_abs_error": round(float(err), 3),
        }
    return out


def _parquet(repo: Path, path: str) -> list[dict[str, Any]] | None:
    import pyarrow.parquet as pq  # type: ignore[import-not-found]  # only this script needs it

    out = subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{path}"], capture_output=True)
    if out.returncode != 0:
        return None
    rows: list[dict[str, Any]] = pq.read_table(io.BytesIO(out.stdout)).to_pylist()
    return rows


def _gemm(repo: Path, system: str, engine: str, version: str) -> list[dict[str, Any]]:
    """The system's GEMM table for one engine version (empty when not collected)."""
    return _parquet(repo, f"{DATA}/{system}/gemm/{engine}/{version}/gemm_perf.parquet") or []


def _commit(repo: Path) -> str:
    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True)
    return out.stdout.decode().strip()


def extract(repo: Path) -> dict[str, Any]:
    """The summary document for an aiconfigurator checkout at ``repo``."""
    gpus: dict[str, Any] = {}
    link_rows: dict[str, list[dict[str, Any]]] = {}
    for system, (gpu, peak, fp8_peak, fp4_peak, link, link_gb_per_s) in SYSTEMS.items():
        entry: dict[str, Any] = {
            "system": system,
            "peak_hbm_tb_per_s": peak,
            "scale_up_link": link,
            "engines": {},
        }
        ll = _parquet(
            repo, f"{DATA}/{system}/comm/sglang/{DEEPEP_VERSION}/wideep_deepep_ll_perf.parquet"
        )
        if ll and (fit := all_to_all_fit(ll, link_gb_per_s)):
            entry["deepep_low_latency"] = dict(fit, sglang_version=DEEPEP_VERSION)
        for engine, version in ENGINE_VERSIONS.items():
            e: dict[str, Any] = {"version": version}
            ar = _parquet(
                repo, f"{DATA}/{system}/comm/{engine}/{version}/custom_allreduce_perf.parquet"
            )
            if ar:
                e["allreduce_small_us"] = allreduce_floors(ar)
                link_rows.setdefault(link, []).extend(ar)
                if eager := allreduce_floors(ar, eager=True):
                    e["allreduce_small_eager_us"] = eager
            gemm = _gemm(repo, system, engine, version)
            moe = _parquet(repo, f"{DATA}/{system}/moe/{engine}/{version}/moe_perf.parquet")
            if moe and (one := moe_one_token_us(moe)) is not None:
                e["moe_layer_one_token_us"] = one
                e["moe_layer_floor_us"] = floor_us = moe_floor_us(one, peak)
                if gemm and (ratio := expert_read_vs_dense(moe, gemm, peak, floor_us)) is not None:
                    e["moe_expert_read_vs_dense"] = ratio
            if moe and (few := few_experts_floor_us(moe, peak)) is not None:
                e["moe_layer_floor_8_experts_us"] = few
            if moe and (share := grouped_gemm_peak_share(moe, fp8_peak)):
                e["moe_grouped_gemm_peak_share_by_width"] = share
            if (ratio := fp8_gemm_vs_bf16(gemm)) is not None:
                e["fp8_gemm_vs_bf16"] = ratio
            if gain := gemm_token_gain(gemm):
                e["gemm_token_gain"] = gain
            if peak_share := gemm_peak_share(gemm, fp8_peak / FP8_PEAK_OVER_BF16, fp4_peak):
                e["gemm_peak_share_512"] = peak_share
            if (stream := weight_stream_share(gemm, peak)) is not None:
                e["weight_stream_share"] = stream
            mla = _parquet(
                repo, f"{DATA}/{system}/mla/{engine}/{version}/generation_mla_perf.parquet"
            )
            if mla and (floor := mla_floor_us(mla)) is not None:
                e["mla_layer_floor_us"] = floor
            gen = _parquet(
                repo,
                f"{DATA}/{system}/attention/{engine}/{version}/generation_attention_perf.parquet",
            )
            if gen and (attention := decode_attention_fit(gen, peak)):
                e["decode_attention"] = attention
            entry["engines"][engine] = e
        gpus[gpu] = entry
    gemm_only: dict[str, Any] = {}
    for system, gpu in GEMM_ONLY_SYSTEMS.items():
        engines: dict[str, Any] = {}
        for engine, version in SYSTEM_ENGINE_VERSIONS.get(system, ENGINE_VERSIONS).items():
            gemm = _gemm(repo, system, engine, version)
            e = {"version": version}
            if (ratio := fp8_gemm_vs_bf16(gemm)) is not None:
                e["fp8_gemm_vs_bf16"] = ratio
            if gain := gemm_token_gain(gemm):
                e["gemm_token_gain"] = gain
            if peak_share := gemm_peak_share(gemm, GEMM_ONLY_BF16_PEAK_TFLOPS[system]):
                e["gemm_peak_share_512"] = peak_share
            if (stream := weight_stream_share(gemm, GEMM_ONLY_HBM_TB_PER_S[system])) is not None:
                e["weight_stream_share"] = stream
            if system in GEMM_ONLY_LINKS:
                ar = _parquet(
                    repo, f"{DATA}/{system}/comm/{engine}/{version}/custom_allreduce_perf.parquet"
                )
                link_rows.setdefault(GEMM_ONLY_LINKS[system], []).extend(ar or [])
            if len(e) > 1:
                engines[engine] = e
        gemm_only[gpu] = {"system": system, "engines": engines}
    slowdown: dict[str, Any] = {}
    for link, rows in sorted(link_rows.items()):
        gb_per_s, latency_us = SCALE_UP_LINKS[link]
        slowdown[link] = {
            "latency_us": latency_us,
            "gb_per_s": gb_per_s,
            "by_mib": allreduce_slowdown(rows, latency_us, gb_per_s),
            "by_gpus": allreduce_slowdown_by_gpus(rows, latency_us, gb_per_s),
        }
    system, version = PCIE_NCCL
    nccl = _parquet(repo, f"{DATA}/{system}/comm/nccl/{version}/nccl_perf.parquet")
    pcie = {"system": system, "nccl_version": version, "by_tp": pcie_allreduce_fit(nccl or [])}
    return {
        "description": (
            "Kernel floors read from aiconfigurator's per-operation silicon database "
            "(github.com/ai-dynamo/aiconfigurator, Apache-2.0) by "
            "scripts/extract_aiconfigurator.py: per catalog GPU and serving engine, the "
            "median latency of small bf16 all-reduces (<= 8,192 elements) per GPU count "
            "in a CUDA graph (and eager, where measured), "
            "and the DeepSeek-V3 routed-expert layer (fp8 block-scaled, tp 8) at one token "
            "with its floor (latency minus the experts' weight read at peak HBM bandwidth; "
            "moe_layer_floor_8_experts_us: the same for Mixtral's layer shape of 8 experts, "
            "also fp8 block-scaled at tp 8) "
            "and its expert reads' share of peak bandwidth over dense fp8 GEMMs' at 4-64 "
            "tokens (moe_expert_read_vs_dense, the median ratio), the saturated rate of "
            "grouped expert GEMMs (>= 128 tokens per expert, fp8 block-scaled, balanced "
            "routing) as a share of the FP8 dense peak per expert width per GPU "
            "(moe_grouped_gemm_peak_share_by_width: expert FFN / moe_tp_size -> the median "
            "over layer shapes of that width), the MLA decode attention "
            "kernel at batch 1 and a one-token context (mla_layer_floor_us, 16 heads per GPU, "
            "fp8 KV), "
            "FP8 GEMMs' share of the FP8 peak over BF16 GEMMs' share of the BF16 peak at "
            "1,024-8,192 tokens (fp8_gemm_vs_bf16, the median over 4,096-16,384 square-ish "
            "weight shapes; also for L40S, under fp8_gemm_only), "
            "a dense GEMM's rate at 1,024, 2,048, 4,096 and 8,192 tokens over its rate at "
            "512 tokens (gemm_token_gain per dtype, bf16, fp8 and fp4 (the database's "
            "nvfp4 GEMMs), the median over the same weight shapes, "
            "floored at 1; also for L40S and A100, under fp8_gemm_only), "
            "a dense GEMM's share of its BF16, FP8 or FP4 dense peak at 512 tokens "
            "(gemm_peak_share_512 per dtype, the median over the same weight shapes), "
            "the share of peak memory bandwidth at which BF16 GEMMs of 8-32 tokens stream "
            "weights of 256 MB or more (weight_stream_share, the median; also for L40S and "
            "A100), "
            "per scale-up link, the engines' bf16 all-reduces in a CUDA graph over 2-8 GPUs "
            "at 1 MiB-1 GiB against the alpha-beta time at the link's nominal bandwidth and "
            "latency (allreduce_slowdown: per MiB, the median ratio over engines, GPU "
            "counts and the link's GPUs; by_gpus: per GPU count, read for comparison and "
            "not priced, docs/design.md), "
            "the decode attention kernel per KV dtype (decode_attention: launch_us + "
            "pairs x pair_ns + KV bytes / (peak x saturated_share), fitted over batches "
            "of 64+ (sequence, KV head) pairs and 128-16,384-token contexts, head size "
            "128, GQA groups of 1-8), "
            "NCCL's all-reduce over PCIe on an 8 x L40S server (pcie_allreduce: per GPU "
            "count, the small-message latency and the bus bandwidth at 1-64 MB), "
            "and DeepEP's low-latency all-to-all (per-operation latency at one token, "
            "bandwidth share at 1,024 tokens). "
            "Kernel benchmarks, not serving runs: the cost model's collective latency, "
            "MoE layer floor, expert-read efficiency, grouped GEMM share, MLA layer floor, "
            "decode attention rate, FP8 GEMM "
            "efficiency, GEMM rate gain with tokens per step, GEMM share of peak and "
            "all-reduce bandwidth come from here "
            "(catalog/data/links, catalog/data/gpus)."
        ),
        "source": f"https://github.com/ai-dynamo/aiconfigurator/tree/{_commit(repo)}/{DATA}",
        "gpus": gpus,
        "fp8_gemm_only": gemm_only,
        "pcie_allreduce": pcie,
        "allreduce_slowdown": slowdown,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", type=Path, help="an aiconfigurator checkout or bare mirror")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    doc = extract(args.repo)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
