"""The fleet simulator: against closed forms, the cost model, and itself (seeds)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from catalog.loader import load_catalog
from planner import architecture as arch
from planner import queueing
from planner import roofline as rl
from planner.simulate import LengthModel, SimClass, SimPool, simulate
from planner.simulate.engine import fcfs_servers, run_class, sample_arrivals
from planner.simulate.steps import StepModel, chunk_count, chunk_plan
from solver.problem import PoolRole

CAT = load_catalog()


def replica(model="llama-3.1-8b", gpu="h100-sxm5-80gb", tp=1, dtype="fp8"):
    return rl.build_replica(CAT, model, gpu, tp=tp, dtype=dtype, kv_dtype="fp8")


def one_class(
    pools,
    *,
    rate=1.0,
    prompt=2000,
    output=200,
    hit=0.0,
    ttft=1000.0,
    tpot=50.0,
    prompt_sigma=0.0,
    output_sigma=0.0,
):
    return SimClass(
        name="c",
        rate_rps=rate,
        prompt=LengthModel(math.log(prompt), prompt_sigma),
        output=LengthModel(math.log(output), output_sigma),
        prefix_hit_rate=hit,
        ttft_slo_ms=ttft,
        tpot_slo_ms=tpot,
        percentile=90.0,
        max_context_tokens=131072,
        pools=tuple(pools),
    )


def pool(role, rep, n=1, *, max_batch=None, budget=None, rate=0.0, step=None, link=None):
    return SimPool(
        id=f"c:{role.value}",
        class_name="c",
        role=role,
        replicas=n,
        steps=StepModel(rep),
        max_batch=max_batch,
        chunk_budget_tokens=budget,
        rate_rps=rate,
        step_ms=step,
        kv_link_gb_per_s=link,
    )


# --------------------------------------------------------------------------- cost model


@pytest.mark.parametrize(
    ("model", "gpu", "tp", "dtype"),
    [
        ("llama-3.1-8b", "h100-sxm5-80gb", 1, "fp8"),
        ("llama-3.1-70b", "mi300x", 8, "fp8"),
        ("mixtral-8x7b", "h100-sxm5-80gb", 2, "bf16"),  # MoE
        ("gpt-oss-120b", "b200", 2, "fp8"),  # MoE + sliding window
        ("mistral-7b-v0.1", "a100-sxm-80gb", 1, "bf16"),  # sliding window
    ],
)
def test_step_model_equals_the_cost_model(model, gpu, tp, dtype):
    r = replica(model, gpu, tp, dtype)
    sm = StepModel(r)
    for batch, ctx in ((1, 3000.0), (37, 2150.0), (200, 97800.0)):
        assert sm.decode_ms(batch, ctx) == pytest.approx(
            rl.decode_step_ms(r, batch, ctx), rel=1e-12
        )
    for tokens in (1.0, 7.0, 300.0, 5000.0):
        assert sm.weights_read(tokens) == pytest.approx(rl.weight_bytes_read_per_step(r, tokens))
        assert sm.comm_ms(tokens) == pytest.approx(rl.tp_comm_ms(r, tokens), rel=1e-12, abs=1e-15)
    for batch, ctx in ((0, 0.0), (1, 3000.0), (37, 2150.0), (200, 97800.0)):
        for new, cached, budget in (
            (5000.0, 0.0, 512),
            (7760.0, 89240.0, 256),
            (300.0, 10.0, 1024),
        ):
            sizes, starts = chunk_plan(new, cached, budget)
            assert len(sizes) == math.ceil(new / budget)
            assert sizes.sum() == pytest.approx(new)
            want = [
                rl.mixed_step_ms(r, batch, ctx, t, s) for t, s in zip(sizes, starts, strict=True)
            ]
            count, last = chunk_count(new, budget)
            for first in (0, count // 2, count - 1):
                got = sm.chunk_steps_ms(batch, ctx, budget, count, last, cached, first)
                assert got == pytest.approx(want[first:], rel=1e-12)
                for steps in {1, min(2, count - first), (count - first + 1) // 2, count - first}:
                    span = sm.chunks_ms(batch, ctx, budget, count, last, cached, first, steps)
                    assert span == pytest.approx(sum(want[first : first + steps]), rel=1e-12)
    tokens = np.array([1.0, 100.0, 4096.0, 131072.0])
    assert sm.kv_bytes_array(tokens) == pytest.approx(
        [arch.kv_bytes_for_sequence(r.model, t, r.kv_dtype) for t in tokens], rel=1e-12
    )
    assert sm.prefill_ms(4000, 1000) == rl.prefill_ms(r, 4000, 1000)


@pytest.mark.parametrize(
    ("model", "gpu", "tp", "dtype"),
    [
        ("llama-3.1-8b", "h100-sxm5-80gb", 1, "fp8"),
        ("llama-3.1-70b", "mi300x", 8, "fp8"),
        ("llama-3.1-405b", "h100-sxm5-80gb", 8, "fp8"),
    ],
)
def test_chunk_sums_in_closed_form_equal_the_steps(model, gpu, tp, dtype):
    """StepModel.chunks_ms sums a prompt's full chunks in closed form (the step is a
    convex, piecewise affine function of the chunk's index): equal to the sum of the cost
    model's steps, over prompts whose chunks go from memory- to compute-bound and whose
    attention crosses the decodes' (several affine pieces per prompt)."""
    r = replica(model, gpu, tp, dtype)
    sm = StepModel(r)
    assert sm._closed
    rng = np.random.default_rng(7)
    for _ in range(60):
        batch = int(rng.integers(0, 300))
        ctx = float(rng.uniform(100.0, 120_000.0))
        budget = int(rng.choice([64, 256, 512, 2048, 8192]))
        new = float(rng.integers(1, 100_000))
        cached = float(rng.choice([0.0, rng.uniform(0.0, 100_000.0)]))
        count, last = chunk_count(new, budget)
        sizes, starts = chunk_plan(new, cached, budget)
        want = [rl.mixed_step_ms(r, batch, ctx, t, s) for t, s in zip(sizes, starts, strict=True)]
        first = int(rng.choice([0, rng.integers(0, count)]))
        steps = int(rng.integers(1, count - first + 1))
        got = sm.chunks_ms(batch, ctx, budget, count, last, cached, first, steps)
        assert got == pytest.approx(math.fsum(want[first : first + steps]), rel=1e-12)


# --------------------------------------------------------------------------- closed forms


def test_fcfs_servers_is_mmc():
    """Exponential services on c identical servers: the M/M/c mean wait (Erlang C)."""
    rng = np.random.default_rng(7)
    service_ms, servers, rho = 100.0, 4, 0.8
    rate_rps = rho * servers / (service_ms / 1000.0)
    t = sample_arrivals(rng, rate_rps, 400_000 / rate_rps * 1000.0)
    s = rng.exponential(service_ms, len(t))
    _, start = fcfs_servers(t.tolist(), [s.tolist()], [servers])
    wait = (np.array(start) - t)[len(t) // 10 :].mean()
    want = queueing.mmc_mean_wait_s(rate_rps, service_ms / 1000.0, servers) * 1000.0
    assert wait == pytest.approx(want, rel=0.04)


def test_prefill_pool_is_md1():
    """A disaggregated prefill pool of one replica with a fixed prompt is an M/D/1
    queue: mean wait rho S / (2 (1 - rho)) (Pollaczek-Khinchine)."""
    r = replica()
    s_ms = rl.prefill_ms(r, 2000, 0)
    rho = 0.7
    rate = rho / (s_ms / 1000.0)
    cls = one_class(
        [
            pool(PoolRole.PREFILL, r, link=50.0),
            pool(PoolRole.DECODE, r, max_batch=4000, rate=rate, step=20.0),
        ],
        rate=rate,
    )
    run = run_class(cls, np.random.default_rng(3), 60_000 / rate * 1000.0)
    wait = np.nanmean(run.wait_ms[run.measured])
    assert wait == pytest.approx(rho * s_ms / (2 * (1 - rho)), rel=0.05)
    # TTFT = wait + prefill + the exposed part of the KV transfer
    ttft = (run.first_ms - run.arrival_ms)[run.measured] - run.wait_ms[run.measured]
    kv = arch.kv_bytes_for_sequence(r.model, 2000, r.kv_dtype)
    expo = rl.exposed_transfer_ms(rl.kv_transfer_ms(kv, 50.0), s_ms, 0.9, r.model.num_layers)
    assert ttft == pytest.approx(s_ms + expo, rel=1e-9)


def test_single_decode_replica_tpot_is_the_step_time():
    """One sequence at a time on a decode replica: TPOT = decode_step_ms(1, P + G/2)."""
    r = replica()
    cls = one_class(
        [pool(PoolRole.PREFILL, r, link=50.0), pool(PoolRole.DECODE, r, max_batch=64)],
        rate=0.01,
        prompt=3000,
        output=400,
    )
    run = run_class(cls, np.random.default_rng(1), 5_000_000.0, warmup_fraction=0.0)
    done = ~np.isnan(run.last_ms)
    assert done.sum() > 20
    tpot = (run.last_ms - run.first_ms)[done] / 399
    assert tpot == pytest.approx(rl.decode_step_ms(r, 1, 3000 + 200), rel=1e-9)


def test_decode_batch_step_time():
    """Sequences that arrive together decode in one batch: TPOT = decode_step_ms(B, ctx)."""
    r = replica()
    cls = one_class(
        [pool(PoolRole.PREFILL, r, 8, link=50.0), pool(PoolRole.DECODE, r, max_batch=64)],
        prompt=1000,
        output=100,
    )
    trace = (np.zeros(8), np.full(8, 1000.0), np.full(8, 100.0))
    run = run_class(cls, np.random.default_rng(0), 10_000.0, warmup_fraction=0.0, trace=trace)
    tpot = (run.last_ms - run.first_ms) / 99
    assert tpot == pytest.approx(rl.decode_step_ms(r, 8, 1050), rel=1e-9)


@pytest.mark.parametrize(("prompt", "budget", "hit"), [(5000, 512, 0.0), (20000, 2048, 0.5)])
def test_unloaded_chunked_ttft_is_ceil_p_over_t_steps(prompt, budget, hit):
    """An idle aggregated replica prefills P(1 - h) new tokens in ceil(P(1-h)/T) mixed
    steps: TTFT = sum of roofline.mixed_step_ms over those chunks."""
    r = replica()
    cls = one_class(
        [pool(PoolRole.AGGREGATED, r, max_batch=64, budget=budget, step=20.0)],
        rate=0.01,
        prompt=prompt,
        output=50,
        hit=hit,
    )
    run = run_class(cls, np.random.default_rng(2), 3_000_000.0, warmup_fraction=0.0)
    new, cached = prompt * (1 - hit), prompt * hit
    steps = math.ceil(new / budget)
    sizes, starts = chunk_plan(new, cached, budget)
    assert len(sizes) == steps
    want = sum(rl.mixed_step_ms(r, 0, 0.0, t, s) for t, s in zip(sizes, starts, strict=True))
    ttft = (run.first_ms - run.arrival_ms)[~np.isnan(run.first_ms)]
    assert len(ttft) > 10
    assert ttft == pytest.approx(want, rel=1e-9)
    # then G - 1 decode-only steps of one sequence
    tpot = (run.last_ms - run.first_ms)[~np.isnan(run.last_ms)] / 49
    assert tpot == pytest.approx(rl.decode_step_ms(r, 1, prompt + 25), rel=1e-9)


def test_chunks_ride_with_resident_decodes():
    """A prompt arriving while 4 sequences decode waits for the step boundary, then
    each chunk step is roofline.mixed_step_ms(4, ctx, T, s); every request that found
    the replica stepping sees its tokens one planned step (20 ms) later (overlap
    scheduling: planner.engines.busy_wait_ms), the first, on an idle replica, not."""
    r = replica()
    cls = one_class(
        [pool(PoolRole.AGGREGATED, r, max_batch=64, budget=1024, step=20.0)],
        prompt=1000,
        output=2000,
    )
    t = np.array([0.0, 0.0, 0.0, 0.0, 500.0])
    p = np.array([1000.0, 1000.0, 1000.0, 1000.0, 4000.0])
    trace = (t, p, np.full(5, 2000.0))
    run = run_class(cls, np.random.default_rng(0), 1e6, warmup_fraction=0.0, trace=trace)
    first = run.first_ms - np.array([0.0, 20.0, 20.0, 20.0, 20.0])  # the GPU's timeline
    assert (run.last_ms - run.first_ms)[1:] == pytest.approx((run.last_ms - first)[1:] - 20.0)
    # the four first prompts go one after the other (one chunk each)
    assert first[:4] == pytest.approx(np.sort(first[:4]))
    step4 = rl.decode_step_ms(r, 4, 2000.0)
    k = math.ceil((500.0 - first[3]) / step4)
    start = first[3] + k * step4
    sizes, starts = chunk_plan(4000.0, 0.0, 1024)
    want = sum(rl.mixed_step_ms(r, 4, 2000.0, a, b) for a, b in zip(sizes, starts, strict=True))
    assert first[4] - start == pytest.approx(want, rel=1e-9)


# --------------------------------------------------------------------------- behaviour


def chat_like(rate=40.0):
    r = replica()
    cand_step = rl.decode_step_ms(r, 128, 2150)
    return one_class(
        [
            # 4 prefill replicas: 60 req/s of 2,000-token prompts load them as 6 did before
            # dense GEMMs ran at their measured kernel rate (and 4 before FP8 GEMMs were
            # priced at their measured share of the peak)
            pool(PoolRole.PREFILL, r, 4, link=50.0),
            pool(PoolRole.DECODE, r, 3, max_batch=256, rate=rate, step=cand_step),
        ],
        rate=rate,
        prompt=2000,
        output=300,
        prompt_sigma=0.7,
        output_sigma=0.7,
    )


def test_same_seed_same_result_other_seed_differs():
    cls = [chat_like()]
    a = simulate(cls, 8000, seed=11).model_dump(exclude={"wall_time_s"})
    b = simulate(cls, 8000, seed=11).model_dump(exclude={"wall_time_s"})
    c = simulate(cls, 8000, seed=12).model_dump(exclude={"wall_time_s"})
    assert a == b
    assert a != c


@pytest.mark.parametrize("burst_cv", [1.0, 3.0])
def test_decode_joins_done_ahead_of_their_boundary_change_nothing(monkeypatch, burst_cv):
    """A request joins its decode replica at the replica's next step boundary; done on
    arrival when nothing else happens at that boundary (ClassSim._join_ahead) instead of
    at an event there, every request's times and waits are the same, bit for bit, also
    when replicas fill and requests wait for a decode slot, and so are the statistics
    (up to rounding: the decode queue's time average is summed in fewer pieces)."""
    from planner.simulate.scheduler import ClassSim

    r = replica()
    cls = one_class(
        [
            pool(PoolRole.PREFILL, r, 4, link=50.0),
            pool(PoolRole.DECODE, r, 3, max_batch=44, rate=30.0, step=10.0),
        ],
        rate=30.0,
        prompt=2000,
        output=300,
        prompt_sigma=0.7,
        output_sigma=0.9,
    )
    runs = []
    for ahead in (False, True):
        monkeypatch.setattr(ClassSim, "JOIN_AHEAD", ahead)
        runs.append(run_class(cls, np.random.default_rng(3), 300_000.0, burst_cv))
    off, on = runs
    assert off.pool_stats[1]["max_queue"] > 0  # requests waited for a decode slot
    for name in ("first_ms", "last_ms", "wait_ms", "slot_wait_ms", "decode_pool_of"):
        np.testing.assert_array_equal(getattr(off, name), getattr(on, name))
    # the decode queue's time average is integrated in fewer pieces: equal up to rounding
    for a, b in zip(off.pool_stats, on.pool_stats, strict=True):
        assert a.keys() == b.keys()
        for key, value in a.items():
            assert value == (b[key] if value is None else pytest.approx(b[key], rel=1e-12))
    assert off.events == on.events


def test_classes_in_parallel_processes_give_the_same_result():
    """Classes are independent streams: simulated in two processes (forked: pytest's
    process has one thread) or in one, the result is the same."""
    cls = [chat_like(), chat_like(rate=25.0)]
    one = simulate(cls, 6000, seed=5, workers=1).model_dump(exclude={"wall_time_s"})
    two = simulate(cls, 6000, seed=5, workers=2).model_dump(exclude={"wall_time_s"})
    assert one == two


def test_bursty_arrivals_raise_waits():
    cls = [chat_like(rate=60.0)]
    smooth = simulate(cls, 20000, seed=4).classes[0]
    bursty = simulate(cls, 20000, seed=4, burst_cv=3.0).classes[0]
    assert bursty.mean_prefill_wait_ms > 2 * smooth.mean_prefill_wait_ms
    assert bursty.ttft_ms.p90 > smooth.ttft_ms.p90
    assert bursty.attainment_ttft < smooth.attainment_ttft


def test_gamma_arrivals_have_the_asked_cv():
    rng = np.random.default_rng(0)
    for cv in (0.5, 1.0, 3.0):
        t = sample_arrivals(rng, 100.0, 2_000_000.0, cv)
        gaps = np.diff(t)
        assert gaps.mean() == pytest.approx(10.0, rel=0.03)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.05)


def test_decode_pool_obeys_littles_law_and_its_slots():
    cls = chat_like(rate=60.0)
    res = simulate([cls], 30000, seed=2)
    dec = next(p for p in res.pools if p.role == PoolRole.DECODE)
    c = res.classes[0]
    # L = lambda x time in decode (G - 1 steps of about TPOT)
    resident = dec.mean_batch * dec.replicas
    tokens = cls.output.mean_tokens - 1
    assert resident == pytest.approx(c.rate_rps * tokens * c.tpot_ms.mean / 1000.0, rel=0.05)
    assert dec.mean_batch <= dec.max_batch


@pytest.mark.parametrize("disaggregated", [False, True])
def test_one_token_outputs_finish_with_their_prefill_and_free_their_slot(disaggregated):
    """A request whose whole output is one token finishes with its prefill (last = first)
    and frees its slot and KV at once: on a replica of batch 1, the next prompt still
    starts (a slot or KV leak would stall the rest of the trace)."""
    r = replica()
    if disaggregated:
        pools = [pool(PoolRole.PREFILL, r, link=50.0), pool(PoolRole.DECODE, r, max_batch=1)]
    else:
        pools = [pool(PoolRole.AGGREGATED, r, max_batch=1, budget=2048, step=20.0)]
    cls = one_class(pools, prompt=1000, output=1)
    n = 40
    trace = (np.arange(n) * 1.0, np.full(n, 1000.0), np.full(n, 1.0))
    run = run_class(cls, np.random.default_rng(0), 1e6, warmup_fraction=0.0, trace=trace)
    assert not np.isnan(run.last_ms).any()
    assert run.last_ms == pytest.approx(run.first_ms)
    assert np.all(np.diff(run.first_ms) > 0)
