"""Field readers for measurements-more.json entries (split from
``scripts/import_reference_measurements.py``, which imports them): the hardware, model and
precision names mapped to catalog ids, the output share of an ambiguous throughput, the
KV-cache dtype and the engine's stated running-sequence cap and memory share."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T", int, float)


#: measurements-more.json hardware names -> catalog GPU id, with what the mapping assumes.
HARDWARE_MORE = {
    "AMD Instinct MI300X": ("mi300x", ""),
    "AMD Instinct MI300X (192GB)": ("mi300x", ""),
    "AMD Instinct MI300X (192GB HBM3, 750W)": ("mi300x", ""),
    "AMD Instinct MI325X": ("mi325x", ""),
    "AMD Instinct MI355X": ("mi355x", ""),
    "NVIDIA B300": ("b300", ""),
    "NVIDIA GB300 NVL72": ("gb300-per-gpu", "one GB300 GPU of an NVL72 rack"),
    "NVIDIA B200": ("b200", ""),
    "NVIDIA GB200 NVL72": ("gb200-per-gpu", "one GB200 GPU of an NVL72 rack"),
    "NVIDIA H100 (SXM)": ("h100-sxm5-80gb", ""),
    "NVIDIA H100 SXM5 80GB": ("h100-sxm5-80gb", ""),
    "NVIDIA H100 SXM 80GB": ("h100-sxm5-80gb", ""),
    "NVIDIA H200 (SXM)": ("h200-sxm-141gb", ""),
    "NVIDIA H200 SXM5 (141GB)": ("h200-sxm-141gb", ""),
    "NVIDIA A10G 24GB (AWS ml.g5.2xlarge)": ("a10g", ""),
    "NVIDIA A10G 24GB (AWS ml.g5.48xlarge)": ("a10g", ""),
    "NVIDIA L4 24GB": ("l4", ""),
    "NVIDIA L4 24GB (GKE)": ("l4", ""),
    "Intel Gaudi 3 (HL-325L, 128 GiB)": ("gaudi3", ""),
    "NVIDIA A100-SXM4-40GB": ("a100-40gb", ""),
    "NVIDIA H100 PCIe 80GB": ("h100-pcie-80gb", ""),
}

#: measurements-more.json model names -> catalog model id, with what the mapping assumes.
MODELS_MORE = {
    "DeepSeek-R1-0528 (deepseek-v3 architecture)": (
        "deepseek-v3",
        "DeepSeek-R1-0528 mapped to deepseek-v3 (same architecture and weights layout)",
    ),
    "DeepSeek-V3/R1 671B (deepseek-v3)": ("deepseek-v3", ""),
    "DeepSeek-V3-0324 (deepseek-v3)": ("deepseek-v3", ""),
    "amd/Llama-3.1-405B-Instruct-FP8-KV (llama-3.1-405b)": ("llama-3.1-405b", ""),
    "meta-llama/Llama-3.1-405B-FP8 (llama-3.1-405b)": ("llama-3.1-405b", ""),
    "Llama 3.1 405B (amd/Llama-3.1-405B-Instruct-FP8-KV)": ("llama-3.1-405b", ""),
    "Llama 3.1 70B (amd/Llama-3.1-70B-Instruct-FP8-KV)": ("llama-3.1-70b", ""),
    "openai/gpt-oss-120b": ("gpt-oss-120b", ""),
    "Llama-2-70B (JumpStart meta-textgeneration-llama-2-70b)": ("llama-2-70b", ""),
    "Mistral-7B (JumpStart huggingface-llm-mistral-7b, v0.1 base)": ("mistral-7b-v0.1", ""),
    "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8 (llama-3.1-8b)": ("llama-3.1-8b", ""),
    "LLaMA 2 7b (Intel Gaudi page; llama-2-7b)": ("llama-2-7b", ""),
    "LLaMA 2 70b (Intel Gaudi page; llama-2-70b)": ("llama-2-70b", ""),
    "LLaMA 3.1 8B (Intel Gaudi page; llama-3.1-8b)": ("llama-3.1-8b", ""),
    "LLaMA 3.1 70B (Intel Gaudi page; llama-3.1-70b)": ("llama-3.1-70b", ""),
    "Mistral 7b (Intel Gaudi page, version not stated; mistral-7b-v0.1 architecture)": (
        "mistral-7b-v0.1",
        "Mistral 7B version not stated on the page; mapped to mistral-7b-v0.1 (same layer shapes)",
    ),
    "meta-llama/Meta-Llama-3-8B-Instruct (llama-3.1-8b architecture)": (
        "llama-3.1-8b",
        "Llama-3-8B mapped to llama-3.1-8b (same layer shapes; 8K native context)",
    ),
    "meta-llama/Meta-Llama-3-70B-Instruct (llama-3.1-70b architecture)": (
        "llama-3.1-70b",
        "Llama-3-70B mapped to llama-3.1-70b (same layer shapes; 8K native context)",
    ),
    "meta-llama/Llama-3.1-8B-Instruct": ("llama-3.1-8b", ""),
    "nvidia/Llama-3.1-8B-Instruct-FP8 (llama-3.1-8b)": ("llama-3.1-8b", ""),
}

#: measurements-more.json precision -> catalog dtype (weights).
PRECISION_MORE = {
    "FP8": "fp8",
    "FP8 (block-scaled)": "fp8",
    "FP8 (block-scaled MoE/GEMM)": "fp8",
    "FP8 (W8A8)": "fp8",
    "FP4 (NVFP4)": "fp4",
    "FP4 (MXFP4)": "fp4",
    "FP4 (NVFP4 MoE/o_proj; FP8 attention)": "fp4",
    "MXFP4 (native checkpoint)": "fp4",
    "FP16": "bf16",  # same tensor-core peak and bytes as bf16
    "BF16": "bf16",
}


class BadEntry(ValueError):
    """A malformed source entry (reported with its file and line; nothing is written)."""


#: An entry whose source does not say whether its throughput counts output or all tokens
#: (AMD's ROCm performance table: "Throughput") is used when the two readings differ by
#: at most 1 / this - 1 (11%: output share osl / (isl + osl) >= 0.9, the 128/2048 and
#: 128/4096 rows), read as total tokens, the lower output throughput (conservative: an
#: output reading would rate the GPU up to 11% higher); else it is recorded, not fitted.
AMBIGUOUS_MIN_OUTPUT_SHARE = 0.9


def output_share(entry: dict[str, Any]) -> float:
    """``osl / (isl + osl)``: the share of a fixed-length run's tokens that are output
    tokens (0 when either length is missing)."""
    isl, osl = entry.get("isl"), entry.get("osl")
    if not isinstance(isl, int | float) or not isinstance(osl, int | float) or isl + osl <= 0:
        return 0.0
    return float(osl) / float(isl + osl)


def kv_dtype_more(text: Any) -> str | None:
    """The KV-cache dtype a measurements-more entry states (``FP8 (FP8-KV checkpoint)``
    -> fp8, ``BF16 (default)`` -> bf16), or None when it states none (the engine's
    default then applies, planner.engines)."""
    if not isinstance(text, str) or not text.strip():
        return None
    head = text.strip().split()[0].upper()
    return {"FP8": "fp8", "BF16": "bf16", "FP16": "bf16"}.get(head)


def _stated_once(
    entry: dict[str, Any], pattern: re.Pattern[str], convert: Callable[[str], T], what: str
) -> T | None:
    """The one value ``pattern`` (its first group, read by ``convert``) finds in an entry's
    framework and notes, None when none; several different values are refused as
    ambiguous (:class:`BadEntry`: "states several ``what`` (...)")."""
    text = f"{entry.get('framework') or ''} {entry.get('notes') or ''}"
    values = {convert(m.group(1)) for m in pattern.finditer(text)}
    if len(values) > 1:
        raise BadEntry(f"states several {what} ({', '.join(map(str, sorted(values)))})")
    return next(iter(values), None)


#: How a source states the engine's running-sequence cap (vLLM ``--max-num-seqs`` /
#: ``max_num_seqs``), in an entry's framework or notes.
MAX_NUM_SEQS = re.compile(r"max[-_]num[-_]seqs[ =:]*(\d+)")


def stated_max_batch(entry: dict[str, Any]) -> int | None:
    """The engine's running-sequence cap an entry states (``max-num-seqs 3200`` in its
    notes, ``max_num_seqs 512`` in its framework), or None: the run's ``max_batch``, so
    that it is priced at the batch the engine was allowed rather than the engine's default
    (planner.engines.default_max_num_seqs: vLLM 1,024 on large GPUs, 256 on an A100 40GB
    or an L4). Several different stated caps are refused as ambiguous (:class:`BadEntry`)."""
    cap = _stated_once(entry, MAX_NUM_SEQS, int, "max-num-seqs")
    if cap is not None and cap < 1:
        raise BadEntry(f"max-num-seqs must be at least 1, not {cap}")
    return cap


#: How a source states the engine's memory share (vLLM ``--gpu-memory-utilization`` /
#: ``gpu_memory_utilization``, SGLang ``--mem-fraction-static``), in its framework or notes.
MEMORY_SHARE = re.compile(
    r"(?:gpu[-_]memory[-_]utilization|mem[-_]fraction[-_]static)[ =:]*(\d*\.?\d+)"
)


def stated_memory_share(entry: dict[str, Any]) -> float | None:
    """The engine's memory share an entry states (``gpu_memory_utilization 0.9`` in its
    notes), or None: the run's ``memory_utilization``, so that its KV cache is priced at the
    memory the engine was given rather than the engine's default (vLLM 0.92 as plans launch
    it; planner.engines). Several different stated shares, or one outside (0, 1], are
    refused (:class:`BadEntry`)."""
    share = _stated_once(entry, MEMORY_SHARE, float, "memory shares")
    if share is not None and not 0.0 < share <= 1.0:
        raise BadEntry(f"a memory share must be in (0, 1], not {share}")
    return share
