"""Replay InferenceX's closed-loop runs step by step, to see what their start does to TTFT.

InferenceX (formerly InferenceMAX) measures a server with ``C`` users that each send
their next request as soon as the last one finishes, ``10 x C`` requests in all, random
prompt and output lengths uniform in ``[0.8 L, L]`` (``--random-range-ratio 0.8``, so
the mean is ``0.9 L``), every user starting at once. The capacity model
(:func:`planner.capacity.replica_capacity`) prices the steady state of such a loop: its
mean TTFT is the queue of a loop whose users are spread over their cycle. A run of ten
cycles that starts with every user at once is not spread: the first ``C`` prefills
queue together, and the users finish together for a few cycles more (their lengths
differ by 10% at most).

This replays such a run on the cost model's own step times
(:meth:`planner.capacity.StepModel.step_ms`, the run's replica as
:func:`planner.calibration.predict.base_replica` builds it): each step decodes every
admitted sequence and prefills up to the token budget left (chunked, first come first
served, as vLLM and TensorRT-LLM schedule; SGLang runs its prefills as steps of their
own), admitting up to the engine's batch and KV limits; a sequence's first token comes
at the end of the step that finishes its prompt, and each user submits its next prompt
when its last output token is out. TTFT and TPOT are means over the run's requests
(the measurements' ``mean_ttft_ms``), throughput is output tokens over the run. The
serving stack's share of TTFT (:meth:`planner.roofline.Replica.stack_ttft_ms`) is added.

    .venv/bin/python bench/closed_loop_replay.py [--model deepseek-v3] [--min-users 1]

prints each aggregated InferenceX point with a measured TTFT: measured, the steady
state and the replay, and the median error of each over the points. It is an analysis,
not a predictor the planner uses.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from statistics import median

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog.loader import load_catalog
from catalog.schema import Catalog
from planner import calibration as cb
from planner.calibration.predict import base_replica
from planner.capacity import DEFAULT_TOKEN_BUDGET, StepModel, engine_max_batch

#: The prompts per user of an InferenceX run (``--num-prompts $((CONC * 10))``).
ROUNDS = 10
#: ``--random-range-ratio`` of InferenceX's runs: lengths uniform in [0.8 L, L].
RANGE_RATIO = 0.8
#: What marks an InferenceX point's note (its random-length, all-at-once harness).
MARK = "random-range-ratio 0.8"


@dataclass(frozen=True)
class Replay:
    """Means over one replayed run: TTFT and TPOT (ms), output tokens/s."""

    ttft_ms: float
    tpot_ms: float
    output_tok_s: float


def replay(m: cb.Measurement, catalog: Catalog, seed: int = 0) -> Replay:
    """Replay ``m`` (a closed loop of ``m.concurrency`` users, mean lengths ``m.isl`` /
    ``m.osl``) as the module docstring says."""
    assert m.concurrency and m.isl and m.osl
    rep = base_replica(m, catalog)
    steps = StepModel.of(rep, float(m.isl), float(m.osl))
    budget = m.token_budget or DEFAULT_TOKEN_BUDGET
    cap = m.max_batch if m.max_batch is not None else engine_max_batch(rep)
    limit = min(cap or 10**9, steps.max_resident)
    users, rng = int(m.concurrency), np.random.default_rng(seed)
    n = users * ROUNDS
    scale = 2.0 / (1.0 + RANGE_RATIO)  # nominal L from the mean 0.9 L
    prompts = rng.integers(int(m.isl * scale * RANGE_RATIO), int(m.isl * scale) + 1, n)
    outputs = rng.integers(int(m.osl * scale * RANGE_RATIO), int(m.osl * scale) + 1, n)
    queue: list[list[int]] = [[i, int(prompts[i])] for i in range(users)]
    submitted = dict.fromkeys(range(users), 0.0)
    first: dict[int, float] = {}
    done: dict[int, float] = {}
    decoding: dict[int, int] = {}
    t, nxt = 0.0, users

    def finish(rid: int) -> None:
        nonlocal nxt
        done[rid] = t
        if nxt < n:
            queue.append([nxt, int(prompts[nxt])])
            submitted[nxt] = t
            nxt += 1

    while len(done) < n:
        left, chunk, ready = budget - len(decoding), 0, []
        for entry in queue[: max(limit - len(decoding), 0)]:
            if left <= 0:
                break
            take = min(left, entry[1])
            entry[1] -= take
            chunk += take
            left -= take
            if entry[1] == 0:
                ready.append(entry[0])
        t += steps.step_ms(float(len(decoding)), float(chunk))
        for rid in list(decoding):
            decoding[rid] -= 1
            if decoding[rid] == 0:
                del decoding[rid]
                finish(rid)
        queue = [e for e in queue if e[1] > 0]
        for rid in ready:
            first[rid] = t
            decoding[rid] = int(outputs[rid]) - 1
            if decoding[rid] == 0:
                del decoding[rid]
                finish(rid)
    stack = rep.stack_ttft_ms(float(m.isl))
    ttft = [first[r] - submitted[r] + stack for r in range(n)]
    tpot = [(done[r] - first[r]) / max(int(outputs[r]) - 1, 1) for r in range(n)]
    return Replay(
        float(np.mean(ttft)),
        float(np.mean(tpot)),
        float(outputs.sum()) / (max(done.values()) / 1e3),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="deepseek-v3")
    ap.add_argument("--min-users", type=float, default=1.0)
    args = ap.parse_args(argv)
    catalog = load_catalog()
    points = [
        m
        for m in cb.load_reference_measurements(catalog)
        if m.model == args.model
        and not m.disaggregated
        and m.concurrency
        and m.concurrency >= args.min_users
        and m.ttft_ms
        and MARK in (m.note or "")
    ]
    errors: dict[str, list[float]] = {"steady": [], "replay": []}
    for m in points:
        assert m.ttft_ms
        steady = cb.predict(m, catalog)
        r = replay(m, catalog)
        if steady.ttft_ms is None:
            continue
        errors["steady"].append(steady.ttft_ms / m.ttft_ms - 1)
        errors["replay"].append(r.ttft_ms / m.ttft_ms - 1)
        print(
            f"{m.label:6} {m.gpu:15} {m.engine or '-':7} tp{m.tp} {m.isl}/{m.osl} "
            f"C={m.concurrency:g}: TTFT ms measured {m.ttft_ms:,.0f}, steady "
            f"{steady.ttft_ms:,.0f}, replay {r.ttft_ms:,.0f}; TPOT ms {m.tpot_ms or 0:.1f} / "
            f"{steady.tpot_ms or 0:.1f} / {r.tpot_ms:.1f}"
        )
    for name, xs in errors.items():
        if xs:
            print(
                f"{name}: median |TTFT error| {median(abs(x) for x in xs):.1%}, signed "
                f"{median(xs):+.1%} over {len(xs)} points"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
