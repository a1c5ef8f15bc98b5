"""``fleetplan analyze capacity``, ``fleetplan calibrate`` and ``fleetplan calibrations``.

- ``analyze capacity``: one replica's predicted steady state
  (:mod:`planner.capacity_analysis`), as text or ``--json``;
- ``calibrate FILE...``: read measured results (``vllm bench serve --save-result``
  JSON, genai-perf/AIPerf profile exports, the CSV of
  :data:`planner.calibration.CSV_COLUMNS`, fleetplan's measurements JSON), fit the
  efficiency factors per GPU and dtype, print the fit and every point's residuals,
  and store the named calibration as ``$FLEETPLAN_CALIBRATION_DIR/NAME.yaml``
  (default ``./calibrations``; ``--dry-run`` stores nothing). A bad file is
  refused with its file, line and reason, and nothing is stored;
- ``calibrations list|show``: the stored calibrations.

Errors exit 2 with one line naming the option (``fleetplan: error: --gpu: ...``);
measurement problems name ``file:line``.

Shared helpers (errors, JSON output, number options) come from :mod:`api.cli.common`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from api.cli import common as cli
from api.cli.common import Subparsers
from api.schemas.analyses import CapacityRequest
from api.services import calibrations as cb
from api.services.analyses import replica_capacity
from api.services.catalog import shipped_catalog
from api.services.reports import render_table
from planner import architecture as arch
from planner.errors import PlanningError

if TYPE_CHECKING:
    pass
    from api.schemas.analyses import CapacityAnalysis, ReplicaSummary
    from api.schemas.calibrations import Calibration

CAPACITY_OPTIONS = {
    **cli.REPLICA_OPTIONS,
    "step_overhead_ms": "--step-overhead-ms",
    "overlap_factor": "--overlap",
    "prompt_tokens": "--prompt-tokens",
    "output_tokens": "--output-tokens",
    "ttft_ms": "--ttft-ms",
    "tpot_ms": "--tpot-ms",
    "concurrency": "--concurrency",
    "request_rate_rps": "--request-rate",
    "token_budget": "--token-budget",
    "max_batch": "--max-batch",
    "calibration": "--calibration",
    "engine": "--engine",
}


# --------------------------------------------------------------------------- analyze capacity


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def gemm_gain_text(gains: list[float], lift: float = 1.0) -> str:
    """The replica's measured GEMM rate (``lift`` x the MFU's at 512 tokens) and its gain
    by step size, for the analyses' headers."""
    rate = (
        f"at x{lift:.2f} the MFU's rate at 512 tokens (measured kernels), "
        if lift != 1.0
        else "at the MFU's rate at 512 tokens, "
    )
    if not gains:
        return rate + "the same at every step size (no measured gain with tokens per step)"
    at = " / ".join(f"x{g:.2f}" for g in gains)
    return f"{rate}{at} faster at 1,024 / 2,048 / 4,096 / 8,192 tokens per step than at 512"


def render_capacity(a: CapacityAnalysis) -> str:
    r, x = a.replica, a.result
    cal = f", calibration {a.calibration}" if a.calibration else ""
    load = {
        "max_throughput": "maximum throughput (every request queued)",
        "concurrency": f"closed loop of {x.concurrency:g} users" if x.concurrency else "",
        "rate": "open loop at the given request rate",
        "slo": "highest throughput meeting the SLOs (means)",
    }[x.mode.value]
    bound = x.bound.value + (f" ({x.slo_binding})" if x.slo_binding else "")
    lines = [
        f"capacity: {r.model} on {r.tp} x {r.gpu} ({r.dtype} weights, {r.kv_dtype} KV, "
        f"{r.engine}), "
        f"MFU {r.mfu:.4g}, MBU {r.mbu:.4g}, step overhead {r.step_overhead_ms:g} ms"
        + (
            f" + {r.step_layer_floor_ms:.2f} ms layer floor"
            f" = {r.step_overhead_ms + r.step_layer_floor_ms:.2f} ms"
            if r.step_layer_floor_ms
            else ""
        )
        + cal,
        "dense GEMMs " + gemm_gain_text(r.gemm_gain, r.gemm_lift),
        *(
            [
                f"BF16 GEMMs  {r.bf16_gemm_params_b:.2f}B GEMM parameters kept in BF16 by the "
                f"{r.dtype} checkpoint (its lm_head and any BF16 layers): each FLOP "
                f"x{r.bf16_gemm_time_ratio:.2f} a {r.dtype} FLOP's time"
            ]
            if r.bf16_gemm_params_b
            else []
        ),
        *(
            [
                f"each decoding sequence adds {r.decode_sequence_ms:.3f} ms to a step beyond "
                "its KV read (fitted to batch sweeps, this GPU's or a sibling's as the catalog's "
                "decode_sequence_cost.source says)"
            ]
            if r.decode_sequence_ms
            else []
        ),
        *(
            [
                f"each step pays a {r.step_layer_floor_ms:.2f} ms layer floor beyond its "
                "kernels and the step overhead (fitted per layer to batch sweeps, this GPU's "
                "or a sibling's as the catalog's decode_sequence_cost.source says)"
            ]
            if r.step_layer_floor_ms
            else []
        ),
        *([experts_read_text(r, x.batch)] if r.num_experts else []),
        f"requests of {x.prompt_tokens:,} prompt + {x.output_tokens:,} output tokens, "
        f"token budget {x.token_budget:,} per step; {load}",
        "",
        f"output tokens/s     {_f(x.output_tokens_per_s)} ({_f(x.output_tokens_per_s_per_gpu)} "
        "per GPU)",
        f"requests/s          {_f(x.requests_per_s, 3)}",
        f"batch               {_f(x.batch)} decoding, {_f(x.resident_sequences)} resident "
        f"(the KV cache holds {x.max_resident_sequences:,})",
        f"concurrency         {_f(x.concurrency)}",
        f"TTFT ms             {_f(x.ttft_ms)} (prefill {_f(x.prefill_ms)})",
        f"TPOT ms             {_f(x.tpot_ms, 2)}",
        f"prefill per step    {_f(x.prefill_tokens_per_step)} tokens "
        f"({x.prefill_budget_utilization:.0%} of the budget left by decodes)",
        f"bound               {bound}; steps are {x.step_bound.value}-bound"
        + ("" if x.saturated else "; not saturated"),
    ]
    if x.slo_met is not None:
        lines.append(f"SLOs met            {'yes' if x.slo_met else 'no'}")
    from planner.risk import Z_BAND

    f = a.factors
    if f is not None:
        if f.provenance == "fitted":
            src = f"fitted to {f.points} points"
        elif f.provenance == "scaled":
            src = f"analogy scaled x{f.level_scale:.2f} to {f.points} points"
        else:
            src = f"set by analogy x{f.level_scale:.2f} (no measurement)"
        lines.append(f"factors             {src}, sigma_log {f.sigma_log:.3f}")
        if f.moe_level_ratio != 1.0:
            lines.append(
                f"{'':20}MoE LLMs at x{f.moe_level_ratio:.2f} of that level on this GPU "
                "(measured; the catalog's MFU and MBU above include it)"
            )
        if f.dense_level_from is not None:
            judged = (
                "its level on them stands for this dense LLM (no measured GPU judges it)"
                if f.dense_level_from == "self"
                else f"its level for this dense LLM is judged by {f.dense_level_from}'s "
                "measured level, never above it"
            )
            lines.append(f"{'':20}measured on mixture-of-experts LLMs only: {judged}")
        if f.fp4_level_ratio != 1.0:
            lines.append(
                f"{'':20}FP4 runs measured at x{f.fp4_level_ratio:.2f} the assumed FP4 "
                "derates (GEMMs at most 2x FP8, reads at most 0.7 of peak)"
            )
        if f.requests_per_s_band is not None:
            lo, hi = f.requests_per_s_band
            lines.append(
                f"{f.band_confidence:.0%} band".ljust(20)
                + f"requests/s {_f(lo, 3)}-{_f(hi, 3)} (x exp(+/-{Z_BAND:.3f} x sigma_log))"
            )
    lines += [f"note: {n}" for n in x.notes]
    return "\n".join(lines)


def experts_read_text(r: ReplicaSummary, batch: float) -> str:
    """The capacity line on a MoE replica's expert reads: the distinct routed experts a
    decode-only step of the mean decode ``batch`` (one token per sequence, at least one)
    reads per MoE layer (:func:`planner.architecture.distinct_experts` at the replica's
    routing exponent), against uniform routing's count. Steps with a prefill chunk, draft
    tokens or pipeline stages price their own token counts."""
    e, k, a = r.num_experts, r.experts_per_token, r.routing_exponent
    n = max(batch, 1.0)
    head = (
        f"MoE experts {arch.distinct_experts(e, k, n, a):.0f} of {e} routed experts per MoE "
        f"layer in a decode-only step of {n:,.0f} tokens"
    )
    if a == 0:
        return head + " (uniform routing)"
    return (
        f"{head} ({arch.distinct_experts(e, k, n):.0f} with uniform routing; routing "
        f"exponent {a:g}, as the catalog's moe.routing.source says)"
    )


def cmd_capacity(args: argparse.Namespace) -> int:
    fields = {
        "model": args.model,
        "gpu": args.gpu,
        "tp": args.tp,
        "dtype": args.dtype,
        "kv_dtype": args.kv_dtype,
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "ttft_ms": args.ttft_ms,
        "tpot_ms": args.tpot_ms,
        "concurrency": args.concurrency,
        "request_rate_rps": args.request_rate,
        "token_budget": args.token_budget,
        "max_batch": args.max_batch,
        "mfu": args.mfu,
        "mbu": args.mbu,
        "step_overhead_ms": args.step_overhead_ms,
        "overlap_factor": args.overlap,
        "calibration": args.calibration,
        "engine": args.engine,
    }
    req = cli.validated_request(CapacityRequest, fields, CAPACITY_OPTIONS)
    try:
        analysis = replica_capacity(None, req, shipped_catalog(), cli.load_settings())
    except PlanningError as err:
        raise cli.planning_error(err, CAPACITY_OPTIONS) from None
    return cli.print_model(args.json, analysis, render_capacity)


def register_capacity(asub: Any) -> None:
    """Add ``analyze capacity`` to the ``analyze`` subparsers."""
    p = asub.add_parser(
        "capacity",
        help="one replica's throughput, batch, TTFT and TPOT under continuous batching",
        description=(
            "The predicted steady state of one replica running continuous batching with "
            "chunked prefill (planner/capacity.py): output tokens/s (replica and per GPU), "
            "requests/s, the decode batch, mean TTFT and TPOT, and what bounds it (compute, "
            "memory_bandwidth, kv_capacity, max_batch or slo). Without SLOs, concurrency or "
            "rate: the maximum throughput (every request queued); --concurrency: a closed "
            "loop of C users; --request-rate: an open loop; --ttft-ms/--tpot-ms: the highest "
            "throughput whose mean TTFT/TPOT meet them."
        ),
    )
    p.add_argument("--model", required=True, help="model id (fleetplan catalog list models)")
    p.add_argument("--gpu", required=True, help="GPU id (fleetplan catalog list gpus)")
    cli.add_number(p, "--tp", int, default=1, help="tensor parallelism (default 1)")
    p.add_argument("--dtype", default="bf16", help="weight dtype: bf16, fp8 or fp4 (default bf16)")
    p.add_argument("--kv-dtype", help="KV-cache dtype (default: bf16 with bf16 weights, else fp8)")
    cli.add_number(p, "--prompt-tokens", int, required=True, help="prompt length ISL (tokens)")
    cli.add_number(
        p, "--output-tokens", int, required=True, help="output length OSL (tokens, >= 2)"
    )
    cli.add_number(p, "--ttft-ms", float, help="SLO on mean TTFT (ms)")
    cli.add_number(p, "--tpot-ms", float, help="SLO on mean TPOT (ms)")
    cli.add_number(p, "--concurrency", float, help="users of a closed loop")
    cli.add_number(p, "--request-rate", float, help="open-loop arrival rate (requests/s)")
    cli.add_number(
        p,
        "--token-budget",
        int,
        help="tokens per engine step (vLLM max_num_batched_tokens; default 8192)",
    )
    cli.add_number(
        p,
        "--max-batch",
        int,
        help="the engine's max_num_seqs (default: the engine's own, vLLM 1,024 on GPUs of "
        "70 GiB or more other than A100 and 256 elsewhere, TensorRT-LLM 2,048, SGLang none)",
    )
    cli.add_number(p, "--mfu", float, help="prefill MFU (default: GPU's)")
    cli.add_number(p, "--mbu", float, help="decode MBU (default: GPU's)")
    cli.add_number(
        p, "--step-overhead-ms", float, help="per-step overhead, ms (default: the GPU's)"
    )
    cli.add_number(p, "--overlap", float, help="overlap factor 0-1 (default: GPU's)")
    p.add_argument(
        "--calibration", help="use a stored calibration's factors (fleetplan calibrations list)"
    )
    p.add_argument(
        "--engine",
        help="serving engine: vllm (default, as plans launch), sglang or trtllm (its memory "
        "share, attention precision and KV admission: trtllm reserves each request's whole "
        "output, GUARANTEED_NO_EVICT)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_capacity)


# --------------------------------------------------------------------------- calibrate


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _v(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def render_calibration(cal: Calibration, *, residuals: bool = True) -> str:
    out = [f"calibration {cal.name} ({cal.created_at})"]
    if cal.description:
        out.append(cal.description)
    out.append("")
    headers = [
        "gpu",
        "dtype",
        "engine",
        "points",
        "MFU",
        "MBU",
        "overhead ms",
        "error before",
        "error after",
        "sigma_log",
    ]
    rows = []
    for f in cal.factors:

        def mark(name: str, text: str, f=f) -> str:
            return text if f.determined.get(name, True) else f"{text}*"

        rows.append(
            [
                f.gpu,
                f.dtype.value if f.dtype else "all",
                f.engine or "all",
                str(f.points),
                mark("prefill_mfu", f"{f.prefill_mfu:.3f}"),
                mark("decode_mbu", f"{f.decode_mbu:.3f}"),
                mark("step_overhead_ms", f"{f.step_overhead_ms:.2f}"),
                f"{_pct(f.median_ape_before)} / {_pct(f.worst_ape_before)}",
                f"{_pct(f.median_ape_after)} / {_pct(f.worst_ape_after)}",
                f"{cb.group_sigma_log(cal, f):.3f}",
            ]
        )
    out.append(render_table(headers, rows))
    out.append(
        "errors: median / worst |predicted / measured - 1| over the group's measured values; "
        "*: not determined by the data (stays near the catalog's value); sigma_log: residual "
        "spread of ln(measured / predicted) after the fit, which the plans' capacity bands "
        "use (their derate uses the downside spread, at most it: "
        "planner.calibration.group_spreads)"
    )
    if residuals and cal.residuals:
        out += ["", "residuals per point:"]
        rh = [
            "point",
            "gpu",
            "model",
            "quantity",
            "measured",
            "before",
            "after",
            "err before",
            "err after",
        ]
        rr = [
            [
                r.point,
                r.gpu,
                r.model,
                r.quantity,
                _v(r.measured),
                _v(r.predicted_before),
                _v(r.predicted_after),
                _pct(r.ape_before),
                _pct(r.ape_after),
            ]
            for r in cal.residuals
        ]
        out.append(render_table(rh, rr))
    return "\n".join(out)


def cmd_calibrate(args: argparse.Namespace) -> int:
    directory = args.dir or cli.load_settings().calibration_dir
    try:
        cb.check_name(args.name)
    except PlanningError as err:
        raise cli.CliError("--name", err.issues[0][1]) from None
    defaults = {
        "model": args.model,
        "gpu": args.gpu,
        "tp": args.tp,
        "dtype": args.dtype,
        "engine": args.engine,
    }
    catalog = shipped_catalog()
    try:
        cal = cb.fit_measurement_files(
            args.files,
            args.name,
            catalog,
            defaults,
            per_engine=args.per_engine,
            description=args.description or "",
        )
    except cb.MeasurementError as err:
        if err.issues and err.issues[0][0] == "files":
            raise cli.CliError("FILE", err.issues[0][1]) from None
        where, reason = err.issues[0]
        more = f" (and {len(err.issues) - 1} more problems)" if len(err.issues) > 1 else ""
        raise cli.CliError(where, f"{reason}{more}; nothing stored") from None
    except PlanningError as err:
        raise cli.planning_error(err, {"name": "--name"}) from None
    path = None
    if not args.dry_run:
        path = cb.save_to_store(cal, directory)
    if args.json:
        data = cal.model_dump(mode="json")
        data["stored_at"] = str(path) if path else None
        cli.print_json(data)
    else:
        print(render_calibration(cal))
        print()
        print(f"stored as {path}" if path else "dry run: nothing stored")
    return cli.EXIT_OK


def register_calibrate(sub: Subparsers) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit the efficiency factors to measured serving results and store them",
        description=(
            "Read measured results (vllm bench serve --save-result JSON, genai-perf/AIPerf "
            "profile exports, CSV with columns "
            f"{','.join(cb.CSV_COLUMNS)}, or fleetplan's measurements JSON), fit prefill MFU, "
            "decode MBU and per-step overhead per GPU and dtype by least squares on the "
            "log ratio of predicted to measured values, print the fit and every point's "
            "residuals, and store the calibration as $FLEETPLAN_CALIBRATION_DIR/NAME.yaml "
            "(default ./calibrations). A plan request uses it with `calibration: NAME`. "
            "Any bad file is refused with its file, line and reason; nothing is stored."
        ),
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="measurement files (.csv or .json)")
    p.add_argument("--name", required=True, help="name to store the calibration under")
    p.add_argument("--model", help="model, for files that do not say it (vLLM, genai-perf)")
    p.add_argument("--gpu", help="GPU id, for files that do not say it")
    cli.add_number(p, "--tp", int, help="tensor parallelism, likewise")
    p.add_argument("--dtype", help="weight dtype, likewise")
    p.add_argument("--engine", help="serving engine (vllm, sglang, trtllm...), likewise")
    p.add_argument(
        "--per-engine", action="store_true", help="fit separate factors per engine as well"
    )
    p.add_argument("--description", help="a note stored with the calibration")
    p.add_argument("--dir", help="calibration directory (default $FLEETPLAN_CALIBRATION_DIR)")
    p.add_argument("--dry-run", action="store_true", help="fit and print, store nothing")
    p.add_argument("--json", action="store_true", help="print the calibration as JSON")
    p.set_defaults(func=cmd_calibrate)


# --------------------------------------------------------------------------- calibrations


def cmd_calibrations_list(args: argparse.Namespace) -> int:
    directory = args.dir or cli.load_settings().calibration_dir
    cals = []
    for name in cb.store_names(directory):
        try:
            cals.append(cb.load_from_store(name, directory))
        except PlanningError as err:
            raise cli.planning_error(err, {}) from None
    if args.json:
        cli.print_json([c.summary() for c in cals])
        return cli.EXIT_OK
    if not cals:
        print(f"no calibrations in {cb.store_dir(directory)}")
        return cli.EXIT_OK
    rows = [
        [
            c.name,
            c.created_at,
            ", ".join(
                f"{f.gpu} {f.dtype.value if f.dtype else ''}".strip()
                + (f" ({f.engine})" if f.engine else "")
                for f in c.factors
            ),
            str(sum(f.points for f in c.factors)),
        ]
        for c in cals
    ]
    print(render_table(["name", "created", "groups", "points"], rows))
    return cli.EXIT_OK


def cmd_calibrations_show(args: argparse.Namespace) -> int:
    directory = args.dir or cli.load_settings().calibration_dir
    try:
        cal = cb.load_from_store(args.name, directory)
    except PlanningError as err:
        raise cli.planning_error(err, {"calibration": "name"}) from None
    return cli.print_model(
        args.json, cal, lambda c: render_calibration(c, residuals=args.residuals)
    )


def register_calibrations(sub: Subparsers) -> None:
    csub = cli.command_group(
        sub, "calibrations", "stored calibrations ($FLEETPLAN_CALIBRATION_DIR)"
    )
    ls = csub.add_parser("list", help="stored calibrations")
    ls.add_argument("--dir", help="calibration directory (default $FLEETPLAN_CALIBRATION_DIR)")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=cmd_calibrations_list)
    show = csub.add_parser("show", help="one calibration: factors, errors, residuals")
    show.add_argument("name")
    show.add_argument("--dir", help="calibration directory (default $FLEETPLAN_CALIBRATION_DIR)")
    show.add_argument("--residuals", action="store_true", help="also list every residual")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=cmd_calibrations_show)


__all__ = [
    "cmd_calibrate",
    "cmd_capacity",
    "register_calibrate",
    "register_calibrations",
    "register_capacity",
    "render_calibration",
    "render_capacity",
]
