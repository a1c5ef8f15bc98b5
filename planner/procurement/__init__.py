"""Procurement: what the fleet costs to own or rent over a horizon (TCO), and the
own-or-rent split over a day's load (issue 13)."""

from planner.procurement.models import HourSplit, PurchaseOption, Tco, TcoLine
from planner.procurement.spec import (
    LoadProfileSpec,
    ProcurementSpec,
    Purchase,
    RentTerm,
)
from planner.procurement.tco import PoolDemand, hourly_need, plan_tco

__all__ = [
    "HourSplit",
    "LoadProfileSpec",
    "PoolDemand",
    "ProcurementSpec",
    "Purchase",
    "PurchaseOption",
    "RentTerm",
    "Tco",
    "TcoLine",
    "hourly_need",
    "plan_tco",
]
