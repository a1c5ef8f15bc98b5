"""Set a MoE model's routing skew (``moe.routing`` in its catalog YAML) from the
routing aiconfigurator estimated for it on real text, and check it on served runs.

The cost model prices a decode step's expert reads by the distinct experts its tokens
touch (:func:`planner.architecture.distinct_experts`). Uniform routing touches the
most: DeepSeek-V3 (256 experts, top 8) 222 of 256 at 64 tokens. A trained router is
skewed. aiconfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) times its MoE
kernels under a power-law expert load whose exponent it estimated per model by matching
observed latency on real text (CNN-DailyMail and OpenOrca): 1.01 for DeepSeek-V3/R1,
1.2 for Qwen3-235B (its collector's ``power_law_logits_v3``, documented in its
``power_law`` guide). :func:`generator_distinct` re-implements that load generator
(each expert's load drawn from a power law on ``[1, 0.8 T]`` tokens when the ``T k``
picks outnumber the experts, on ``[0.01, 2]`` otherwise, by inverse transform; the
loads scaled to ``T k`` picks and rounded, the rounding corrected as :func:`settle`
says) and counts the experts with a load. :func:`envelope_exponent` is the largest Zipf
exponent (0.01 steps) whose expected count is at least the generator's mean at every
token count of :data:`TOKENS` (less :data:`TOLERANCE`, the Monte Carlo noise): the cost
model reads at least the experts that routing touches, at every decode batch from 4 to
128 tokens and at 256, 512 and 1,024.

The check (:func:`served_slope`): InferenceX's served runs of the model (closed loops,
no expert parallelism, both splits reported): per series of one GPU, engine, tp and
shape, ``ln((TPOT_hi / TPOT_lo) predicted / measured)`` between each run and the
series' fewest users; the median is 0 when the model's step grows with the batch as
measured, positive when it grows too fast (expert reads over-counted).

    .venv/bin/python scripts/moe_routing.py [--model deepseek-v3] [--write]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import median

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_levels import folded

from catalog.layers import MAX_ROUTING_EXPONENT, top_expert_share
from catalog.loader import DATA_DIR, load_catalog
from catalog.schema import Catalog
from planner import architecture as arch
from planner import calibration as cb

#: aiconfigurator's routing exponent per catalog model (its power-law guide: estimated by
#: latency matching on CNN-DailyMail and OpenOrca).
AIC_EXPONENT = {"deepseek-v3": 1.01}
AIC_SOURCE = (
    "https://github.com/ai-dynamo/aiconfigurator (collector power_law guide and "
    "power_law_logits_v3: exponent 1.01 estimated for DeepSeek-V3/R1 on CNN-DailyMail and "
    "OpenOrca by latency matching)"
)
#: Token counts per step the envelope holds at: every count from 4 to 128 (decode batches:
#: the generator changes its load range where the picks first outnumber the experts, 33
#: tokens for DeepSeek, and touches the most experts relative to uniform just past it),
#: then powers of two to 1,024 (large batches and small chunks).
TOKENS = (*range(4, 129), 256, 512, 1024)
#: Share by which the Zipf count may fall below the generator's mean: the Monte Carlo
#: noise of :data:`DRAWS` draws (seeds agree within about 0.1%).
TOLERANCE = 0.005
DRAWS = 2000


def settle(counts: np.ndarray, picks: int) -> np.ndarray:
    """The generator's rounding correction (a copy of ``counts``, one load per expert in
    expert order, made to sum to ``picks``): the experts ranked by load, busiest first
    (stable); a shortfall of ``n`` picks adds one to each of the ``n`` busiest; an excess
    of ``n`` takes one from the ranked experts ``0, -1, -2, ...`` in turn (the busiest,
    then from the least loaded up), from the busiest instead where that one has none."""
    out = counts.copy()
    order = np.argsort(-out, kind="stable")
    delta = picks - int(out.sum())
    if delta > 0:
        out[order[np.arange(delta) % len(out)]] += 1
    for i in range(-delta):
        j = order[-(i % len(out))]
        out[j if out[j] > 0 else order[0]] -= 1
    return out


def generator_distinct(
    tokens: int, exponent: float, experts: int, per_token: int, draws: int, seed: int = 0
) -> float:
    """Mean number of experts with a load under aiconfigurator's power-law load generator
    (see the module docstring; :func:`settle` its rounding correction) for ``tokens``
    tokens, over ``draws`` seeded draws."""
    rng = np.random.default_rng(seed)
    picks = tokens * per_token
    lo, hi = (1.0, tokens * 0.8) if picks > experts else (0.01, 2.0)
    b = 1.0 - exponent
    u = rng.random((draws, experts))
    loads = ((hi**b - lo**b) * u + lo**b) ** (1.0 / b)
    counts = np.rint(loads / loads.sum(axis=1, keepdims=True) * picks).astype(int)
    return float(np.mean([np.count_nonzero(settle(row, picks)) for row in counts]))


def envelope_exponent(
    exponent: float,
    experts: int,
    per_token: int,
    tokens: Sequence[int] = TOKENS,
    draws: int = DRAWS,
    tolerance: float = TOLERANCE,
) -> float:
    """The largest Zipf exponent (a multiple of 0.01) the catalog accepts for the layer
    (:func:`catalog.layers.top_expert_share`) whose
    :func:`planner.architecture.distinct_experts` is at least ``(1 - tolerance)`` x the
    generator's mean (:func:`generator_distinct` at ``exponent``) at every count of
    ``tokens``; 0 when even a small skew reads fewer."""
    target = {t: generator_distinct(t, exponent, experts, per_token, draws) for t in tokens}
    best = 0.0
    for step in range(1, int(MAX_ROUTING_EXPONENT * 100) + 1):
        a = step / 100
        if per_token * top_expert_share(experts, a) > 1 or any(
            arch.distinct_experts(experts, per_token, t, a) < (1 - tolerance) * target[t]
            for t in tokens
        ):
            break
        best = a
    return best


def served_slope(
    points: Sequence[cb.Measurement], catalog: Catalog, model: str, split: cb.Split
) -> tuple[float, int] | None:
    """(median ln((TPOT_hi / TPOT_lo) predicted / measured), pairs) over ``model``'s
    closed-loop, aggregated runs without expert parallelism in ``split``, each against
    the fewest users of its series (one GPU, engine, tp, dtype and shape; that run may be
    of either split: it is the reference, the run in ``split`` is what is predicted);
    None without pairs."""
    series: dict[tuple, list[cb.Measurement]] = {}
    for m in points:
        if (
            m.model == model
            and not m.disaggregated
            and (m.ep or 1) == 1
            and m.concurrency
            and m.tpot_ms
        ):
            key = (m.gpu, m.engine, m.tp, m.dp_attention, m.dtype, m.isl, m.osl)
            series.setdefault(key, []).append(m)
    logs = []
    for runs in series.values():
        base, *rest = sorted(runs, key=lambda m: m.concurrency or 0)
        rest = [m for m in rest if (m.split or cb.Split.FIT) == split]
        if not rest:
            continue
        p0 = cb.predict(base, catalog).tpot_ms
        for m in rest:
            p = cb.predict(m, catalog).tpot_ms
            assert m.tpot_ms and base.tpot_ms and p and p0
            logs.append(math.log((p / p0) / (m.tpot_ms / base.tpot_ms)))
    return (median(logs), len(logs)) if logs else None


def with_routing(catalog: Catalog, model: str, exponent: float) -> Catalog:
    """``catalog`` with ``model``'s routing exponent set (0: uniform)."""
    m = catalog.models[model]
    assert m.moe is not None
    routing = None
    if exponent > 0:
        routing = {"exponent": exponent, "source": "trial of scripts/moe_routing.py"}
    moe = m.moe.model_validate({**m.moe.model_dump(), "routing": routing})
    models = {**catalog.models, model: m.model_copy(update={"moe": moe})}
    return catalog.model_copy(update={"models": models})


def write_routing(model: str, exponent: float, source: str) -> None:
    """Write ``moe.routing`` of ``model``'s YAML (replacing an earlier one): the block
    goes last inside its ``moe:`` mapping."""
    path = DATA_DIR / "models" / f"{model}.yaml"
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^  routing:\n(?:    .*\n)+", "", text, flags=re.M)
    block = re.search(r"^moe:\n(?:  .*\n)+", text, flags=re.M)
    if block is None:
        raise SystemExit(f"{path}: no moe block")
    lines = folded(source.split(), indent=6)
    routing = f"  routing:\n    exponent: {exponent:g}\n    source: >-\n" + "\n".join(lines) + "\n"
    text = text[: block.end()] + routing + text[block.end() :]
    path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="deepseek-v3", choices=sorted(AIC_EXPONENT))
    ap.add_argument("--write", action="store_true", help="store it in the model's YAML")
    args = ap.parse_args(argv)
    catalog = load_catalog()
    moe = catalog.models[args.model].moe
    assert moe is not None
    e, k = moe.num_experts, moe.experts_per_token
    aic = AIC_EXPONENT[args.model]
    exponent = envelope_exponent(aic, e, k)
    gen = {t: generator_distinct(t, aic, e, k, DRAWS) for t in TOKENS}
    print(f"{args.model}: aiconfigurator's exponent {aic} -> Zipf envelope {exponent:g}")
    for t in TOKENS:
        print(
            f"  {t:5d} tokens: generator {gen[t]:6.1f} experts, Zipf {exponent:g} "
            f"{arch.distinct_experts(e, k, t, exponent):6.1f}, uniform "
            f"{arch.distinct_experts(e, k, t):6.1f}"
        )
    points = cb.load_reference_measurements(catalog)
    checks = {}
    for a in (0.0, exponent, 0.76, 0.85):
        trial = with_routing(catalog, args.model, a)
        checks[a] = {s: served_slope(points, trial, args.model, s) for s in cb.Split}
        text = ", ".join(
            f"{s.value} {r[0]:+.3f} ({r[1]} pairs)" if r else f"{s.value} none"
            for s, r in checks[a].items()
        )
        print(f"  served TPOT slope ln(predicted / measured) at exponent {a:g}: {text}")
    if args.write:
        fit = checks[exponent][cb.Split.FIT]
        before = checks[0.0][cb.Split.FIT]
        source = (
            f"The largest Zipf exponent whose expected distinct experts are at least "
            f"those of aiconfigurator's power-law load generator at exponent {aic} at "
            f"every count of 4-128 tokens and at 256, 512 and 1,024 (within "
            f"{TOLERANCE:.1%}, the Monte Carlo noise; scripts/moe_routing.py), {AIC_SOURCE}."
            + (
                f" InferenceX served runs (fit split, no expert parallelism): TPOT growth "
                f"over users ln(predicted / measured) {before[0]:+.3f} uniform, "
                f"{fit[0]:+.3f} at this exponent ({fit[1]} pairs)."
                if fit and before
                else ""
            )
        )
        write_routing(args.model, exponent, source)
        print(f"wrote {args.model}'s moe.routing")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
