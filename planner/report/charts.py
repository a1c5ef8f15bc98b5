"""Charts for reports: matplotlib (Agg, object API, no pyplot) rendered to SVG
text that is inlined in the HTML report.

Text stays text (``svg.fonttype = none``: selectable, sharp in print), the XML
prologue and metadata are dropped, element ids get a per-chart prefix (a hash
of the chart: the same input renders the same bytes) so several charts can
share one page, and the root element scales to its box.
Every chart function returns the SVG markup, or None when there is nothing to
draw.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter
    from matplotlib.typing import RcKeyType  # matplotlib >= 3.9


def _matplotlib() -> Any:
    """matplotlib on the Agg backend, imported at the first chart: importing it costs
    about a second, which a CLI command or an API worker that draws nothing should not
    pay at start-up."""
    import matplotlib

    matplotlib.use("Agg")
    return matplotlib


def _formatter(fn: Any) -> FuncFormatter:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(fn)


_LOCK = threading.Lock()  # rcParams are process-wide

FONT = ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"]
RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "fleetplan",
    "font.family": "sans-serif",
    "font.sans-serif": FONT,
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#9aa3ad",
    "axes.labelcolor": "#2b3138",
    "xtick.color": "#4a525b",
    "ytick.color": "#2b3138",
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.titlepad": 10,
    "legend.frameon": False,
}

#: GPU types get colours in the order they first appear (stable across charts).
PALETTE = ["#2f6db5", "#e07b39", "#3a9b6b", "#8e5cb5", "#c9a227", "#c44e52", "#5b8fa8", "#8c6d4f"]
ROLE_COLORS = {"prefill": "#2f6db5", "decode": "#e07b39", "aggregated": "#3a9b6b"}
BASE_COLOR = "#3b4650"
UP_COLOR = "#d9822b"
DOWN_COLOR = "#3a9b6b"
GREY = "#9aa3ad"


#: One colour per shipped GPU type, the same in every chart of every report (a plan's,
#: a comparison's): an H100 is the same blue wherever it appears. NVIDIA in blues and
#: greens, AMD in reds, Intel in purple; GPU types not listed get a stable colour from
#: :data:`EXTRA_COLORS` (:func:`gpu_colors`).
GPU_COLORS = {
    "h100-sxm5-80gb": "#2f6db5",
    "h200-sxm-141gb": "#5b8fa8",
    "h100-nvl-94gb": "#7fa7d9",
    "h100-pcie-80gb": "#1f4e79",
    "b200": "#3a9b6b",
    "gb200-per-gpu": "#1e6b45",
    "b300": "#66c28f",
    "gb300-per-gpu": "#0f4a2e",
    "a100-sxm-80gb": "#c9a227",
    "a100-40gb": "#a6841c",
    "l40s": "#8c6d4f",
    "l4": "#b89b7a",
    "a10g": "#6f6f6f",
    "mi300x": "#c44e52",
    "mi325x": "#e07b39",
    "mi355x": "#8b1a1a",
    "gaudi3": "#8e5cb5",
}
EXTRA_COLORS = ["#17becf", "#bcbd22", "#e377c2", "#7f7f7f", "#9467bd", "#ff9896", "#98df8a"]


def gpu_colors(gpus: Sequence[str]) -> dict[str, str]:
    """A colour per GPU type: :data:`GPU_COLORS` for shipped types; other (custom) types
    a colour from :data:`EXTRA_COLORS` picked by a hash of the id (the same in every
    report), moved to the next free one where two would share a colour in one chart."""
    out: dict[str, str] = {}
    for g in dict.fromkeys(gpus):
        if g in GPU_COLORS:
            out[g] = GPU_COLORS[g]
    used = set(out.values())
    for g in dict.fromkeys(gpus):
        if g in out:
            continue
        start = int(hashlib.sha1(g.encode()).hexdigest(), 16) % len(EXTRA_COLORS)
        free = [EXTRA_COLORS[(start + i) % len(EXTRA_COLORS)] for i in range(len(EXTRA_COLORS))]
        color = next((c for c in free if c not in used), free[0])
        out[g] = color
        used.add(color)
    return out


def usd_tick(x: float, _pos: Any = None) -> str:
    if abs(x) >= 1e6:
        return f"${x / 1e6:,.1f}M"
    return f"${x:,.0f}"


def short_usd(x: float) -> str:
    if abs(x) >= 1e6:
        return f"${x / 1e6:,.2f}M"
    if abs(x) >= 100:
        return f"${x:,.0f}"
    return f"${x:,.2f}"


# --------------------------------------------------------------------------- svg


def to_svg(fig: Figure, label: str) -> str:
    """The figure as inline SVG markup: no prologue or metadata, ids prefixed,
    scalable (``width: 100%``), with an accessible label."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    prefix = "fp" + hashlib.sha1(svg.encode()).hexdigest()[:10] + "-"
    svg = re.sub(r'\bid="', f'id="{prefix}', svg)
    svg = svg.replace("url(#", f"url(#{prefix}")
    svg = re.sub(r'(xlink:)?href="#', lambda m: f"{m.group(0)}{prefix}", svg)
    m = re.match(r'<svg([^>]*?)\swidth="([\d.]+)pt"\s+height="([\d.]+)pt"', svg)
    if m:
        width_px = float(m.group(2)) * 4 / 3
        svg = (
            f'<svg{m.group(1)} role="img" aria-label="{_attr(label)}" '
            f'style="width:100%;max-width:{width_px:.0f}px;height:auto"' + svg[m.end() :]
        )
    return svg.strip()


def _attr(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def _figure(width_in: float, height_in: float) -> Figure:
    _matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=96)
    fig.patch.set_alpha(0)
    return fig


def _render(draw, label: str) -> str | None:
    with _LOCK, _matplotlib().rc_context(RC):
        fig = draw()
        return None if fig is None else to_svg(fig, label)


def _legend_below(ax: Any, fig: Figure, ncols: int = 4) -> None:
    """The legend in one row under the x axis label, left-aligned with the axes."""
    height_in = fig.get_size_inches()[1]
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(0.0, -0.55 / max(height_in - 1.0, 0.5)),
        fontsize=9,
        ncols=ncols,
        handlelength=1.2,
        columnspacing=1.2,
    )


def _role_text(c: Mapping[str, Any]) -> str:
    """ "83 GPUs: 69 prefill + 14 decode (4.9 : 1)" or "752 GPUs aggregated"."""
    parts = [
        (role, int(c.get(f"{role}_gpus") or 0))
        for role in ("prefill", "decode", "aggregated")
        if c.get(f"{role}_gpus")
    ]
    total = sum(n for _, n in parts)
    if len(parts) == 1:
        return f"{total:,} GPUs {parts[0][0]}"
    text = f"{total:,} GPUs: " + " + ".join(f"{n:,} {r}" for r, n in parts)
    pre, dec = c.get("prefill_gpus") or 0, c.get("decode_gpus") or 0
    if pre and dec:
        text += f" ({pre / dec:.1f} : 1)"
    return text


def _num(x: Any) -> TypeGuard[float]:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _pool_class(p: Mapping[str, Any]) -> str:
    return str(p.get("class", p.get("class_name", "?")))


# --------------------------------------------------------------------------- plans


def chart_cost_by_pool(plan: Mapping[str, Any]) -> str | None:
    """Horizontal stacked bars: cost per hour of each pool (class and role),
    split by GPU type, labelled with $/h and GPUs."""
    pools = [p for p in plan.get("pools") or [] if _num(p.get("cost_usd_per_hour"))]
    if not pools:
        return None
    order: list[tuple[str, str]] = []
    for p in pools:
        key = (_pool_class(p), str(p.get("role")))
        if key not in order:
            order.append(key)
    roles = {"prefill": 0, "decode": 1, "aggregated": 2}
    classes = list(dict.fromkeys(k[0] for k in order))
    order.sort(key=lambda k: (classes.index(k[0]), roles.get(k[1], 9)))
    gpus = list(dict.fromkeys(str(p.get("gpu")) for p in pools))
    colors = gpu_colors(gpus)

    def draw() -> Figure:
        fig = _figure(6.0, 0.55 * len(order) + 1.4)
        ax = fig.add_subplot()
        labels = [f"{c} · {r}" for c, r in order]
        y = list(range(len(order)))[::-1]
        left = [0.0] * len(order)
        totals = [0.0] * len(order)
        counts = [0] * len(order)
        for g in gpus:
            widths = []
            for i, key in enumerate(order):
                w = sum(
                    p["cost_usd_per_hour"]
                    for p in pools
                    if (_pool_class(p), str(p.get("role"))) == key and str(p.get("gpu")) == g
                )
                widths.append(w)
                totals[i] += w
                counts[i] += sum(
                    int(p.get("gpus") or 0)
                    for p in pools
                    if (_pool_class(p), str(p.get("role"))) == key and str(p.get("gpu")) == g
                )
            ax.barh(y, widths, left=left, color=colors[g], label=g, height=0.62)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        top = max(totals) or 1.0
        for yi, t, n in zip(y, totals, counts, strict=True):
            ax.text(
                t + top * 0.015,
                yi,
                f"{short_usd(t)}/h · {n:,} GPUs",
                va="center",
                fontsize=9,
                color="#2b3138",
            )
        ax.set_yticks(y, labels)
        ax.set_xlim(0, top * 1.45)
        ax.xaxis.set_major_formatter(_formatter(usd_tick))
        ax.set_xlabel("cost, $ per hour")
        ax.set_title("Cost by pool and GPU type")
        ax.tick_params(axis="y", length=0)
        ax.grid(axis="x", color="#e3e7eb", linewidth=0.8)
        ax.set_axisbelow(True)
        _legend_below(ax, fig)
        return fig

    return _render(draw, "Cost per hour by pool and GPU type")


def chart_gpus_per_class(plan: Mapping[str, Any]) -> str | None:
    """Horizontal stacked bars per class: prefill, decode and aggregated GPUs."""
    classes = [
        c
        for c in plan.get("classes") or []
        if (c.get("prefill_gpus") or 0)
        + (c.get("decode_gpus") or 0)
        + (c.get("aggregated_gpus") or 0)
        > 0
    ]
    if not classes:
        return None

    def draw() -> Figure:
        fig = _figure(6.0, 0.6 * len(classes) + 1.5)
        ax = fig.add_subplot()
        y = list(range(len(classes)))[::-1]
        left = [0.0] * len(classes)
        totals = [
            (c.get("prefill_gpus") or 0)
            + (c.get("decode_gpus") or 0)
            + (c.get("aggregated_gpus") or 0)
            for c in classes
        ]
        top = max(totals) or 1
        for role in ("prefill", "decode", "aggregated"):
            widths = [float(c.get(f"{role}_gpus") or 0) for c in classes]
            if not any(widths):
                continue
            ax.barh(y, widths, left=left, color=ROLE_COLORS[role], label=role, height=0.62)
            for yi, lft, w in zip(y, left, widths, strict=True):
                if w >= top * 0.08:
                    ax.text(
                        lft + w / 2,
                        yi,
                        f"{w:,.0f}",
                        ha="center",
                        va="center",
                        color="white",
                        fontsize=9,
                        fontweight="bold",
                    )
            left = [a + b for a, b in zip(left, widths, strict=True)]
        for yi, c, t in zip(y, classes, totals, strict=True):
            ax.text(t + top * 0.015, yi, _role_text(c), va="center", fontsize=9, color="#2b3138")
        ax.set_yticks(y, [str(c.get("name")) for c in classes])
        ax.set_xlim(0, top * 1.75)
        ax.set_xlabel("GPUs")
        ax.set_title("Prefill vs decode GPUs per class")
        ax.tick_params(axis="y", length=0)
        ax.grid(axis="x", color="#e3e7eb", linewidth=0.8)
        ax.set_axisbelow(True)
        _legend_below(ax, fig)
        return fig

    return _render(draw, "GPUs per traffic class by role: prefill, decode, aggregated")


def chart_robust_usage(plan: Mapping[str, Any], prices: Mapping[str, float]) -> str | None:
    """Robust plans: per scenario, GPUs of each type in use (solid) and idle
    (light), out of the one fleet bought."""
    scenarios = plan.get("scenarios") or []
    bought = plan.get("gpus_by_type") or {}
    if not scenarios or not bought:
        return None
    gpus = list(bought)
    colors = gpu_colors(gpus)

    def draw() -> Figure:
        fig = _figure(6.0, 0.6 * len(scenarios) + 1.6)
        ax = fig.add_subplot()
        y = list(range(len(scenarios)))[::-1]
        left = [0.0] * len(scenarios)
        for g in gpus:
            used = [float((s.get("gpus_used") or {}).get(g, 0)) for s in scenarios]
            idle = [float(bought[g]) - u for u in used]
            ax.barh(y, used, left=left, color=colors[g], height=0.62, label=f"{g} in use")
            left = [a + b for a, b in zip(left, used, strict=True)]
            ax.barh(
                y,
                idle,
                left=left,
                color=colors[g],
                alpha=0.25,
                height=0.62,
                hatch="//",
                edgecolor=colors[g],
                linewidth=0,
                label=f"{g} idle",
            )
            left = [a + b for a, b in zip(left, idle, strict=True)]
        total = sum(bought.values())
        for yi, s in zip(y, scenarios, strict=True):
            used = sum((s.get("gpus_used") or {}).values())
            ax.text(
                total * 1.015,
                yi,
                f"{used:,} of {total:,} in use",
                va="center",
                fontsize=9,
                color="#2b3138",
            )
        ax.set_yticks(y, [str(s.get("name")) for s in scenarios])
        ax.set_xlim(0, total * 1.35)
        ax.set_xlabel("GPUs bought")
        ax.set_title("GPUs in use per scenario (one fleet)")
        ax.tick_params(axis="y", length=0)
        _legend_below(ax, fig, ncols=4)
        return fig

    return _render(draw, "GPUs in use and idle per traffic scenario")


def chart_sensitivity(base_cost: float | None, rows: Sequence[Mapping[str, Any]]) -> str | None:
    """Bars: the plan's cost and its cost under each sensitivity case."""
    pts = [(r["name"], r["cost_usd_per_hour"]) for r in rows if _num(r.get("cost_usd_per_hour"))]
    if not pts or not _num(base_cost):
        return None
    return chart_variant_costs(
        [{"variant": "this plan", "cost_usd_per_hour": base_cost, "delta_pct": 0.0}]
        + [
            {
                "variant": r["name"],
                "cost_usd_per_hour": r.get("cost_usd_per_hour"),
                "delta_pct": r.get("delta_pct"),
                "status": r.get("status"),
            }
            for r in rows
        ],
        title="Cost under traffic and mix changes",
        base_name="this plan",
    )


# --------------------------------------------------------------------------- comparisons


def chart_variant_costs(
    rows: Sequence[Mapping[str, Any]],
    title: str = "Cost per variant",
    base_name: str = "base",
) -> str | None:
    """Horizontal bars of $/h per variant (base dark; dearer orange, cheaper
    green), labelled with the cost and the change against the base."""
    rows = [r for r in rows if r.get("axis") is None]
    if not rows or not any(_num(r.get("cost_usd_per_hour")) for r in rows):
        return None

    def draw() -> Figure:
        fig = _figure(6.4, 0.42 * len(rows) + 1.3)
        ax = fig.add_subplot()
        y = list(range(len(rows)))[::-1]
        costs: list[float] = [c if _num(c := r.get("cost_usd_per_hour")) else 0 for r in rows]
        top = max(costs) or 1.0
        colors = []
        for r in rows:
            d = r.get("delta_pct")
            if r.get("variant") == base_name:
                colors.append(BASE_COLOR)
            elif not _num(r.get("cost_usd_per_hour")):
                colors.append(GREY)
            elif _num(d) and d < -0.05:
                colors.append(DOWN_COLOR)
            else:
                colors.append(UP_COLOR)
        ax.barh(y, costs, color=colors, height=0.64)
        for yi, r, c in zip(y, rows, costs, strict=True):
            if not _num(r.get("cost_usd_per_hour")):
                text = str(r.get("status") or "no plan")
            else:
                d = r.get("delta_pct")
                text = f"{short_usd(c)}/h"
                if r.get("variant") != base_name and _num(d):
                    text += f"  {d:+.1f}%"
            ax.text(c + top * 0.012, yi, text, va="center", fontsize=9, color="#2b3138")
        ax.set_yticks(y, [str(r.get("variant")) for r in rows])
        ax.set_xlim(0, top * 1.3)
        ax.xaxis.set_major_formatter(_formatter(usd_tick))
        ax.set_xlabel("cost, $ per hour")
        ax.set_title(title)
        ax.tick_params(axis="y", length=0)
        ax.grid(axis="x", color="#e3e7eb", linewidth=0.8)
        ax.set_axisbelow(True)
        return fig

    return _render(draw, title)


def _axis_is_share(name: str, values: Sequence[Any]) -> bool:
    return "share" in name.lower() and all(_num(v) and 0 <= v <= 1 for v in values)


def chart_sweeps(rows: Sequence[Mapping[str, Any]], base_cost: float | None = None) -> str | None:
    """One panel per sweep: cost per hour against the swept value (numbers on a
    linear axis, anything else in order), the base's cost dashed."""
    axes: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("axis") is not None:
            axes.setdefault(str(r["axis"]), []).append(r)
    if not axes:
        return None

    def draw() -> Figure:
        n = len(axes)
        fig = _figure(6.4, 3.0 * n + 0.4)
        for i, (name, pts) in enumerate(axes.items()):
            ax = fig.add_subplot(n, 1, i + 1)
            values = [p.get("value") for p in pts]
            numeric = all(_num(v) for v in values)
            share = numeric and _axis_is_share(name, values)
            xs = [float(v) for v in values if _num(v)] if numeric else list(range(len(values)))
            ys = [
                p.get("cost_usd_per_hour") if _num(p.get("cost_usd_per_hour")) else None
                for p in pts
            ]
            ok = [(x, yv) for x, yv in zip(xs, ys, strict=True) if yv is not None]
            if ok:
                ax.plot(
                    [x for x, _ in ok],
                    [yv for _, yv in ok],
                    marker="o",
                    color=PALETTE[0],
                    linewidth=2,
                    markersize=5,
                )
                hi = max(ok, key=lambda t: t[1])
                lo = min(ok, key=lambda t: t[1])
                for x, yv in {lo, hi}:
                    ax.annotate(
                        f"{short_usd(yv)}/h",
                        (x, yv),
                        textcoords="offset points",
                        xytext=(0, 8),
                        ha="center",
                        fontsize=9,
                    )
            bad = [x for x, yv in zip(xs, ys, strict=True) if yv is None]
            if bad:
                ax.plot(bad, [0] * len(bad), "x", color="#c44e52", label="no feasible plan")
                ax.legend(fontsize=8, loc="upper left")
            if _num(base_cost):
                ax.axhline(base_cost, color=BASE_COLOR, linestyle="--", linewidth=1)
                ax.text(
                    ax.get_xlim()[0] if not ok else min(xs),
                    base_cost,
                    f" base {short_usd(base_cost)}/h",
                    va="bottom",
                    fontsize=8,
                    color=BASE_COLOR,
                )
            if share:
                ax.xaxis.set_major_formatter(_formatter(lambda v, _p: f"{v * 100:.0f}%"))
            elif not numeric:
                ax.set_xticks(xs, [str(v) for v in values])
            ax.yaxis.set_major_formatter(_formatter(usd_tick))
            ax.set_ylim(bottom=0)
            ax.set_xlabel(name)
            ax.set_ylabel("$ per hour")
            ax.set_title(f"Cost across the sweep: {name}")
            ax.grid(color="#e3e7eb", linewidth=0.8)
            ax.set_axisbelow(True)
        fig.tight_layout()
        return fig

    return _render(draw, "Cost per hour across each sweep")
