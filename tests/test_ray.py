"""Comparisons on Ray (issue 14 item 3): with a Ray address the variants run as Ray
tasks, with the same results as the local process pool. Runs when Ray is installed
(pip install 'fleetplan[ray]'), starting a local Ray; skipped otherwise."""

from __future__ import annotations

import copy

import pytest
from compare_support import SPEC

from catalog.loader import load_catalog
from planner.compare import compare

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'fleetplan[ray]'")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield "local"
    ray.shutdown()


def _costs(result) -> list[tuple[str, float | None, int | None]]:
    return [(r["variant"], r.get("cost_usd_per_hour"), r.get("gpus_total")) for r in result.table]


def test_a_comparison_on_ray_equals_the_local_one(local_ray) -> None:
    catalog = load_catalog()
    spec = copy.deepcopy(SPEC)
    seen: list[tuple[int, int]] = []
    on_ray = compare(
        spec,
        catalog,
        ray_address=local_ray,
        verify_default=False,
        progress=lambda done, total: seen.append((done, total)),
    )
    local = compare(copy.deepcopy(SPEC), catalog, workers=1, verify_default=False)
    assert _costs(on_ray) == _costs(local)
    assert [p is not None for p in on_ray.plans] == [p is not None for p in local.plans]
    total = len(on_ray.table)
    assert seen[0] == (0, total) and seen[-1] == (total, total)
