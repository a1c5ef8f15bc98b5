"""What a plan assumed rather than measured, one line each: the plan's ``assumed_notes``.

Four kinds, from the plan's own document: the TTFT of a disaggregated class
(:func:`disaggregated_ttft_line`: the planner prices queue + prefill + KV transfer,
measured multi-node deployments show more) and of an aggregated class
(:func:`aggregated_ttft_line`: public runs through engines' HTTP servers measure more
than queue + prefill even at one user), speculative decoding per class
(``assumptions.classes.<name>.speculative``: the acceptance length is the request's)
and FP4 weights (``assumptions.fp4``: efficiency factors assumed where no FP4
measurement backs them). ``make_plan`` sets ``Plan.assumed_notes`` from
:func:`assumed_notes`, so every plan document carries them (the CLI's ``--json``, the
stored plan, the API response); the reports print the same lines under "Assumed"
(:func:`notes_of`), and the web page lists them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

#: TTFT that measured multi-node disaggregated deployments show beyond queue + prefill +
#: KV transfer (ms, rounded down): InferenceMAX's DeepSeek-V3 runs on B200, GB200 and
#: H200 at 11 or more users measured 221-12,670 ms where those predict 40-520 ms; the
#: least excess is +165 ms (GB200, 24 users; 221 against 56 ms). Hand-over, router,
#: scheduling and serving-stack delays (planner.calibration.disagg); for MLA models the
#: plan's TTFT prices the stack's part (planner.serving_stack, ~150 ms on NVIDIA), which
#: :func:`disaggregated_ttft_line` takes off this figure.
MEASURED_DISAGG_TTFT_EXTRA_MS = 150.0

#: TTFT that public single-replica runs at 1-8 users, served through SGLang's and
#: TensorRT-LLM's HTTP servers, measured beyond the planner's prediction of it (ms,
#: rounded down), the upper quartile: InferenceMAX's aggregated DeepSeek-V3 runs on B200,
#: B300, H200, MI300X, MI325X and MI355X (51 runs) measured 69-1,441 ms; with the serving
#: stack's latency priced (planner.serving_stack: the line through each vendor's median
#: excess by prompt length, and the step overlap scheduling queues ahead:
#: planner.engines.busy_wait_ms) the model is right at the median and a quarter of the
#: runs took 52 ms or more beyond it (up to +371 ms: B200 with SGLang, 7,373-token prompts
#: at 4 users; 65 ms before MI355X's MXFP4 runs, whose current SGLang images measure
#: 200-780 ms below the model, were priced; each vendor's runs alone give 46 ms NVIDIA,
#: 51 ms AMD), while NVIDIA
#: NIM's two Llama-3.1-70B runs on H100 at 1 and 5 users were within 68 ms of it
#: (planner.fidelity.ttft_excess_at_low_load; tests/test_report.py holds the figure to
#: the data).
MEASURED_AGG_TTFT_EXTRA_MS = 50.0

#: What a missing value prints as (as in the plain-text report).
_MISSING = "-"


def _is_num(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _ms(value: Any) -> str:
    """Milliseconds as the reports print them: whole above 100, one decimal below."""
    if not _is_num(value):
        return _MISSING
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def _s(value: Any) -> str:
    return _MISSING if value is None or value == "" else str(value)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _ttft_caveat(
    c: Mapping[str, Any], mode: str, extra_ms: float, what: str, measured: str
) -> str | None:
    """``<name>: <mode> TTFT <t> ms is <what> as priced; <measured>, which would be within
    / beyond the <slo> ms SLO: check it on your stack`` for a class of ``mode`` with a
    predicted TTFT ``t`` and a TTFT SLO (None otherwise); "within" when ``t + extra_ms <=
    slo``."""
    if c.get("mode") != mode:
        return None
    ttft, slo = c.get("ttft_ms"), _map(c.get("slo")).get("ttft_ms")
    if not (_is_num(ttft) and _is_num(slo)):
        return None
    verdict = "within" if ttft + extra_ms <= slo else "beyond"
    return (
        f"{_s(c.get('name'))}: {mode} TTFT {_ms(ttft)} ms is {what} as priced; {measured}, "
        f"which would be {verdict} the {_ms(slo)} ms SLO: check it on your stack"
    )


def disaggregated_ttft_line(c: Mapping[str, Any], stack_ms: float = 0.0) -> str | None:
    """A caveat for a disaggregated class (its plan JSON): its predicted TTFT, its SLO
    and whether :data:`MEASURED_DISAGG_TTFT_EXTRA_MS` more would still meet it, less
    the ``stack_ms`` of serving stack its TTFT already prices (the least base latency
    of the plan's GPUs, planner.serving_stack) (None for other classes)."""
    extra = max(MEASURED_DISAGG_TTFT_EXTRA_MS - stack_ms, 0.0)
    priced = f" + {stack_ms:,.0f} ms or more of serving stack" if stack_ms > 0 else ""
    return _ttft_caveat(
        c,
        "disaggregated",
        extra,
        "queue + prefill + KV transfer" + priced,
        "measured multi-node disaggregated deployments (InferenceMAX) add "
        f"{MEASURED_DISAGG_TTFT_EXTRA_MS:,.0f} ms or more of hand-over, router, scheduling "
        "and serving-stack delay"
        + (f", {extra:,.0f} ms beyond what is priced" if stack_ms > 0 else ""),
    )


def aggregated_ttft_line(c: Mapping[str, Any], stack_ms: float = 0.0) -> str | None:
    """A caveat for an aggregated class (its plan JSON): its predicted TTFT, its SLO and
    whether :data:`MEASURED_AGG_TTFT_EXTRA_MS` more would still meet it; ``stack_ms``
    the serving stack it prices (named in the line) (None for other classes)."""
    extra = MEASURED_AGG_TTFT_EXTRA_MS
    priced = f" + {stack_ms:,.0f} ms or more of serving stack" if stack_ms > 0 else ""
    return _ttft_caveat(
        c,
        "aggregated",
        extra,
        "queue + the step already scheduled + chunked prefill" + priced,
        "a quarter of public runs through SGLang's and TensorRT-LLM's HTTP servers at 1-8 "
        f"users (InferenceMAX) measured {extra:,.0f} ms or more beyond such predictions "
        "(NIM within 70 ms)",
    )


def assumed_notes(classes: Iterable[Any], assumptions: Mapping[str, Any]) -> list[str]:
    """The plan's assumed lines from its classes (plan JSON of each) and ``assumptions``:
    one per disaggregated class (:func:`disaggregated_ttft_line`) and per aggregated class
    (:func:`aggregated_ttft_line`), one per class with speculative decoding, one for FP4
    weights."""
    bases = [
        float(_map(g).get("serving_stack_base_ms") or 0.0)
        for g in _map(assumptions.get("gpus")).values()
    ]
    stack = min(bases, default=0.0)  # the least the plan's TTFTs carry
    lines = [
        line
        for c in classes
        if (line := disaggregated_ttft_line(_map(c), stack) or aggregated_ttft_line(_map(c), stack))
        is not None
    ]
    for name, c in _map(assumptions.get("classes")).items():
        sp = _map(_map(c).get("speculative"))
        if sp:
            drafter = f" ({_s(sp.get('draft_repo'))})" if sp.get("draft_repo") else ""
            lines.append(
                f"{_s(name)}: speculative {_s(sp.get('method'))}{drafter}, "
                f"{_s(sp.get('draft_tokens'))} draft tokens, assumed acceptance length "
                f"{_s(sp.get('acceptance_length'))}: {_s(sp.get('note'))}"
            )
    fp4 = _map(assumptions.get("fp4"))
    if fp4:
        several = len(_map(fp4.get("checkpoints"))) > 1
        derates = "; ".join(
            f"{_s(g)}"
            + (f" (loads {_s(_map(d).get('checkpoint'))})" if several else "")
            + f" GEMMs x{_s(_map(d).get('gemm_derate'))}, weight reads "
            f"x{_s(_map(d).get('weight_read_derate'))}"
            + (
                f" (FP4 runs measured at x{_s(_map(d).get('fp4_level_ratio'))} these derates)"
                if _map(d).get("fp4_level_ratio") not in (None, 1.0)
                else ""
            )
            + f", factors {_s(_map(d).get('provenance'))}"
            for g, d in _map(fp4.get("gpus")).items()
        )
        # plans stored before fp4_checkpoints named one checkpoint at the top level
        legacy = fp4.get("checkpoint")
        ckpts = _map(fp4.get("checkpoints")) or ({str(legacy): fp4} if legacy else {})
        loaded = "; ".join(
            f"{_s(repo)} ({_s(_map(c).get('format'))}, {_s(_map(c).get('bits_per_weight'))} "
            "bits per weight"
            + (
                f"; the weights of {_s(_map(c).get('weights_of'))}, the same architecture"
                if _map(c).get("weights_of")
                else ""
            )
            + (
                "; " + ", ".join(_s(g) for g in _list(_map(c).get("bf16_layers"))) + " kept in BF16"
                if _list(_map(c).get("bf16_layers"))
                else ""
            )
            + ")"
            for repo, c in ckpts.items()
        )
        lines.append(
            f"fp4: checkpoint {loaded}, KV {_s(fp4.get('kv_dtype'))}; {derates}: "
            f"{_s(fp4.get('note'))}"
        )
    return lines


def plan_assumed_notes(plan: Any) -> list[str]:
    """:func:`assumed_notes` of a :class:`planner.plan.Plan` (what ``make_plan`` sets
    as its ``assumed_notes``)."""
    classes = [c.model_dump(mode="json", by_alias=True) for c in plan.classes]
    return assumed_notes(classes, plan.assumptions)


def notes_of(doc: Mapping[str, Any]) -> list[str]:
    """A plan document's ``assumed_notes``; a document stored before plans carried
    them gets them computed from its classes and assumptions, the same way."""
    notes = doc.get("assumed_notes")
    if isinstance(notes, list):
        return [str(n) for n in notes]
    classes = doc.get("classes")
    return assumed_notes(classes if isinstance(classes, list) else [], _map(doc.get("assumptions")))
