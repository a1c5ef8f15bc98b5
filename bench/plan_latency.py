"""The 80/20 plan end to end, by stage: screening, MILP, verification, alternatives.

Run: ``.venv/bin/python bench/plan_latency.py [example] [--repeat N]`` (or ``make bench``).

In process (no HTTP, no database), best of ``--repeat`` runs (default 3) after one
warm-up run (imports, catalog load), for three ways of asking:

* ``inline``: alternatives solved with the plan (``make_plan(...)``, the CLI);
* ``deferred``: the plan returned with ``alternatives_status: pending`` and its solved
  model kept (``alternatives="deferred"``: what ``POST /plans`` answers), then, timed
  apart, ``complete_alternatives`` (the service's background job) on that model;
* ``no verification``: ``verify: {enabled: false}``, alternatives deferred.

Each row: wall seconds per stage (``make_plan(..., timings=)``; planner.service.STAGES)
and the total; the load average is printed with them (this is a shared 2-core VM).
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
from planner.alternatives import complete_alternatives
from planner.report.text import render_table
from planner.service import STAGES, make_plan

ROOT = Path(__file__).resolve().parent.parent


def run(doc: dict, catalog, mode: str) -> dict[str, float]:
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    plan = make_plan(
        doc, catalog, alternatives="deferred" if mode != "inline" else True, timings=timings
    )
    timings["plan"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    complete_alternatives(plan)
    timings["later"] = time.perf_counter() - t1
    timings["cost"] = plan.cost_usd_per_hour or 0.0
    return timings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("example", nargs="?", default="chat-agent-80-20")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    catalog = load_catalog()
    doc = yaml.safe_load((ROOT / "examples" / f"{args.example}.yaml").read_text())
    unverified = {**doc, "verify": {**(doc.get("verify") or {}), "enabled": False}}
    make_plan(doc, catalog)  # warm-up
    print(f"== {args.example}: best of {args.repeat}, load average {os.getloadavg()[0]:.2f}")
    rows = []
    for label, body, mode in (
        ("inline", doc, "inline"),
        ("deferred", doc, "deferred"),
        ("no verification", unverified, "deferred"),
    ):
        runs = [run(body, catalog, mode) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r["plan"])
        rows.append(
            [
                label,
                *(f"{best[s]:.3f}" for s in STAGES),
                f"{best['plan']:.3f}",
                f"{best['later']:.3f}" if mode != "inline" else "-",
                f"{best['cost']:,.2f}",
            ]
        )
    headers = [
        "alternatives",
        *STAGES,
        "plan s",
        "alternatives later s",
        "$/h",
    ]
    print(render_table(headers, rows))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
