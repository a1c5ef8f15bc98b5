"""Solver scaling: screening and MILP time and gap against instance size.

Run: ``.venv/bin/python bench/solver_scaling.py`` (or ``make bench``).

1. The 80/20 example over the whole catalog (target: under 1 s end to end,
   without the alternatives).
2. Synthetic instances up to 50 GPU types x 20 traffic classes: the catalog's
   GPUs cloned with perturbed prices and speeds, and the catalog's workloads
   cloned with perturbed lengths, shares and SLOs (target: 50 x 20 solved to
   a proven 0.1% gap in under 10 s).
3. Small random instances against a brute-force enumeration of replica counts
   (the MILP's cost must equal the enumeration's).

Prints one table per part; figures are wall-clock seconds on this machine, each the
best of ``--repeat`` runs (default 1; the figures in docs/design.md are best of 3),
with the load average when it was measured (the machine is shared: check it).
``--parts 2 --sizes 50x20`` runs the headline instance alone. Every row gives the
breakdown: screening, MILP (with its gap) and the two together.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # brute_solver

from brute_solver import brute_force_cost

from catalog.loader import load_catalog, with_entries
from catalog.schema import Catalog
from planner.candidates import screen_candidates
from planner.problem_build import build_problem, parse_request
from planner.report.text import render_table
from planner.request import resolve_request
from planner.service import make_plan
from solver.problem import (
    ClassDemand,
    Limits,
    PoolCandidate,
    PoolRole,
    Problem,
    Segment,
    SolverOptions,
)
from solver.solve import solve

ROOT = Path(__file__).resolve().parent.parent


def table(headers, rows):
    print(render_table([str(h) for h in headers], [[str(c) for c in r] for r in rows]))
    print()


#: The longest p90 prompt a synthetic workload is scaled to (tokens): llama-3.1-8b's
#: 131,072-token context less room for the output.
MAX_SYNTHETIC_P90_TOKENS = 120_000


def synthetic_catalog(base: Catalog, n_gpus: int, n_classes: int, seed: int = 7) -> Catalog:
    """Clone GPUs and workloads with perturbed figures until there are enough."""
    rng = random.Random(seed)
    gpus: dict[str, Any] = {}
    workloads: dict[str, Any] = {}
    base_gpus = sorted(base.gpus.values(), key=lambda g: g.id)
    i = 0
    while len(base.gpus) + len(gpus) < n_gpus:
        g = base_gpus[i % len(base_gpus)]
        i += 1
        f = rng.uniform(0.8, 1.25)
        data = g.model_dump()
        data["id"] = f"{g.id}-syn{i}"
        data["name"] = f"{g.name} (synthetic {i})"
        data["bf16_dense_tflops"] *= f
        if data["fp8_dense_tflops"]:
            data["fp8_dense_tflops"] *= f
        data["mem_bw_tbps"] *= rng.uniform(0.85, 1.2)
        data["price"]["usd_per_hour"] *= rng.uniform(0.75, 1.3)
        gpus[data["id"]] = type(g).model_validate(data)
    base_wl = sorted(base.workloads.values(), key=lambda w: w.id)
    j = 0
    while len(base.workloads) + len(workloads) < n_classes:
        w = base_wl[j % len(base_wl)]
        j += 1
        data = w.model_dump()
        data["id"] = f"{w.id}-syn{j}"
        data["name"] = f"{w.name} (synthetic {j})"
        # no longer than the 8B model's context allows at the p90 (the planner refuses a
        # class whose requests often exceed it): 128K tokens less the longest output
        s = min(rng.uniform(0.6, 1.5), MAX_SYNTHETIC_P90_TOKENS / w.prompt_tokens.p90_tokens)
        data["prompt_tokens"] = {
            "mean_tokens": w.prompt_tokens.mean_tokens * s,
            "p90_tokens": w.prompt_tokens.p90_tokens * s,
        }
        data["slo"]["ttft_ms"] *= rng.uniform(1.0, 1.5)
        workloads[data["id"]] = type(w).model_validate(data)
    return with_entries(base, {"gpus": gpus, "workloads": workloads})


def synthetic_request(cat: Catalog, n_gpus: int, n_classes: int, seed: int = 7) -> dict:
    rng = random.Random(seed)
    wl = sorted(cat.workloads)[:n_classes]
    weights = [rng.uniform(0.5, 2.0) for _ in wl]
    total = sum(weights)
    shares = [w / total for w in weights]
    shares[-1] = 1.0 - sum(shares[:-1])
    # Keep agent-like long prompts from dominating: 8B model, moderate rate.
    return {
        "model": "llama-3.1-8b",
        "traffic": {
            "rate_rps": 40.0 * n_classes,
            "classes": [
                {"workload": w, "share": s, "name": f"k{i}-{w}"}
                for i, (w, s) in enumerate(zip(wl, shares, strict=True))
            ],
        },
        "candidates": {"gpus": sorted(cat.gpus)[:n_gpus], "dtypes": ["fp8", "bf16"]},
        "solver": {"time_limit_s": 60, "rel_gap": 0.001},
    }


def load_average() -> str:
    """The 1-minute load average (the machine's other users), as text."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:  # not available on this platform
        return "n/a"


def run_instance(cat: Catalog, req: dict) -> dict:
    """Screen and solve one request in-process: the breakdown in seconds (screening,
    MILP, their sum), the MILP's status and gap, and the model's size."""
    t0 = time.perf_counter()
    res = resolve_request(parse_request(req), cat)
    sc = screen_candidates(res, cat)
    t1 = time.perf_counter()
    problem = build_problem(res, sc)
    result = solve(problem, SolverOptions(time_limit_s=60, rel_gap=0.001))
    t2 = time.perf_counter()
    return {
        "considered": sc.considered,
        "in_model": len(sc.candidates),
        "vars": result.num_variables,
        "rows": result.num_constraints,
        "screen_s": t1 - t0,
        "solve_s": t2 - t1,
        "total_s": t2 - t0,
        "status": result.status.value,
        "gap": result.gap,
        "objective": result.objective,
        "load": load_average(),
    }


def best_of(repeat: int, run) -> dict:
    """The run with the shortest total of ``repeat`` runs of ``run()``."""
    return min((run() for _ in range(max(1, repeat))), key=lambda r: r["total_s"])


def part1(base: Catalog, repeat: int) -> None:
    print("== 1. The 80/20 example over the whole catalog (no alternatives, no verification)")
    req = yaml.safe_load((ROOT / "examples" / "chat-agent-80-20.yaml").read_text())
    req = {**req, "verify": {"enabled": False}}
    r = best_of(repeat, lambda: run_instance(base, req))
    rows = [
        [
            "screen+MILP",
            f"{r['screen_s']:.3f}",
            f"{r['solve_s']:.3f}",
            f"{r['total_s']:.3f}",
            r["status"],
            f"{r['gap']:.5f}" if r["gap"] is not None else "-",
            r["in_model"],
            f"{r['objective']:,.2f}",
            r["load"],
        ]
    ]
    runs = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        plan = make_plan(req, base, alternatives=False)
        runs.append((time.perf_counter() - t0, plan, load_average()))
    dt, plan, load = min(runs, key=lambda x: x[0])
    rows.append(
        [
            "make_plan",
            "-",
            f"{plan.solver.runtime_s:.3f}",
            f"{dt:.3f}",
            plan.solver.status.value,
            f"{plan.solver.gap:.5f}",
            plan.solver.candidates_in_model,
            f"{plan.cost_usd_per_hour:,.2f}",
            load,
        ]
    )
    table(
        [
            "path",
            "screen_s",
            "milp_s",
            "total_s",
            "status",
            "gap",
            "in_model",
            "usd_per_hour",
            "load",
        ],
        rows,
    )
    print("   usd_per_hour: the MILP's objective (GPUs and operations costs) on the first")
    print("   row, the plan's cost (GPUs) on the second.")
    print()


SIZES = [(5, 2), (14, 6), (25, 10), (50, 10), (50, 20)]


def part2(base: Catalog, repeat: int, sizes: list[tuple[int, int]]) -> None:
    print("== 2. Synthetic instances: GPU types x classes (8B model, fp8+bf16, all TPs,")
    print("      6 chunk budgets, both modes)")
    rows = []
    for n_gpus, n_classes in sizes:
        cat = synthetic_catalog(base, n_gpus, n_classes)
        req = synthetic_request(cat, n_gpus, n_classes)
        r = best_of(repeat, lambda cat=cat, req=req: run_instance(cat, req))
        rows.append(
            [
                f"{n_gpus}x{n_classes}",
                r["considered"],
                r["in_model"],
                r["vars"],
                r["rows"],
                f"{r['screen_s']:.2f}",
                f"{r['solve_s']:.2f}",
                r["status"],
                f"{r['gap']:.5f}" if r["gap"] is not None else "-",
                f"{r['total_s']:.2f}",
                r["load"],
            ]
        )
        print("   ", rows[-1], flush=True)
    table(
        [
            "gpus x classes",
            "configs",
            "in_model",
            "vars",
            "rows",
            "screen_s",
            "milp_s",
            "status",
            "gap",
            "total_s",
            "load",
        ],
        rows,
    )


def part3() -> None:
    print("== 3. Small random instances: MILP vs brute force over replica counts")
    rows = []
    for seed in range(8):
        rng = random.Random(seed)
        classes = tuple(ClassDemand(f"k{i}", round(rng.uniform(0.5, 5.0), 2)) for i in range(2))
        cands = []
        for k in classes:
            for role in (PoolRole.AGGREGATED, PoolRole.PREFILL, PoolRole.DECODE):
                slope = rng.uniform(0.6, 2.5)
                rho = rng.uniform(0.3, 0.9)

                def f(n, slope=slope, rho=rho):
                    return slope * n * (1 - (1 - rho) / n**0.5) if n > 0 else 0.0

                segs = tuple(
                    Segment(a, b, f(a) - (f(a + 1) - f(a)) * a, f(a + 1) - f(a))
                    for a, b in ((0, 1), (1, 2), (2, 3), (3, 5))
                )
                cands.append(
                    PoolCandidate(
                        f"{k.id}-{role}",
                        k.id,
                        role,
                        rng.choice("xy"),
                        1,
                        round(rng.uniform(1, 5), 2),
                        1.0,
                        (),
                        5,
                        segments=segs,
                    )
                )
        p = Problem(classes, tuple(cands), Limits())
        t0 = time.perf_counter()
        bf = brute_force_cost(p, 5)
        t1 = time.perf_counter()
        r = solve(p, SolverOptions(rel_gap=0.0))
        t2 = time.perf_counter()
        rows.append(
            [
                seed,
                f"{bf:.2f}" if bf is not None else "infeasible",
                f"{r.objective:.2f}" if r.objective is not None else r.status.value,
                f"{t1 - t0:.3f}",
                f"{t2 - t1:.3f}",
                "yes"
                if (bf is None and r.objective is None)
                or abs((bf or 0) - (r.objective or 0)) < 1e-6
                else "NO",
            ]
        )
    table(["seed", "brute_force", "milp", "brute_s", "milp_s", "equal"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per row; the best is shown")
    parser.add_argument("--parts", default="1,3,2", help="which parts, in order (1, 2, 3)")
    parser.add_argument(
        "--sizes",
        default=",".join(f"{g}x{c}" for g, c in SIZES),
        help="part 2's instances, GPU types x classes (e.g. 50x20)",
    )
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    base = load_catalog()
    for part in args.parts.split(","):
        if part == "1":
            part1(base, args.repeat)
        elif part == "2":
            part2(base, args.repeat, sizes)  # type: ignore[arg-type]
        elif part == "3":
            part3()


if __name__ == "__main__":
    main()
