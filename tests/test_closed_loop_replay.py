"""bench/closed_loop_replay.py: an InferenceX-style closed loop replayed step by step."""

from __future__ import annotations

import pytest
from script_support import BENCH, load_script

from catalog.loader import load_catalog
from catalog.schema import Dtype
from planner import calibration as cb

REPLAY = load_script("closed_loop_replay", BENCH)
CAT = load_catalog()


def point(users: float, isl: int = 922, osl: int = 922) -> cb.Measurement:
    return cb.Measurement(
        model="deepseek-v3",
        gpu="h200-sxm-141gb",
        tp=8,
        dtype=Dtype.FP8,
        engine="trtllm",
        isl=isl,
        osl=osl,
        concurrency=users,
        output_tok_s=1.0,
        note=f"test point, {REPLAY.MARK}",
    )


def test_one_user_replays_the_steady_state():
    m = point(1)
    steady, r = cb.predict(m, CAT), REPLAY.replay(m, CAT)
    assert steady.tpot_ms and steady.output_tok_s and steady.ttft_ms
    assert r.tpot_ms == pytest.approx(steady.tpot_ms, rel=0.05)
    assert r.output_tok_s == pytest.approx(steady.output_tok_s, rel=0.05)
    # no queue: the first token waits only for its own prompt (and the serving stack)
    assert r.ttft_ms == pytest.approx(steady.ttft_ms, rel=0.35)


def test_a_synchronized_start_queues_the_first_prompts():
    m = point(64, isl=7373)
    steady, r = cb.predict(m, CAT), REPLAY.replay(m, CAT)
    assert steady.ttft_ms and steady.tpot_ms
    # 64 prompts of ~7K tokens arrive together: the mean TTFT is well above the spread
    # loop's, while the decode steps (TPOT) are the same steps
    assert r.ttft_ms > 1.5 * steady.ttft_ms
    assert r.tpot_ms == pytest.approx(steady.tpot_ms, rel=0.05)


def test_the_replay_keeps_littles_law():
    m = point(16)
    r = REPLAY.replay(m, CAT)
    # users = requests/s x (TTFT + (G - 1) TPOT), within the run's start and end
    per_request_s = (r.ttft_ms + (922 - 1) * r.tpot_ms) / 1e3
    assert r.output_tok_s / 922 * per_request_s == pytest.approx(16, rel=0.1)
