"""One consistent optimum (issue 11): the simulation corrects the optimizer's capacity
model, and every figure shown next to a plan comes from that same corrected model.

Property tests over random small requests (8B model, a few GPU types, bursty
traffic so that corrections are learned, 1,000 simulated requests):

(a) no alternative listed next to an optimal plan is cheaper than it;
(b) offering more GPU types never costs more (the smaller offer is planned with the
    larger one's learned corrections, as the "without GPU X" alternatives are);
(c) more traffic never costs less (the report's sensitivity rows are monotone).
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.loader import load_catalog
from catalog.schema import Catalog
from planner.candidates import screen
from planner.candidates.chunking import chunked_ttft_ms
from planner.sensitivity import sensitivity
from planner.service import make_plan
from planner.simulate import verify as sv
from planner.simulate.results import FamilyCorrection

CAT = load_catalog()
GPUS = ["h100-sxm5-80gb", "a100-sxm-80gb", "l40s", "h200-sxm-141gb"]
#: Solved to optimality, so "cheaper" can only mean an inconsistent model.
EXACT = {"rel_gap": 0.0, "time_limit_s": 60}
SLACK = 1e-6  # relative, for float sums of replica costs

PROPS = settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def _total(plan) -> float:
    """What the optimizer minimizes: GPUs plus operations ($/hour); alternatives and
    sensitivity rows are priced the same way."""
    assert plan.total_cost_usd_per_hour is not None
    return plan.total_cost_usd_per_hour


@st.composite
def small_requests(draw) -> dict:
    """A small, fast request: 1-2 classes of llama-3.1-8b, 2-4 GPU types, 1,000
    simulated requests, often bursty (so the simulation misses and corrects)."""
    gpus = draw(st.lists(st.sampled_from(GPUS), min_size=2, max_size=4, unique=True))
    two = draw(st.booleans())
    share = draw(st.sampled_from([0.5, 0.7, 0.9]))
    classes = [{"workload": "chat", "share": share if two else 1.0}]
    if two:
        classes.append({"workload": "rag", "share": round(1.0 - share, 6)})
    return {
        "model": "llama-3.1-8b",
        "traffic": {"rate_rps": draw(st.sampled_from([4.0, 10.0, 25.0])), "classes": classes},
        "candidates": {
            "gpus": gpus,
            "dtypes": ["fp8"],
            "tp": [1, 2],
            "chunk_budgets": [512, 2048],
            "modes": draw(st.sampled_from([["aggregated"], ["aggregated", "disaggregated"]])),
        },
        "solver": EXACT,
        "verify": {
            "enabled": True,
            "requests": 1000,
            "seed": draw(st.integers(1, 5)),
            "burst_cv": draw(st.sampled_from([1.0, 3.0, 5.0])),
        },
    }


def _solved(plan) -> bool:
    return plan.status.value == "optimal"


@PROPS
@given(small_requests())
def test_no_alternative_is_cheaper_than_the_plan(req):
    plan = make_plan(req, CAT, alternatives=True)
    if not _solved(plan):
        return
    cost = _total(plan)
    for alt in plan.alternatives:
        if alt.cost_usd_per_hour is not None:
            assert alt.cost_usd_per_hour >= cost * (1 - SLACK), (alt.name, alt.cost_usd_per_hour)
            assert alt.verified is False  # solved on the corrected model, not simulated


@PROPS
@given(small_requests(), st.data())
def test_offering_more_gpu_types_never_costs_more(req, data):
    more = make_plan(req, CAT, alternatives=False)
    if not _solved(more):
        return
    gpus = req["candidates"]["gpus"]
    drop = data.draw(st.sampled_from(gpus))
    fewer_req = {**req, "candidates": {**req["candidates"], "gpus": [g for g in gpus if g != drop]}}
    fewer = make_plan(fewer_req, CAT, alternatives=False, corrections=more.verification.corrections)
    if fewer.total_cost_usd_per_hour is None:
        return  # infeasible without that GPU type: "costs more" holds
    assert _total(fewer) >= _total(more) * (1 - SLACK)
    # the smaller offer keeps every correction the larger one learned, for its GPU types
    kept = {c.key: c.factor for c in fewer.verification.corrections}
    for c in more.verification.corrections:
        if c.gpu != drop:
            assert kept[c.key] <= c.factor


@PROPS
@given(small_requests())
def test_more_traffic_never_costs_less(req):
    plan = make_plan(req, CAT, alternatives=False)
    if not _solved(plan):
        return
    sens = sensitivity(req, CAT, workers=1, base_plan=plan.to_json_dict())
    costs = [_total(plan)]
    for row in sens["rows"]:
        if row["name"].startswith("traffic"):
            if row["cost_usd_per_hour"] is None:
                break  # infeasible at more traffic: not cheaper
            assert isinstance(row["verified"], bool)
            costs.append(row["cost_usd_per_hour"])
    for lo, hi in itertools.pairwise(costs):
        assert hi >= lo * (1 - SLACK), costs


def test_a_correction_covers_the_whole_family_and_every_variant_reuses_it():
    """A learned correction derates every candidate of its family, in the model and
    set aside, and a variant planned with it starts from the corrected model."""
    req = {
        "model": "llama-3.1-8b",
        "traffic": {"rate_rps": 40, "classes": [{"workload": "chat", "share": 1.0}]},
        "candidates": {"gpus": ["h100-sxm5-80gb"], "dtypes": ["fp8"], "modes": ["disaggregated"]},
        "solver": EXACT,
        "verify": {"requests": 10000, "burst_cv": 4.0},
        "constraints": {"max_utilization": 1.0},  # no headroom: the burst makes it miss
        "risk": {"confidence": 0.5},  # nominal capacities, no risk margin either
    }
    plan = make_plan(req, CAT, alternatives=False, verify=True)
    fixes = plan.verification.corrections
    assert fixes and all(c.learned == "this plan" and c.factor < 1 for c in fixes)
    assert plan.verification.passed
    # re-planned with those corrections and no simulation: the same corrected optimum
    again = make_plan(req, CAT, alternatives=False, verify=False, corrections=fixes)
    assert again.cost_usd_per_hour == plan.cost_usd_per_hour
    assert all(c.learned == "inherited" for c in again.verification.corrections)
    # JSON round trip (a stored plan's corrections), and the max of derates per family
    doc = [c.model_dump(by_alias=True) for c in fixes]
    looser = [{**d, "factor": 1.0} for d in doc]
    merged = sv.as_corrections(doc + looser)
    assert {k: c.factor for k, c in merged.items()} == {c.key: c.factor for c in fixes}


def test_corrected_screening_derates_the_family_everywhere():
    from planner.candidates import screen_candidates
    from planner.request import resolve_request
    from planner.service import parse_request

    req = {
        "model": "llama-3.1-8b",
        "traffic": {"rate_rps": 20, "classes": [{"workload": "chat", "share": 1.0}]},
        "candidates": {"gpus": ["h100-sxm5-80gb", "h200-sxm-141gb"], "dtypes": ["fp8"]},
    }
    resolved = resolve_request(parse_request(req), CAT)
    scr = screen_candidates(resolved, CAT)
    fam = scr.candidates[0]
    fc = FamilyCorrection(
        class_name=fam.class_name,
        role=fam.config.role.value,
        mode="x",
        gpu=fam.config.gpu,
        side="prefill",
        factor=0.5,
        reason="test",
        learned="this plan",
    )
    fixed = sv.corrected_screening(scr, {fc.key: fc}, resolved)
    every = fixed.candidates + fixed.cross_dominated
    same = [
        c
        for c in every
        if (c.class_name, c.config.role, c.config.gpu)
        == (fam.class_name, fam.config.role, fam.config.gpu)
    ]
    assert same and all(isinstance(c, sv.DeratedCandidate) for c in same)
    for c in same:
        assert c.prefill_derate == 0.5
        n = c.max_replicas
        assert c.prefill_capacity_rps(n) == 0.5 * super(
            sv.DeratedCandidate, c
        ).prefill_capacity_rps(n)
    others = [c for c in every if c not in same]
    assert not any(isinstance(c, sv.DeratedCandidate) for c in others)


# --------------------------------------------------------------------------- an oracle
# The simulator's verdict replaced by a known truth: family (class, role, GPU type) F
# really carries truth[F] x the uncorrected queueing model's capacity. Noise-free and
# fast, so many random requests run, and the corrections are known to be needed.


def oracle(truth: dict[tuple[str, str, str], float]):
    """A stand-in for :func:`planner.simulate.verify.verify_plan`: a class misses
    (on the side concerned) when one of its pools carries more than truth x the
    uncorrected model's capacity at its replica count."""
    from planner.candidates import screen_candidates
    from planner.simulate.results import ClassVerification, Verification

    screened: dict[str, dict] = {}

    def verify(plan, request, catalog, spec):
        if plan.get("status") not in ("optimal", "feasible"):
            return Verification(
                requests=0, seed=spec.seed, burst_cv=1.0, wall_time_s=0.0, passed=None, summary="-"
            )
        key = request.request.model_dump_json()
        if key not in screened:
            scr = screen_candidates(request, catalog)
            everything = scr.candidates + scr.cross_dominated + scr.pruned
            screened[key] = {c.id: c for c in everything}
        by_id = screened[key]
        classes = []
        for cls in request.classes:
            pools = [p for p in plan["pools"] if p["class"] == cls.name and p["replicas"] > 0]
            if not pools:
                continue
            bad = set()
            for p in pools:
                t = truth.get((cls.name, p["role"], p["gpu"]), 1.0)
                c, n, rate = by_id[p["id"]], p["replicas"], p["rate_rps"] * (1 - 1e-9)
                if p["role"] != "decode" and rate > t * c.prefill_capacity_rps(n):
                    bad.add("ttft")
                if p["role"] != "prefill" and rate > t * c.decode_capacity_rps(n):
                    bad.add("tpot")
            slo = cls.slo
            ok = not bad
            classes.append(
                ClassVerification(
                    name=cls.name,
                    percentile=slo.percentile,
                    slo_ttft_ms=slo.ttft_ms,
                    slo_tpot_ms=slo.tpot_ms,
                    ttft_ms=slo.ttft_ms * (1.3 if "ttft" in bad else 0.8),
                    tpot_ms=slo.tpot_ms * (1.3 if "tpot" in bad else 0.8),
                    planned_ttft_ms=None,
                    planned_tpot_ms=None,
                    attainment=0.95 if ok else 0.8,
                    attainment_ci95=0.0,
                    goodput_rps=cls.rate_rps,
                    status="meets" if ok else "misses",
                    meets_slo=ok,
                    verdict="oracle",
                )
            )
        passed = all(c.meets_slo for c in classes)
        return Verification(
            requests=0,
            seed=spec.seed,
            burst_cv=1.0,
            wall_time_s=0.0,
            passed=passed,
            summary="oracle: " + ("meets" if passed else "misses"),
            classes=classes,
        )

    return verify


@st.composite
def oracle_cases(draw):
    """A small request and a truth: some families carry 55-90% of their model."""
    req = draw(small_requests())
    req["verify"] = {"enabled": True}
    # larger rates than the simulated cases: more pools, so cross-GPU pruning sets
    # candidates aside (what "without GPU X" brings back)
    req["traffic"]["rate_rps"] = draw(st.sampled_from([10.0, 25.0, 60.0]))
    families = [
        (cls, role, gpu)
        for cls in ("chat", "rag")
        for role in ("aggregated", "prefill", "decode")
        for gpu in req["candidates"]["gpus"]
    ]
    truth = {
        f: draw(st.sampled_from([0.55, 0.75, 0.9]))
        for f in draw(st.lists(st.sampled_from(families), max_size=6, unique=True))
    }
    return req, truth


ORACLE = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


@ORACLE
@given(oracle_cases())
def test_oracle_alternatives_and_gpu_offers_are_consistent(case):
    from unittest import mock

    req, truth = case
    with mock.patch.object(sv, "verify_plan", oracle(truth)):
        plan = make_plan(req, CAT, alternatives=True)
        if not _solved(plan):
            return
        cost = _total(plan)
        # (a) every alternative restricts the corrected model
        for alt in plan.alternatives:
            if alt.cost_usd_per_hour is not None:
                assert alt.cost_usd_per_hour >= cost * (1 - SLACK), (alt.name, truth)
        # (b) each smaller offer, planned with the plan's corrections, costs no less
        gpus = req["candidates"]["gpus"]
        for drop in gpus:
            fewer_req = {
                **req,
                "candidates": {**req["candidates"], "gpus": [g for g in gpus if g != drop]},
            }
            fewer = make_plan(
                fewer_req, CAT, alternatives=False, corrections=plan.verification.corrections
            )
            if fewer.total_cost_usd_per_hour is not None:
                assert _total(fewer) >= cost * (1 - SLACK), (drop, truth)


@settings(
    max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(oracle_cases())
def test_oracle_sensitivity_is_monotone_in_traffic(case):
    from unittest import mock

    req, truth = case
    with mock.patch.object(sv, "verify_plan", oracle(truth)):
        plan = make_plan(req, CAT, alternatives=False)
        if not _solved(plan):
            return
        sens = sensitivity(req, CAT, workers=1, base_plan=plan.to_json_dict())
    costs = [_total(plan)]
    for row in sens["rows"]:
        if row["name"].startswith("traffic") and row["cost_usd_per_hour"] is not None:
            costs.append(row["cost_usd_per_hour"])
    for lo, hi in itertools.pairwise(costs):
        assert hi >= lo * (1 - SLACK), (costs, truth)


def test_issue_11_a_corrected_family_does_not_make_without_gpu_x_cheaper():
    """The case that broke (a) before family corrections: H100 really carries 55% of
    its modelled aggregated capacity. The old correction derated the class's pools in
    the model (all H100, which had pruned A100 and H200 away) and planned $5.90/h,
    while "without h100" brought back un-derated rivals at $4.00/h. (Since aggregated
    batches maximize capacity instead of filling the TPOT SLO the H100 plan has more
    slack, so the oracle's H100 carries 35% to make it miss.)"""
    from unittest import mock

    req = {
        "model": "llama-3.1-8b",
        "traffic": {"rate_rps": 10.0, "classes": [{"workload": "chat", "share": 1.0}]},
        "candidates": {
            "gpus": ["h100-sxm5-80gb", "a100-sxm-80gb", "h200-sxm-141gb"],
            "dtypes": ["fp8"],
            "tp": [1, 2],
            "chunk_budgets": [512, 2048],
            "modes": ["aggregated"],
        },
        "solver": EXACT,
        "verify": {"enabled": True},
    }
    # the GPU type the model buys (H100 when this case broke; which one follows the
    # catalog's calibration) is the one that really carries 35% of its capacity
    (gpu,) = make_plan({**req, "verify": {"enabled": False}}, CAT, alternatives=False).gpus_by_type
    truth = {("chat", "aggregated", gpu): 0.35}
    with mock.patch.object(sv, "verify_plan", oracle(truth)):
        plan = make_plan(req, CAT, alternatives=True)
    assert plan.verification.passed
    # the side that misses first depends on the headroom (max_utilization 0.85 by
    # default): prefill (TTFT) or decode (TPOT) of the bought aggregated family, or both
    fixes = plan.verification.corrections
    assert fixes and all(
        (f.class_name, f.role, f.gpu) == ("chat", "aggregated", gpu) for f in fixes
    )
    assert all(f.side in ("prefill", "decode") and f.factor < 1 for f in fixes)
    without = {a.name: a.cost_usd_per_hour for a in plan.alternatives}
    for name, cost in without.items():
        assert cost is None or cost >= _total(plan) * (1 - SLACK), name


#: Agent turns of 52k-token prompts on GB200 tp8 alone: verifies as planned; with
#: screening's chunked prefill made 25% optimistic (:func:`_optimistic_chunks`), the
#: simulated p90 TTFT sits at a latency floor over the SLO.
GB200_AGENT = {
    "model": "llama-3.1-70b",
    "traffic": {
        "rate_rps": 15,
        "classes": [
            {
                "workload": "agent",
                "share": 1.0,
                "prompt_tokens": {"mean_tokens": 40000, "p90_tokens": 52000},
                "output_tokens": {"mean_tokens": 800, "p90_tokens": 1600},
                "prefix_hit_rate": 0.6,
            }
        ],
    },
    # 700 ms: GB200's dense level is borrowed from B200 (0.80 since FP4 GEMMs are priced
    # at their measured rate; 0.87 before, when 600 ms was used); 650 ms until TTFT
    # counted the step already scheduled (overlap scheduling, about 55 ms here), under
    # which 650 ms has no fleet at all. TPOT 60 ms: with all-reduces and
    # elementwise kernels at their measured cost a 256-token chunk's mixed step at these
    # contexts takes 55 ms
    "slo": {"ttft_ms": 700, "tpot_ms": 60, "percentile": 90},
    "candidates": {"modes": ["aggregated"], "dtypes": ["fp8"], "gpus": ["gb200-per-gpu"]},
}


def _gb200_at(prefill_mfu: float, decode_mbu: float) -> Catalog:
    """CAT with GB200's factors pinned (the correction tests below exercise the
    correction, not the calibration: their request sits at GB200's latency floor, which
    every recalibration of its level moves)."""
    gpu = CAT.gpus["gb200-per-gpu"]
    eff = gpu.efficiency.model_copy(update={"prefill_mfu": prefill_mfu, "decode_mbu": decode_mbu})
    gpus = {**CAT.gpus, gpu.id: gpu.model_copy(update={"efficiency": eff})}
    return CAT.model_copy(update={"gpus": gpus})


#: GB200's factors when the correction tests were written (level 0.795 of the analogy
#: 0.45 / 0.65, borrowed from B200's dense level; 0.709 x 1 / 0.974 since the checkpoints'
#: BF16 layers are counted, at which 700 ms has no fleet).
GB200_CAT = _gb200_at(0.3579, 0.5169)


def _optimistic_chunks(monkeypatch, share: float = 0.75) -> None:
    """Screening prices chunked prompts 25% under what the simulation runs (the kind of
    gap that max(decode step, chunk) pricing left before chunks were priced as mixed
    steps, made large enough to miss): the miss the correction tests need. (30% when
    written; with the catalog recalibrated for measured MoE/MLA kernels, GB200's level
    moved and at 30% the correction's re-solve found no other fleet, so nothing
    costlier was tried.)"""
    monkeypatch.setattr(
        screen, "chunked_ttft_ms", lambda prompt, steps: share * chunked_ttft_ms(prompt, steps)
    )


def test_a_family_excluded_at_its_latency_floor_buys_no_more_replicas(monkeypatch):
    """A miss whose latency stays put after its family was derated (the pools grew) is a
    service-time floor: the family is excluded (factor 0, its candidates rejected), not
    derated again, and the stop reason says so. End to end, a screening that prices long
    chunked prompts 25% under what the simulation runs (:func:`_optimistic_chunks`)
    plans an agent class on GB200 whose p90 prompt's prefill alone is over the TTFT SLO
    in simulation: more replicas cannot fix it. With the
    screening's own pricing the same request verifies as planned."""
    fc = FamilyCorrection(
        class_name="agent",
        role="aggregated",
        mode="aggregated",
        gpu="gb200-per-gpu",
        side="prefill",
        factor=0.837,
        reason="round 1",
        learned="this plan",
        metric_ms=814.0,
    )
    assert sv.latency_floor(fc, 815.0) is not None  # no better with more replicas
    assert sv.latency_floor(fc, 790.0) is None  # it fell: load, derate again
    assert sv.latency_floor(fc.model_copy(update={"learned": "inherited"}), 815.0) is None
    assert sv.latency_floor(fc.model_copy(update={"metric_ms": None}), 815.0) is None
    plan = make_plan(GB200_AGENT, GB200_CAT, alternatives=False, verify=True)
    assert plan.verification.passed and plan.verification.correction is None
    _optimistic_chunks(monkeypatch)
    plan = make_plan(GB200_AGENT, GB200_CAT, alternatives=False, verify=True)
    corr = plan.verification.correction
    assert corr is not None and "excluded at its latency floor" in corr.note
    # stopped at the floor instead of re-solving to MAX_CORRECTIONS at ever higher cost
    assert corr.iterations <= 2


def test_a_costlier_correction_that_attains_no_more_leaves_the_original_plan(monkeypatch):
    """The GB200 agent plan, screened 35% optimistic on chunked prompts
    (:func:`_optimistic_chunks`; 30% until BF16 GEMMs were priced at the BF16 rate, 40%
    before the checkpoints' BF16 layers were counted: at those the re-solve now attains a
    little more), misses at its latency floor; the correction's re-solve costs more
    ($1,234.88/h against $1,053.28/h) and attains no more:
    the original plan is returned with the corrections it was solved with (none), and
    the verification says what was tried. Planned again on those corrections, without
    simulation, the model gives the same fleet: alternatives and variants reuse them."""
    from planner.report.text import render_plan_text

    _optimistic_chunks(monkeypatch, 0.65)
    plan = make_plan(GB200_AGENT, GB200_CAT, alternatives=False, verify=True)
    ver = plan.verification
    fix = ver.correction
    assert fix is not None and fix.kept == "original"
    assert plan.cost_usd_per_hour == fix.original_cost_usd_per_hour
    assert fix.cost_usd_per_hour is not None and fix.cost_usd_per_hour > plan.cost_usd_per_hour
    first, tried = fix.rounds[0], fix.rounds[1]
    assert first.kept and not tried.kept
    assert round(tried.attainment["agent"], 3) <= round(first.attainment["agent"], 3)
    assert ver.corrections == []  # what the returned plan was solved with
    assert fix.tried_corrections and all(c.learned == "this plan" for c in fix.tried_corrections)
    assert "correction tried" in fix.note and "the original plan is kept" in fix.note
    assert f"${plan.cost_usd_per_hour:,.2f}/h plan is kept" in ver.summary
    text = render_plan_text(plan.to_json_dict())
    assert "Correction tried, original kept:" in text and "tried, not applied:" in text
    again = make_plan(
        GB200_AGENT, GB200_CAT, alternatives=False, verify=False, corrections=ver.corrections
    )
    assert again.cost_usd_per_hour == plan.cost_usd_per_hour
    assert [(p.id, p.replicas) for p in again.pools] == [(p.id, p.replicas) for p in plan.pools]
