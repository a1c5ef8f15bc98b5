"""Analyses users run on one model and GPU: chunk budgets, KV transfers, pool ratios.

Each analysis is a pure function of the catalog and a few parameters that
returns a frozen pydantic model (the CLI renders it as a table or JSON, and an
HTTP endpoint can serve it as is):

- :func:`chunk_budget_table` — DOMAIN.md section 3: what a chunked-prefill token
  budget costs in TPOT and buys in TTFT, with the largest free chunk ``T*``;
- :func:`kv_transfer_table` — DOMAIN.md section 4: the KV cache a disaggregated
  prefill ships, over each link, and what of it layer-wise streaming hides;
- :func:`pool_ratio_table` — DOMAIN.md section 5: prefill and decode GPU-seconds
  per request and the prefill/decode pool ratio per workload and for a mix.

Every number comes from a named cost-model function (:mod:`planner.roofline`,
:mod:`planner.sizing`, :mod:`planner.architecture`); the docstrings state the
formulas. Units are in the names: ``_ms`` milliseconds, ``_gb`` decimal
gigabytes (1e9 bytes), ``_gb_per_s`` GB/s, ``_gpu_s`` GPU-seconds, ``_tokens``.

Bad input raises :class:`~planner.errors.PlanningError` (or a subclass) whose
field is the parameter's name here (``prompt_tokens``, ``budgets``...) or, for
the replica, the field :func:`planner.roofline.build_replica` names (``model``,
``gpu``, ``tp``, ``dtype``...).

The package holds one module per analysis (:mod:`.chunk_budget`,
:mod:`.kv_transfer`, :mod:`.pool_ratio`) and what they share (:mod:`.common`);
``from planner.analyses import X`` keeps working for every name below.
"""

from __future__ import annotations

from planner.analyses.chunk_budget import (
    ChunkBudgetRow,
    ChunkBudgetTable,
    ShrinkingSchedule,
    chunk_budget_row,
    chunk_budget_table,
    default_budgets,
    fixed_chunks,
    overlapped_step_ms,
    schedule_ttft_ms,
)
from planner.analyses.common import (
    DEFAULT_KV_STREAM_OVERLAP,
    DEFAULT_MIN_BUDGET_TOKENS,
    ReplicaSummary,
)
from planner.analyses.kv_transfer import (
    KvTransferRow,
    KvTransferTable,
    PrefillSource,
    kv_transfer_table,
)
from planner.analyses.pool_ratio import (
    DecodePointSource,
    MixShare,
    PoolRatioBlend,
    PoolRatioRow,
    PoolRatioTable,
    PrefillCost,
    decode_context_tokens,
    pool_ratio_table,
)

__all__ = [
    "DEFAULT_KV_STREAM_OVERLAP",
    "DEFAULT_MIN_BUDGET_TOKENS",
    "ChunkBudgetRow",
    "ChunkBudgetTable",
    "DecodePointSource",
    "KvTransferRow",
    "KvTransferTable",
    "MixShare",
    "PoolRatioBlend",
    "PoolRatioRow",
    "PoolRatioTable",
    "PrefillCost",
    "PrefillSource",
    "ReplicaSummary",
    "ShrinkingSchedule",
    "chunk_budget_row",
    "chunk_budget_table",
    "decode_context_tokens",
    "default_budgets",
    "fixed_chunks",
    "kv_transfer_table",
    "overlapped_step_ms",
    "pool_ratio_table",
    "schedule_ttft_ms",
]
