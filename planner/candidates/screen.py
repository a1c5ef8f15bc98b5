"""Screening one configuration per class and role: fit, TPOT and TTFT reachability,
the aggregated batch, prefill service times (planner.candidates)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import replace

from catalog.schema import Catalog, Dtype
from planner import engines
from planner import kernels as kn
from planner import roofline as rl
from planner.candidates import sessions as ses
from planner.candidates.bounds import (
    Deferred,
    aggregated_rejected_at_once,
    aggregated_usd_per_rps_floor,
    mixed_tpot_rejection,
    screen_deferred,
)
from planner.candidates.chunking import (
    _expect,
    _expect_mean,
    capacity_maximizing_batch,
    chunked_prompt,
    chunked_ttft_ms,
)
from planner.candidates.confidence import class_at_confidence
from planner.candidates.links import (
    dp_ep_options,
    kv_exposed_ms,
    kv_link_for,
    pair_link_ids,
    pp_options,
    prefill_link_options,
    replica_cost_usd_per_hour,
    replica_power_kw,
    tp_options,
)
from planner.candidates.model import (
    Candidate,
    ClassFigures,
    PoolConfig,
    Rejection,
    Screening,
    failure_text,
    kv_dtype_options,
    roles_for,
    speculative_label,
)
from planner.candidates.prune import (
    attach_capacities,
    prune,
    prune_by_cost_curves,
    restrict_prefill_links,
)
from planner.candidates.replicas import (
    fits_one_node,
    rate_and_free_hbm,
    request_replica,
    speculative_replica,
)
from planner.capacity import decode_slots, largest_batch
from planner.errors import PlanningError, PlanningTimeLimit
from planner.request import ResolvedClass, ResolvedRequest
from planner.risk import capacity_derate, factor_uncertainty
from solver.problem import PoolRole

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- screening


def _screen_config(
    catalog: Catalog,
    req: ResolvedRequest,
    cls: ResolvedClass,
    fig: ClassFigures,
    replica: rl.Replica,
    role: PoolRole,
    budget: int | None,
    link_option: tuple | None = None,
    batch_cap: int | None = None,
    reload: tuple[float, float] = (0.0, 0.0),
    pair_links: dict[str, str] | None = None,
    slots: tuple[tuple[int, float] | None] | None = None,
) -> Candidate | Rejection:
    """Screen one configuration; a prefill one is priced on ``link_option`` (a link and
    the decode GPU types it pairs with, :func:`prefill_link_options`); an aggregated
    one's decode batch is at most ``batch_cap`` when given (KV memory left for idle
    sessions' prefixes). ``reload`` = (mean, percentile) ms that reloading prefixes
    from a KV host tier adds to a request's prefill (:mod:`planner.candidates.sessions`).
    ``pair_links`` is :func:`pair_link_ids` of the GPU type when the caller has it
    (the same for every configuration of one GPU type: computed once). ``slots``: a
    decode pool's :func:`decode_slots` (in a 1-tuple) when the caller has them (the
    aggregated floor of the same replica asked for them)."""
    reload_mean_ms, reload_q_ms = reload
    gpu, tp, dtype, pp = replica.gpu.id, replica.tp, replica.weight_dtype, replica.pp
    par = {"pp": pp, "dp": replica.dp, "ep": replica.ep}
    slo = cls.slo

    def reject(reason: str, detail: str) -> Rejection:
        return Rejection(cls.name, role, gpu, tp, dtype.value, budget, reason, detail)

    h = fig.prefix_hit_rate
    spec_label = speculative_label(replica)
    # output tokens per engine step and sequence: the acceptance length with speculation
    a = kn.tokens_per_verification_step(replica.speculative)
    # KV-limited batch: decode and aggregated pools only (a prefill pool holds no batch)
    b_mem = (
        rl.max_resident_batch(replica, fig.decode_context_tokens) if role != PoolRole.PREFILL else 0
    )
    cand = Candidate(
        class_name=cls.name,
        config=PoolConfig(
            role, gpu, tp, dtype, replica.kv_dtype, budget, None, speculative=spec_label, **par
        ),
        replica=replica,
        rate_rps=cls.rate_rps,
        quantile=fig.quantile,
        ttft_slo_ms=slo.ttft_ms,
        tpot_slo_ms=slo.tpot_ms,
        output_mean_tokens=fig.output_mean_tokens,
        cost_usd_per_hour=replica_cost_usd_per_hour(catalog, gpu, replica.gpus),
        power_kw=replica_power_kw(catalog, gpu, replica.gpus),
        min_replicas=req.request.constraints.min_replicas_per_pool,
        arrival_cv2=req.request.traffic.burst_cv**2,
        max_utilization=req.request.constraints.max_utilization,
        spare_replicas=req.request.constraints.spare_replicas_per_pool,
        stack_ttft_ms=replica.stack_ttft_ms(fig.prompt_q_tokens) * (role != PoolRole.DECODE),
    )
    if role in (PoolRole.DECODE, PoolRole.AGGREGATED) and b_mem < 1:
        return reject(
            "kv_exceeds_memory",
            f"one sequence of {fig.decode_context_tokens:,.0f} tokens needs more KV memory "
            f"than the {rl.kv_capacity_bytes(replica) / 1e9:.1f} GB left after weights",
        )
    if role == PoolRole.DECODE:
        best = (
            slots[0]
            if slots is not None
            else decode_slots(replica, fig.decode_context_tokens, slo.tpot_ms)
        )
        if best is None:
            step1 = kn.effective_tpot_ms(
                rl.decode_step_ms(replica, 1, fig.decode_context_tokens), a
            )
            return reject(
                "tpot_unreachable",
                f"decode step {step1:.1f} ms per token at batch 1 exceeds the TPOT SLO "
                f"{slo.tpot_ms:g} ms",
            )
        b, step = best
        cand.config = PoolConfig(
            role, gpu, tp, dtype, replica.kv_dtype, None, b, speculative=spec_label, **par
        )
        cand.step_ms = step
        return cand

    if role == PoolRole.PREFILL:

        def service(p: float) -> float:
            return rl.prefill_ms(replica, p, p * h)

        mean, cv2 = _expect(fig, service)
        mean += reload_mean_ms
        p_q = fig.prompt_q_tokens
        s_q = service(p_q) + reload_q_ms
        if link_option is None:
            link_option = (kv_link_for(catalog, gpu), frozenset([gpu]))
        link, cand.pairs_with = link_option
        cand.kv_q_tokens = p_q
        cand.pair_links = dict(
            pair_links if pair_links is not None else pair_link_ids(catalog, gpu, req.gpus)
        )
        exposed = kv_exposed_ms(replica, s_q, p_q, link)
        cand.service_mean_ms, cand.service_cv2, cand.service_q_ms = mean, cv2, s_q
        cand.transfer_exposed_ms, cand.kv_transfer_link = exposed, link.id
        if cand.queue_room_ms <= 0:
            return reject(
                "ttft_unreachable",
                f"prefill of a p{slo.percentile:g} prompt ({p_q:,.0f} tokens) takes "
                f"{s_q:.0f} ms + {exposed:.0f} ms KV transfer"
                + cand.stack_text
                + cand.over_slo_text,
            )
        return cand

    # aggregated: B decodes + one chunk of `budget` tokens per step
    assert budget is not None

    def step_of(b: int) -> float:
        return rl.mixed_step_ms(
            replica, b, fig.decode_context_tokens, budget, fig.chunk_context_tokens
        )

    # one cost-model step per batch tried (the TPOT search, the chunked prefill of every
    # prompt node and the bisection's comparisons all ask for it again)
    step_at = functools.cache(step_of)
    # capacity.decode_slots(replica, decode context, TPOT, chunk_tokens=budget, ...) on
    # the cached steps: the same search over the same step times
    best = largest_batch(b_mem, lambda b: kn.effective_tpot_ms(step_at(b), a), slo.tpot_ms)
    if best is None:
        return mixed_tpot_rejection(cls, replica, budget, step_of(1))
    b_tpot = min(best[0], batch_cap) if batch_cap else best[0]
    # each prompt's chunk attention does not depend on the batch: priced once here, then
    # only the steps change (chunked_ttft_ms(chunked_prompt(..)) = fast_chunked_ttft_ms)
    prompts = {
        p: chunked_prompt(replica, p, budget, p * h)
        for p in (*fig.prompt_nodes_tokens, fig.prompt_q_tokens)
    }
    steps_at = functools.cache(lambda b: rl.MixedSteps(replica, b, fig.decode_context_tokens))

    @functools.cache
    def service_at(b: int, p: float) -> float:
        return chunked_ttft_ms(prompts[p], steps_at(b))

    def decode_rps(b: int) -> float:
        # B x a / (G x step): a tokens per sequence and step with speculation
        return kn.decode_tokens_per_s(b, step_at(b), a) / fig.output_mean_tokens

    @functools.cache
    def prefill_rps(b: int) -> float:
        return 1000.0 / (_expect_mean(fig, lambda p: service_at(b, p)) + reload_mean_ms)

    def q_service_at(b: int) -> float:
        return service_at(b, fig.prompt_q_tokens) + reload_q_ms

    def q_ttft_at(b: int) -> float:
        # an arrival at a busy replica also waits for the step already scheduled
        # (overlap / async scheduling; a plan's replicas are busy)
        return q_service_at(b) + engines.scheduled_step_ms(replica.engine, step_at(b))

    b = capacity_maximizing_batch(b_tpot, decode_rps, prefill_rps)
    # a smaller batch shortens the step, hence the chunked prefill: where the
    # percentile prompt misses the TTFT SLO at b, the largest batch that meets it
    ttft_left_ms = slo.ttft_ms - cand.stack_ttft_ms  # the stack's latency is not the GPU's
    if ttft_left_ms - q_ttft_at(b) <= 0:
        fits = largest_batch(b, q_ttft_at, ttft_left_ms)
        b = fits[0] if fits is not None else 1
    step = step_at(b)
    cand.overlap_ttft_ms = engines.scheduled_step_ms(replica.engine, step)

    def service_agg(p: float) -> float:
        return service_at(b, p)

    mean, cv2 = _expect(fig, service_agg)
    mean += reload_mean_ms
    s_q = service_agg(fig.prompt_q_tokens) + reload_q_ms
    cand.config = PoolConfig(
        role, gpu, tp, dtype, replica.kv_dtype, budget, b, speculative=spec_label, **par
    )
    cand.step_ms = kn.effective_tpot_ms(step, a)  # per output token (step / a)
    cand.service_mean_ms, cand.service_cv2, cand.service_q_ms = mean, cv2, s_q
    if cand.wait_budget_ms <= 0:
        return reject(
            "ttft_unreachable",
            f"a p{slo.percentile:g} prompt ({fig.prompt_q_tokens:,.0f} tokens) needs "
            f"{s_q:.0f} ms of {budget}-token chunks"
            + cand.overlap_text
            + cand.stack_text
            + f", over the TTFT SLO {slo.ttft_ms:g} ms",
        )
    return cand


def _screen_with_sessions(
    catalog: Catalog,
    req: ResolvedRequest,
    cls: ResolvedClass,
    fig: ClassFigures,
    replica: rl.Replica,
    role: PoolRole,
    budget: int | None,
    link_option: tuple | None,
    pair_links: dict[str, str] | None = None,
    slots: tuple[tuple[int, float] | None] | None = None,
) -> list[Candidate | Rejection]:
    """Screen one configuration at the prefix hit rate it can count on (``slots``: a
    decode pool's decode slots when known, see :func:`_screen_config`).

    Classes without sessions (or without hits), and decode pools, are screened at the
    nominal rate. Otherwise the pool's hit rate is the fixed point of
    :func:`planner.candidates.sessions.effective_hit_rate`, and an aggregated pool is
    also offered with its decode batch capped at :data:`SESSION_BATCH_SHARES` of the
    KV-limited batch, leaving KV memory for idle prefixes."""
    h = fig.prefix_hit_rate
    if role == PoolRole.DECODE or cls.sessions is None or cls.sessions.turns <= 1 or h <= 0:
        out = _screen_config(
            catalog,
            req,
            cls,
            fig,
            replica,
            role,
            budget,
            link_option,
            pair_links=pair_links,
            slots=slots,
        )
        if isinstance(out, Candidate) and role != PoolRole.DECODE:
            out.effective_prefix_hit_rate = h
        return [out]
    per_session = ses.session_prefix_bytes(replica, h, fig.prompt_mean_tokens)
    capacity = rl.kv_capacity_bytes(replica)
    tier = req.request.prefix_cache
    host = (
        ses.host_cache_bytes(
            replica.gpu.server.host_memory_gb,
            tier.host_memory_share,
            replica.gpus,
            replica.gpu.server.gpus_per_server,
        )
        if tier.host_tier
        else 0.0
    )
    caps: list[int | None] = [None]
    if role == PoolRole.AGGREGATED:
        b_mem = rl.max_resident_batch(replica, fig.decode_context_tokens)
        caps += sorted({max(1, int(b_mem * share)) for share in ses.SESSION_BATCH_SHARES})
    outs: list[Candidate | Rejection] = []
    seen: set[str] = set()
    for cap in caps:

        def screened(
            hit: float, cap: int | None = cap, reload: tuple[float, float] = (0.0, 0.0)
        ) -> Candidate | Rejection:
            return _screen_config(
                catalog,
                req,
                cls,
                fig.at_hit(hit),
                replica,
                role,
                budget,
                link_option,
                cap,
                reload,
                pair_links,
            )

        tried: dict[float, Candidate | Rejection] = {}

        def state_at(
            hit: float, screened=screened, tried=tried
        ) -> tuple[float, float, float] | None:
            c = tried[hit] = screened(hit)
            if isinstance(c, Rejection):
                return None
            rate, free = rate_and_free_hbm(c, fig, capacity)
            return rate, free + host, per_session

        h_eff = ses.effective_hit_rate(h, cls.sessions, state_at)
        # the fixed point is one of the hit rates tried (or 0): screened once
        out = tried[h_eff] if h_eff in tried else screened(h_eff)
        if isinstance(out, Candidate) and host > 0 and h_eff > 0:
            # hits found in the host tier are reloaded before their prefill
            rate, free = rate_and_free_hbm(out, fig, capacity)
            idle = ses.idle_sessions(rate, cls.sessions)
            share = ses.host_hit_share(free, host, idle, per_session)
            if share > 0:
                one, link_id = ses.host_reload(catalog, replica, per_session)
                out = screened(h_eff, cap, (share * one, one))
                if isinstance(out, Candidate):
                    out.host_cache_gb = host / 1e9
                    out.host_hit_share = share
                    out.notes.append(
                        f"{share:.0%} of prefix hits reloaded from host memory "
                        f"({one:.0f} ms each over {link_id})"
                    )
        if isinstance(out, Candidate):
            if out.config.key in seen:
                continue
            seen.add(out.config.key)
            out.effective_prefix_hit_rate = h_eff
            out.session_affinity = h_eff > 0
            if h_eff < h:
                out.notes.append(
                    f"prefix hits {h_eff:.0%} of the nominal {h:.0%}: idle sessions' "
                    "prefixes do not all fit this replica's KV cache"
                )
        elif outs:
            continue  # a capped batch that fails adds nothing to the uncapped outcome
        elif h_eff < h and out.reason == "ttft_unreachable":
            out = replace(
                out,
                detail=f"{out.detail}; idle sessions' prefixes ({cls.sessions.think_time_s:g} s "
                f"between turns) leave room for {h_eff:.0%} prefix hits of the nominal {h:.0%}",
            )
        outs.append(out)
        if cap is None and h_eff >= h:
            break  # the full batch keeps every hit: a capped one only loses capacity
    return outs


def _screen_gpu(
    catalog: Catalog,
    req: ResolvedRequest,
    cls: ResolvedClass,
    fig: ClassFigures,
    gpu_id: str,
    check_time: Callable[[], None],
    skip_by_floor: bool = True,
) -> tuple[list[Candidate], list[Rejection], int]:
    """Screen every configuration of one class on one GPU type: (kept, rejected,
    configurations considered), in enumeration order.

    With ``skip_by_floor``, aggregated configurations are screened last, in increasing
    order of :func:`planner.candidates.bounds.aggregated_usd_per_rps_floor`, and one
    whose floor is above the cost per request/s of the candidates :func:`prune` would
    keep is recorded as ``dominated`` without being screened (the proof that this
    leaves every candidate the MILP sees unchanged: :mod:`planner.candidates.bounds`)."""
    eff = req.request.efficiency
    overridden = eff.prefill_mfu is not None or eff.decode_mbu is not None
    confidence = req.request.risk.confidence
    roles = roles_for(cls)
    results: list[tuple[int, list[Candidate | Rejection]]] = []  # (index, outcomes), re-sorted
    deferred: list[Deferred] = []  # aggregated configurations left for later (bounds.py)
    considered = 0
    gpu = catalog.gpus[gpu_id]
    model = catalog.models[req.model_id]
    pair_links: dict[str, str] | None = None  # pair_link_ids, once per GPU type
    prefill_links: list = []  # prefill_link_options, once per GPU type

    def finish(outs: list[Candidate | Rejection], dtype: Dtype) -> list[Candidate | Rejection]:
        unc = factor_uncertainty(catalog, gpu_id, dtype, overridden)
        for out in outs:
            if isinstance(out, Candidate):
                out.provenance = unc.provenance.value
                out.factor_points = unc.points
                out.level_scale = unc.level_scale
                out.sigma_log = unc.sigma_log
                out.derate_sigma_log = unc.derate_sigma_log
                out.risk_derate = capacity_derate(unc.derate_sigma_log, confidence)
        return outs

    def screen_agg(r: rl.Replica, budget: int, dtype: Dtype) -> list[Candidate | Rejection]:
        c, role = at_confidence[dtype], PoolRole.AGGREGATED
        outs = _screen_with_sessions(catalog, req, c, fig, r, role, budget, None, pair_links)
        return finish(outs, dtype)

    slots_of: dict[int, tuple[int, float] | None] = {}  # decode_slots per replica (id)
    at_confidence: dict[Dtype, ResolvedClass] = {}  # cls, its SLOs held at the confidence

    def tighter_floor(replica: rl.Replica, budget: int, dtype: Dtype) -> float | None:
        unc = factor_uncertainty(catalog, gpu_id, dtype, overridden)
        return aggregated_usd_per_rps_floor(
            at_confidence[dtype],
            fig,
            replica,
            budget,
            slots_of[id(replica)],
            replica_cost_usd_per_hour(catalog, gpu_id, replica.gpus),
            capacity_derate(unc.derate_sigma_log, confidence),
            mixed_slots=True,
        )

    for dtype in req.dtypes:
        fp4_error = rl.fp4_format_error(model, gpu) if dtype == Dtype.FP4 else None
        if (
            gpu.peak_tflops(dtype) is None
            or dtype not in model.weight_dtypes
            or fp4_error is not None
        ):
            considered += len(roles)
            why = (
                f"{gpu_id} has no {dtype} tensor cores"
                if gpu.peak_tflops(dtype) is None
                else fp4_error or f"{req.model_id} is not served in {dtype}"
            )
            results.append(
                (
                    len(results) + len(deferred),
                    [
                        Rejection(
                            cls.name,
                            role,
                            gpu_id,
                            None,
                            dtype.value,
                            None,
                            "dtype_unsupported",
                            why,
                        )
                        for role in roles
                    ],
                )
            )
            continue
        fits_alone = fits_one_node(catalog, req.model_id, gpu_id, dtype)
        shapes = [
            (tp, pp, dp, ep, kv)
            for tp in tp_options(catalog, gpu_id, req.tps)
            for pp in pp_options(catalog, gpu_id, tp, fits_alone, req.pps)
            for dp, ep in dp_ep_options(catalog, req.model_id, gpu_id, tp, req.eps)
            for kv in kv_dtype_options(dtype, req.kv_dtypes)
        ]
        unc = factor_uncertainty(catalog, gpu_id, dtype, overridden)
        derate = capacity_derate(unc.derate_sigma_log, confidence)
        dcls = at_confidence[dtype] = class_at_confidence(cls, derate, req.request.risk)
        for tp, pp, dp, ep, kv in shapes:
            check_time()
            try:
                replica = request_replica(catalog, req, gpu_id, dtype, kv, tp, pp=pp, dp=dp, ep=ep)
            except PlanningError as err:
                considered += len(roles)
                reason = "does_not_fit" if err.code == "does_not_fit" else "invalid"
                results.append(
                    (
                        len(results) + len(deferred),
                        [
                            Rejection(
                                cls.name, role, gpu_id, tp, dtype.value, None, reason, err.message
                            )
                            for role in roles
                        ],
                    )
                )
                continue
            spec_replica = speculative_replica(catalog, cls, replica)
            known: tuple[tuple[int, float] | None] | None = None  # decode_slots(spec_replica)
            for role in roles:
                role_replica = replica if role == PoolRole.PREFILL else spec_replica
                budgets = req.chunk_budgets if role == PoolRole.AGGREGATED else (None,)
                if role == PoolRole.PREFILL and pair_links is None:
                    # the same for every shape of this GPU type: computed once
                    pair_links = pair_link_ids(catalog, gpu_id, req.gpus)
                    prefill_links = prefill_link_options(catalog, gpu_id, req.gpus)
                links = prefill_links if role == PoolRole.PREFILL else [None]
                slots = (
                    decode_slots(role_replica, fig.decode_context_tokens, dcls.slo.tpot_ms)
                    if skip_by_floor and role == PoolRole.AGGREGATED
                    else None
                )
                if skip_by_floor and role == PoolRole.AGGREGATED:
                    b_mem = rl.max_resident_batch(role_replica, fig.decode_context_tokens)
                    slots_of[id(role_replica)] = slots
                    # the decode role's replica is this one (spec_replica): the same slots
                    known = (slots,)
                for budget in budgets:
                    for link in links:
                        considered += 1
                        index = len(results) + len(deferred)
                        step1 = None
                        if skip_by_floor and budget is not None:
                            # aggregated: rejected for TPOT at batch 1, without screening
                            at_once, step1 = aggregated_rejected_at_once(
                                dcls, fig, role_replica, budget, b_mem
                            )
                            if at_once is not None:
                                results.append((index, [at_once]))
                                continue
                        floor = (
                            aggregated_usd_per_rps_floor(
                                dcls,
                                fig,
                                role_replica,
                                budget,
                                slots,
                                replica_cost_usd_per_hour(catalog, gpu_id, role_replica.gpus),
                                derate,
                                step_nominal_ms=step1,
                            )
                            if slots is not None and budget is not None
                            else None
                        )
                        if floor is not None and budget is not None:
                            deferred.append((floor, index, role_replica, budget, dtype))
                            continue
                        outs = _screen_with_sessions(
                            catalog,
                            req,
                            dcls,
                            fig,
                            role_replica,
                            role,
                            budget,
                            link,
                            pair_links,
                            known if role == PoolRole.DECODE else None,
                        )
                        results.append((index, finish(outs, dtype)))
    # aggregated configurations left for their floors: screened, or skipped
    screen_deferred(
        cls,
        results,
        deferred,
        screen_agg,
        tighter_floor,
        check_time,
    )
    kept: list[Candidate] = []
    rejections: list[Rejection] = []
    for _, outs in sorted(results, key=lambda r: r[0]):
        for out in outs:
            if isinstance(out, Rejection):
                rejections.append(out)
            else:
                kept.append(out)
    return kept, rejections, considered


def screen_candidates(
    req: ResolvedRequest,
    catalog: Catalog,
    *,
    cross_gpu_prune: bool = True,
    deadline: float | None = None,
    skip_by_floor: bool = True,
) -> Screening:
    """Enumerate role x GPU x TP x dtype (x chunk budget) per class; screen; prune.

    ``cross_gpu_prune=False`` keeps candidates that another GPU type beats on cost
    (needed when GPUs are bought once for several scenarios: then the GPU type
    itself matters, not just the cost of the pool).

    A GPU type whose screening fails (an error in the cost model, e.g. a custom entry
    whose figures overflow it) is left out with a ``faulty_entry`` rejection naming
    the error: one faulty catalog entry never fails the plan. ``deadline``
    (``time.perf_counter()`` seconds): past it, screening stops with
    :class:`PlanningTimeLimit` naming ``candidates``. ``skip_by_floor=False`` screens
    every aggregated configuration (:func:`_screen_gpu`; the same candidates)."""
    started = time.perf_counter()
    kept: list[Candidate] = []
    rejections: list[Rejection] = []
    considered = 0

    def check_time() -> None:
        if deadline is not None and time.perf_counter() > deadline:
            raise PlanningTimeLimit.for_field(
                "candidates",
                f"screening stopped after {time.perf_counter() - started:.1f} s, the time "
                f"limit of this request's planning, with {considered:,} configurations "
                f"screened ({len(req.classes)} classes x {len(req.gpus)} GPU types x "
                f"{len(req.dtypes)} dtypes x {len(req.chunk_budgets)} chunk budgets x TP "
                "and PP degrees); ask for fewer GPU types, dtypes, TP degrees or chunk budgets",
            )

    for cls in req.classes:
        if cls.rate_rps <= 0:
            continue
        fig = ClassFigures.of(cls)
        for gpu_id in req.gpus:
            try:
                got, rejected, n = _screen_gpu(
                    catalog, req, cls, fig, gpu_id, check_time, skip_by_floor
                )
            except PlanningTimeLimit:
                raise
            except Exception as err:  # a faulty entry excludes itself, never the plan
                log.warning("screening %s for class %s failed", gpu_id, cls.name, exc_info=True)
                considered += 1
                rejections += [
                    Rejection(
                        cls.name,
                        role,
                        gpu_id,
                        None,
                        None,
                        None,
                        "faulty_entry",
                        f"{gpu_id} left out: screening it failed ({failure_text(err)}); check "
                        "its catalog entry",
                    )
                    for role in roles_for(cls)
                ]
                continue
            kept += got
            rejections += rejected
            considered += n
    kept, unpaired = restrict_prefill_links(kept, catalog)
    survivors, pruned = prune(kept)
    pruned = unpaired + pruned
    final: list[Candidate] = []
    check_time()
    for cand, failed in zip(survivors, attach_capacities(survivors), strict=True):
        if isinstance(failed, Exception):  # the same isolation for the capacity tables
            log.warning("capacity of %s failed", cand.config, exc_info=failed)
            c = cand.config
            failed = Rejection(
                cand.class_name,
                c.role,
                c.gpu,
                c.tp,
                c.dtype.value,
                c.chunk_budget_tokens,
                "faulty_entry",
                f"{c.gpu} configuration left out: its capacity table failed "
                f"({failure_text(failed)})",
            )
        if failed is None:
            final.append(cand)
        else:
            rejections.append(failed)
    final, dominated = prune_by_cost_curves(final, req) if cross_gpu_prune else (final, [])
    return Screening(final, pruned + dominated, rejections, considered, dominated)
