"""Collectives of a step: tensor-parallel all-reduces and expert-parallel all-to-alls on
a link (split from :mod:`planner.kernels`, which re-exports them).

Link latencies and the all-to-all kernel are measured where the catalog says so
(aiconfigurator's database, ``catalog/measurements/sources/aiconfigurator-kernels.json``)
and assumed no faster than the slowest measured elsewhere.
"""

from __future__ import annotations

from catalog.schema import Link, LinkKind

#: Expert-parallel all-to-all on a link without a measurement (:func:`all_to_all_kernel`):
#: the largest per-operation latency and the smallest bandwidth share measured on any
#: catalog link (DeepEP's low-latency kernels in aiconfigurator's database: NVLink 5
#: 22.1 us, NVLink 4 0.67), so an unmeasured link is never faster. Checked against the
#: catalog in tests/test_kernel_floors.py.
ALL_TO_ALL_ASSUMED_LATENCY_US = 22.1
ALL_TO_ALL_ASSUMED_BANDWIDTH_FRACTION = 0.67


#: NCCL all-reduce over PCIe on an 8-GPU server without NVLink, per GPU count: (latency
#: of a small message in us, bus bandwidth in GB/s). The latencies are measured on an
#: 8 x L40S PCIe Gen4 server (aiconfigurator's database, NCCL 2.27.3, extracted by
#: ``scripts/extract_aiconfigurator.py`` with the bus bandwidths: 19.56 GB/s at tp 2, 5.11
#: at tp 4, 1.51 at tp 8). That server's tp 4 and 8 rings cross its CPU sockets without
#: peer-to-peer: two other L40S servers that ran Llama-2-70B FP8 at tp 4 (MLPerf v4.1
#: Fujitsu, NVIDIA's DLI course) served 2.7-3x what 5.11 GB/s allows, and within -11% to
#: +14% of what tp 2's 19.56 GB/s predicts. So the bus bandwidth is tp 2's measured one up
#: to tp 4 (a ring whose hops all run through PCIe switches) and half of it at tp 8
#: (assumed: a whole dual-socket server's ring crosses the CPU interconnect; the DLI tp 8
#: runs serve 1.2-1.5x what it predicts, against 0.84-0.87x at the full figure: priced
#: conservatively). Taken for every PCIe link (Gen5 hosts are not measured). Checked
#: against the extracted file in tests/test_kernel_floors.py.
PCIE_ALLREDUCE_MEASURED: dict[int, tuple[float, float]] = {
    2: (7.0, 19.56),
    4: (12.41, 19.56),
    8: (24.53, 9.78),
}
_PCIE_MEASURED_TPS = sorted(PCIE_ALLREDUCE_MEASURED)


def pcie_allreduce_alpha_beta(link: Link, tp: int) -> tuple[float, float]:
    """(latency ``t0`` us, bus bandwidth GB/s) of an all-reduce over ``tp`` GPUs on the
    PCIe link ``link``: :data:`PCIE_ALLREDUCE_MEASURED` at ``tp`` (a tp between measured
    counts takes the next larger one's, past 8 the 8's), the bandwidth never above the
    link's own (the measured latency replaces the link's assumed one)."""
    at = next((t for t in _PCIE_MEASURED_TPS if t >= tp), _PCIE_MEASURED_TPS[-1])
    t0_us, bus = PCIE_ALLREDUCE_MEASURED[at]
    return t0_us, min(bus, link.bandwidth_gb_per_s)


def allreduce_ms(link: Link, tp: int, message_bytes: float) -> float:
    """Time of one all-reduce of ``message_bytes`` over ``tp`` ranks on ``link`` (ms).

    Alpha-beta costs with ``a`` = the link's latency and ``b`` = 1 / its per-GPU,
    per-direction bandwidth:

    * ring: ``2 (tp-1) a + 2 (tp-1)/tp x M b``;
    * one-shot (every rank reads every peer's buffer): ``a + (tp-1) x M b``;
    * two-shot (reduce-scatter then all-gather, direct): ``2 a + 2 (tp-1)/tp x M b``.

    On a scale-up link (NVSwitch, xGMI mesh, NVLink bridge) engines pick the fastest
    (one-shot for small messages: a few microseconds; two-shot or ring for large ones,
    bandwidth-bound). Over PCIe the measured NCCL ring of a PCIe server:
    ``t0 + 2 (tp-1)/tp x M / bus`` with (``t0``, ``bus``) from
    :func:`pcie_allreduce_alpha_beta` (70B's 1 MB decode message at tp 4: 12.41 us +
    1.5 x 1.05e6 / 19.56e9 s = 0.093 ms; at tp 8: 0.212 ms). Other links (network): the
    link's ring. 0 when ``tp == 1`` or nothing is sent.
    """
    if tp <= 1 or message_bytes <= 0:
        return 0.0
    if link.kind == LinkKind.PCIE:
        t0_us, bus = pcie_allreduce_alpha_beta(link, tp)
        return t0_us * 1e-3 + 2.0 * (tp - 1) / tp * message_bytes / (bus * 1e9) * 1e3
    alpha_ms = link.latency_us * 1e-3
    beta_ms = 1e3 / (link.bandwidth_gb_per_s * 1e9)
    ring = 2 * (tp - 1) * alpha_ms + 2.0 * (tp - 1) / tp * message_bytes * beta_ms
    if link.kind != LinkKind.SCALE_UP:
        return ring
    one_shot = alpha_ms + (tp - 1) * message_bytes * beta_ms
    two_shot = 2 * alpha_ms + 2.0 * (tp - 1) / tp * message_bytes * beta_ms
    return min(ring, one_shot, two_shot)


def all_to_all_kernel(link: Link) -> tuple[float, float]:
    """(latency us, bandwidth fraction) of an expert-parallel all-to-all on ``link``:
    measured where the link's catalog entry has it (``all_to_all``: DeepEP's low-latency
    dispatch and combine in aiconfigurator's database, e.g. NVLink 4 13.8 us and 0.67 of
    450 GB/s), else assumed: :data:`ALL_TO_ALL_ASSUMED_LATENCY_US` and
    :data:`ALL_TO_ALL_ASSUMED_BANDWIDTH_FRACTION`, or the link's own latency if higher."""
    if link.all_to_all is not None:
        return link.all_to_all.latency_us, link.all_to_all.bandwidth_fraction
    return (
        max(link.latency_us, ALL_TO_ALL_ASSUMED_LATENCY_US),
        ALL_TO_ALL_ASSUMED_BANDWIDTH_FRACTION,
    )


def all_to_all_ms(link: Link, ranks: int, bytes_per_rank: float) -> float:
    """One all-to-all over ``ranks`` GPUs on ``link``, each rank sending
    ``bytes_per_rank`` spread evenly over all ranks (ms):
    ``a + bytes_per_rank x (ranks - 1) / ranks / (bandwidth x f)`` with the kernel's
    per-operation latency ``a`` and bandwidth share ``f`` (:func:`all_to_all_kernel`);
    0 for one rank."""
    if ranks <= 1 or bytes_per_rank <= 0:
        return 0.0
    latency_us, fraction = all_to_all_kernel(link)
    return latency_us * 1e-3 + bytes_per_rank * (ranks - 1) / ranks / (
        link.bandwidth_gb_per_s * fraction * 1e9 / 1e3
    )
