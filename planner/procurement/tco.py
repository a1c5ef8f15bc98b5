"""A plan's total cost of ownership: buy, rent and hybrid over a day's load.

Each pool needs, in hour h of the day, the fewest replicas whose capacity carries
``factor_h x`` its planned rate (:func:`hourly_need`; the peak hour needs the
plan's replicas). Three ways to pay for those needs, all costed by one function
(:func:`option_cost`) at the same prices:

* ``buy``: own every pool's peak need, in whole servers per GPU type
  (:func:`buy_decision`);
* ``rent``: rent each hour's need on demand, or reserve the peak for the whole term
  with a reserved ``rent_term`` (:func:`rent_decision`);
* ``hybrid``: the own-or-rent MILP (:func:`solver.hybrid.solve_hybrid`) chooses the
  owned base (whole servers), the reserved replicas and each hour's on-demand rent.
  Buy and rent are feasible points of that MILP, so hybrid is never dearer.

The request's ``procurement.purchase`` picks the option the plan reports as its
TCO; the others are listed beside it (``tco.options``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from catalog.schema import Catalog, Gpu
from planner.procurement import formulas as f
from planner.procurement.models import HourSplit, PurchaseOption, Tco, TcoLine
from planner.procurement.spec import HOURS_PER_DAY, ProcurementSpec, Purchase, RentTerm
from solver.hybrid import HybridGpu, HybridPool, HybridProblem, solve_hybrid
from solver.problem import SolverOptions

FLAT_DAY = (1.0,) * HOURS_PER_DAY
#: Price points: nominal, and the low and high ends of the catalog's ranges.
NOMINAL, LOW, HIGH = 1, 0, 2


@dataclass(frozen=True)
class PoolDemand:
    """A pool as planned: ``replicas`` carry ``rate_rps`` at the peak hour;
    ``capacity_rps(n)`` is what n replicas carry within the SLO and margins (the
    fleet MILP's own curve, :meth:`solver.problem.PoolCandidate.capacity_rps`); None
    when unknown (a robust plan's GPUs by type): the need is then the same every hour."""

    id: str
    gpu: str
    gpus_per_replica: int
    replicas: int
    rate_rps: float
    capacity_rps: Callable[[int], float] | None = None
    min_replicas: int = 1


def hourly_need(pool: PoolDemand, factors: Sequence[float]) -> tuple[int, ...]:
    """Replicas the pool needs in each hour (count): the plan's replicas where the
    factor is 1, else the fewest n in [min_replicas, replicas] with
    ``capacity_rps(n) >= factor x rate_rps`` (bisection; the curve rises with n)."""
    out = []
    for fac in factors:
        if fac >= 1.0 or pool.capacity_rps is None or pool.replicas <= pool.min_replicas:
            out.append(pool.replicas)
            continue
        target = fac * pool.rate_rps
        lo, hi = pool.min_replicas, pool.replicas
        while lo < hi:
            mid = (lo + hi) // 2
            if pool.capacity_rps(mid) >= target - 1e-12:
                hi = mid
            else:
                lo = mid + 1
        out.append(lo)
    return tuple(out)


@dataclass(frozen=True)
class GpuPrices:
    """A GPU type's server and prices at the three price points (low, nominal, high)."""

    gpu: str
    gpus_per_server: int
    server_kw: float
    server_usd: tuple[float, float, float] | None
    networking_usd: tuple[float, float, float] | None
    on_demand_usd_per_gpu_hour: tuple[float, float, float]
    reserved_usd_per_gpu_hour: tuple[float, float, float] | None
    purchase_is_estimate: bool | None


def _ends(nominal: float, rng: tuple[float, float] | None) -> tuple[float, float, float]:
    return (rng[0], nominal, rng[1]) if rng else (nominal, nominal, nominal)


def gpu_prices(gpu: Gpu, term: RentTerm) -> GpuPrices:
    """The catalog's prices for ``gpu``: purchase and networking per server, on-demand
    and the ``term``'s reserved price per GPU-hour, each as (low, nominal, high) from
    its range (a quoted price without a range is the same at all three)."""
    p = gpu.price
    res = None
    if term != RentTerm.ON_DEMAND:
        r = p.reserved_1y if term == RentTerm.RESERVED_1Y else p.reserved_3y
        res = _ends(r.usd_per_hour, r.range_usd_per_hour) if r else None
    buy = p.purchase
    return GpuPrices(
        gpu=gpu.id,
        gpus_per_server=gpu.server.gpus_per_server,
        server_kw=f.server_power_kw(
            gpu.server.gpus_per_server, gpu.tdp_w, gpu.server.server_overhead_w
        ),
        server_usd=_ends(buy.usd_per_server, buy.range_usd_per_server) if buy else None,
        networking_usd=(
            _ends(buy.networking_usd_per_server, buy.networking_range_usd_per_server)
            if buy
            else None
        ),
        on_demand_usd_per_gpu_hour=_ends(p.usd_per_hour, p.range_usd_per_hour),
        reserved_usd_per_gpu_hour=res,
        purchase_is_estimate=buy.estimate if buy else None,
    )


@dataclass
class Decision:
    """Who carries each pool's need: owned and reserved replicas (constant), on-demand
    replicas per hour, and servers bought per GPU type."""

    owned: dict[str, int] = field(default_factory=dict)
    reserved: dict[str, int] = field(default_factory=dict)
    on_demand: dict[str, tuple[int, ...]] = field(default_factory=dict)
    servers: dict[str, int] = field(default_factory=dict)


def buy_decision(pools: Sequence[PoolDemand], needs: dict[str, tuple[int, ...]]) -> Decision:
    """Own every pool's peak need; servers per type = ``ceil(owned GPUs / GPUs per
    server)`` (:func:`formulas.servers_for`), filled in :func:`option_cost`."""
    return Decision(owned={p.id: max(needs[p.id]) for p in pools})


def rent_decision(
    pools: Sequence[PoolDemand], needs: dict[str, tuple[int, ...]], term: RentTerm
) -> Decision:
    """Rent everything: each hour's need on demand, or (reserved term) the peak
    reserved for every hour of the term."""
    if term == RentTerm.ON_DEMAND:
        return Decision(on_demand=dict(needs))
    return Decision(reserved={p.id: max(needs[p.id]) for p in pools})


def _owned_gpus_by_type(pools: Sequence[PoolDemand], d: Decision) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in pools:
        out[p.gpu] = out.get(p.gpu, 0) + p.gpus_per_replica * d.owned.get(p.id, 0)
    return out


def option_cost(
    pools: Sequence[PoolDemand],
    d: Decision,
    prices: dict[str, GpuPrices],
    spec: ProcurementSpec,
    operations_usd_per_hour: float,
    point: int = NOMINAL,
) -> dict[str, float]:
    """The decision's cost over the horizon at a price point ($): capex (servers x
    (price + networking), :func:`formulas.capex_usd`), energy and hosting of the owned
    servers' nameplate power (:func:`formulas.energy_usd`, :func:`formulas.hosting_usd`),
    rent (reserved replicas x GPUs x $/GPU-h x horizon hours + on-demand replicas per
    hour x GPUs x $/GPU-h x horizon days, :func:`formulas.rent_usd`) and operations
    (:func:`formulas.operations_usd`). Servers are whole: ``d.servers`` when set (the
    MILP's), else ``ceil(owned GPUs / GPUs per server)``."""
    hours = f.horizon_hours(spec.horizon_years)
    days = f.horizon_days(spec.horizon_years)
    owned = _owned_gpus_by_type(pools, d)
    out = dict.fromkeys(("capex", "networking", "energy", "hosting", "rent", "kw"), 0.0)
    for gpu, gp in prices.items():
        servers = d.servers.get(gpu, f.servers_for(owned.get(gpu, 0), gp.gpus_per_server))
        d.servers[gpu] = servers
        if servers and gp.server_usd and gp.networking_usd:
            out["capex"] += f.capex_usd(servers, gp.server_usd[point], gp.networking_usd[point])
            out["networking"] += servers * gp.networking_usd[point]
            out["kw"] += servers * gp.server_kw
    out["energy"] = f.energy_usd(out["kw"], spec.pue, hours, spec.electricity_usd_per_kwh)
    out["hosting"] = f.hosting_usd(
        out["kw"], spec.hosting_usd_per_kw_month, f.horizon_months(spec.horizon_years)
    )
    for p in pools:
        gp = prices[p.gpu]
        q = d.reserved.get(p.id, 0)
        if q and gp.reserved_usd_per_gpu_hour:
            out["rent"] += f.rent_usd(
                q * p.gpus_per_replica * hours, gp.reserved_usd_per_gpu_hour[point]
            )
        od = sum(d.on_demand.get(p.id, ()))
        if od:
            out["rent"] += f.rent_usd(
                od * p.gpus_per_replica * days, gp.on_demand_usd_per_gpu_hour[point]
            )
    out["operations"] = f.operations_usd(operations_usd_per_hour, hours)
    out["total"] = sum(out[k] for k in ("capex", "energy", "hosting", "rent", "operations"))
    return out


def hybrid_problem(
    pools: Sequence[PoolDemand],
    needs: dict[str, tuple[int, ...]],
    prices: dict[str, GpuPrices],
    spec: ProcurementSpec,
) -> HybridProblem:
    """The own-or-rent MILP's data at nominal prices: an owned server costs
    :func:`formulas.owned_server_usd` over the horizon."""
    gpus = []
    for gp in prices.values():
        owned = None
        if gp.server_usd and gp.networking_usd:
            owned = f.owned_server_usd(
                gp.server_usd[NOMINAL],
                gp.networking_usd[NOMINAL],
                gp.server_kw,
                spec.pue,
                spec.electricity_usd_per_kwh,
                spec.hosting_usd_per_kw_month,
                spec.horizon_years,
            )
        res = gp.reserved_usd_per_gpu_hour[NOMINAL] if gp.reserved_usd_per_gpu_hour else None
        gpus.append(
            HybridGpu(
                gp.gpu, gp.gpus_per_server, owned, gp.on_demand_usd_per_gpu_hour[NOMINAL], res
            )
        )
    return HybridProblem(
        pools=tuple(HybridPool(p.id, p.gpu, p.gpus_per_replica, needs[p.id]) for p in pools),
        gpus=tuple(gpus),
        horizon_years=spec.horizon_years,
    )


def _option(name: str, cost: dict[str, float], d: Decision, note: str = "") -> PurchaseOption:
    return PurchaseOption(
        purchase=name,
        available=True,
        total_usd=cost["total"],
        capex_usd=cost["capex"],
        energy_usd=cost["energy"],
        hosting_usd=cost["hosting"],
        rent_usd=cost["rent"],
        operations_usd=cost["operations"],
        servers_by_type={g: n for g, n in sorted(d.servers.items()) if n},
        note=note,
    )


def tco_band_usd(
    low_usd: float,
    high_usd: float,
    operations_usd: float,
    capacity_band_ratio: tuple[float, float] | None,
) -> tuple[float, float]:
    """The TCO's band ($): the hardware part (total - operations) at the low and high
    ends of every price range, times the plan's capacity band as a ratio to its cost
    (``cost_band_usd_per_hour / cost_usd_per_hour``, :mod:`planner.risk`: the fleet a
    90% capacity error would need), plus operations. Prices and capacity are taken to
    move together: the cautious side for a budget."""
    lo_r, hi_r = capacity_band_ratio or (1.0, 1.0)
    return (
        (low_usd - operations_usd) * lo_r + operations_usd,
        (high_usd - operations_usd) * hi_r + operations_usd,
    )


def plan_tco(
    pools: Sequence[PoolDemand],
    catalog: Catalog,
    spec: ProcurementSpec,
    factors: Sequence[float] | None,
    operations_usd_per_hour: float,
    output_tokens_per_hour_at_peak: float,
    capacity_band_ratio: tuple[float, float] | None = None,
    time_limit_s: float = 10.0,
) -> Tco:
    """The plan's TCO over ``spec.horizon_years`` for ``spec.purchase``, with buy, rent
    and hybrid side by side (each at nominal prices; the chosen one's band at the
    price ranges' ends and the capacity band)."""
    day = tuple(factors) if factors else FLAT_DAY
    gpu_ids = sorted({p.gpu for p in pools})
    prices = {g: gpu_prices(catalog.gpus[g], spec.rent_term) for g in gpu_ids}
    needs = {p.id: hourly_need(p, day) for p in pools}
    notes: list[str] = []
    options: dict[str, tuple[PurchaseOption, Decision | None]] = {}

    unbuyable = [g for g in gpu_ids if prices[g].server_usd is None]
    if unbuyable:
        options["buy"] = (
            PurchaseOption(
                purchase="buy",
                available=False,
                note=f"no purchase price in the catalog for {', '.join(unbuyable)}",
            ),
            None,
        )
    else:
        d = buy_decision(pools, needs)
        options["buy"] = (
            _option("buy", option_cost(pools, d, prices, spec, operations_usd_per_hour), d),
            d,
        )
    unrentable = [
        g
        for g in gpu_ids
        if spec.rent_term != RentTerm.ON_DEMAND and prices[g].reserved_usd_per_gpu_hour is None
    ]
    if unrentable:
        options["rent"] = (
            PurchaseOption(
                purchase="rent",
                available=False,
                note=f"no {spec.rent_term.value} price in the catalog for {', '.join(unrentable)}",
            ),
            None,
        )
    else:
        d = rent_decision(pools, needs, spec.rent_term)
        options["rent"] = (
            _option("rent", option_cost(pools, d, prices, spec, operations_usd_per_hour), d),
            d,
        )
    res = solve_hybrid(
        hybrid_problem(pools, needs, prices, spec),
        SolverOptions(time_limit_s=time_limit_s, rel_gap=0.0),
    )
    if res.status.has_solution and res.status.value != "optimal":
        notes.append(
            f"The own-or-rent MILP stopped at its time limit ({res.status.value}, gap "
            f"{res.gap if res.gap is not None else 'unknown'}): hybrid may be a little dearer "
            "than the best split."
        )
    hybrid_note = ""
    if res.status.has_solution:
        d = Decision(res.owned_replicas, res.reserved_replicas, res.on_demand_replicas, res.servers)
        cost = option_cost(pools, d, prices, spec, operations_usd_per_hour)
        # buy and rent are feasible points of the same model: a MILP stopped short of
        # optimality never reports more than the better of them
        for name in ("buy", "rent"):
            alt, alt_d = options[name]
            if (
                alt_d is not None
                and alt.total_usd is not None
                and alt.total_usd < cost["total"] * (1 - 1e-9)
            ):
                d, cost = alt_d, option_cost(pools, alt_d, prices, spec, operations_usd_per_hour)
                hybrid_note = (
                    f"the own-or-rent MILP stopped at {res.status.value}; {name} is cheaper"
                )
        options["hybrid"] = (_option("hybrid", cost, d, hybrid_note), d)
    else:
        options["hybrid"] = (
            PurchaseOption(
                purchase="hybrid", available=False, note=res.message or res.status.value
            ),
            None,
        )

    chosen, decision = options[spec.purchase.value]
    hours = f.horizon_hours(spec.horizon_years)
    ops = f.operations_usd(operations_usd_per_hour, hours)
    band = None
    lines: list[TcoLine] = []
    hourly: list[HourSplit] = []
    if decision is not None:
        lo = option_cost(pools, decision, prices, spec, operations_usd_per_hour, LOW)
        hi = option_cost(pools, decision, prices, spec, operations_usd_per_hour, HIGH)
        band_lo, band_hi = tco_band_usd(lo["total"], hi["total"], ops, capacity_band_ratio)
        band = (round(band_lo, 2), round(band_hi, 2))
        lines = _lines(pools, needs, decision, prices, spec)
        hourly = _hourly(pools, needs, decision, day)
    else:
        notes.append(f"{spec.purchase.value} is not possible: {chosen.note}")
    tokens = f.output_tokens_over_horizon(
        output_tokens_per_hour_at_peak, sum(day) / len(day), spec.horizon_years
    )
    nominal = (
        option_cost(pools, decision, prices, spec, operations_usd_per_hour)
        if decision is not None
        else None
    )
    if any(prices[g].purchase_is_estimate for g in gpu_ids) and spec.purchase != Purchase.RENT:
        notes.append(
            "Server prices marked estimate are third-party figures, not quotes: the band "
            "runs over their ranges."
        )
    notes.append(
        "Owned servers are powered and hosted whole, at nameplate power around the clock "
        "(an upper bound); rent includes power and hosting."
    )
    return Tco(
        horizon_years=spec.horizon_years,
        purchase=spec.purchase.value,
        rent_term=spec.rent_term.value,
        electricity_usd_per_kwh=spec.electricity_usd_per_kwh,
        pue=spec.pue,
        hosting_usd_per_kw_month=spec.hosting_usd_per_kw_month,
        total_usd=chosen.total_usd,
        capex_usd=chosen.capex_usd,
        networking_usd=nominal["networking"] if nominal else 0.0,
        energy_usd=chosen.energy_usd,
        hosting_usd=chosen.hosting_usd,
        rent_usd=chosen.rent_usd,
        operations_usd=chosen.operations_usd if chosen.available else ops,
        usd_per_million_output_tokens=(
            f.usd_per_million_output_tokens(chosen.total_usd, tokens)
            if chosen.total_usd is not None
            else None
        ),
        band_usd=band,
        servers_by_type=dict(chosen.servers_by_type),
        lines=lines,
        options=[options[k][0] for k in ("buy", "rent", "hybrid")],
        hourly=hourly,
        load_profile=list(factors) if factors else None,
        notes=notes,
    )


def _lines(
    pools: Sequence[PoolDemand],
    needs: dict[str, tuple[int, ...]],
    d: Decision,
    prices: dict[str, GpuPrices],
    spec: ProcurementSpec,
) -> list[TcoLine]:
    owned = _owned_gpus_by_type(pools, d)
    out = []
    for gpu, gp in prices.items():
        mine = [p for p in pools if p.gpu == gpu]
        sub = option_cost(
            mine,
            Decision(
                {p.id: d.owned.get(p.id, 0) for p in mine},
                {p.id: d.reserved.get(p.id, 0) for p in mine},
                {p.id: d.on_demand.get(p.id, ()) for p in mine},
                {gpu: d.servers.get(gpu, 0)},
            ),
            {gpu: gp},
            spec,
            0.0,
        )
        out.append(
            TcoLine(
                gpu=gpu,
                gpus_needed_peak=sum(p.gpus_per_replica * max(needs[p.id]) for p in mine),
                owned_gpus=owned.get(gpu, 0),
                servers=d.servers.get(gpu, 0),
                gpus_per_server=gp.gpus_per_server,
                power_kw=d.servers.get(gpu, 0) * gp.server_kw,
                usd_per_server=gp.server_usd[NOMINAL] if gp.server_usd else None,
                networking_usd_per_server=gp.networking_usd[NOMINAL] if gp.networking_usd else None,
                purchase_is_estimate=gp.purchase_is_estimate,
                # to the cent, as the fleet's totals (float sums are not)
                capex_usd=round(sub["capex"], 2),
                energy_usd=round(sub["energy"], 2),
                hosting_usd=round(sub["hosting"], 2),
                rent_usd=round(sub["rent"], 2),
            )
        )
    return out


def _hourly(
    pools: Sequence[PoolDemand],
    needs: dict[str, tuple[int, ...]],
    d: Decision,
    day: Sequence[float],
) -> list[HourSplit]:
    out = []
    for h, fac in enumerate(day):
        need = sum(p.gpus_per_replica * needs[p.id][h] for p in pools)
        owned = sum(p.gpus_per_replica * d.owned.get(p.id, 0) for p in pools)
        reserved = sum(p.gpus_per_replica * d.reserved.get(p.id, 0) for p in pools)
        od = sum(p.gpus_per_replica * (d.on_demand.get(p.id) or (0,) * len(day))[h] for p in pools)
        out.append(
            HourSplit(
                hour=h,
                rate_factor=fac,
                needed_gpus=need,
                owned_gpus=owned,
                reserved_gpus=reserved,
                on_demand_gpus=od,
            )
        )
    return out
