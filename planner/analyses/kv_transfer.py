"""DOMAIN.md section 4: the KV cache a disaggregated prefill ships, over each link,
and what of it layer-wise streaming hides (:func:`kv_transfer_table`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum

from catalog.schema import Catalog, Dtype, Link
from planner import architecture as arch
from planner import roofline as rl
from planner.analyses.common import (
    DEFAULT_KV_STREAM_OVERLAP,
    ReplicaSummary,
    _check_positive,
    _check_prompt,
    _get_model,
    _kv_dtype,
    _Result,
)
from planner.errors import PlanningError, UnknownEntryError

# --------------------------------------------------------------------------- KV transfer


class PrefillSource(StrEnum):
    """Where a KV-transfer analysis got its prefill time from."""

    GIVEN = "given"
    ROOFLINE = "roofline"
    NONE = "none"


class KvTransferRow(_Result):
    """Shipping one prompt's KV cache over one link.

    ``bandwidth_gb_per_s``: the link's per-direction bandwidth (GB/s = 1e9 bytes/s);
    ``parallel_links``: links used at once (the prefill replica's ``tp``: each GPU
    ships its own shard); ``transfer_ms``:
    :func:`planner.roofline.kv_transfer_ms` ``= kv_bytes / (bandwidth x parallel_links)
    + latency``; ``exposed_ms``: what layer-wise streaming leaves on TTFT,
    :func:`planner.roofline.exposed_transfer_ms` ``(transfer, prefill, overlap, L)``
    (the whole transfer when no prefill time is known).
    """

    link: str
    kind: str
    bandwidth_gb_per_s: float
    latency_us: float
    parallel_links: int
    transfer_ms: float
    exposed_ms: float


class KvTransferTable(_Result):
    """The KV transfer of a disaggregated prefill (DOMAIN.md section 4).

    ``kv_bytes_per_token``: :func:`planner.architecture.kv_bytes_per_token`;
    ``kv_gb``: the cache of one ``prompt_tokens`` sequence,
    :func:`planner.architecture.kv_bytes_for_sequence` / 1e9 (sliding windows cap it).
    ``prefill_ms``: the prefill the transfer streams behind (given, or
    :func:`planner.roofline.prefill_ms` on ``prefill_replica``; None when unknown).
    """

    model: str
    prompt_tokens: int
    kv_dtype: str
    kv_bytes_per_token: float
    kv_gb: float
    num_layers: int
    overlap_fraction: float
    prefill_ms: float | None
    prefill_source: PrefillSource
    prefill_replica: ReplicaSummary | None
    rows: list[KvTransferRow]
    notes: list[str]


def kv_transfer_table(
    catalog: Catalog,
    model_id: str,
    *,
    prompt_tokens: int,
    kv_dtype: Dtype | str = "bf16",
    link_ids: Sequence[str] | None = None,
    bandwidths_gb_per_s: Sequence[float] | None = None,
    prefill_ms: float | None = None,
    gpu_id: str | None = None,
    tp: int = 1,
    dtype: Dtype | str = "bf16",
    mfu: float | None = None,
    overlap_fraction: float = DEFAULT_KV_STREAM_OVERLAP,
) -> KvTransferTable:
    """The KV-transfer analysis of one ``prompt_tokens`` prompt of ``model_id``.

    Links: the catalog links ``link_ids`` and plain bandwidths
    ``bandwidths_gb_per_s`` (GB/s per direction, no latency), in that order; with
    neither, every catalog link, fastest first. Prefill time: ``prefill_ms`` if
    given, else :func:`planner.roofline.prefill_ms` of the prompt on ``tp`` x
    ``gpu_id`` (causal attention, overhead included), else unknown (exposed =
    transfer). With ``gpu_id`` each of the ``tp`` GPUs ships its shard over its
    own link (``parallel_links = tp``), as the planner does.

    Checks (DOMAIN.md): 4,096 tokens of llama-2-7b (MHA) are 2.147 GB, of a GQA-8
    7-8B model 0.537 GB; over 400 / 64 / 25 GB/s they take 5.4 / 33.6 / 85.9 ms
    and 1.3 / 8.4 / 21.5 ms.
    """
    model = _get_model(catalog, model_id)
    _check_prompt(model, prompt_tokens)
    k_dtype = _kv_dtype(kv_dtype)
    if not 0.0 <= overlap_fraction <= 1.0:
        raise PlanningError.for_field(
            "overlap_fraction", f"must be in [0, 1], got {overlap_fraction}"
        )
    links: list[Link] = []
    for lid in link_ids or ():
        link = catalog.links.get(lid)
        if link is None:
            known = ", ".join(sorted(catalog.links))
            raise UnknownEntryError.for_field("links", f"unknown link {lid!r} (known: {known})")
        links.append(link)
    custom = list(bandwidths_gb_per_s or ())
    for bw in custom:
        _check_positive("bandwidths_gb_per_s", bw)
    if not links and not custom:
        links = sorted(catalog.links.values(), key=lambda lk: (-lk.bandwidth_gb_per_s, lk.id))

    replica: rl.Replica | None = None
    notes: list[str] = []
    if prefill_ms is not None and gpu_id is not None:
        raise PlanningError.for_field("prefill_ms", "give a prefill time or a GPU, not both")
    if prefill_ms is not None:
        if not (prefill_ms >= 0 and math.isfinite(prefill_ms)):
            raise PlanningError.for_field("prefill_ms", f"must be >= 0, got {prefill_ms}")
        source = PrefillSource.GIVEN
    elif gpu_id is not None:
        replica = rl.build_replica(
            catalog, model_id, gpu_id, tp=tp, dtype=dtype, kv_dtype=k_dtype, mfu=mfu
        )
        prefill_ms = rl.prefill_ms(replica, prompt_tokens)
        source = PrefillSource.ROOFLINE
    else:
        source = PrefillSource.NONE
        notes.append(
            "no prefill time (give one, or a GPU to compute it): "
            "the whole transfer is counted as exposed"
        )
    parallel = replica.tp if replica is not None else 1
    kv_bytes = arch.kv_bytes_for_sequence(model, prompt_tokens, k_dtype)

    def row(label: str, kind: str, bw: float, latency_us: float) -> KvTransferRow:
        transfer = rl.kv_transfer_ms(kv_bytes, bw * parallel, latency_us)
        if prefill_ms is None:
            exposed = transfer
        else:
            exposed = rl.exposed_transfer_ms(
                transfer, prefill_ms, overlap_fraction, num_layers=model.num_layers
            )
        return KvTransferRow(
            link=label,
            kind=kind,
            bandwidth_gb_per_s=bw,
            latency_us=latency_us,
            parallel_links=parallel,
            transfer_ms=transfer,
            exposed_ms=exposed,
        )

    rows = [row(lk.id, str(lk.kind), lk.bandwidth_gb_per_s, lk.latency_us) for lk in links]
    rows += [row(f"{bw:g} GB/s", "custom", bw, 0.0) for bw in custom]
    return KvTransferTable(
        model=model.id,
        prompt_tokens=prompt_tokens,
        kv_dtype=str(k_dtype),
        kv_bytes_per_token=arch.kv_bytes_per_token(model, k_dtype),
        kv_gb=kv_bytes / 1e9,
        num_layers=model.num_layers,
        overlap_fraction=overlap_fraction,
        prefill_ms=prefill_ms,
        prefill_source=source,
        prefill_replica=None if replica is None else ReplicaSummary.of(replica),
        rows=rows,
        notes=notes,
    )
