"""Collectives on a scale-up mesh without a switch (MI300X's xGMI, Gaudi 3's RoCE ports):
a group of n GPUs uses only the n - 1 direct links to its peers, and xGMI's latency and
all-reduce slowdown are fitted to public MI300X timings (scripts/fit_mesh_allreduce.py,
catalog/measurements/sources/mi300x-allreduce.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from script_support import load_script

from catalog.loader import load_catalog
from catalog.schema import Link
from planner.collectives import (
    all_to_all_ms,
    allreduce_ms,
    allreduce_slowdown,
    group_bandwidth_gb_per_s,
)

ROOT = Path(__file__).resolve().parent.parent
CAT = load_catalog()
FIT = load_script("fit_mesh_allreduce")
SOURCE = json.loads(FIT.SOURCE.read_text())


def mesh(**update) -> Link:
    base = {
        "id": "mesh",
        "name": "a mesh",
        "kind": "scale_up",
        "bandwidth_gb_per_s": 448.0,
        "latency_us": 7.0,
        "mesh_peers": 7,
        "sources": ["https://example.org/mesh"],
    }
    return Link.model_validate({**base, **update})


def test_a_group_uses_the_links_to_its_own_peers():
    link = mesh()
    assert group_bandwidth_gb_per_s(link, 1) == 448.0
    assert group_bandwidth_gb_per_s(link, 2) == pytest.approx(64.0)
    assert group_bandwidth_gb_per_s(link, 4) == pytest.approx(192.0)
    assert group_bandwidth_gb_per_s(link, 8) == pytest.approx(448.0)
    assert group_bandwidth_gb_per_s(link, 16) == pytest.approx(448.0)  # at most every link
    switched = mesh(mesh_peers=None)
    assert group_bandwidth_gb_per_s(switched, 2) == 448.0  # NVSwitch: the whole bandwidth


def test_worked_allreduce_and_all_to_all_on_a_mesh():
    """16 MiB at tp 2 on 64 GB/s: two-shot 2 x 7 us + 2 x 1/2 x 16 MiB / 64 GB/s = 276.1 us
    (one-shot: 7 + 262.1); at tp 8 on 448 GB/s two-shot: 14 + 2 x 7/8 x 16 MiB / 448 GB/s
    = 79.5 us; with no measured curve both take the assumed slowdown at 16 MiB."""
    link = mesh()
    m = 16 * 2**20
    slow = allreduce_slowdown(link, m)
    assert allreduce_ms(link, 2, m) == pytest.approx((7 + m / 64e9 * 1e6) * 1e-3 * slow)
    assert allreduce_ms(link, 8, m) == pytest.approx(
        (14 + 2 * 7 / 8 * m / 448e9 * 1e6) * 1e-3 * slow
    )
    assert allreduce_ms(link, 2, m) > 3 * allreduce_ms(link, 8, m)
    # an all-to-all over 4 ranks of the mesh: 3 links, 192 GB/s x the kernel's share
    a2a = all_to_all_ms(link, 4, 3e6)
    switched = all_to_all_ms(mesh(mesh_peers=None), 4, 3e6)
    assert a2a > switched and a2a - 22.1e-3 == pytest.approx((switched - 22.1e-3) * 448 / 192)


def test_a_group_takes_the_curve_of_its_size():
    """The smallest measured count at least the group's (tp 3 -> tp 4's), the largest
    beyond them (tp 16 -> tp 8's), the median curve without a count."""
    xgmi = CAT.links["infinity-fabric-mi300"]
    assert xgmi.allreduce is not None and xgmi.allreduce.slowdown_by_gpus is not None
    m = 16 * 2**20
    by = xgmi.allreduce.slowdown_by_gpus
    assert allreduce_slowdown(xgmi, m, 2) == by[2][16]
    assert allreduce_slowdown(xgmi, m, 3) == by[4][16]
    assert allreduce_slowdown(xgmi, m, 8) == by[8][16]
    assert allreduce_slowdown(xgmi, m, 16) == by[8][16]
    assert allreduce_slowdown(xgmi, m) == xgmi.allreduce.slowdown_by_mib[16]
    assert allreduce_slowdown(xgmi, 2**16, 8) == 1.0  # 64 KiB: the measured latency holds


def test_mesh_peers_is_refused_out_of_range():
    with pytest.raises(ValueError, match="mesh_peers"):
        mesh(mesh_peers=0)


def test_xgmi_is_fitted_to_the_stored_timings():
    """The catalog link carries what scripts/fit_mesh_allreduce.py derives from the stored
    timings: latency 7.18 us (7.07 / 7.18 / 7.64 us at tp 2 / 4 / 8) and the slowdown
    curve (measured over alpha-beta at the mesh bandwidth, median over GPU counts)."""
    xgmi = CAT.links["infinity-fabric-mi300"]
    assert xgmi.mesh_peers == 7
    latency, curve, by_gpus = FIT.fit(xgmi, SOURCE)
    assert latency == pytest.approx(7.18) and xgmi.latency_us == pytest.approx(latency)
    assert xgmi.allreduce is not None and xgmi.allreduce.slowdown_by_mib == curve
    assert xgmi.allreduce.slowdown_by_gpus == by_gpus
    assert set(curve) == {1, 2, 4, 8, 16, 32, 64} and sorted(by_gpus) == [2, 4, 8]
    # the curve differs by GPU count: at 16 MiB 1.32 at tp 2, 1.84 at tp 8
    assert by_gpus[2][16] == pytest.approx(1.321) and by_gpus[8][16] == pytest.approx(1.841)
    assert curve[16] == pytest.approx(1.412)  # the median, for callers without a count
    best = FIT.fastest_by_gpus(SOURCE["runs"])
    assert sorted(best) == [2, 4, 8]
    assert best[4][2**20] == 21.92  # QuickReduce beat the baseline's 22.91 us there
    # every source is a URL; each run names its kernel and GPU count
    for run in SOURCE["runs"]:
        assert run["source"].startswith("https://") and run["kernel"] and run["gpus"] in (2, 4, 8)


@pytest.mark.parametrize(
    ("gpus", "mib", "measured_us"),
    [
        (2, 16, 355.91),
        (2, 1, 28.15),
        (4, 16, 205.4),
        (4, 4, 63.86),
        (8, 16, 147.05),
        (8, 64, 426.0),
    ],
)
def test_priced_xgmi_allreduces_are_near_the_measured_ones(gpus, mib, measured_us):
    """Within 10% of the fastest measured kernel at each GPU count (each count has its
    curve); before the mesh was modelled tp 2 was priced 4.2x too fast at 16 MiB (85 us
    against 356 us measured)."""
    priced_us = allreduce_ms(CAT.links["infinity-fabric-mi300"], gpus, mib * 2**20) * 1e3
    assert priced_us == pytest.approx(measured_us, rel=0.10)


def test_the_catalog_yaml_states_the_mesh():
    raw = yaml.safe_load((ROOT / "catalog/data/links/infinity-fabric-mi300.yaml").read_text())
    assert raw["mesh_peers"] == 7
    assert "mesh_peers" in (ROOT / "catalog/data/links/gaudi3-roce.yaml").read_text()
