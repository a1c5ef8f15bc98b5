"""Without Ray installed, a Ray address is refused with how to install it (runs
whether or not Ray is installed: its import is made to fail)."""

from __future__ import annotations

import importlib

import pytest

from planner import distributed
from planner.errors import PlanningError


def test_without_ray_installed_the_address_is_refused(monkeypatch) -> None:
    real = importlib.import_module

    def no_ray(name: str, *args: object) -> object:
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib, "import_module", no_ray)
    with pytest.raises(PlanningError) as err:
        distributed.ray_module()
    assert err.value.issues[0][0] == "ray_address" and "fleetplan[ray]" in err.value.message
