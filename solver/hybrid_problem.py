"""The own-or-rent problem's data (:mod:`solver.hybrid` builds and solves the MILP;
:mod:`solver.constraints.own_rent` holds its rows)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulp

DAYS_PER_YEAR = 365.0
HOURS_PER_DAY = 24


@dataclass(frozen=True)
class HybridGpu:
    """One GPU type: its server size and prices.

    ``owned_usd_per_server``: what owning one server costs over the horizon (purchase,
    networking, energy, hosting; $), None when it cannot be bought.
    ``on_demand_usd_per_gpu_hour``: rent per GPU-hour used ($/GPU-h).
    ``reserved_usd_per_gpu_hour``: rent per GPU-hour of the whole term, used or not
    ($/GPU-h), None when no reservation is offered or asked for."""

    id: str
    gpus_per_server: int
    owned_usd_per_server: float | None
    on_demand_usd_per_gpu_hour: float
    reserved_usd_per_gpu_hour: float | None = None


@dataclass(frozen=True)
class HybridPool:
    """One pool: its GPU type, GPUs per replica, and the replicas it needs in each
    hour of the day (24 integers, hour 0 first)."""

    id: str
    gpu: str
    gpus_per_replica: int
    need_by_hour: tuple[int, ...]


@dataclass(frozen=True)
class HybridProblem:
    pools: tuple[HybridPool, ...]
    gpus: tuple[HybridGpu, ...]
    horizon_years: float

    @property
    def horizon_days(self) -> float:
        """Days in the horizon: 365 x years."""
        return DAYS_PER_YEAR * self.horizon_years

    @property
    def horizon_hours(self) -> float:
        """Hours in the horizon: 8,760 x years."""
        return HOURS_PER_DAY * self.horizon_days


@dataclass
class HybridVariables:
    owned: dict[str, pulp.LpVariable | float] = field(default_factory=dict)
    reserved: dict[str, pulp.LpVariable | float] = field(default_factory=dict)
    on_demand: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)
    servers: dict[str, pulp.LpVariable | float] = field(default_factory=dict)
