"""What-if sensitivity of a plan: the cheapest fleet at more traffic and at a shifted
mix, each re-planned on the base plan's corrected capacity model.

It plans (``planner.compare.run_variants``), so it lives beside the planner, not in
``planner.report``: a report renders the rows computed here (``api.services.reports``
computes and caches them), it never runs the optimizer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from catalog.schema import Catalog

#: Traffic multipliers of the sensitivity rows.
TRAFFIC_FACTORS = (1.5, 2.0)
#: Points the largest class's share moves by in the mix rows.
MIX_SHIFT_POINTS = 20


def _class_names(request: Mapping[str, Any]) -> list[tuple[str, float]]:
    classes = (request.get("traffic") or {}).get("classes") or []
    return [(str(c.get("name") or c.get("workload")), float(c.get("share", 0.0))) for c in classes]


def mix_shift(request: Mapping[str, Any], points: float) -> tuple[dict[str, Any], str] | None:
    """The request with its largest class's share moved by ``points`` share
    points (clipped to [0, 1]); the other classes take up the difference in
    their base proportions (``planner.compare.share_of``). Returns (request,
    description), or None with fewer than two classes."""
    from planner.compare import share_of

    shares = _class_names(request)
    if len(shares) < 2:
        return None
    name, share = max(shares, key=lambda t: t[1])
    new = min(1.0, max(0.0, share + points / 100.0))
    doc = share_of(dict(request), name, new, "traffic.classes")
    after = dict(_class_names(doc))
    change = ", ".join(f"{n} {s:.0%} → {after[n]:.0%}" for n, s in shares)
    return doc, change


def objective_cost_usd_per_hour(plan: Mapping[str, Any]) -> float | None:
    """The cost a plan's optimizer minimized ($/hour): ``total_cost_usd_per_hour`` (GPUs
    plus the operations cost of GPU types and configurations) when the plan has one,
    else ``cost_usd_per_hour`` (plans stored before operations were priced)."""
    total = plan.get("total_cost_usd_per_hour")
    return total if total is not None else plan.get("cost_usd_per_hour")


def sensitivity_cases(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The cases: ``{name, change, request}`` (``request`` None with a
    ``status``/``note`` when a case does not apply)."""
    from planner.variants import scale_rate

    out: list[dict[str, Any]] = []
    for f in TRAFFIC_FACTORS:
        out.append(
            {
                "name": f"traffic ×{f:g}",
                "change": f"total rate {request['traffic']['rate_rps']:g} → "
                f"{request['traffic']['rate_rps'] * f:g} req/s",
                "request": scale_rate(request, f),
            }
        )
    shares = _class_names(request)
    largest = max(shares, key=lambda t: t[1])[0] if shares else "largest class"
    for sign in (-1, 1):
        pts = sign * MIX_SHIFT_POINTS
        name = f"{largest} share {pts:+d} pts"
        if request.get("scenarios"):
            out.append(
                {
                    "name": name,
                    "change": "",
                    "request": None,
                    "status": "not applicable",
                    "note": "the request's scenarios set the mix",
                }
            )
            continue
        shifted = mix_shift(request, pts)
        if shifted is None:
            out.append(
                {
                    "name": "mix shift",
                    "change": "",
                    "request": None,
                    "status": "not applicable",
                    "note": "one traffic class: no mix to shift",
                }
            )
            break
        out.append({"name": name, "change": shifted[1], "request": shifted[0]})
    return out


def sensitivity(
    request: Mapping[str, Any],
    catalog: Catalog | None = None,
    caps: Any = None,
    *,
    base_cost_usd_per_hour: float | None = None,
    base_plan: Mapping[str, Any] | None = None,
    workers: int | None = None,
    calibrations: Mapping[str, Any] | None = None,
    verify_default: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The cost of the cheapest fleet at traffic x1.5 and x2 and at the largest
    class's share -20 and +20 points, each re-planned
    (``planner.compare.run_variants``, in parallel processes where they are independent).

    Every case is planned on the base plan's corrected capacity model: it inherits
    the base's learned corrections (``base_plan["verification"]["corrections"]``, or
    those of the base planned here) and may only add to them. The traffic cases
    run in increasing order, each inheriting the corrections of the one before,
    so their cost cannot fall as traffic rises: with C the corrections a case
    inherits and C' >= C the ones it ends with, cost(f r) = opt(f r, C') >=
    opt(f r, C) >= opt(f' r, C) = cost(f' r) for f > f' (tighter curves cost no less;
    a fleet carrying f r carries f' r). Each case is simulated (unless the request,
    or else ``verify_default``, the caller's setting, turns verification off);
    ``verified`` says whether its plan met every SLO.

    Costs are what the optimizer minimizes, GPUs plus operations
    (:func:`objective_cost_usd_per_hour`), so the guarantee above holds for them.
    Returns ``{"base_cost_usd_per_hour", "rows": [{name, change, status,
    cost_usd_per_hour, delta_usd_per_hour, delta_pct, gpus_total,
    gpus_by_type, verified, note}], "note"}``; ``delta_pct = 100 x (cost - base) / base``.
    The base is planned too unless ``base_plan`` or ``base_cost_usd_per_hour`` is
    given; ``calibrations`` (name -> Calibration) serves a request naming one;
    ``progress(done, total)`` is called as re-plans finish.
    """
    from planner.compare import run_variants

    if catalog is None:
        from catalog.loader import load_catalog

        catalog = load_catalog()
    request = dict(request)
    cases = sensitivity_cases(request)
    total = sum(1 for c in cases if c["request"] is not None)
    total += 1 if base_plan is None and base_cost_usd_per_hour is None else 0
    finished = 0

    def run(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
        nonlocal finished
        if not variants:
            return []
        start = finished

        def step(done: int, _of: int) -> None:
            if progress is not None:
                progress(start + done, total)

        out = run_variants(
            variants,
            catalog,
            caps,
            workers=workers,
            calibrations=calibrations,
            verify_default=verify_default,
            progress=step,
        )
        finished = start + len(variants)
        return out

    def corrections_of(r: Mapping[str, Any] | None) -> list[Any] | None:
        plan = (r or {}).get("plan") if (r or {}).get("ok") else None
        return ((plan or {}).get("verification") or {}).get("corrections")

    base = base_cost_usd_per_hour
    base_corr: list[Any] | None = None
    if base_plan is not None:
        base = objective_cost_usd_per_hour(base_plan) if base is None else base
        base_corr = (base_plan.get("verification") or {}).get("corrections")
    elif base is None:
        (r,) = run([{"name": "base", "request": request}])
        base = objective_cost_usd_per_hour(r.get("plan") or {}) if r.get("ok") else None
        base_corr = corrections_of(r)
    todo = [c for c in cases if c["request"] is not None]
    traffic = [c for c in todo if c["name"].startswith("traffic")]
    first = [c for c in todo if c not in traffic[1:]]
    by_name: dict[str, dict[str, Any]] = {}
    results = run(
        [{"name": c["name"], "request": c["request"], "corrections": base_corr} for c in first]
    )
    by_name.update(zip([c["name"] for c in first], results, strict=True))
    inherit = corrections_of(by_name.get(traffic[0]["name"])) if traffic else None
    inherit = inherit if inherit is not None else base_corr
    for c in traffic[1:]:  # each inherits the corrections of the smaller traffic before it
        (r,) = run([{"name": c["name"], "request": c["request"], "corrections": inherit}])
        by_name[c["name"]] = r
        got = corrections_of(r)
        inherit = got if got is not None else inherit
    rows = []
    for c in cases:
        row: dict[str, Any] = {
            "name": c["name"],
            "change": c.get("change", ""),
            "status": c.get("status", "error"),
            "cost_usd_per_hour": None,
            "delta_usd_per_hour": None,
            "delta_pct": None,
            "gpus_total": None,
            "gpus_by_type": {},
            "verified": False,
            "note": c.get("note", ""),
        }
        outcome = by_name.get(c["name"]) if c["request"] is not None else None
        if outcome is not None and outcome.get("ok"):
            plan = outcome["plan"]
            cost = objective_cost_usd_per_hour(plan)
            ver = plan.get("verification") or {}
            row.update(
                status=plan.get("status"),
                cost_usd_per_hour=cost,
                gpus_total=plan.get("gpus_total"),
                gpus_by_type=plan.get("gpus_by_type") or {},
                verified=ver.get("passed") is True,
            )
            if cost is not None and base:
                row["delta_usd_per_hour"] = cost - base
                row["delta_pct"] = 100.0 * (cost - base) / base
            if plan.get("status") == "infeasible":
                row["note"] = "; ".join(plan.get("infeasible_reasons") or [])
            elif ver.get("passed") is not True and ver.get("summary"):
                row["note"] = f"not verified: {ver['summary']}"
        elif outcome is not None:
            row.update(
                status="error", note=str(outcome.get("detail") or outcome.get("error") or "")
            )
        rows.append(row)
    return {
        "base_cost_usd_per_hour": base,
        "rows": rows,
        "note": (
            "Each case is re-planned: the cheapest fleet meeting the same latency objectives, "
            "on the plan's capacity model as corrected by simulation (larger traffic cases "
            "also keep the corrections learned by smaller ones), and simulated. Mix shift: "
            f"the largest class's share moves by {MIX_SHIFT_POINTS} points and the other "
            "classes take up the difference in proportion."
        ),
    }
