"""A simulation as text: per class latencies against the SLO, per pool load."""

from __future__ import annotations

from planner.report.text import render_table
from planner.simulate.results import SimulationResult


def _ms(x: float | None, digits: int = 0) -> str:
    return "unbounded" if x is None else f"{x:,.{digits}f}"


def render_simulation_text(sim: SimulationResult, title: str = "Simulation") -> str:
    """Headline, a table of classes (percentiles, attainment, goodput) and of pools."""
    lines = [
        title,
        f"{sim.requests:,} requests over {sim.horizon_s:,.0f} s simulated "
        f"({sim.measured:,} measured after a {sim.warmup_s:,.0f} s warm-up), seed {sim.seed}"
        + (f", burst CV {sim.burst_cv:g}" if sim.burst_cv != 1.0 else "")
        + f"; {sim.events:,} events in {sim.wall_time_s:.2f} s",
        "",
        "Classes (latencies in ms at the SLO percentile; p50 / p99 for reference)",
    ]
    rows = []
    for c in sim.classes:
        rows.append(
            [
                c.name,
                c.mode,
                f"p{c.percentile:g}",
                f"{_ms(c.ttft_ms.at_target)} / {c.slo_ttft_ms:,.0f}",
                f"{_ms(c.ttft_ms.p50)}-{_ms(c.ttft_ms.p99)}",
                f"{_ms(c.tpot_ms.at_target, 1)} / {c.slo_tpot_ms:,.0f}",
                f"{c.attainment:.1%}"
                + (f" +-{c.attainment_ci95:.1%}" if c.attainment_ci95 else ""),
                f"{c.goodput_rps:,.1f}",
                "meets" if c.meets_slo else "MISSES",
            ]
        )
    lines.append(
        render_table(
            [
                "class",
                "mode",
                "pct",
                "TTFT/SLO",
                "TTFT p50-p99",
                "TPOT/SLO",
                "attainment",
                "goodput/s",
                "verdict",
            ],
            rows,
            indent="  ",
        )
    )
    lines += ["", "Pools"]
    rows = []
    for p in sim.pools:
        rows.append(
            [
                p.id,
                str(p.replicas),
                f"{p.rate_rps:,.1f}",
                f"{p.utilization:.0%}",
                "-" if p.mean_batch is None else f"{p.mean_batch:,.1f}/{p.max_batch}",
                f"{p.mean_queue:,.1f}",
                str(p.max_queue),
                _ms(p.mean_wait_ms, 1) if p.mean_wait_ms is not None else "-",
            ]
        )
    lines.append(
        render_table(
            ["pool", "replicas", "req/s", "util", "batch/max", "queue", "max q", "wait ms"],
            rows,
            indent="  ",
        )
    )
    if sim.notes:
        lines += ["", "Notes"] + [f"  - {n}" for n in sim.notes]
    return "\n".join(lines) + "\n"
