"""A cheap floor on an aggregated configuration's cost per request/s, to skip screening
configurations that within-GPU pruning would drop anyway (planner.candidates).

Screening an aggregated configuration (one GPU type, shape, dtype and chunk budget)
searches its decode batch, prices the chunked prefill of every prompt node and, for a
class with sessions, repeats that along the prefix-hit fixed point: most of the time
of a large screening. :func:`prune` then keeps per (class, role, GPU type) only the
:data:`KEEP_PER_GPU` cheapest non-dominated candidates per request/s. A configuration
whose *floor* (:func:`aggregated_usd_per_rps_floor`) is above what the kept ones
already cost is never kept, so it need not be screened.

**The floor.** An aggregated candidate's rate per replica at full utilization is
``R = min(decode_rps(b), prefill_rps(b)) x risk_derate`` at its chosen batch ``b``
(:attr:`Candidate.asymptotic_rps_per_replica`), and its cost per request/s is
``cost / max(R, 1e-12)`` (:attr:`Candidate.usd_per_rps`). With the cost model's
monotonicity (step times grow with the batch, with the chunk's tokens and with its
context; ``b / decode_step(b)`` grows with ``b``: what :func:`largest_batch` and
:func:`capacity_maximizing_batch` already assume, held by
``tests/test_screening_bounds.py``), for every batch cap and every prefix hit rate
``h <= nominal`` the screening may settle on:

* decode: ``b`` meets the TPOT SLO with a mixed step, which is no shorter than a
  decode step of ``b``, so ``b <= b_dec``, the decode-only slots
  (:func:`planner.capacity.decode_slots`), and
  ``decode_rps(b) = b a / (G step(b)) <= b / (G decode_step(b)) x a
  <= b_dec / (G tpot_dec)`` (requests/s; ``tpot_dec`` = the decode step per output
  token at ``b_dec``);
* prefill: a prompt of ``P`` tokens with ``P h`` cached takes the mixed steps of its
  ``ceil(P (1 - h) / T)`` chunks, no shorter in sum than
  :func:`planner.candidates.chunking.chunked_ttft_floor_ms` of its ``P (1 - h)`` new
  tokens at batch 1 (for any batch and start context), which only grows as ``h``
  falls; reloading prefixes from a host tier only adds, so
  ``prefill_rps(b) <= 1000 / E[floor(P (1 - nominal))]`` (requests/s; ``E`` over the
  prompt's quadrature nodes).

Hence ``usd_per_rps >= cost / max(min(decode bound, prefill bound) x risk_derate,
1e-12)``: the floor. A configuration the floor does not skip gets a tighter one before
it is screened (``mixed_slots``): the decode bound at the largest batch whose *mixed*
step at batch ``b`` (context at ``h = 0`` with sessions) meets the TPOT SLO, which the
screened batch cannot exceed, with ``b / step(b)`` growing (the same monotonicity).

**Skipping is exact for the model.** Configurations of one class and GPU type are
screened in increasing order of floor; one is skipped when its floor exceeds the cost
per request/s of the :data:`KEEP_PER_GPU`-th candidate kept so far
(:func:`kept_ahead`: sorted and freed of dominated ones as :func:`prune` does). At
the end every skipped floor is checked against that bar as it finally stands (a
candidate screened after a skip can dominate a kept one and raise it); one below is
screened after all, until none is. Then every configuration left unscreened has a
floor, hence a cost, above the final :data:`KEEP_PER_GPU` kept candidates', so it
sorts after them in :func:`prune`; a candidate's fate there depends only on the ones
sorting before it, all screened, so the kept ones are the same as with every
configuration screened, and the skipped configuration, sorting after
:data:`KEEP_PER_GPU` kept ones, would have been dropped (dominated, or beyond
:data:`KEEP_PER_GPU`). No candidate the MILP sees
changes: the same candidates, in the same order, with the same figures. What
changes is the record of what was dropped: a skipped configuration is a
``dominated`` :class:`Rejection` naming its floor and the kept configurations that
beat it (one per configuration, where its screening might have added two or three
pruned candidates, one per session batch cap; or, rarely, a ``ttft_unreachable``
rejection, which its floor being beaten makes moot). Configurations the screening
rejects at once for KV memory are screened as before; those it rejects for the TPOT
SLO at batch 1 get that rejection without screening (:func:`aggregated_rejected_at_once`:
the same record). :func:`screen_deferred` runs the skipping.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from catalog.schema import Dtype
from planner import kernels as kn
from planner import roofline as rl
from planner.candidates.chunking import chunked_ttft_floor_ms
from planner.candidates.model import KEEP_PER_GPU, Candidate, ClassFigures, Rejection
from planner.candidates.prune import dominates
from planner.capacity import largest_batch
from planner.request import ResolvedClass
from solver.problem import PoolRole


def has_sessions(cls: ResolvedClass, fig: ClassFigures) -> bool:
    """Whether screening looks for the class's effective prefix hit rate (sessions of
    more than one turn, with prefix hits): then any ``h`` up to the nominal rate."""
    return cls.sessions is not None and cls.sessions.turns > 1 and fig.prefix_hit_rate > 0


def aggregated_usd_per_rps_floor(
    cls: ResolvedClass,
    fig: ClassFigures,
    replica: rl.Replica,
    budget_tokens: int,
    decode: tuple[int, float] | None,
    cost_usd_per_hour: float,
    risk_derate: float,
    mixed_slots: bool = False,
    step_nominal_ms: float | None = None,
) -> float | None:
    """A floor on the cost per request/s ($/h per rps) of every candidate screening an
    aggregated configuration could give (see the module docstring for the proof):
    ``cost / max(min(b_dec / (G tpot_dec / 1000), 1000 / E[prefill_min]) x
    risk_derate, 1e-12)``, with ``decode = (b_dec, tpot_dec ms)`` the replica's
    decode-only slots (:func:`planner.capacity.decode_slots` at the class's TPOT SLO)
    and ``prefill_min`` (ms) :func:`chunked_ttft_floor_ms` of a prompt of ``P`` tokens
    at the nominal hit rate ``h`` at batch 1. None when screening
    rejects the configuration at once (no decode slots, or a mixed step at batch 1
    over the TPOT SLO): then it is screened, to keep its rejection.

    ``mixed_slots``: a tighter floor for ten or so more steps, the decode bound
    ``kn.decode_tokens_per_s(b0, step0(b0), a) / G`` at ``b0``, the largest batch whose
    mixed step ``step0`` (chunk context at ``h = 0`` with sessions, nominal otherwise)
    meets the TPOT SLO: the screened batch ``b`` meets it with a step no shorter than
    ``step0(b)``, so ``b <= b0``, and ``b / step0(b)`` grows with ``b``.

    ``step_nominal_ms``: the mixed step at batch 1 with the nominal chunk context when
    the caller has it (ms; computed here otherwise)."""
    if decode is None:
        return None
    slo = cls.slo
    a = kn.tokens_per_verification_step(replica.speculative)
    step_nominal = (
        step_nominal_ms
        if step_nominal_ms is not None
        else rl.mixed_step_ms(
            replica, 1, fig.decode_context_tokens, budget_tokens, fig.chunk_context_tokens
        )
    )
    if kn.effective_tpot_ms(step_nominal, a) > slo.tpot_ms:
        return None  # screening's tpot_unreachable
    b_dec, tpot_dec_ms = decode
    decode_rps = b_dec / (fig.output_mean_tokens * tpot_dec_ms / 1000.0)
    if mixed_slots:
        ctx = fig.prompt_mean_tokens / 2.0 if has_sessions(cls, fig) else fig.chunk_context_tokens

        def step0(b: int) -> float:
            return rl.mixed_step_ms(replica, b, fig.decode_context_tokens, budget_tokens, ctx)

        limit = rl.max_resident_batch(replica, fig.decode_context_tokens)
        best = largest_batch(limit, lambda b: kn.effective_tpot_ms(step0(b), a), slo.tpot_ms)
        if best is not None:
            b0 = best[0]
            decode_rps = min(
                decode_rps, kn.decode_tokens_per_s(b0, step0(b0), a) / fig.output_mean_tokens
            )
    h = fig.prefix_hit_rate
    steps = rl.MixedSteps(replica, 1, fig.decode_context_tokens)
    prefill_ms = sum(
        w * chunked_ttft_floor_ms(steps, max(p - p * h, 0.0), budget_tokens)
        for p, w in zip(fig.prompt_nodes_tokens, fig.prompt_weights, strict=True)
    )
    prefill_rps = 1000.0 / prefill_ms if prefill_ms > 0 else math.inf
    return cost_usd_per_hour / max(min(decode_rps, prefill_rps) * risk_derate, 1e-12)


def kept_ahead(group: list[Candidate]) -> list[Candidate]:
    """The first :data:`KEEP_PER_GPU` candidates :func:`prune` keeps of ``group`` (one
    class, role and GPU type): sorted by (cost per request/s, GPUs, key), those no
    earlier kept one dominates. With :data:`KEEP_PER_GPU` of them, the last one's cost
    per request/s is the threshold a floor must exceed to skip a configuration."""
    alive: list[Candidate] = []
    for c in sorted(group, key=lambda c: (c.usd_per_rps, c.config.gpus, c.config.key)):
        if not any(dominates(k, c) for k in alive):
            alive.append(c)
            if len(alive) == KEEP_PER_GPU:
                break
    return alive


def skipped_rejection(
    cls: ResolvedClass,
    replica: rl.Replica,
    budget_tokens: int,
    floor_usd_per_rps: float,
    ahead: list[Candidate],
) -> Rejection:
    """The record of an aggregated configuration left unscreened: ``dominated``, with
    its floor and the kept configurations that cost less per request/s."""
    beaten_by = ", ".join(f"{c.config.key} (${c.usd_per_rps:,.2f})" for c in ahead)
    return _aggregated_rejection(
        cls,
        replica,
        budget_tokens,
        "dominated",
        f"costs at least ${floor_usd_per_rps:,.2f}/h per req/s at full utilization "
        f"(decode slots and chunk steps at their best), more than {beaten_by} on the "
        "same GPU type: not screened further",
    )


def _aggregated_rejection(
    cls: ResolvedClass, replica: rl.Replica, budget: int, reason: str, detail: str
) -> Rejection:
    """The :class:`Rejection` of an aggregated configuration of ``replica`` with chunks
    of ``budget`` tokens for ``cls``."""
    return Rejection(
        cls.name,
        PoolRole.AGGREGATED,
        replica.gpu.id,
        replica.tp,
        replica.weight_dtype.value,
        budget,
        reason,
        detail,
    )


def mixed_tpot_rejection(
    cls: ResolvedClass, replica: rl.Replica, budget: int, step1_ms: float
) -> Rejection:
    """An aggregated configuration whose mixed step at batch 1 (``step1_ms``, a chunk
    of ``budget`` tokens at the class's nominal chunk context) is over the TPOT SLO per
    output token: ``tpot_unreachable``."""
    a = kn.tokens_per_verification_step(replica.speculative)
    return _aggregated_rejection(
        cls,
        replica,
        budget,
        "tpot_unreachable",
        f"a mixed step with a {budget}-token chunk takes {step1_ms / a:.1f} ms per "
        f"output token at batch 1, over the TPOT SLO {cls.slo.tpot_ms:g} ms",
    )


def aggregated_rejected_at_once(
    cls: ResolvedClass, fig: ClassFigures, replica: rl.Replica, budget: int, b_mem: int
) -> tuple[Rejection | None, float | None]:
    """(the rejection, None) when screening an aggregated configuration would reject it
    for its TPOT at batch 1, else (None, that mixed step in ms, when computed), without
    screening: what :func:`planner.candidates.screen._screen_with_sessions` returns then.
    :func:`planner.candidates.screen._screen_config`
    rejects it for KV memory first (one sequence does not fit: left to it, None), then
    for a mixed step at batch 1, with the chunk context at the nominal hit rate, over
    the TPOT SLO: a class with sessions is screened at the nominal rate first
    (:func:`planner.candidates.sessions.effective_hit_rate`), rejected there, and that
    rejection (its figures ``fig.at_hit(nominal)``, the same floats as ``fig``) is the
    outcome (the capped batches are not tried when the full one keeps every hit).
    ``b_mem``: :func:`planner.roofline.max_resident_batch` of the replica at the class's
    decode context (the same for every chunk budget: the caller's, once)."""
    if b_mem < 1:
        return None, None
    step1 = rl.mixed_step_ms(
        replica, 1, fig.decode_context_tokens, budget, fig.chunk_context_tokens
    )
    a = kn.tokens_per_verification_step(replica.speculative)
    if kn.effective_tpot_ms(step1, a) > cls.slo.tpot_ms:
        return mixed_tpot_rejection(cls, replica, budget, step1), step1
    return None, step1


#: An aggregated configuration left for its floor: (floor $/h per rps, enumeration
#: index, replica, chunk budget tokens, dtype).
Deferred = tuple[float, int, rl.Replica, int, Dtype]


def screen_deferred(
    cls: ResolvedClass,
    results: list[tuple[int, list[Candidate | Rejection]]],
    deferred: list[Deferred],
    screen: Callable[[rl.Replica, int, Dtype], list[Candidate | Rejection]],
    tighter_floor: Callable[[rl.Replica, int, Dtype], float | None],
    check_time: Callable[[], None],
) -> None:
    """Screen (``screen``) or skip the ``deferred`` aggregated configurations of one
    class on one GPU type, adding their outcomes to ``results`` (enumeration index,
    outcomes; the configurations screened so far): in enumeration order up to the first
    aggregated candidate, then in increasing order of floor, each skipped whose floor
    (or ``tighter_floor``) is above the bar of :func:`kept_ahead`, and the skipped ones
    checked against the final bar (the module docstring's proof). A skipped one is a
    :func:`skipped_rejection`."""
    # aggregated candidates so far: the group prune compares (one class, role, GPU type)
    group = [
        (i, o)
        for i, outs in results
        for o in outs
        if isinstance(o, Candidate) and o.config.role == PoolRole.AGGREGATED
    ]
    first = min((i for i, _ in group), default=math.inf)
    # prune lists its groups in the order of their first candidate, which fixes the
    # MILP's order of candidates (and so which of equal-cost fleets it returns): the
    # first aggregated candidate is found by screening in enumeration order, unskipped
    order = sorted(deferred, key=lambda d: d[1])
    while order and order[0][1] < first:
        floor, index, replica, budget, dtype = order.pop(0)
        outs = screen(replica, budget, dtype)
        results.append((index, outs))
        group += [(index, o) for o in outs if isinstance(o, Candidate)]
        first = min((i for i, _ in group), default=math.inf)

    def limit() -> float:  # the cost per request/s a floor must exceed to skip
        ahead = kept_ahead([o for _, o in group])
        return ahead[-1].usd_per_rps * (1 + 1e-9) if len(ahead) == KEEP_PER_GPU else math.inf

    def screen_at(index: int, replica: rl.Replica, budget: int, dtype: Dtype) -> None:
        outs = screen(replica, budget, dtype)
        results.append((index, outs))
        group.extend((index, o) for o in outs if isinstance(o, Candidate))

    skipped: list[Deferred] = []
    bar = limit()
    for floor, index, replica, budget, dtype in sorted(order, key=lambda d: (d[0], d[1])):
        check_time()
        if bar < math.inf and floor <= bar:
            # not skipped by its floor: a tighter one (ten or so more steps) may
            floor = max(floor, tighter_floor(replica, budget, dtype) or floor)
        if floor > bar:
            skipped.append((floor, index, replica, budget, dtype))
            continue
        screen_at(index, replica, budget, dtype)
        bar = limit()
    # a candidate screened after a skip may have changed which ones prune keeps (one
    # that dominates them): every skipped floor must be above the final bar, else it is
    # screened after all, until none is below
    while back := [d for d in skipped if d[0] <= bar]:
        for d in back:
            skipped.remove(d)
            screen_at(*d[1:])
        bar = limit()
    ahead = kept_ahead([o for _, o in group])
    for floor, index, replica, budget, _ in skipped:
        results.append((index, [skipped_rejection(cls, replica, budget, floor, ahead)]))


__all__ = [
    "aggregated_rejected_at_once",
    "aggregated_usd_per_rps_floor",
    "has_sessions",
    "kept_ahead",
    "mixed_tpot_rejection",
    "screen_deferred",
    "skipped_rejection",
]
