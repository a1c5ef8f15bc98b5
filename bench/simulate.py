"""Fleet simulation: speed, and every shipped example verified against its SLOs.

Run: ``.venv/bin/python bench/simulate.py`` (or ``make bench``).

0. One million requests of the 80/20 plan (target: under 10 s on this machine), in
   one process and with the classes in parallel processes (the default from
   ``PARALLEL_FROM_REQUESTS``), best of ``--repeat`` (default 3), with the load average.
1. Speed: 100,000 requests of each shipped example's planned fleet (target: under
   10 s each on this machine); wall time, events, requests and events per second.
2. Verification: per example and class, the plan's predicted p-percentile TTFT and
   TPOT (queueing model), the simulated ones over three seeds (100,000 requests
   each), the SLO, and the attainment (share of requests meeting both SLOs).
3. Burstiness: the 80/20 example's chat class under gamma inter-arrivals of
   growing coefficient of variation (the planner assumes Poisson).

Figures are wall-clock seconds on this machine (a 2-core VM; other work running
on it shows as spread between runs).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog.loader import load_catalog
from planner.report.text import render_table
from planner.service import make_plan
from planner.simulate import simulate_plan

ROOT = Path(__file__).resolve().parent.parent
REQUESTS = 100_000
MILLION = 1_000_000
SEEDS = (1, 2, 3)


def table(headers, rows):
    print(render_table([str(h) for h in headers], [[str(c) for c in r] for r in rows]))
    print()


def examples():
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if "traffic" in doc and "model" in doc and not doc.get("scenarios"):
            yield path.stem, doc


def million(plans, catalog, repeat: int) -> None:
    """Section 0: one million requests of the 80/20 plan."""
    name, doc, plan = next(x for x in plans if x[0] == "chat-agent-80-20")
    print(f"== 0. Speed: {MILLION:,} requests of {name} (seed 1), best of {repeat}")
    rows = []
    for label, workers in (("one process", 1), ("classes in parallel", None)):
        best, sim, load = float("inf"), None, 0.0
        for _ in range(repeat):
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            sim = simulate_plan(plan, doc, catalog, MILLION, seed=1, workers=workers)
            best = min(best, time.perf_counter() - t0)
        assert sim is not None
        for c in sim.classes:
            rows.append(
                [
                    label,
                    c.name,
                    f"{sim.requests:,}",
                    f"{sim.events:,}",
                    f"{best:.2f}",
                    f"{c.ttft_ms.p50:,.1f} / {c.ttft_ms.p90:,.1f}",
                    f"{c.tpot_ms.p50:.2f} / {c.tpot_ms.p90:.2f}",
                    f"{c.attainment:.2%}",
                    f"{load:.2f}",
                ]
            )
    table(
        [
            "run",
            "class",
            "requests",
            "events",
            "wall s",
            "TTFT p50 / p90 ms",
            "TPOT p50 / p90 ms",
            "attainment",
            "load",
        ],
        rows,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="runs of section 0 (best shown)")
    ap.add_argument("--only-million", action="store_true", help="section 0 alone")
    args = ap.parse_args()
    catalog = load_catalog()
    plans = []
    for name, doc in examples():
        if args.only_million and name != "chat-agent-80-20":
            continue
        # plan once (verified only where the example asks), simulate explicitly below
        plan = make_plan(doc, catalog, alternatives=False, verify_default=False).to_json_dict()
        plans.append((name, doc, plan))

    million(plans, catalog, args.repeat)
    if args.only_million:
        return

    print(f"== 1. Speed: {REQUESTS:,} requests per example (seed 1)")
    rows, sims = [], {}
    for name, doc, plan in plans:
        t0 = time.perf_counter()
        sim = simulate_plan(plan, doc, catalog, REQUESTS, seed=1)
        wall = time.perf_counter() - t0
        sims[(name, 1)] = sim
        replicas = sum(p["replicas"] for p in plan["pools"])
        rows.append(
            [
                name,
                replicas,
                f"{sim.horizon_s:,.0f}",
                f"{sim.requests:,}",
                f"{sim.events:,}",
                f"{wall:.2f}",
                f"{sim.requests / wall:,.0f}",
                f"{sim.events / wall:,.0f}",
            ]
        )
    table(
        ["example", "replicas", "sim s", "requests", "events", "wall s", "req/s", "events/s"],
        rows,
    )

    print(f"== 2. Verification: planned vs simulated p-percentile, {len(SEEDS)} seeds")
    rows = []
    for name, doc, plan in plans:
        for seed in SEEDS:
            if (name, seed) not in sims:
                sims[(name, seed)] = simulate_plan(plan, doc, catalog, REQUESTS, seed=seed)
        planned = {c["name"]: c for c in plan["classes"]}
        for cls in sims[(name, 1)].classes:
            runs = [next(c for c in sims[(name, s)].classes if c.name == cls.name) for s in SEEDS]
            ttft = [x for c in runs if (x := c.ttft_ms.at_target) is not None]
            tpot = [x for c in runs if (x := c.tpot_ms.at_target) is not None]
            att = [c.attainment for c in runs]
            p = planned[cls.name]
            rows.append(
                [
                    name,
                    cls.name,
                    cls.mode,
                    f"p{cls.percentile:g}",
                    f"{p['ttft_ms']:,.0f}",
                    f"{min(ttft):,.0f}-{max(ttft):,.0f}",
                    f"{cls.slo_ttft_ms:,.0f}",
                    f"{p['tpot_ms']:.1f}",
                    f"{min(tpot):.1f}-{max(tpot):.1f}",
                    f"{cls.slo_tpot_ms:g}",
                    f"{min(att):.1%}-{max(att):.1%}",
                    "meets" if all(c.meets_slo for c in runs) else "MISSES",
                ]
            )
    table(
        [
            "example",
            "class",
            "mode",
            "pct",
            "TTFT plan",
            "TTFT sim",
            "SLO",
            "TPOT plan",
            "TPOT sim",
            "SLO",
            "attainment",
            "verdict",
        ],
        rows,
    )

    print("== 3. Burstiness: 80/20 plan, gamma inter-arrivals (the plan assumes Poisson)")
    name, doc, plan = next(x for x in plans if x[0] == "chat-agent-80-20")
    rows = []
    for cv in (1.0, 1.5, 2.0, 3.0):
        sim = simulate_plan(plan, doc, catalog, REQUESTS, seed=1, burst_cv=cv)
        for c in sim.classes:
            rows.append(
                [
                    f"{cv:g}",
                    c.name,
                    f"{c.ttft_ms.at_target:,.0f}" if c.ttft_ms.at_target else "unbounded",
                    f"{c.tpot_ms.at_target:.1f}" if c.tpot_ms.at_target else "-",
                    f"{c.attainment:.1%}",
                    "meets" if c.meets_slo else "MISSES",
                ]
            )
    table(["burst CV", "class", "p90 TTFT", "p90 TPOT", "attainment", "verdict"], rows)


if __name__ == "__main__":
    main()
