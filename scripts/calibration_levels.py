"""The level half of ``make calibrate-defaults`` (split from
``scripts/calibrate_defaults.py``, which imports it): per catalog GPU whose two-factor
fit is not adopted, the analogy factors scaled to the level its saturated throughputs
show (planner.fidelity.level_scale), the measured MoE and FP4 ratios to that level, a
dense-LLM level borrowed from a measured sibling where only MoE LLMs were measured, and
the catalog's efficiency block rewritten with them.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from catalog.loader import DATA_DIR, load_catalog  # noqa: E402
from catalog.schema import ANALOGY_LEVEL_SCALE, ANALOGY_SIGMA_LOG, Catalog, Dtype  # noqa: E402
from planner import calibration as cb  # noqa: E402
from planner import fidelity as fd  # noqa: E402

MIN_POINTS = 10


#: Independent publishers (planner.fidelity.source_roots) a GPU's fit points must come
#: from before a two-factor fit is adopted or a spread narrower than a guess's is
#: believed: one vendor page or one benchmark repository is one set of runs (Intel's
#: static-batch Gaudi 3 table alone fitted MBU 0.79 with sigma 0.12).
MIN_SOURCES = 2


def folded(words: list[str], indent: int = 4, width: int = 94) -> list[str]:
    """A YAML folded scalar's lines: the words joined and wrapped at ``width`` columns,
    each line indented ``indent`` spaces (a word longer than the line stands alone)."""
    pad = " " * (indent - 1)
    lines, cur = [], pad
    for w in words:
        if len(cur) + 1 + len(w) > width and cur.strip():
            lines.append(cur)
            cur = pad
        cur += " " + w
    lines.append(cur)
    return lines


#: Where the generated part of a GPU's ``reason`` starts (the analogy's own reasoning
#: before it is kept; a rerun replaces what follows).
LEVEL_MARK = "Calibration (`make calibrate-defaults`):"


def level_plan(catalog, results: dict[str, dict], points: list[cb.Measurement]) -> dict:
    """Per catalog GPU whose fit is not adopted: the factors the catalog keeps.

    A GPU with saturated-throughput fit points keeps the analogy's MFU / MBU split
    scaled to its measured level (``planner.fidelity.level_scale``, provenance
    ``scaled``, spread of the scaled factors on its fit points, or
    :data:`ANALOGY_SIGMA_LOG` with fewer than ``MIN_POINTS`` fit points or fewer than
    ``MIN_SOURCES`` publishers). Any other GPU
    keeps the
    analogy scaled by ``planner.fidelity.analogy_level_scale`` (the median level of the
    scaled GPUs, :data:`ANALOGY_LEVEL_SCALE`, or a lower same-architecture level;
    provenance ``analogy``, spread :data:`ANALOGY_SIGMA_LOG`)."""
    fit_pts = cb.fit_points(points)
    plan: dict[str, dict] = {}
    levels: dict[str, float] = {}
    # the reference GPUs first (absolute levels), then every other GPU relative to
    # them on the same LLM (planner.fidelity.level_targets)
    order = [g for g in fd.LEVEL_REFERENCE_GPUS if g in catalog.gpus]
    order += [g for g in sorted(catalog.gpus) if g not in order]
    targets: dict[str, float] | None = None
    for gpu in order:
        if targets is None and gpu not in fd.LEVEL_REFERENCE_GPUS:
            targets = fd.level_targets(fit_pts, catalog, {g: e["factors"] for g, e in plan.items()})
            print(
                "level targets (reference GPUs' median measured / predicted per LLM): "
                + ", ".join(f"{k} {v:.3f}" for k, v in sorted(targets.items()))
            )
        r = results.get(gpu)
        if r is not None and r["adopt"]:
            continue
        prior = fd.prior_factors(catalog, gpu)
        pts = [m for m in fit_pts if m.gpu == gpu]
        lv = fd.level_scale(pts, catalog, gpu, prior, targets)
        if lv is None:
            continue  # measured but no saturated throughput: handled below
        factors = fd.scaled_factors(catalog, prior, lv.scale)
        # the points the level rests on: FP4 runs measure the FP4 ratio, not the level
        base = [m for m in pts if m.dtype != Dtype.FP4] or pts
        few = len(pts) < MIN_POINTS or len(fd.source_roots(base)) < MIN_SOURCES
        if few:
            # a few points, or one publisher's runs, cannot show a spread narrower than
            # a guess's (B200's four DeepSeek points alone gave 0.28; one MLPerf FP4 run
            # beside one sweep of FP8 runs does not make its level better known), nor,
            # with the spread's quantiles over a handful of values, a wider one (H100
            # PCIe's five values gave 1.075 from one MLPerf server run's latencies): the
            # guess's
            sigma, down = ANALOGY_SIGMA_LOG, None
        else:
            priced = with_ratios(catalog, gpu, lv.moe_ratio, lv.fp4_ratio)
            got = fd.factor_spread(pts, priced, factors)
            sigma = got.sigma_log if got else cb.MIN_SIGMA_LOG
            down = got.downside_sigma_log if got else None
        levels[gpu] = lv.scale
        plan[gpu] = {
            "provenance": "scaled",
            "factors": factors,
            "prior": prior,
            "level": lv,
            "points": len(pts),
            "sigma_log": sigma,
            "downside_sigma_log": down,
            "few": few,
            "moe_ratio": lv.moe_ratio,
            "fp4_ratio": lv.fp4_ratio,
        }
    borrow_dense_levels(catalog, plan, fit_pts, targets)
    # runs with data-parallel attention against the written factors and ratios (every
    # GPU's MoE and FP4 ratios as written, none for data-parallel attention)
    written = ratios_catalog(catalog, plan)
    for gpu, e in plan.items():
        e["dp_ratio"], e["dp_values"] = fd.dp_attention_ratio(fit_pts, written, gpu, e["factors"])
    inherit_dp_ratios(catalog, plan)
    for gpu, e in plan.items():
        # each measured LLM's own runs against the written factors, relative to the
        # reference GPUs' on that LLM (absolute for the reference GPUs themselves)
        e["own"] = fd.own_llm_ratios(
            fit_pts,
            cb.with_measured_ratios(
                catalog, {gpu: (e["moe_ratio"], e["fp4_ratio"], e["dp_ratio"])}
            ),
            gpu,
            e["factors"],
            None if gpu in fd.LEVEL_REFERENCE_GPUS else targets,
        )
    # the level of a GPU never measured: the median measured level of the GPUs measured on
    # a dense LLM (2 decimals; a level lifted above 1 counts as 1, so a guess is never
    # rated above its own analogy), which catalog.schema.ANALOGY_LEVEL_SCALE records (a
    # test holds the two together). A GPU measured on MoE LLMs only is left out: its
    # level is its MoE kernels', and its dense level is borrowed, not measured.
    dense_levels = [min(v, 1.0) for g, v in levels.items() if plan[g]["level"].dense]
    median_level = round(median(dense_levels), 2) if dense_levels else ANALOGY_LEVEL_SCALE
    if abs(median_level - ANALOGY_LEVEL_SCALE) > 0.005:
        print(
            f"note: the median level of the scaled GPUs is {median_level:.2f}; "
            f"set catalog.schema.ANALOGY_LEVEL_SCALE (now {ANALOGY_LEVEL_SCALE}) to it"
        )
    for gpu in sorted(catalog.gpus):
        r = results.get(gpu)
        if gpu in plan or (r is not None and r["adopt"]):
            continue
        if r is not None:
            # measured (kernel timings, say) but no level to scale to: the catalog's
            # factors stay as they are (A100 80GB keeps its earlier adopted fit)
            continue
        prior = fd.prior_factors(catalog, gpu)
        level = fd.analogy_level_scale(gpu, catalog, levels, median_level)
        arch = catalog.gpus[gpu].arch
        # (a sibling measured on MoE LLMs only carries its MoE level as its level)
        sib = [
            e["moe_ratio"]
            for g, e in plan.items()
            if catalog.gpus[g].arch == arch
            and isinstance(e["level"], fd.LevelScale)
            and e["level"].dense
        ]
        plan[gpu] = {
            "provenance": "analogy",
            "factors": fd.scaled_factors(catalog, prior, level),
            "prior": prior,
            "level": level,
            "points": 0,
            "sigma_log": ANALOGY_SIGMA_LOG,
            # a guessed GPU's MoE kernels are no better than a measured sibling's
            "moe_ratio": min([1.0, *sib]),
            "fp4_ratio": 1.0,
            "dp_ratio": 1.0,
            "dp_values": 0,
        }
    inherit_dp_ratios(catalog, plan)  # the guessed GPUs too
    return plan


def inherit_dp_ratios(catalog, plan: dict[str, dict]) -> None:
    """A GPU whose data-parallel attention is unmeasured (fewer than
    ``planner.fidelity.MIN_DP_VALUES`` such runs) takes the lowest ratio measured on a GPU
    of its vendor (the same serving software: ROCm's SGLang and all-to-all on MI300X and
    MI325X as on MI355X), if below 1: such layouts are never rated better on it than on
    the measured one. Sets ``dp_ratio`` and ``dp_from``."""
    measured = {g: e["dp_ratio"] for g, e in plan.items() if e["dp_values"] >= fd.MIN_DP_VALUES}
    for gpu, e in plan.items():
        if e["dp_values"] >= fd.MIN_DP_VALUES:
            continue
        vendor = catalog.gpus[gpu].vendor
        kin = {g: r for g, r in measured.items() if catalog.gpus[g].vendor == vendor}
        if kin and min(kin.values()) < 1.0:
            source = min(kin, key=lambda g: (kin[g], g))
            e["dp_ratio"], e["dp_from"] = kin[source], source


def dp_reason(e: dict) -> str:
    """The clause on a level entry's data-parallel-attention ratio ("" when 1)."""
    if round(e.get("dp_ratio", 1.0), 3) >= 1.0:
        return ""
    how = "(dp_attention_level_ratio: MFU and MBU x it at dp > 1; "
    if e.get("dp_from"):
        return (
            f"its data-parallel attention is unmeasured: it takes {e['dp_from']}'s measured "
            f"{e['dp_ratio']:.3f}, the lowest of its vendor's GPUs {how}"
            "scripts/calibration_levels.inherit_dp_ratios)"
        )
    return (
        f"its {e['dp_values']} saturated runs with data-parallel attention (wide expert "
        f"parallelism) are predicted as measured at {e['dp_ratio']:.3f} of these factors "
        f"{how}planner.fidelity.dp_attention_ratio)"
    )


def borrow_dense_levels(
    catalog,
    plan: dict[str, dict],
    fit_pts: list[cb.Measurement],
    targets: dict[str, float] | None = None,
) -> None:
    """A scaled GPU measured on MoE LLMs only takes its dense-LLM level from a scaled
    sibling of its architecture measured on both (planner.fidelity.borrowed_dense_level;
    the least lift when several), its MoE LLMs staying at their measured level; the
    spread is recomputed on its points. Where no sibling of its architecture is measured
    on dense LLMs, its ``predecessor`` (the vendor's previous generation) only caps it:
    its MoE level stands for dense LLMs too (another architecture's gap between dense
    and MoE kernels is not borrowed, even through matched runs, whose ratio carries the
    predecessor's gap), never above the predecessor's level. With neither it keeps its
    MoE level. Each such GPU records what its dense level rests on (``dense_from``: the
    GPU, or "self"; catalog ``efficiency.dense_level_from``). Changes ``plan`` in place."""
    for gpu, e in sorted(plan.items()):
        lv = e["level"]
        if lv.dense or e["moe_ratio"] != 1.0:
            continue  # measured on a dense LLM (any format): its own level stands
        e["dense_from"] = "self"
        arch = catalog.gpus[gpu].arch
        ceiling = fd.level_ceiling(catalog, e["prior"])
        options = []
        for s, o in sorted(plan.items()):
            if s == gpu or catalog.gpus[s].arch != arch or o["moe_ratio"] >= 1.0:
                continue
            if not o["level"].dense:  # a sibling without dense runs has no dense gap
                continue
            matched = matched_ratio(catalog, fit_pts, (gpu, e), (s, o))
            dense, ratio = fd.borrowed_dense_level(
                lv.scale, o["level"].scale, o["moe_ratio"], ceiling, matched[0] if matched else None
            )
            options.append(
                (dense, ratio, s, matched, fd.held_at(lv.scale, o["level"].scale, ceiling))
            )
        before = catalog.gpus[gpu].predecessor
        if not options and before in plan and plan[before]["level"].dense:
            judge = plan[before]["level"].scale
            held = fd.held_at(lv.scale, judge, ceiling)
            options.append((min(lv.scale, judge, ceiling), 1.0, before, None, held))
        if not options:
            continue
        dense, moe_ratio, sibling, matched, held = min(options, key=lambda x: x[:3])
        prior = e["prior"]
        factors = fd.scaled_factors(catalog, prior, dense)
        pts = [m for m in fit_pts if m.gpu == gpu]
        # a capped dense level: the MoE ratio that keeps its MoE LLMs where they measured
        # (none when held below them, or judged by a predecessor: MoE ratio 1)
        at_cap = None
        if not held and moe_ratio < 1.0:
            at_cap = fd.moe_ratio_capped(pts, catalog, gpu, prior, dense, targets)
        moe_ratio = moe_ratio if at_cap is None else at_cap
        if e.get("few"):
            sigma, down = ANALOGY_SIGMA_LOG, None  # as level_plan: a few points show no spread
        else:
            priced = with_ratios(catalog, gpu, moe_ratio, e["fp4_ratio"])
            got = fd.factor_spread(pts, priced, factors)
            sigma = max(got.sigma_log if got else cb.MIN_SIGMA_LOG, e["sigma_log"])
            down = max(
                got.downside_sigma_log if got else cb.MIN_SIGMA_LOG,
                e.get("downside_sigma_log") or e["sigma_log"],
            )
        e.update(
            factors=factors,
            moe_ratio=moe_ratio,
            borrowed=(sibling, lv.scale, dense, matched),
            moe_measured=lv.measured,
            borrowed_from=("sibling" if catalog.gpus[sibling].arch == arch else "predecessor"),
            held=held,
            dense_from=sibling,
            sigma_log=sigma,
            downside_sigma_log=down,
            level=dataclasses.replace(lv, scale=dense, moe_ratio=moe_ratio),
        )


def matched_ratio(
    catalog, fit_pts: list[cb.Measurement], mine: tuple[str, dict], theirs: tuple[str, dict]
) -> tuple[float, int, str] | None:
    """The level of GPU ``mine`` relative to its sibling ``theirs`` (ids and plan entries)
    on the runs published for both (planner.fidelity.matched_runs), for the LLM group
    (an LLM, or its FP4 runs) with the most such runs: its planner.fidelity.paired_level
    over the sibling's level for that group (LevelScale.by_model), with the number of runs
    and the group. None with fewer than planner.fidelity.MIN_MATCHED_RUNS matched runs in
    every group."""
    (gpu, e), (sib, o) = mine, theirs
    pairs = fd.matched_runs(fit_pts, gpu, sib)
    groups: dict[str, list] = {}
    for a, b in pairs:
        groups.setdefault(fd.level_group(a), []).append((a, b))
    sib_levels = dict(o["level"].by_model)
    usable = [
        (len(p), g, p)
        for g, p in sorted(groups.items())
        if len(p) >= fd.MIN_MATCHED_RUNS and g in sib_levels
    ]
    if not usable:
        return None
    _, group, chosen = max(usable)
    level = sib_levels[group]
    ratio = fd.paired_level(chosen, catalog, e["prior"], o["prior"], level) / level
    print(
        f"{gpu}: {len(chosen)} runs matched with {sib} on {group}: "
        f"level {ratio:.3f} x {sib}'s {level:.3f}"
    )
    return ratio, len(chosen), group


def fit_script_inputs(
    argv: Sequence[str] | None, doc: str
) -> tuple[argparse.Namespace, Catalog, list[cb.Measurement]]:
    """What the fit scripts run by ``make calibrate-defaults`` after the levels read:
    their ``--write`` flag (parsed from ``argv``, described by ``doc``'s first line), the
    shipped catalog and its priceable reference measurements (both splits)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="store the fits in the GPU YAML files")
    catalog = load_catalog()
    return ap.parse_args(argv), catalog, cb.load_reference_measurements(catalog)


def with_gpu(catalog: Catalog, gpu: str, **fields: Any) -> Catalog:
    """``catalog`` with ``gpu``'s entry updated by ``fields`` (its trial fits: a server's
    PCIe all-reduce, a per-sequence decode cost), every other entry as it was."""
    gpus = dict(catalog.gpus)
    gpus[gpu] = catalog.gpus[gpu].model_copy(update=fields)
    return catalog.model_copy(update={"gpus": gpus})


def with_ratios(catalog, gpu: str, moe_ratio: float, fp4_ratio: float):
    """``catalog`` with ``gpu``'s measured ratios set and every other GPU's at 1."""
    return cb.with_measured_ratios(catalog, {gpu: (moe_ratio, fp4_ratio)})


def ratios_catalog(catalog, plan: dict[str, dict]):
    """``catalog`` with every GPU of ``plan`` at its new measured ratios (``moe_ratio``,
    ``fp4_ratio`` and, once measured, ``dp_ratio``, as written: 3 decimals) and every
    other at none: how plans are priced once they are written."""
    return cb.with_measured_ratios(
        catalog,
        {
            g: (
                round(e["moe_ratio"], 3),
                round(e["fp4_ratio"], 3),
                round(e.get("dp_ratio", 1.0), 3),
            )
            for g, e in plan.items()
        },
    )


def level_of(e: dict) -> float:
    """The level of one :func:`level_plan` entry (scaled: measured; analogy: assumed)."""
    lv = e["level"]
    return float(lv.scale) if isinstance(lv, fd.LevelScale) else float(lv)


def level_reason(gpu: str, e: dict) -> str:
    prior = e["prior"]
    if e["provenance"] == "scaled":
        lv: fd.LevelScale = e["level"]
        per = ", ".join(f"{m} {v:.2f}" for m, v in lv.by_model)
        ref = gpu in fd.LEVEL_REFERENCE_GPUS
        return (
            f"{LEVEL_MARK} the analogy MFU {prior[0]:g} / MBU {prior[1]:g} scaled by "
            f"{lv.scale:.3f}"
            + (" (dense LLMs, below)" if e.get("borrowed") else "")
            + f": the median over LLMs ({per}; over its dense LLMs where that is higher) of "
            "the level at which its "
            f"{lv.values} saturated throughputs (of {e['points']} fit points) are predicted "
            + (
                "as measured (a reference GPU)"
                if ref
                else "as the reference GPUs' are on the same LLM"
            )
            + f"; with the analogy the median measured / predicted was {lv.median_ratio:.2f}"
            + (
                f", its median {lv.measured:.2f} capped at the reference GPUs' factors"
                if lv.measured > lv.scale > 1.0
                else ""
            )
            + (
                f"; each factor at most the reference GPUs' (planner.fidelity.factor_caps): "
                f"MFU {e['factors'][0]:.4g}, MBU {e['factors'][1]:.4g}"
                if e["factors"][0] < prior[0] * lv.scale - 1e-9
                or e["factors"][1] < prior[1] * lv.scale - 1e-9
                else ""
            )
            + ". "
            + ratio_reason(e)
            + "The two-factor fit is not adopted (docs/calibration.md). Spread of these "
            f"factors on the fit points: sigma_log {e['sigma_log']:.2f}"
            + (
                f" (its low side, which the derate uses: {down:.2f})"
                if (down := e.get("downside_sigma_log")) is not None
                and round(down, 2) < round(e["sigma_log"], 2)
                else ""
            )
            + "."
        )
    return (
        f"{LEVEL_MARK} no measurement the planner can price; the analogy MFU {prior[0]:g} / "
        f"MBU {prior[1]:g} scaled by {e['level']:.2f} (where analogy guesses were checked "
        "they were optimistic: the median level of the checked GPUs, or a lower level of a "
        "checked GPU of the same architecture), with the analogy spread."
        + (f" {dp_reason(e)[:1].upper()}{dp_reason(e)[1:]}." if dp_reason(e) else "")
    )


def ratio_reason(e: dict) -> str:
    """The sentence on a level entry's measured MoE and FP4 ratios ("" when both are 1)."""
    parts = []
    if e["moe_ratio"] < 1.0:
        parts.append(
            f"its MoE LLMs are measured at {e['moe_ratio']:.2f} of that level "
            "(moe_level_ratio: MFU and MBU x it on MoE models)"
        )
    if e["fp4_ratio"] != 1.0:
        parts.append(
            f"its FP4 runs at {e['fp4_ratio']:.2f}x the FP4 derates "
            "(fp4_level_ratio: each derate x it, the GEMM's capped at 1, the read's "
            "at 0.7 of peak bandwidth)"
        )
    if dp_reason(e):
        parts.append(dp_reason(e))
    if e.get("borrowed"):
        sibling, measured, dense, matched = e["borrowed"]
        kin = e.get("borrowed_from", "sibling")
        if e.get("held"):
            parts.insert(
                0,
                f"its dense LLMs are unmeasured, and its MoE LLMs measure at "
                f"{e.get('moe_measured', measured):.3f} (before the ceiling), above "
                f"{sibling}'s level: both are held at "
                f"{dense:.3f}, the {kin}'s level or the ceiling, whichever is lower (never a "
                f"larger share of peak than the measured {kin} it is judged by; its MoE runs "
                "are priced below what they measured; planner.fidelity.borrowed_dense_level)",
            )
        elif kin == "predecessor":
            parts.insert(
                0,
                f"its dense LLMs are unmeasured and no GPU of its architecture is measured on "
                f"them: its MoE level {dense:.3f} stands for them, at most the level of "
                f"{sibling}, its predecessor (another architecture's gap between dense and "
                "MoE kernels is not borrowed)",
            )
        else:
            if matched:
                ratio, runs, group = matched
                how = (
                    f"{sibling}'s measured level times its level relative to {sibling} on "
                    f"{runs} {group} runs published for both ({ratio:.3f}; "
                    "planner.fidelity.paired_level), at most the sibling's level"
                )
            else:
                how = (
                    f"its MoE level {measured:.3f} over the MoE ratio of {sibling} (measured "
                    "on both, same architecture)"
                )
            parts.insert(
                0,
                f"its dense LLMs are unmeasured: their level {dense:.3f} is {how}"
                + (
                    f"; moe_level_ratio undoes it on MoE models (measured at {measured:.3f})"
                    if e["moe_ratio"] < 1.0
                    else ""
                ),
            )
    elif e.get("dense_from") == "self":
        parts.insert(
            0,
            "its dense LLMs are unmeasured and no measured GPU judges them: its MoE level "
            "stands for them",
        )
    text = "; ".join(parts)
    return (text[:1].upper() + text[1:] + ". ") if parts else ""


def downside_line(sigma_log: float, downside: float | None) -> str:
    """The ``downside_sigma_log`` line of an efficiency block: written (3 decimals) only
    where narrower than ``sigma_log`` as written; empty otherwise (None: ``sigma_log``)."""
    if downside is None or round(downside, 3) >= round(sigma_log, 3):
        return ""
    return f"  downside_sigma_log: {downside:.3f}\n"


def own_llm_block(own: dict[str, tuple[float, int, int]]) -> str:
    """The ``own_llm_ratio`` lines of an efficiency block (catalog.schema.OwnLlmCheck):
    one flow mapping per LLM, the ratio to 3 decimals; empty without checks."""
    if not own:
        return ""
    lines = [
        f"    {llm}: {{ratio: {r:.3f}, points: {n}, publishers: {k}}}\n"
        for llm, (r, n, k) in sorted(own.items())
    ]
    return "  own_llm_ratio:\n" + "".join(lines)


def write_level(gpu: str, e: dict) -> None:
    """Rewrite ``gpu``'s efficiency block with the factors of :func:`level_plan`,
    keeping its overlap factor and the analogy's reasoning (before :data:`LEVEL_MARK`)."""
    path = DATA_DIR / "gpus" / f"{gpu}.yaml"
    text = path.read_text(encoding="utf-8")
    m = re.search(r"^efficiency:\n((?:[ ].*\n|\n)*?)(?=^\S)", text, flags=re.M)
    if m is None:
        raise SystemExit(f"{path}: no efficiency block")
    block = m.group(0)
    overlap = re.search(r"overlap_factor:\s*([0-9.]+)", block)
    rm = re.search(r"^  reason: >-\n((?:    .*\n)+)", block, flags=re.M)
    old = " ".join(rm.group(1).split()) if rm else ""
    old = old.split(LEVEL_MARK)[0].strip()
    words = (old + " " + level_reason(gpu, e)).split()
    lines = folded(words)
    f = e["factors"]
    level = level_of(e)
    new = (
        "efficiency:\n"
        f"  prefill_mfu: {f[0]:.4g}\n"
        f"  decode_mbu: {f[1]:.4g}\n"
        f"  step_overhead_ms: {float(f[2]):.1f}\n"
        f"  overlap_factor: {overlap.group(1) if overlap else '0.8'}\n"
        f"  provenance: {e['provenance']}\n"
        + (f"  points: {e['points']}\n" if e["points"] else "")
        + f"  sigma_log: {e['sigma_log']:.3f}\n"
        + downside_line(e["sigma_log"], e.get("downside_sigma_log"))
        + f"  level_scale: {level:.3f}\n"
        + (f"  moe_level_ratio: {e['moe_ratio']:.3f}\n" if e["moe_ratio"] != 1.0 else "")
        + (f"  fp4_level_ratio: {e['fp4_ratio']:.3f}\n" if e["fp4_ratio"] != 1.0 else "")
        + (
            f"  dp_attention_level_ratio: {e['dp_ratio']:.3f}\n"
            if round(e.get("dp_ratio", 1.0), 3) < 1.0
            else ""
        )
        + (f"  dense_level_from: {e['dense_from']}\n" if e.get("dense_from") else "")
        + own_llm_block(e.get("own") or {})
        + "  reason: >-\n"
        + "\n".join(lines)
        + "\n"
    )
    path.write_text(text.replace(block, new), encoding="utf-8")
