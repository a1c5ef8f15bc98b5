"""The own/rent split over the day (a plan's ``tco.hourly``), as an SVG chart.
matplotlib is imported at the first chart (:mod:`planner.report.charts`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from planner.report.charts import BASE_COLOR, PALETTE, _figure, _legend_below, _render

if TYPE_CHECKING:
    from matplotlib.figure import Figure

OWNED, RESERVED, ON_DEMAND = PALETTE[0], PALETTE[4], PALETTE[1]


def chart_own_rent_by_hour(tco: Mapping[str, Any]) -> str | None:
    """Stacked bars per hour of the day: GPUs owned, reserved and rented on demand,
    with the GPUs each hour needs as a line (the load curve in GPUs)."""
    hours = [h for h in tco.get("hourly") or [] if isinstance(h, Mapping)]
    if len(hours) < 2:
        return None

    def draw() -> Figure:
        fig = _figure(6.4, 3.2)
        ax = fig.add_subplot()
        x = [int(h["hour"]) for h in hours]
        need = [int(h["needed_gpus"]) for h in hours]
        # owned and reserved GPUs serve up to the hour's need; the rest idles
        owned = [min(int(h["owned_gpus"]), n) for h, n in zip(hours, need, strict=True)]
        idle = [int(h["owned_gpus"]) - o for h, o in zip(hours, owned, strict=True)]
        res = [
            min(int(h["reserved_gpus"]), n - o) for h, n, o in zip(hours, need, owned, strict=True)
        ]
        od = [int(h["on_demand_gpus"]) for h in hours]
        bottom = [0] * len(x)
        for vals, color, label, alpha in (
            (owned, OWNED, "owned, serving", 1.0),
            (idle, OWNED, "owned, idle", 0.25),
            (res, RESERVED, "reserved", 1.0),
            (od, ON_DEMAND, "rented on demand", 1.0),
        ):
            if any(vals):
                ax.bar(x, vals, bottom=bottom, color=color, alpha=alpha, label=label, width=0.8)
                bottom = [a + b for a, b in zip(bottom, vals, strict=True)]
        ax.step(x, need, where="mid", color=BASE_COLOR, linewidth=1.6, label="GPUs needed")
        ax.set_xticks(range(0, 24, 3), [f"{h:02d}:00" for h in range(0, 24, 3)])
        ax.set_xlabel("hour of the day")
        ax.set_ylabel("GPUs")
        ax.set_title(f"Owned and rented GPUs over the day ({tco.get('purchase')})")
        ax.grid(axis="y", color="#e3e7eb", linewidth=0.8)
        ax.set_axisbelow(True)
        _legend_below(ax, fig, ncols=5)
        return fig

    return _render(draw, "GPUs owned and rented in each hour of the day")
