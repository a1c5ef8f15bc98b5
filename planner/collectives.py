"""Collectives of a step: tensor-parallel all-reduces and expert-parallel all-to-alls on
a link (split from :mod:`planner.kernels`, which re-exports them).

Link latencies and the all-to-all kernel are measured where the catalog says so
(aiconfigurator's database, ``catalog/measurements/sources/aiconfigurator-kernels.json``)
and assumed no faster than the slowest measured elsewhere.
"""

from __future__ import annotations

import math

from catalog.schema import Link, LinkKind

#: Expert-parallel all-to-all on a link without a measurement (:func:`all_to_all_kernel`):
#: the largest per-operation latency and the smallest bandwidth share measured on any
#: catalog link (DeepEP's low-latency kernels in aiconfigurator's database: NVLink 5
#: 22.1 us, NVLink 4 0.67), so an unmeasured link is never faster. Checked against the
#: catalog in tests/test_kernel_floors.py.
ALL_TO_ALL_ASSUMED_LATENCY_US = 22.1
ALL_TO_ALL_ASSUMED_BANDWIDTH_FRACTION = 0.67

#: Tensor-parallel all-reduce on a scale-up link without a measurement
#: (:func:`allreduce_slowdown`): per message size (MiB), the largest slowdown measured on a
#: catalog link (NVLink 3, 4 and 5: engines' custom all-reduces in aiconfigurator's
#: database), so an unmeasured link (xGMI, a bridge, Gaudi's RoCE) is never faster.
#: Checked against the catalog in tests/test_gemm_peak_share.py.
ALLREDUCE_SLOWDOWN_ASSUMED: dict[int, float] = {
    1: 1.216,
    2: 1.277,
    4: 1.4,
    8: 2.128,
    16: 1.97,
    32: 1.913,
    64: 1.852,
    128: 1.565,
    256: 1.552,
    512: 1.489,
    1024: 1.443,
}
#: Messages of at most this many MiB (64 KiB) take the alpha-beta time (slowdown 1: the
#: measured small-message latency is the link's latency); the slowdown grows linearly in
#: log2(size) from here to the curve's first point.
ALLREDUCE_SLOWDOWN_FROM_MIB = 1.0 / 16.0


def allreduce_slowdown(link: Link, message_bytes: float, gpus: int | None = None) -> float:
    """Measured all-reduce time over the alpha-beta time on ``link`` for a message of
    ``message_bytes`` (dimensionless, >= 0.5): the link's ``allreduce.slowdown_by_mib``
    (engines' custom all-reduces, 1 MiB to 1 GiB: NVLink 4 1.22 at 1 MiB, 1.55 at 8-16 MiB,
    1.26 at 1 GiB), else :data:`ALLREDUCE_SLOWDOWN_ASSUMED` on a scale-up link; linear in
    log2(size) between the curve's points, 1 at and below
    :data:`ALLREDUCE_SLOWDOWN_FROM_MIB`, the last point's beyond the last; 1 on other links
    (a network ring at its nominal rate; PCIe has its own measured fit). Where the link's
    measurement has a curve per GPU count (``allreduce.slowdown_by_gpus``) and ``gpus`` is
    given, the curve of the smallest measured count at least ``gpus`` (the largest beyond
    them) is used: xGMI at 16 MiB 1.32 at tp 2, 1.84 at tp 8."""
    if link.allreduce is not None:
        curve = link.allreduce.slowdown_by_mib
        by_gpus = link.allreduce.slowdown_by_gpus
        if by_gpus and gpus is not None:
            counts = sorted(by_gpus)
            curve = by_gpus[next((c for c in counts if c >= gpus), counts[-1])]
    elif link.kind == LinkKind.SCALE_UP:
        curve = ALLREDUCE_SLOWDOWN_ASSUMED
    else:
        return 1.0
    points = sorted(curve.items())
    mib = message_bytes / 2**20
    if mib <= ALLREDUCE_SLOWDOWN_FROM_MIB:
        return 1.0
    prev_x, prev_y = ALLREDUCE_SLOWDOWN_FROM_MIB, 1.0
    for x, y in points:
        if mib <= x:
            t = math.log2(mib / prev_x) / math.log2(x / prev_x)
            return prev_y + (y - prev_y) * t
        prev_x, prev_y = x, y
    return prev_y


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
#: conservatively). Taken for every PCIe link (Gen5 hosts are not measured) unless the
#: GPU's servers have a tp 8 figure fitted to its own runs (``server.pcie_allreduce``,
#: :func:`pcie_allreduce_alpha_beta`). Checked against the extracted file in
#: tests/test_kernel_floors.py.
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
    link's own (the measured latency replaces the link's assumed one).

    Where the link carries a bus bandwidth fitted to the GPU's own tp 8 runs
    (``link.pcie_tp8_bus_gb_per_s``, from ``server.pcie_allreduce``: L40S 16.3 GB/s
    against the conservative 9.78) it replaces the 8's figure, and a smaller ring is
    never slower: ``max(measured, fitted)`` at tp 2 and 4."""
    at = next((t for t in _PCIE_MEASURED_TPS if t >= tp), _PCIE_MEASURED_TPS[-1])
    t0_us, bus = PCIE_ALLREDUCE_MEASURED[at]
    fitted = link.pcie_tp8_bus_gb_per_s
    if fitted is not None:
        bus = fitted if at == _PCIE_MEASURED_TPS[-1] else max(bus, fitted)
    return t0_us, min(bus, link.bandwidth_gb_per_s)


def group_bandwidth_gb_per_s(link: Link, ranks: int) -> float:
    """Per-GPU, per-direction bandwidth a collective over ``ranks`` GPUs of one node gets
    on ``link`` (GB/s): the link's ``bandwidth_gb_per_s`` through a switch (NVSwitch, a
    network, PCIe); on a full mesh without a switch (``link.mesh_peers`` = P direct links,
    each ``bandwidth / P``) only the ``min(ranks - 1, P)`` links to the group's own peers
    carry it: ``bandwidth x min(ranks - 1, P) / P``. MI300X's xGMI (448 GB/s over 7
    links): 64 GB/s at tp 2, 192 at tp 4, 448 at tp 8 (a tp-2 all-reduce of 16 MiB
    measured 356 us, against 85 us at the whole 448 GB/s: :func:`allreduce_ms`)."""
    if link.mesh_peers is None or ranks <= 1:
        return link.bandwidth_gb_per_s
    return link.bandwidth_gb_per_s * min(ranks - 1, link.mesh_peers) / link.mesh_peers


def allreduce_ms(link: Link, tp: int, message_bytes: float) -> float:
    """Time of one all-reduce of ``message_bytes`` over ``tp`` ranks on ``link`` (ms).

    Alpha-beta costs with ``a`` = the link's latency and ``b`` = 1 / its per-GPU,
    per-direction bandwidth for a group of ``tp`` (:func:`group_bandwidth_gb_per_s`: on a
    mesh without a switch, the ``tp - 1`` links to the group's peers):

    * ring: ``2 (tp-1) a + 2 (tp-1)/tp x M b``;
    * one-shot (every rank reads every peer's buffer): ``a + (tp-1) x M b``;
    * two-shot (reduce-scatter then all-gather, direct): ``2 a + 2 (tp-1)/tp x M b``.

    On a scale-up link (NVSwitch, xGMI mesh, NVLink bridge) engines pick the fastest
    (one-shot for small messages: a few microseconds; two-shot or ring for large ones,
    bandwidth-bound), times the link's measured :func:`allreduce_slowdown` at ``M``
    (engines' all-reduces take 1.2-1.6x the alpha-beta time on NVLink 4 from 1 MiB up;
    a 32 MiB prefill chunk's message at tp 8: 0.1375 ms x 1.471 = 0.202 ms, measured
    0.178-0.213). Over PCIe the measured NCCL ring of a PCIe server:
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
    beta_ms = 1e3 / (group_bandwidth_gb_per_s(link, tp) * 1e9)
    ring = 2 * (tp - 1) * alpha_ms + 2.0 * (tp - 1) / tp * message_bytes * beta_ms
    if link.kind != LinkKind.SCALE_UP:
        return ring
    one_shot = alpha_ms + (tp - 1) * message_bytes * beta_ms
    two_shot = 2 * alpha_ms + 2.0 * (tp - 1) / tp * message_bytes * beta_ms
    return min(ring, one_shot, two_shot) * allreduce_slowdown(link, message_bytes, tp)


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
    per-operation latency ``a``, bandwidth share ``f`` (:func:`all_to_all_kernel`) and
    the group's bandwidth (:func:`group_bandwidth_gb_per_s`: on a mesh, the ``ranks - 1``
    links to its peers); 0 for one rank."""
    if ranks <= 1 or bytes_per_rank <= 0:
        return 0.0
    latency_us, fraction = all_to_all_kernel(link)
    return latency_us * 1e-3 + bytes_per_rank * (ranks - 1) / ranks / (
        group_bandwidth_gb_per_s(link, ranks) * fraction * 1e9 / 1e3
    )
