"""Every figure of a fleet's total cost of ownership, one named function each.

Units are in the names: ``_usd`` US dollars, ``_kw`` kilowatts, ``_kwh`` kilowatt-
hours, ``_hours``/``_months``/``_days`` of the horizon. Inputs come from the catalog
(server size, TDP and host power: vendor figures; prices: quoted or estimated with
their source and date, :class:`catalog.schema.ServerPurchase`,
:class:`catalog.schema.ReservedPrice`) and from the request's ``procurement`` block
(electricity, PUE, hosting: assumed defaults, :mod:`planner.procurement.spec`).
"""

from __future__ import annotations

import math

HOURS_PER_YEAR = 8760.0
MONTHS_PER_YEAR = 12.0
DAYS_PER_YEAR = 365.0


def horizon_hours(years: float) -> float:
    """Hours in the horizon: ``8,760 x years`` (hours; the fleet runs around the clock)."""
    return HOURS_PER_YEAR * years


def horizon_months(years: float) -> float:
    """Months in the horizon: ``12 x years`` (months)."""
    return MONTHS_PER_YEAR * years


def horizon_days(years: float) -> float:
    """Days in the horizon: ``365 x years`` (days); each hour of the day recurs this often."""
    return DAYS_PER_YEAR * years


def servers_for(gpus: int, gpus_per_server: int) -> int:
    """Servers to buy for ``gpus`` GPUs: ``ceil(gpus / GPUs per server)`` (servers; a
    GB200 NVL72 rack is one 72-GPU server: whole racks are bought)."""
    if gpus <= 0:
        return 0
    return math.ceil(gpus / gpus_per_server)


def server_power_kw(gpus_per_server: int, tdp_w: float, server_overhead_w: float) -> float:
    """Nameplate power of one whole server: ``(GPUs per server x TDP + host overhead) /
    1000`` (kW; catalog figures). Owned servers are powered and hosted whole, at
    nameplate around the clock: an upper bound on what they draw."""
    return (gpus_per_server * tdp_w + server_overhead_w) / 1000.0


def capex_usd(servers: int, usd_per_server: float, networking_usd_per_server: float) -> float:
    """Capital cost: ``servers x (price per server + networking per server)`` ($; the
    catalog's purchase price with its source and date)."""
    return servers * (usd_per_server + networking_usd_per_server)


def energy_usd(power_kw: float, pue: float, hours: float, usd_per_kwh: float) -> float:
    """Energy: ``kW x PUE x hours x $/kWh`` ($): the IT load times the facility's
    overhead (PUE), over the horizon's hours."""
    return power_kw * pue * hours * usd_per_kwh


def hosting_usd(power_kw: float, usd_per_kw_month: float, months: float) -> float:
    """Hosting (colocation, energy excluded): ``kW x $/kW-month x months`` ($)."""
    return power_kw * usd_per_kw_month * months


def rent_usd(gpu_hours: float, usd_per_gpu_hour: float) -> float:
    """Rent: ``GPU-hours x $/GPU-hour`` ($; on-demand or reserved catalog price)."""
    return gpu_hours * usd_per_gpu_hour


def operations_usd(operations_usd_per_hour: float, hours: float) -> float:
    """Operations (the plan's cost of its GPU types and configurations,
    ``operations.cost_usd_per_hour``, assumed rates): ``$/hour x hours`` ($)."""
    return operations_usd_per_hour * hours


def owned_server_usd(
    usd_per_server: float,
    networking_usd_per_server: float,
    power_kw: float,
    pue: float,
    usd_per_kwh: float,
    hosting_usd_per_kw_month: float,
    years: float,
) -> float:
    """What one owned server costs over the horizon ($): :func:`capex_usd` of one
    server + :func:`energy_usd` + :func:`hosting_usd` of its nameplate power."""
    return (
        capex_usd(1, usd_per_server, networking_usd_per_server)
        + energy_usd(power_kw, pue, horizon_hours(years), usd_per_kwh)
        + hosting_usd(power_kw, hosting_usd_per_kw_month, horizon_months(years))
    )


def output_tokens_over_horizon(
    output_tokens_per_hour_at_peak: float, mean_rate_factor: float, years: float
) -> float:
    """Output tokens served over the horizon: ``peak output tokens/hour x mean hourly
    factor x hours`` (tokens; the request's rates x mean output lengths)."""
    return output_tokens_per_hour_at_peak * mean_rate_factor * horizon_hours(years)


def usd_per_million_output_tokens(total_usd: float, output_tokens: float) -> float | None:
    """``total $ / (output tokens / 1e6)`` ($ per million output tokens); None without tokens."""
    if output_tokens <= 0:
        return None
    return total_usd / (output_tokens / 1e6)
