"""The bill of materials of a plan: what to buy per GPU type, in servers, rack
space, power and money.

Every figure comes from a named function below whose docstring states its
formula and units; :func:`build_bom` assembles them per GPU type. The plan's
own figures are preferred (the price it was costed at, its pools' power), the
catalog fills in the rest (server size, rack units, purchase price, sources),
so a stored plan reports what it was planned with even after the catalog
changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from catalog.schema import Catalog, Gpu, Price
from planner.procurement.formulas import capex_usd, servers_for

HOURS_PER_MONTH = 730.0
HOURS_PER_YEAR = 8760.0

NO_PURCHASE_PRICE = "no purchase price in catalog"
POWER_FORMULA = (
    "power_kw = GPUs x (TDP + server overhead / GPUs per server) / 1000 "
    "(the plan's pool power; whole-server overhead shared per GPU)"
)


# --------------------------------------------------------------------------- formulas


def nodes_for(gpus: int, gpus_per_server: int) -> int:
    """Servers to buy: ``ceil(gpus / gpus_per_server)`` (servers;
    :func:`planner.procurement.formulas.servers_for`)."""
    return servers_for(gpus, gpus_per_server)


def rack_units_for(nodes: int, rack_units_per_server: int) -> int:
    """Rack space: ``nodes x rack units per server`` (RU)."""
    return nodes * rack_units_per_server


def gpu_power_kw(gpus: int, tdp_w: float, server_overhead_w: float, gpus_per_server: int) -> float:
    """Power of ``gpus`` GPUs with their share of the server:
    ``gpus x (TDP + server overhead / GPUs per server) / 1000`` (kW). The same
    formula as the planner's ``replica_power_kw``."""
    return gpus * (tdp_w + server_overhead_w / gpus_per_server) / 1000.0


def usd_per_hour(gpus: int, price_usd_per_gpu_hour: float) -> float:
    """Fleet rent: ``gpus x price per GPU-hour`` ($/hour)."""
    return gpus * price_usd_per_gpu_hour


def usd_per_month(usd_hour: float) -> float:
    """``$/hour x 730`` hours per month ($/month)."""
    return usd_hour * HOURS_PER_MONTH


def usd_per_year(usd_hour: float) -> float:
    """``$/hour x 8,760`` hours per year, running around the clock ($/year)."""
    return usd_hour * HOURS_PER_YEAR


def usd_over_years(usd_hour: float, years: float) -> float:
    """Total rent over ``years`` at the hourly price: ``$/hour x 8,760 x years`` ($)."""
    return usd_hour * HOURS_PER_YEAR * years


def capital_usd(gpus: int, purchase_usd_per_gpu: float | None) -> float | None:
    """Capital cost: ``gpus x purchase price per GPU`` ($); None without a price."""
    if purchase_usd_per_gpu is None:
        return None
    return gpus * purchase_usd_per_gpu


def whole_server_capital_usd(nodes: int, gpus_per_server: int, price: Price) -> float | None:
    """Capital cost of whole servers (a GB200 NVL72 rack is one 72-GPU server: the GPUs
    a plan leaves unused in its last server are bought too), $: ``servers x (price per
    server + networking per server)`` (:func:`planner.procurement.formulas.capex_usd`,
    the catalog's ``price.purchase``), else ``servers x GPUs per server x price per
    GPU`` (the legacy ``price.purchase_usd``, no networking); None without a price."""
    if price.purchase is not None:
        return capex_usd(
            nodes, price.purchase.usd_per_server, price.purchase.networking_usd_per_server
        )
    return capital_usd(nodes * gpus_per_server, price.purchase_usd)


# --------------------------------------------------------------------------- the BOM


@dataclass
class BomLine:
    """One GPU type of the bill of materials (units in the field names)."""

    gpu: str
    gpu_name: str
    gpus: int
    gpus_per_server: int | None
    nodes: int | None
    rack_units_per_server: int | None
    rack_units: int | None
    power_kw: float | None
    power_source: str  # "plan" (pools' power) or "catalog" (TDP + overhead)
    price_usd_per_gpu_hour: float | None
    price_is_estimate: bool | None
    price_range_usd_per_gpu_hour: list[float] | None
    price_note: str
    usd_per_hour: float | None
    usd_per_month: float | None
    usd_per_year: float | None
    usd_1y: float | None
    usd_3y: float | None
    purchase_usd_per_gpu: float | None
    capital_usd: float | None
    capital_note: str
    sources: list[str] = field(default_factory=list)
    purchase_usd_per_server: float | None = None
    networking_usd_per_server: float | None = None
    purchase_is_estimate: bool | None = None
    purchase_sources: list[str] = field(default_factory=list)
    purchase_date: str = ""


@dataclass
class BomTotal:
    gpus: int
    nodes: int | None
    rack_units: int | None
    power_kw: float | None
    usd_per_hour: float | None
    usd_per_month: float | None
    usd_per_year: float | None
    usd_1y: float | None
    usd_3y: float | None
    capital_usd: float | None
    capital_note: str


@dataclass
class Bom:
    lines: list[BomLine]
    total: BomTotal
    notes: list[str]
    #: The plan's total cost of ownership as stored (``plan.tco``, planner.procurement).
    tco: dict[str, Any] | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_prices(plan: Mapping[str, Any]) -> dict[str, float]:
    """The price per GPU-hour each GPU type was costed at, from the plan itself
    (``assumptions.gpus[g].price_usd_per_hour``, or a robust plan's
    ``assumptions.prices_usd_per_gpu_hour``)."""
    a = plan.get("assumptions") or {}
    out: dict[str, float] = {}
    for g, v in (a.get("prices_usd_per_gpu_hour") or {}).items():
        if isinstance(v, int | float):
            out[g] = float(v)
    for g, v in (a.get("gpus") or {}).items():
        price = v.get("price_usd_per_hour") if isinstance(v, Mapping) else None
        if isinstance(price, int | float):
            out[g] = float(price)
    return out


def pool_power_by_gpu(plan: Mapping[str, Any]) -> dict[str, float]:
    """Sum of the plan's pools' ``power_kw`` per GPU type (kW); empty for robust
    plans, whose top level has no pools."""
    out: dict[str, float] = {}
    for p in plan.get("pools") or []:
        if isinstance(p, Mapping) and isinstance(p.get("power_kw"), int | float):
            out[p["gpu"]] = out.get(p["gpu"], 0.0) + float(p["power_kw"])
    return out


def _sum(values: list[Any]) -> Any:
    """Sum, or None when any value is missing."""
    if any(v is None for v in values):
        return None
    return sum(values)


def bom_line(
    gpu_id: str,
    gpus: int,
    spec: Gpu | None,
    price_usd_per_gpu_hour: float | None = None,
    power_kw_from_plan: float | None = None,
) -> BomLine:
    """One line of the BOM from the catalog entry ``spec`` (None: unknown to the
    catalog) and, preferred where given, the plan's price and power."""
    server = spec.server if spec else None
    price = price_usd_per_gpu_hour
    if price is None and spec is not None:
        price = spec.price.usd_per_hour
    nodes = nodes_for(gpus, server.gpus_per_server) if server else None
    rack = rack_units_for(nodes, server.rack_units) if server and nodes is not None else None
    if power_kw_from_plan is not None:
        power, power_source = power_kw_from_plan, "plan"
    elif spec is not None and server is not None:
        power = gpu_power_kw(gpus, spec.tdp_w, server.server_overhead_w, server.gpus_per_server)
        power_source = "catalog"
    else:
        power, power_source = None, "unknown"
    hourly = usd_per_hour(gpus, price) if price is not None else None
    purchase = spec.price.purchase_usd if spec else None
    buy = spec.price.purchase if spec else None
    capital = (
        whole_server_capital_usd(nodes, server.gpus_per_server, spec.price)
        if spec and server and nodes is not None
        else None
    )
    return BomLine(
        gpu=gpu_id,
        gpu_name=spec.name if spec else gpu_id,
        gpus=gpus,
        gpus_per_server=server.gpus_per_server if server else None,
        nodes=nodes,
        rack_units_per_server=server.rack_units if server else None,
        rack_units=rack,
        power_kw=power,
        power_source=power_source,
        price_usd_per_gpu_hour=price,
        price_is_estimate=spec.price.estimate if spec else None,
        price_range_usd_per_gpu_hour=(
            list(spec.price.range_usd_per_hour) if spec and spec.price.range_usd_per_hour else None
        ),
        price_note=(spec.price.note.strip() if spec else "not in the current catalog"),
        usd_per_hour=hourly,
        usd_per_month=usd_per_month(hourly) if hourly is not None else None,
        usd_per_year=usd_per_year(hourly) if hourly is not None else None,
        usd_1y=usd_over_years(hourly, 1) if hourly is not None else None,
        usd_3y=usd_over_years(hourly, 3) if hourly is not None else None,
        purchase_usd_per_gpu=purchase,
        capital_usd=capital,
        capital_note="" if capital is not None else NO_PURCHASE_PRICE,
        sources=list(spec.sources) if spec else [],
        purchase_usd_per_server=buy.usd_per_server if buy else None,
        networking_usd_per_server=buy.networking_usd_per_server if buy else None,
        purchase_is_estimate=buy.estimate if buy else None,
        purchase_sources=list(buy.sources) if buy else [],
        purchase_date=buy.date if buy else "",
    )


def build_bom(plan: Mapping[str, Any], catalog: Catalog) -> Bom:
    """The plan's bill of materials: one :class:`BomLine` per GPU type in
    ``plan["gpus_by_type"]`` (for robust plans: the GPUs bought), and the totals
    (sums; a total is None when a line lacks that figure)."""
    prices = plan_prices(plan)
    power = pool_power_by_gpu(plan)
    lines = []
    for gpu_id, n in sorted((plan.get("gpus_by_type") or {}).items()):
        if not isinstance(n, int) or n <= 0:
            continue
        lines.append(
            bom_line(gpu_id, n, catalog.gpus.get(gpu_id), prices.get(gpu_id), power.get(gpu_id))
        )
    capitals = [ln.capital_usd for ln in lines]
    total = BomTotal(
        gpus=sum(ln.gpus for ln in lines),
        nodes=_sum([ln.nodes for ln in lines]),
        rack_units=_sum([ln.rack_units for ln in lines]),
        power_kw=_sum([ln.power_kw for ln in lines]),
        usd_per_hour=_sum([ln.usd_per_hour for ln in lines]),
        usd_per_month=_sum([ln.usd_per_month for ln in lines]),
        usd_per_year=_sum([ln.usd_per_year for ln in lines]),
        usd_1y=_sum([ln.usd_1y for ln in lines]),
        usd_3y=_sum([ln.usd_3y for ln in lines]),
        capital_usd=_sum(capitals) if lines else None,
        capital_note=(
            ""
            if lines and all(c is not None for c in capitals)
            else NO_PURCHASE_PRICE + (" for some GPU types" if any(capitals) else "")
        ),
    )
    notes = [
        "Prices are on-demand rent per GPU-hour, running 24/7: month = 730 h, "
        "year = 8,760 h, 3 years = 26,280 h.",
        "Servers = ceil(GPUs / GPUs per server); rack units = servers x the server's height.",
        "Capital = whole servers (a GB200 NVL72 rack is one 72-GPU unit) x (server price + "
        "networking per server): the GPUs left unused in the last server are bought too.",
        POWER_FORMULA + ".",
    ]
    if any(ln.price_is_estimate for ln in lines):
        notes.append("Prices marked 'estimate' are third-party listings, not quotes.")
    if any(ln.power_source == "catalog" for ln in lines):
        notes.append("Power from catalog figures (the plan has no per-pool power).")
    if plan.get("catalog_hash") and plan.get("catalog_hash") != catalog.content_hash:
        notes.append(
            "The catalog changed since this plan was made: server sizes, purchase "
            "prices and sources are the current catalog's."
        )
    tco = plan.get("tco")
    return Bom(
        lines=lines, total=total, notes=notes, tco=dict(tco) if isinstance(tco, Mapping) else None
    )
