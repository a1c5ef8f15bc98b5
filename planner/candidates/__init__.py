"""Enumerate pool configurations per traffic class, screen them, keep the reasons.

For each class k and each (GPU, TP, dtype) the planner considers three roles:

* ``decode`` (disaggregated): the largest batch B that fits in memory and
  keeps the decode step within the class's TPOT SLO;
* ``prefill`` (disaggregated): one prompt at a time at full speed, its KV
  cache shipped to a decode replica (the exposed part of the transfer adds to
  TTFT);
* ``aggregated`` (chunked prefill, stall-free batching) for every chunk
  budget T: the batch B that maximizes the replica's capacity within the TPOT
  SLO and the KV cache (:func:`capacity_maximizing_batch`); a prompt takes
  ceil(P_new / T) such steps, each a mixed step of the batch and one of its chunks
  (:func:`chunked_ttft_ms`).

A configuration is rejected when the model does not fit, a single sequence's
KV does not fit, the TPOT SLO is out of reach even at batch 1, or the
prompt at the SLO percentile cannot be prefilled within the TTFT SLO even on
an idle replica. Survivors are pruned by cost per request/s (keeping each
GPU type's best, so the plan can say why another GPU lost), and the rest get
their queueing curves, which become the MILP's capacity rows.

One module a job: :mod:`.model` (the data), :mod:`.links` (replica cost and
power, TP degrees, KV links), :mod:`.replicas` (the replicas priced), :mod:`.screen`
(screening), :mod:`.bounds` (floors that skip screening what pruning would drop),
:mod:`.prune` (pruning and capacity curves). Every name is re-exported here.
"""

from planner.candidates.chunking import (
    ChunkedPrompt,
    capacity_maximizing_batch,
    chunked_prompt,
    chunked_ttft_floor_ms,
    chunked_ttft_ms,
    fast_chunked_ttft_ms,
    full_chunks_attention_ms,
)
from planner.candidates.links import (
    RACK_SCALE_DOMAIN,
    dp_ep_options,
    kv_exposed_ms,
    kv_link_for,
    kv_pair_link,
    network_link_for_pairs,
    pp_options,
    prefill_link_options,
    replica_cost_usd_per_hour,
    replica_power_kw,
    tp_options,
)
from planner.candidates.model import (
    DEFAULT_MAX_TP,
    KEEP_PER_GPU,
    KV_STREAM_OVERLAP,
    MAX_REPLICAS_PER_POOL,
    Candidate,
    ClassFigures,
    PoolConfig,
    Rejection,
    Screening,
    kv_dtype_for,
    kv_dtype_options,
    resident_output_tokens,
    speculative_label,
)
from planner.candidates.prune import (
    attach_capacities,
    attach_capacity,
    dominates,
    prune,
    prune_by_cost_curves,
    restrict_prefill_links,
    segments_for,
)
from planner.candidates.replicas import request_replica, speculative_replica
from planner.candidates.screen import screen_candidates

__all__ = [
    "DEFAULT_MAX_TP",
    "KEEP_PER_GPU",
    "KV_STREAM_OVERLAP",
    "MAX_REPLICAS_PER_POOL",
    "RACK_SCALE_DOMAIN",
    "Candidate",
    "ChunkedPrompt",
    "ClassFigures",
    "PoolConfig",
    "Rejection",
    "Screening",
    "attach_capacities",
    "attach_capacity",
    "capacity_maximizing_batch",
    "chunked_prompt",
    "chunked_ttft_floor_ms",
    "chunked_ttft_ms",
    "dominates",
    "dp_ep_options",
    "fast_chunked_ttft_ms",
    "full_chunks_attention_ms",
    "kv_dtype_for",
    "kv_dtype_options",
    "kv_exposed_ms",
    "kv_link_for",
    "kv_pair_link",
    "network_link_for_pairs",
    "pp_options",
    "prefill_link_options",
    "prune",
    "prune_by_cost_curves",
    "replica_cost_usd_per_hour",
    "replica_power_kw",
    "request_replica",
    "resident_output_tokens",
    "restrict_prefill_links",
    "screen_candidates",
    "segments_for",
    "speculative_label",
    "speculative_replica",
    "tp_options",
]
