"""What a plan says about buying and renting: :class:`Tco` and its parts."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TcoLine(_Out):
    """One GPU type under the chosen purchase (figures over the horizon, $)."""

    gpu: str
    gpus_needed_peak: int
    owned_gpus: int
    servers: int
    gpus_per_server: int
    power_kw: float
    usd_per_server: float | None
    networking_usd_per_server: float | None
    purchase_is_estimate: bool | None
    capex_usd: float
    energy_usd: float
    hosting_usd: float
    rent_usd: float


class PurchaseOption(_Out):
    """One way to pay for the fleet, over the horizon ($)."""

    purchase: str
    available: bool
    total_usd: float | None = None
    capex_usd: float = 0.0
    energy_usd: float = 0.0
    hosting_usd: float = 0.0
    rent_usd: float = 0.0
    operations_usd: float = 0.0
    servers_by_type: dict[str, int] = {}
    note: str = ""


class HourSplit(_Out):
    """GPUs needed, owned and rented in one hour of the day (chosen purchase)."""

    hour: int
    rate_factor: float
    needed_gpus: int
    owned_gpus: int
    reserved_gpus: int
    on_demand_gpus: int


class Tco(_Out):
    """The fleet's total cost of ownership over ``horizon_years`` ($), for the
    request's ``procurement.purchase``, with the other purchase options beside it."""

    horizon_years: float
    purchase: str
    rent_term: str
    electricity_usd_per_kwh: float
    pue: float
    hosting_usd_per_kw_month: float
    total_usd: float | None
    capex_usd: float
    networking_usd: float
    energy_usd: float
    hosting_usd: float
    rent_usd: float
    operations_usd: float
    usd_per_million_output_tokens: float | None
    band_usd: tuple[float, float] | None = Field(
        default=None,
        description="[low, high]: the total at the low and high ends of every price range "
        "(purchase, networking, rent) and of the plan's capacity band "
        "(planner.procurement.tco.tco_band_usd)",
    )
    servers_by_type: dict[str, int] = {}
    lines: list[TcoLine] = []
    options: list[PurchaseOption] = []
    hourly: list[HourSplit] = []
    load_profile: list[float] | None = None
    notes: list[str] = []
