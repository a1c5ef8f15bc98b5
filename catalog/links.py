"""Interconnect entries of the catalog (split from :mod:`catalog.schema`, which
re-exports them): a link's kind, per-direction bandwidth and latency, whether its GPUs
form a mesh without a switch, and the all-reduce and all-to-all kernels measured on it."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from catalog.fields import (
    MAX_LATENCY_US,
    MAX_LINK_GB_PER_S,
    Frozen,
    Id,
    Name,
    NonNegFloat,
    PosFloat,
    Sources,
    Text,
)


class LinkKind(StrEnum):
    """Where a link sits: inside a scale-up domain, host PCIe, or between nodes."""

    SCALE_UP = "scale_up"
    PCIE = "pcie"
    NETWORK = "network"


class AllToAllKernel(Frozen):
    """An expert-parallel all-to-all kernel (dispatch or combine) measured on a link:
    ``latency_us``, the per-operation cost at one token; ``bandwidth_fraction``, the share
    of the link's per-direction bandwidth it reaches on large messages; ``source``."""

    latency_us: NonNegFloat = Field(le=10_000)
    bandwidth_fraction: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
    source: Text = Field(min_length=10)


class AllReduceKernel(Frozen):
    """Engines' tensor-parallel all-reduce measured on a link: ``slowdown_by_mib``, per
    message size in MiB (1 to 1,024), the measured time over the alpha-beta time at the
    link's nominal bandwidth and latency (``planner.collectives.allreduce_ms``), the median
    over engines and GPU counts; ``source``."""

    slowdown_by_mib: dict[
        Annotated[int, Field(ge=1, le=1 << 20)],
        Annotated[float, Field(ge=0.5, le=10, allow_inf_nan=False)],
    ] = Field(min_length=1, max_length=32)
    slowdown_by_gpus: (
        dict[
            Annotated[int, Field(ge=2, le=64)],
            dict[
                Annotated[int, Field(ge=1, le=1 << 20)],
                Annotated[float, Field(ge=0.5, le=10, allow_inf_nan=False)],
            ],
        ]
        | None
    ) = Field(
        default=None,
        max_length=8,
        description="The same curve per GPU count of the all-reduce where the measurements "
        "differ by it (xGMI: 1.3 at tp 2, 1.8 at tp 8 for 16 MiB); a group takes the curve of "
        "the smallest measured count at least its size (the largest beyond), "
        "planner.collectives.allreduce_slowdown; None: slowdown_by_mib for every count.",
    )
    source: Text = Field(min_length=10)


class Link(Frozen):
    """An interconnect. Bandwidth is per direction (what one transfer can use)."""

    id: Id
    name: Name
    kind: LinkKind
    bandwidth_gb_per_s: PosFloat = Field(
        le=MAX_LINK_GB_PER_S,
        description="Usable bandwidth per direction per GPU, GB/s (1e9 bytes/s).",
    )
    latency_us: NonNegFloat = Field(
        le=MAX_LATENCY_US, description="One-way latency of a transfer, microseconds."
    )
    all_to_all: AllToAllKernel | None = Field(
        default=None,
        description="Measured expert-parallel all-to-all on this link; None: assumed.",
    )
    allreduce: AllReduceKernel | None = Field(
        default=None,
        description="Measured tensor-parallel all-reduce on this link; None: assumed.",
    )
    mesh_peers: Annotated[int, Field(ge=1, le=64)] | None = Field(
        default=None,
        description="Scale-up links without a switch: each GPU has one direct link to "
        "each of its mesh_peers peers, at bandwidth_gb_per_s / mesh_peers per direction, "
        "so a collective over n GPUs of the node uses n - 1 of them "
        "(planner.collectives.group_bandwidth_gb_per_s; MI300X's xGMI: 7 links of 64 GB/s); "
        "None: a switch gives each GPU its whole bandwidth whatever the group.",
    )
    pcie_tp8_bus_gb_per_s: PosFloat | None = Field(
        default=None,
        le=MAX_LINK_GB_PER_S,
        description="PCIe links only: the bus bandwidth of an 8-GPU all-reduce on the "
        "server a replica runs in (set from the GPU's server.pcie_allreduce when a "
        "replica is built, planner.collectives.pcie_allreduce_alpha_beta); None: the "
        "conservative figure of planner.collectives.PCIE_ALLREDUCE_MEASURED.",
    )
    sources: Sources
    notes: Text = ""
