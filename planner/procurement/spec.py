"""The request's ``procurement`` and ``load_profile`` blocks, with their defaults.

``procurement``: over how many years the fleet is costed, what power and hosting
cost, and whether the fleet is bought (``buy``), rented (``rent``) or both
(``hybrid``: an owned base plus rented peak, chosen by one MILP,
:mod:`planner.procurement.hybrid`). ``load_profile``: the day's load, hour by hour,
relative to the request's rate.

Every default is an assumption, not a measurement; the reasons are beside each.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Default ``procurement.horizon_years``: GPU servers are commonly depreciated over 3
#: to 5 years and a generation is superseded in about 2-3; 3 years is the usual TCO
#: horizon of procurement comparisons (and issue 13's).
DEFAULT_HORIZON_YEARS = 3.0
#: Default ``procurement.electricity_usd_per_kwh`` ($/kWh): about the US industrial
#: average retail price of 2024-2025 (EIA, ~8 cents); assumed, set your contract's.
DEFAULT_ELECTRICITY_USD_PER_KWH = 0.08
#: Default ``procurement.pue`` (facility power / IT power, dimensionless): between a
#: new liquid-cooled AI hall (~1.1-1.2) and the industry average (~1.5-1.6, Uptime
#: Institute surveys); assumed.
DEFAULT_PUE = 1.4
#: Default ``procurement.hosting_usd_per_kw_month`` ($ per kW of IT load per month):
#: wholesale colocation space, cooling capacity and facility operations without the
#: energy, which is priced apart; US market rates of $120-200/kW-month in 2024-2025
#: are commonly quoted; assumed.
DEFAULT_HOSTING_USD_PER_KW_MONTH = 150.0
HOURS_PER_DAY = 24


class Purchase(StrEnum):
    """How the fleet is paid for: bought outright, rented, or an owned base plus rent."""

    BUY = "buy"
    RENT = "rent"
    HYBRID = "hybrid"


class RentTerm(StrEnum):
    """Which rental price applies: on demand (per hour used) or a 1- or 3-year
    reservation (per hour of the term, used or not)."""

    ON_DEMAND = "on_demand"
    RESERVED_1Y = "reserved_1y"
    RESERVED_3Y = "reserved_3y"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProcurementSpec(_Strict):
    """How the fleet's total cost of ownership is computed (:mod:`planner.procurement`)."""

    horizon_years: Annotated[float, Field(gt=0, le=10, allow_inf_nan=False)] = Field(
        default=DEFAULT_HORIZON_YEARS,
        description="Years over which the fleet is costed (capex is not depreciated: it is "
        "paid once within the horizon). Default 3.",
    )
    electricity_usd_per_kwh: Annotated[float, Field(ge=0, le=2, allow_inf_nan=False)] = Field(
        default=DEFAULT_ELECTRICITY_USD_PER_KWH,
        description="Price of energy for owned servers, $/kWh. Default 0.08.",
    )
    pue: Annotated[float, Field(ge=1, le=3, allow_inf_nan=False)] = Field(
        default=DEFAULT_PUE,
        description="Power usage effectiveness of the facility (total / IT power). Default 1.4.",
    )
    hosting_usd_per_kw_month: Annotated[float, Field(ge=0, le=2000, allow_inf_nan=False)] = Field(
        default=DEFAULT_HOSTING_USD_PER_KW_MONTH,
        description="Colocation per kW of owned IT load per month, energy excluded. Default 150.",
    )
    purchase: Purchase = Field(
        default=Purchase.BUY,
        description="buy (own the peak fleet), rent (rent each hour's need) or hybrid (one "
        "MILP chooses the owned base and the rented rest). Default buy.",
    )
    rent_term: RentTerm = Field(
        default=RentTerm.ON_DEMAND,
        description="The rental price for rent and hybrid: on_demand, reserved_1y or "
        "reserved_3y (reserved capacity is paid every hour of the term). Default on_demand.",
    )


class LoadProfileSpec(_Strict):
    """The day's load: 24 hourly factors on the request's rate (hour 0 first).

    Rule: every factor lies in (0, 1] and the largest is exactly 1. The request's
    rate is the peak hour's: the fleet the optimizer sizes is the peak fleet, and
    every other hour needs no more than it. A curve with its peak above 1 would ask
    for a fleet the plan did not size; one whose peak is below 1 would leave the
    request's rate unused. Scale such a curve by its maximum.
    """

    hourly_rate_factors: list[float] = Field(
        description="24 numbers in (0, 1], the largest exactly 1 (the request's rate is the "
        "peak hour's)."
    )

    @field_validator("hourly_rate_factors")
    @classmethod
    def _day(cls, v: list[float]) -> list[float]:
        if len(v) != HOURS_PER_DAY:
            raise ValueError(f"expected 24 hourly factors (hour 0 to 23), got {len(v)}")
        for i, f in enumerate(v):
            if not (f == f) or f in (float("inf"), float("-inf")) or not 0 < f <= 1:
                raise ValueError(
                    f"hour {i}: {f!r} is not in (0, 1]; factors multiply the request's rate, "
                    "which is the peak hour's (scale the curve by its maximum)"
                )
        if max(v) != 1.0:
            raise ValueError(
                f"the largest factor is {max(v):g}, expected exactly 1: the request's rate is "
                "the peak hour's (divide every factor by the maximum)"
            )
        return v
