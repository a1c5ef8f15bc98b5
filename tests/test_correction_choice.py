"""Which plan a failed verification correction returns (planner.simulate.outcome),
through the ``correct()`` seam: a fake simulation (a round's attainment is given)
and a fake re-solve (a round's cost is given), so each case is exact and fast.

The rule: the best of the original and every re-solve by attainment (a plan that
verifies first, then the smallest shortfall at the printed 0.1% resolution), the
cheaper on a tie; the corrections returned are the ones the kept plan was solved
with, and the verification section says what was tried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from planner.simulate import outcome
from planner.simulate import verify as sv
from planner.simulate.results import ClassVerification, FamilyCorrection, Verification

GPU = "gb200-per-gpu"
SPEC = SimpleNamespace(seed=1, burst_cv=1.0)


@dataclass
class FakePlan:
    """What ``correct`` reads of a Plan: its cost, pools (for ``learn``) and status."""

    cost_usd_per_hour: float
    replicas: int = 26
    utilization: float = 0.84
    status: Any = field(default_factory=lambda: SimpleNamespace(has_solution=True, value="optimal"))
    infeasible_reasons: list[str] = field(default_factory=list)
    solver: Any = field(default_factory=lambda: SimpleNamespace(message=None))

    def to_json_dict(self) -> dict:
        return {
            "pools": [
                {
                    "id": f"agent:aggregated-{GPU}-tp8",
                    "class": "agent",
                    "role": "aggregated",
                    "gpu": GPU,
                    "replicas": self.replicas,
                    "utilization": self.utilization,
                }
            ]
        }


def verification(
    attainment: float, ttft_ms: float = 815.0, summary: str = "", name: str = "agent"
) -> Verification:
    """One class (agent), p90 800 ms TTFT / 40 ms TPOT, at ``attainment``."""
    meets = attainment >= 0.9
    c = ClassVerification(
        name=name,
        percentile=90.0,
        slo_ttft_ms=800.0,
        slo_tpot_ms=40.0,
        ttft_ms=ttft_ms,
        tpot_ms=31.0,
        planned_ttft_ms=783.0,
        planned_tpot_ms=35.5,
        attainment=attainment,
        attainment_ci95=0.006,
        goodput_rps=13.0,
        status="meets" if meets else "misses",
        meets_slo=meets,
        verdict="fake",
    )
    return Verification(
        requests=20_000,
        seed=1,
        burst_cv=1.0,
        wall_time_s=0.0,
        passed=meets,
        summary=summary or ("agent meets" if meets else "agent MISSES its SLO percentile"),
        classes=[c],
    )


def run(
    rounds: list[tuple[float, float, float]],
    original: tuple[float, float] = (944.32, 0.8907),
    inherited: dict | None = None,
):
    """``correct()`` on an original plan ($/h, attainment) whose re-solves r = 1, 2, ...
    cost ``rounds[r-1][0]`` and attain ``rounds[r-1][1]`` at p90 TTFT ``rounds[r-1][2]``
    ms (more rounds than given: the re-solve is infeasible)."""
    plans = [FakePlan(cost) for cost, _, _ in rounds]
    vers = {id(p): verification(a, t) for p, (_, a, t) in zip(plans, rounds, strict=True)}
    calls = iter(plans)

    def replan(_screening):
        p = next(calls, None)
        if p is None:
            infeasible = FakePlan(0.0)
            infeasible.status = SimpleNamespace(has_solution=False, value="infeasible")
            infeasible.infeasible_reasons = ["no feasible pool candidates for class(es): agent"]
            return infeasible, None, None, "screening"
        return p, "problem", "result", f"screening {plans.index(p) + 1}"

    plan = FakePlan(original[0])
    first = verification(original[1], 814.0)
    return plan, sv.correct(
        plan,
        first,
        request=None,  # type: ignore[arg-type]
        screening=None,  # type: ignore[arg-type]
        catalog=None,  # type: ignore[arg-type]
        spec=SPEC,  # type: ignore[arg-type]
        replan=replan,
        inherited=inherited,
        simulate=lambda p: vers[id(p)],
    )


@pytest.fixture(autouse=True)
def _no_screening(monkeypatch):
    """The fake re-solve ignores its model: no screening to correct."""
    monkeypatch.setattr(sv, "corrected_screening", lambda screening, corr, request: screening)


def test_a_costlier_correction_that_attains_no_more_is_not_kept():
    """The GB200 agent case: $944.32/h at 89.07%, the correction $1,125.92/h at 89.06%
    (then the family hits its latency floor and nothing else is feasible)."""
    plan, (kept, ver, out, corrections) = run([(1125.92, 0.8906, 815.0)])
    assert kept is plan and out is None
    assert corrections == {}  # what the original was solved with: nothing
    fix = ver.correction
    assert fix is not None and fix.kept == "original"
    assert fix.original_cost_usd_per_hour == 944.32 and fix.cost_usd_per_hour == 1125.92
    assert [(r.round, r.cost_usd_per_hour, r.kept) for r in fix.rounds] == [
        (0, 944.32, True),
        (1, 1125.92, False),
    ]
    assert (
        "correction tried" in fix.note and "$1,125.92/h (solved with agent aggregated" in fix.note
    )
    assert "agent 89.1% vs 89.1% (target 90%)" in fix.note
    assert "the original plan is kept" in fix.note and "no feasible pool" in fix.note
    assert "$944.32/h plan is kept" in ver.summary and "$1,125.92/h" in ver.summary
    # the family the rounds derated (excluded at its floor in round 2) is tried, not applied
    (tried,) = fix.tried_corrections
    assert (tried.class_name, tried.role, tried.gpu, tried.side) == (
        "agent",
        "aggregated",
        GPU,
        "prefill",
    )
    assert tried.factor == 0.0 and "latency floor" in tried.reason


def test_a_costlier_correction_that_attains_less_is_not_kept():
    plan, (kept, ver, _out, corrections) = run([(1125.92, 0.85, 900.0)])
    assert kept is plan and corrections == {} and ver.correction.kept == "original"
    assert "agent 85.0% vs 89.1%" in ver.correction.note


def test_a_correction_that_attains_more_is_kept_even_when_it_still_misses():
    plan, (kept, ver, out, corrections) = run([(1125.92, 0.8950, 790.0)])
    assert kept is not plan and kept.cost_usd_per_hour == 1125.92
    assert out[3] == "screening 1"  # the model the kept plan was solved on
    assert set(corrections) == {("agent", "aggregated", GPU, "prefill")}
    assert [c.factor for c in corrections.values()] == [pytest.approx(0.995 * 0.84)]
    fix = ver.correction
    assert fix.kept == "corrected"
    # round 2 asked for more (its re-solve was infeasible): asked for, not applied
    (tried,) = fix.tried_corrections
    assert tried.factor < corrections[tried.key].factor and "no feasible" in fix.note
    assert "it is kept because it attains more: agent 89.5% vs 89.1%" in fix.note
    assert "the corrected plan is kept ($1,125.92/h, was $944.32/h)" in ver.summary


def test_a_correction_that_verifies_is_kept():
    _plan, (kept, ver, _out, _corrections) = run([(1000.0, 0.93, 700.0)])
    assert kept.cost_usd_per_hour == 1000.0 and ver.passed
    assert ver.correction.kept == "corrected" and "meets its targets at $1,000.00/h" in (
        ver.correction.note
    )
    assert "kept" not in ver.summary  # the plain verdict: every class meets


def test_the_best_round_is_kept_with_the_corrections_of_its_round():
    """Round 1 attains most; round 2 (costlier, worse) tightened the family again:
    round 1's plan, model and factor are returned, round 2's factor is tried only."""
    _plan, (kept, ver, out, corrections) = run(
        [(1000.0, 0.895, 790.0), (1100.0, 0.80, 700.0)]
        + [(1200.0 + i, 0.7, 700.0 - i) for i in range(4)]
    )
    assert kept.cost_usd_per_hour == 1000.0 and out[3] == "screening 1"
    (key,) = corrections
    fix = ver.correction
    assert fix.iterations == sv.MAX_CORRECTIONS
    assert [r.kept for r in fix.rounds] == [False, True] + [False] * (sv.MAX_CORRECTIONS - 1)
    assert "the plan of re-solve 1 still misses" in fix.note
    assert "at most 6 re-solves" in fix.note
    (tried,) = fix.tried_corrections
    assert tried.key == key and tried.factor < corrections[key].factor


def test_a_tie_in_attainment_keeps_the_cheaper_plan():
    """Within the printed 0.1% the plans attain the same: the cheaper one wins, here the
    re-solve (a correction may also find a cheaper fleet)."""
    _plan, (kept, ver, _, _) = run([(900.0, 0.8908, 815.0)])
    assert kept.cost_usd_per_hour == 900.0 and ver.correction.kept == "corrected"
    assert "it attains as much (at the 0.1% shown) and costs less" in ver.correction.note
    assert "costs less, agent 89.1% vs 89.1%" in ver.summary


def test_inherited_corrections_stay_those_of_a_kept_original():
    old = FamilyCorrection(
        class_name="agent",
        role="aggregated",
        mode="aggregated",
        gpu=GPU,
        side="decode",
        factor=0.9,
        reason="learned by the base plan",
        learned="inherited",
    )
    inherited = {old.key: old}
    plan, (kept, ver, _out, corrections) = run([(1125.92, 0.8906, 815.0)], inherited=inherited)
    assert kept is plan and corrections == inherited and corrections[old.key] is old
    assert "with the 1 inherited correction it was solved with" in ver.correction.note
    assert [c.key for c in ver.correction.tried_corrections] == [
        ("agent", "aggregated", GPU, "prefill")
    ]


def test_attainment_rank_counts_met_classes_then_shortfalls():
    def ver(*atts: float) -> Verification:
        v = verification(atts[0])
        v.classes = [
            v.classes[0].model_copy(
                update={"name": f"c{i}", "attainment": a, "meets_slo": a >= 0.9}
            )
            for i, a in enumerate(atts)
        ]
        return v

    rank = outcome.attainment_rank
    assert rank(ver(0.95, 0.80)) > rank(ver(0.89, 0.89))  # one class meets
    assert rank(ver(0.89, 0.88)) > rank(ver(0.895, 0.85))  # smaller worst shortfall
    assert rank(ver(0.8904, 0.8)) == rank(ver(0.8896, 0.8))  # both 1.0 point short
    assert rank(ver(0.8906, 0.8)) > rank(ver(0.8894, 0.8))


def test_the_choice_is_deterministic():
    a = run([(1125.92, 0.8906, 815.0)])[1][1].model_dump()
    b = run([(1125.92, 0.8906, 815.0)])[1][1].model_dump()
    assert a == b


def test_verify_and_correct_hands_on_the_model_of_the_plan_it_keeps(monkeypatch):
    """make_plan's step: when the original is kept, the problem, result and screening
    returned (what the alternatives and "why not" rows are solved on) are the
    original's, and its corrections the inherited ones (none)."""
    from dataclasses import replace

    from catalog.loader import load_catalog
    from planner.candidates import screen_candidates
    from planner.plan import plan_from_result
    from planner.problem_build import build_problem, parse_request
    from planner.request import resolve_request
    from planner.service import SolverLimits, solver_options_for
    from solver.solve import solve

    monkeypatch.undo()  # the real corrected_screening: re-solves run on the real model
    cat = load_catalog()
    doc = {
        "model": "llama-3.1-8b",
        "traffic": {"rate_rps": 20, "classes": [{"workload": "chat", "share": 1.0}]},
        "candidates": {"gpus": ["h100-sxm5-80gb"], "dtypes": ["fp8"], "modes": ["aggregated"]},
        "verify": {"enabled": True},
    }
    request = parse_request(doc)
    resolved = resolve_request(request, cat)
    screening = screen_candidates(resolved, cat)
    problem = build_problem(resolved, screening)
    opts = replace(solver_options_for(request, SolverLimits()), rel_gap=0.0)
    result = solve(problem, opts)
    plan = plan_from_result(resolved, screening, result, cat, 10.0, 0.0)
    original_usd_per_hour = plan.cost_usd_per_hour
    solved_usd_per_hour = []

    def fake_verify(doc, request, catalog, spec):
        """Misses at 85% (TTFT); every costlier re-solve attains less (84%)."""
        solved_usd_per_hour.append(doc["cost_usd_per_hour"])
        better = doc["cost_usd_per_hour"] <= original_usd_per_hour
        return verification(0.85 if better else 0.84, 900.0, name="chat")

    monkeypatch.setattr(sv, "verify_plan", fake_verify)
    kept, prob, res, scr, _ = sv.verify_and_correct(
        plan, problem, result, resolved, screening, cat, opts
    )
    assert len(solved_usd_per_hour) > 1 and max(solved_usd_per_hour) > original_usd_per_hour
    assert kept is plan and prob is problem and res is result and scr is screening
    ver = kept.verification
    assert ver.corrections == [] and ver.correction.kept == "original"
    assert ver.correction.tried_corrections
