"""KV-cache transfer between a prefill and a decode replica: its time over a link, and
the part a TTFT sees (not hidden under the prefill's last layers).
"""

from __future__ import annotations

from planner.errors import PlanningError


def kv_transfer_ms(kv_bytes: float, bandwidth_gb_per_s: float, latency_us: float = 0.0) -> float:
    """Time to ship a KV cache (ms): ``kv_bytes / (GB/s x 1e9) x 1000 + latency_us / 1000``.

    Checks: a 4,096-token GQA-8 cache (0.537 GB) over 400 / 64 / 25 GB/s takes
    1.3 / 8.4 / 21.5 ms; an MHA cache (2.147 GB) 5.4 / 33.6 / 85.9 ms.
    """
    if bandwidth_gb_per_s <= 0:
        raise PlanningError.for_field(
            "bandwidth_gb_per_s", f"must be > 0, got {bandwidth_gb_per_s}"
        )
    if kv_bytes < 0 or latency_us < 0:
        raise PlanningError.for_field("kv_bytes", "bytes and latency must be >= 0")
    return kv_bytes / (bandwidth_gb_per_s * 1e9) * 1e3 + latency_us * 1e-3


def exposed_transfer_ms(
    transfer_ms: float, prefill_ms: float, overlap_fraction: float, num_layers: int = 1
) -> float:
    """The part of a KV transfer that adds to TTFT under layer-wise streaming (ms).

    Layer i's KV leaves as soon as layer i is computed, so the transfer can run
    behind the last ``(L-1)/L`` of the prefill. ``overlap_fraction`` caps the share
    of the transfer that streaming hides in practice:
    ``hidden = min(overlap_fraction x transfer, prefill x (L-1)/L)``,
    ``exposed = transfer - hidden``, clamped to ``[0, transfer]``.
    ``num_layers = 1`` (the default) models no streaming: all of it is exposed.
    """
    if not 0.0 <= overlap_fraction <= 1.0:
        raise PlanningError.for_field(
            "overlap_fraction", f"must be in [0, 1], got {overlap_fraction}"
        )
    if num_layers < 1:
        raise PlanningError.for_field("num_layers", f"must be >= 1, got {num_layers}")
    if transfer_ms <= 0:
        return 0.0
    window = max(prefill_ms, 0.0) * (num_layers - 1) / num_layers
    hidden = min(overlap_fraction * transfer_ms, window)
    return min(max(transfer_ms - hidden, 0.0), transfer_ms)
