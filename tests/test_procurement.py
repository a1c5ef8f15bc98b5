"""Issue 13: prices in the catalog, TCO, and buy / rent / hybrid over a day's load."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.loader import load_catalog
from planner.errors import PlanningError
from planner.problem_build import parse_request
from planner.procurement import PoolDemand, ProcurementSpec, hourly_need, plan_tco
from planner.procurement import formulas as f
from planner.procurement.spec import Purchase, RentTerm
from planner.report.render import render_plan_report
from planner.service import make_plan
from solver.hybrid import HybridGpu, HybridPool, HybridProblem, solve_hybrid

CAT = load_catalog()
ROOT = Path(__file__).parent.parent
#: A typical diurnal curve: night at 25-30% of the peak, a morning ramp, an evening peak.
DIURNAL = [
    0.30, 0.27, 0.25, 0.25, 0.26, 0.30, 0.40, 0.55, 0.70, 0.80, 0.85, 0.88,
    0.90, 0.90, 0.88, 0.86, 0.88, 0.92, 0.97, 1.00, 0.95, 0.80, 0.60, 0.40,
]  # fmt: skip


# --------------------------------------------------------------------------- formulas


def test_formulas_are_exact():
    assert f.horizon_hours(3) == 26_280
    assert f.horizon_months(3) == 36
    assert f.horizon_days(2) == 730
    assert f.servers_for(0, 8) == 0
    assert f.servers_for(9, 8) == 2
    assert f.servers_for(73, 72) == 2  # whole NVL72 racks
    assert f.server_power_kw(8, 700.0, 4600.0) == pytest.approx(10.2)
    assert f.capex_usd(3, 300_000.0, 35_000.0) == 1_005_000.0
    # energy = kW x PUE x hours x $/kWh; hosting = kW x $/kW-month x months
    assert f.energy_usd(10.0, 1.4, 1000.0, 0.08) == pytest.approx(1120.0)
    assert f.hosting_usd(10.0, 150.0, 36.0) == pytest.approx(54_000.0)
    assert f.rent_usd(1000.0, 2.5) == 2500.0
    assert f.operations_usd(25.0, 8760.0) == 219_000.0
    one = f.owned_server_usd(300_000.0, 35_000.0, 10.2, 1.4, 0.08, 150.0, 3)
    assert one == pytest.approx(
        335_000.0 + 10.2 * 1.4 * 26_280 * 0.08 + 10.2 * 150.0 * 36, rel=1e-12
    )
    assert f.output_tokens_over_horizon(1e6, 0.5, 1) == pytest.approx(4.38e9)
    assert f.usd_per_million_output_tokens(1000.0, 2e6) == 500.0
    assert f.usd_per_million_output_tokens(1000.0, 0.0) is None


def _linear_pool(replicas: int = 40, rate: float = 100.0, gpu="h100-sxm5-80gb", tp=2, **kw):
    """A pool whose n replicas carry 2.6 n req/s (enough for ``rate`` at ``replicas``)."""
    per = rate / replicas * 1.04
    return PoolDemand(
        id=f"p-{gpu}-{tp}",
        gpu=gpu,
        gpus_per_replica=tp,
        replicas=replicas,
        rate_rps=rate,
        capacity_rps=lambda n: per * n,
        **kw,
    )


def test_hourly_need_follows_the_curve_and_keeps_the_minimum():
    pool = _linear_pool(min_replicas=2)
    need = hourly_need(pool, DIURNAL)
    assert need[DIURNAL.index(1.0)] == pool.replicas  # the peak hour is the plan's fleet
    for fac, n in zip(DIURNAL, need, strict=True):
        assert pool.capacity_rps(n) >= fac * pool.rate_rps - 1e-9
        assert n == pool.replicas or pool.capacity_rps(n - 1) < fac * pool.rate_rps
        assert n >= 2
    assert need[2] < need[19]  # night needs fewer
    # no curve (a robust plan's GPUs by type): the same need every hour
    flat = PoolDemand("g", "l40s", 1, 7, 0.0)
    assert hourly_need(flat, DIURNAL) == (7,) * 24


def test_price_band_moves_each_pool_to_its_price_range():
    from planner.risk import price_band_usd_per_hour

    bands = [("a", 10.0, 20.0), ("b", 4.0, 8.0), ("c", 1.0, 2.0)]
    ranges = {"a": (1.0, 2.0, 5.0), "b": (2.0, 2.0, 2.0)}  # c: no range, nominal
    lo, hi = price_band_usd_per_hour(bands, ranges)
    assert lo == pytest.approx(10 * 0.5 + 4 + 1)
    assert hi == pytest.approx(20 * 2.5 + 8 + 2)


# --------------------------------------------------------------------------- whole servers


def test_whole_nvl72_racks_are_bought_and_costed():
    spec = ProcurementSpec()
    pool = PoolDemand("gb", "gb200-per-gpu", 4, 25, 10.0)  # 100 GPUs: two racks
    tco = plan_tco([pool], CAT, spec, None, 0.0, 1e6)
    buy = next(o for o in tco.options if o.purchase == "buy")
    rack = CAT.gpus["gb200-per-gpu"].price.purchase
    assert buy.servers_by_type == {"gb200-per-gpu": 2}
    assert buy.capex_usd == 2 * (rack.usd_per_server + rack.networking_usd_per_server)
    kw = 2 * f.server_power_kw(72, 1200.0, CAT.gpus["gb200-per-gpu"].server.server_overhead_w)
    assert buy.energy_usd == pytest.approx(f.energy_usd(kw, 1.4, 26_280, 0.08))
    assert buy.hosting_usd == pytest.approx(f.hosting_usd(kw, 150.0, 36))
    assert (
        tco.total_usd
        == buy.total_usd
        == pytest.approx(buy.capex_usd + buy.energy_usd + buy.hosting_usd)
    )
    lo, hi = tco.band_usd
    assert lo < tco.total_usd < hi  # the purchase price ranges move the total


def test_a_cloud_only_gpu_cannot_be_bought():
    spec = ProcurementSpec(purchase=Purchase.BUY)
    tco = plan_tco([PoolDemand("a", "a10g", 1, 9, 0.0)], CAT, spec, None, 0.0, 1e6)
    buy = next(o for o in tco.options if o.purchase == "buy")
    assert not buy.available and "a10g" in buy.note
    assert tco.total_usd is None and any("not possible" in n for n in tco.notes)
    hybrid = next(o for o in tco.options if o.purchase == "hybrid")
    assert hybrid.available and hybrid.capex_usd == 0  # rents what it cannot own


def test_reserved_rent_pays_the_peak_every_hour():
    spec = ProcurementSpec(purchase=Purchase.RENT, rent_term=RentTerm.RESERVED_3Y)
    pool = _linear_pool()
    tco = plan_tco([pool], CAT, spec, DIURNAL, 0.0, 1e6)
    res = CAT.gpus["h100-sxm5-80gb"].price.reserved_3y.usd_per_hour
    assert tco.rent_usd == pytest.approx(pool.replicas * 2 * res * 26_280)
    assert tco.capex_usd == 0 and tco.servers_by_type == {}


# --------------------------------------------------------------------------- hybrid


def _options(tco):
    return {o.purchase: o for o in tco.options}


def test_hybrid_owns_the_base_and_rents_the_peak():
    spec = ProcurementSpec(purchase=Purchase.HYBRID)
    pool = _linear_pool(replicas=120, rate=300.0)
    tco = plan_tco([pool], CAT, spec, DIURNAL, 10.0, 1e6)
    o = _options(tco)
    assert o["hybrid"].total_usd < o["buy"].total_usd
    assert o["hybrid"].total_usd < o["rent"].total_usd
    peak = next(h for h in tco.hourly if h.rate_factor == 1.0)
    night = tco.hourly[3]
    assert 0 < peak.owned_gpus < peak.needed_gpus and peak.on_demand_gpus > 0
    assert night.on_demand_gpus == 0  # the owned base carries the night
    assert peak.owned_gpus % 8 == 0 or tco.servers_by_type["h100-sxm5-80gb"] * 8 >= peak.owned_gpus
    # every hour is covered
    for h in tco.hourly:
        assert h.owned_gpus + h.reserved_gpus + h.on_demand_gpus >= h.needed_gpus


def test_hybrid_milp_matches_a_brute_force_on_a_tiny_case():
    """One pool, 2 GPUs per replica, 4 GPUs per server: enumerate the owned servers."""
    need = (1, 1, 2, 5) + (1,) * 20
    gpu = HybridGpu("g", 4, owned_usd_per_server=9_000.0, on_demand_usd_per_gpu_hour=1.0)
    prob = HybridProblem((HybridPool("p", "g", 2, need),), (gpu,), horizon_years=1)
    res = solve_hybrid(prob)
    best = math.inf
    for servers in range(0, 4):
        owned = min(servers * 4 // 2, max(need))
        od = sum(max(0, n - owned) for n in need) * 2 * 1.0 * 365
        best = min(best, servers * 9_000.0 + od)
    assert res.total_usd == pytest.approx(best)


night = st.floats(0.25, 0.30)
day = st.floats(0.30, 1.0)


@st.composite
def diurnal_curves(draw):
    """24 hours: night (00-05) at 25-30% of the peak, the day anywhere up to it, one
    peak hour at 1."""
    curve = [draw(night) for _ in range(6)] + [draw(day) for _ in range(18)]
    curve[draw(st.integers(8, 22))] = 1.0
    return curve


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    curve=diurnal_curves(),
    term=st.sampled_from(list(RentTerm)),
    replicas=st.integers(3, 200),
    gpu=st.sampled_from(["h100-sxm5-80gb", "mi300x", "gb200-per-gpu", "l40s"]),
)
def test_hybrid_is_never_dearer_than_buy_or_rent(curve, term, replicas, gpu):
    spec = ProcurementSpec(purchase=Purchase.HYBRID, rent_term=term)
    pools = [
        _linear_pool(replicas=replicas, rate=replicas * 2.0, gpu=gpu, tp=2),
        _linear_pool(replicas=max(1, replicas // 3), rate=replicas * 0.5, gpu=gpu, tp=1),
    ]
    tco = plan_tco(pools, CAT, spec, curve, 5.0, 1e6)
    o = _options(tco)
    assert o["hybrid"].available
    for other in ("buy", "rent"):
        if o[other].available:
            assert o["hybrid"].total_usd <= o[other].total_usd * (1 + 1e-9)


# --------------------------------------------------------------------------- request


def _req(**over):
    doc = yaml.safe_load((ROOT / "examples" / "chat-agent-80-20.yaml").read_text())
    doc.update(over)
    return doc


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ([1.0] * 23, "expected 24 hourly factors"),
        ([1.0] * 23 + [1.2], "hour 23: 1.2 is not in (0, 1]"),
        ([0.0] + [1.0] * 23, "hour 0: 0.0 is not in (0, 1]"),
        ([0.5] * 24, "expected exactly 1"),
    ],
)
def test_a_bad_load_profile_names_the_field(profile, message):
    with pytest.raises(PlanningError) as err:
        parse_request(_req(load_profile={"hourly_rate_factors": profile}))
    fields = " ".join(str(i[0]) for i in err.value.issues)
    assert "load_profile.hourly_rate_factors" in fields
    assert message in str(err.value)


def test_procurement_defaults_are_documented_and_bad_values_refused():
    req = parse_request(_req())
    p = req.procurement
    assert (p.horizon_years, p.pue, p.purchase, p.rent_term) == (3.0, 1.4, "buy", "on_demand")
    with pytest.raises(PlanningError) as err:
        parse_request(_req(procurement={"purchase": "lease"}))
    assert "procurement.purchase" in " ".join(str(i[0]) for i in err.value.issues)
    with pytest.raises(PlanningError):
        parse_request(_req(procurement={"pue": 0.9}))


# --------------------------------------------------------------------------- 80/20


@pytest.fixture(scope="module")
def plan_80_20():
    req = _req(
        procurement={"horizon_years": 3, "purchase": "hybrid"},
        load_profile={"hourly_rate_factors": DIURNAL},
        verify={"enabled": False},
    )
    return req, make_plan(req, CAT, alternatives=False)


def test_80_20_has_capex_whole_servers_and_a_3_year_tco(plan_80_20):
    _req_doc, plan = plan_80_20
    tco = plan.tco
    assert tco is not None and tco.horizon_years == 3
    o = _options(tco)
    buy = o["buy"]
    assert buy.capex_usd > 0 and buy.total_usd > buy.capex_usd
    for g, n in plan.gpus_by_type.items():
        gps = CAT.gpus[g].server.gpus_per_server
        assert buy.servers_by_type[g] == math.ceil(n / gps)  # whole servers for the peak
    # hybrid (the request's choice) is never dearer than buying or renting
    assert tco.total_usd == o["hybrid"].total_usd
    assert o["hybrid"].total_usd <= min(buy.total_usd, o["rent"].total_usd)
    assert plan.capex_usd == tco.capex_usd and plan.servers_by_type == tco.servers_by_type
    assert tco.usd_per_million_output_tokens and tco.usd_per_million_output_tokens > 0
    assert len(tco.hourly) == 24 and tco.load_profile == DIURNAL
    # the plan's band covers the price ranges too (every shipped price has a range)
    cap_lo, cap_hi = plan.cost_band_usd_per_hour
    price_lo, price_hi = plan.cost_band_with_prices_usd_per_hour
    assert price_lo <= cap_lo and price_hi >= cap_hi and price_lo < price_hi
    doc = plan.to_json_dict()
    assert doc["tco"]["total_usd"] == tco.total_usd and doc["capex_usd"] == plan.capex_usd


def test_80_20_report_shows_the_tco(plan_80_20):
    req, plan = plan_80_20
    rec = {"id": "x", "request": req, "plan": plan.to_json_dict()}
    html, _ = render_plan_report(rec, "html", CAT)
    assert "Total cost of ownership" in html and "3-year TCO" in html
    assert "Executive summary" in html and "per million output tokens" in html
    assert "Owned and rented GPUs over the day" in html  # the own/rent chart
    md, _ = render_plan_report(rec, "md", CAT)
    assert "| Over 3 years | buy | rent (on demand) | hybrid (chosen) |" in md
    csv_text, _ = render_plan_report(rec, "csv", CAT)
    assert "tco_total_usd" in csv_text.splitlines()[0]
    total = f"{plan.tco.total_usd:.2f}"
    assert total in csv_text.splitlines()[-1]


def test_80_20_text_plan_has_the_tco_lines(plan_80_20):
    from planner.report.text import render_plan_text

    _req_doc, plan = plan_80_20
    text = render_plan_text(plan.to_json_dict())
    tco_line = next(ln for ln in text.splitlines() if ln.startswith("TCO "))
    assert "3.0 years, hybrid" in tco_line and "per million output tokens" in tco_line
    opts = next(ln for ln in text.splitlines() if ln.startswith("TCO options"))
    assert "buy $" in opts and "rent $" in opts and "hybrid $" in opts


def test_a_flat_day_draws_no_hourly_chart(plan_80_20):
    _req_doc, plan = plan_80_20
    doc = plan.to_json_dict()
    doc["tco"]["load_profile"] = None
    html, _ = render_plan_report({"id": "y", "plan": doc}, "html", CAT)
    assert "Total cost of ownership" in html
    assert "Owned and rented GPUs over the day" not in html


def _tco_doc(chosen="buy", buy=2_551_426.4, rent=2_332_087.2, hybrid=2_245_599.52, **kw):
    totals = {"buy": buy, "rent": rent, "hybrid": hybrid}
    return {
        "horizon_years": 3.0,
        "purchase": chosen,
        "rent_term": kw.get("rent_term", "on_demand"),
        "total_usd": totals[chosen],
        "options": [
            {"purchase": p, "available": kw.get(f"{p}_available", True), "total_usd": t}
            for p, t in totals.items()
        ],
    }


def test_a_cheaper_purchase_option_is_named_with_its_saving():
    """A plan bought by default (procurement.purchase: buy) whose hybrid or rent costs
    less over the horizon says so, with the saving and the setting to change; the chosen
    option when cheapest, a saving under 1%, or an unavailable option say nothing."""
    from planner.report.text import cheaper_option, cheaper_option_text

    purchase, saving, share = cheaper_option(_tco_doc())
    assert purchase == "hybrid"
    assert saving == pytest.approx(2_551_426.4 - 2_245_599.52)
    assert share == pytest.approx(saving / 2_551_426.4)
    text = cheaper_option_text(_tco_doc())
    assert text == (
        "Hybrid would cost $305,827 (12%) less over the 3-year horizon than buy: "
        "set procurement.purchase: hybrid."
    )
    # hybrid not possible: rent is the cheaper one, with its term
    doc = _tco_doc(hybrid_available=False, rent_term="reserved_1y")
    assert cheaper_option(doc)[0] == "rent"
    assert cheaper_option_text(doc).startswith("Renting (reserved 1y) would cost $219,339 (9%)")
    assert cheaper_option(_tco_doc("hybrid")) is None  # the chosen is the cheapest
    assert cheaper_option(_tco_doc(rent=2_540_000.0, hybrid=2_530_000.0)) is None  # < 1%
    assert cheaper_option({"purchase": "buy"}) is None  # no figures: nothing said


def test_the_report_and_the_text_plan_name_the_cheaper_option(plan_80_20):
    from planner.report.text import render_plan_text

    req, plan = plan_80_20
    doc = plan.to_json_dict()
    assert "would cost" not in render_plan_text(doc)  # hybrid was chosen, the cheapest
    doc["tco"] = {**doc["tco"], **_tco_doc()}
    text = render_plan_text(doc)
    assert "Hybrid would cost $305,827 (12%) less over the 3-year horizon than buy" in text
    html, _ = render_plan_report({"id": "x", "request": req, "plan": doc}, "html", CAT)
    assert "set procurement.purchase: hybrid." in html
