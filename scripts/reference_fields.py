"""Field readers for measurements-more.json entries (split from
``scripts/import_reference_measurements.py``, which imports them): the output share of an
ambiguous throughput, the KV-cache dtype and the engine's stated running-sequence cap and
memory share."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T", int, float)


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
