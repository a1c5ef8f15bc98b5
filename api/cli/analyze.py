"""``fleetplan analyze``: chunk-budget, kv-transfer and pool-ratio tables (capacity and
gpus are registered from :mod:`api.cli.calibrate` and :mod:`api.cli.ranking`).

Each subcommand calls one function of :mod:`planner.analyses` and prints its
result as a table, or as JSON with ``--json`` (the result model's fields, full
precision). Bad input exits with status 2 and one line naming the option, e.g.
``fleetplan: error: --tp: 16 exceeds the scale-up domain of h100-sxm5-80gb (8)``.

Shared helpers (errors, JSON output, number options) come from :mod:`api.cli.common`.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from api.cli import common as cli
from api.cli.calibrate import gemm_gain_text, register_capacity
from api.cli.common import Subparsers
from api.cli.ranking import register_ranking
from api.services.catalog import shipped_catalog
from api.services.reports import render_table
from planner import analyses as an
from planner.errors import PlanningError

#: Analysis parameter (the PlanningError field) -> command-line option, for every command.
COMMON_OPTIONS = {**cli.REPLICA_OPTIONS, "prompt_tokens": "--prompt-tokens"}

CHUNK_BUDGET_OPTIONS = {
    **COMMON_OPTIONS,
    "overlap_factor": "--overlap",
    "tpot_budget_ms": "--tpot-budget-ms",
    "budgets": "--budgets",
    "budget_tokens": "--budgets",
}

KV_TRANSFER_OPTIONS = {
    **COMMON_OPTIONS,
    "links": "--link",
    "bandwidths_gb_per_s": "--link-gb-per-s",
    "bandwidth_gb_per_s": "--link-gb-per-s",
    "prefill_ms": "--prefill-ms",
    "overlap_fraction": "--overlap",
}

POOL_RATIO_OPTIONS = {
    **COMMON_OPTIONS,
    "workloads": "--workload",
    "context_tokens": "--workload",
    "mix": "--mix",
    "tpot_ms": "--tpot-ms",
    "tpot_budget_ms": "--tpot-ms",
    "decode_batch": "--decode-batch",
    "batch": "--decode-batch",
    "prefix_hit_rate": "--prefix-hit",
    "prefill_cost": "--prefill-cost",
}


def _run(options: Mapping[str, str], compute: Callable[[], Any]) -> Any:
    """Run an analysis; a PlanningError becomes a CliError naming the option."""
    try:
        return compute()
    except PlanningError as err:
        raise cli.planning_error(err, options) from None


# --------------------------------------------------------------------------- parsing


def _flat(groups: Iterable[Iterable[str]] | None) -> list[str]:
    """Flatten an ``action="append", nargs="+"`` option: [[a, b], [c]] -> [a, b, c]."""
    return [value for group in groups or () for value in group]


def _items(values: Iterable[str] | None) -> list[str]:
    """Flatten repeated and comma-separated option values: ``a,b c`` -> [a, b, c]."""
    out: list[str] = []
    for value in values or ():
        out += [part.strip() for part in value.split(",")]
    return out


def _parse_list(
    option: str,
    values: Iterable[str] | None,
    example: str,
    convert: Callable[[str], float],
    what: str,
) -> list[Any] | None:
    """Positive values from comma-separated option values, ``convert``ed; an item that
    does not convert or is not positive and finite is an error saying it is not ``what``
    (None when the option is absent)."""
    if values is None:
        return None
    out: list[Any] = []
    for item in _items(values):
        try:
            x = convert(item)
        except ValueError:
            x = math.nan
        if not (x > 0 and math.isfinite(x)):
            raise cli.CliError(option, f"{item!r} is not {what} (expected a list like {example})")
        out.append(x)
    return out


def parse_int_list(option: str, values: Iterable[str] | None, example: str) -> list[int] | None:
    """Positive integers from comma-separated values (None when the option is absent)."""
    return _parse_list(option, values, example, int, "a positive integer")


def parse_float_list(option: str, values: Iterable[str] | None, example: str) -> list[float] | None:
    """Positive finite numbers from comma-separated values (None when absent)."""
    return _parse_list(option, values, example, float, "a positive number")


def parse_mix(option: str, value: str | None) -> dict[str, float] | None:
    """``chat=0.8,agent=0.2`` -> {"chat": 0.8, "agent": 0.2} (None when absent)."""
    if value is None:
        return None
    mix: dict[str, float] = {}
    for item in _items([value]):
        name, sep, share = item.partition("=")
        try:
            w = float(share) if sep and name.strip() else math.nan
        except ValueError:
            w = math.nan
        if not (w >= 0 and math.isfinite(w)):
            raise cli.CliError(
                option, f"{item!r} is not class=share (expected e.g. chat=0.8,agent=0.2)"
            )
        if name.strip() in mix:
            raise cli.CliError(option, f"{name.strip()!r} appears twice")
        mix[name.strip()] = w
    return mix


# --------------------------------------------------------------------------- formatting


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value: float, digits: int = 1) -> str:
    return f"{value * 100:.{digits}f}%"


def _replica_line(r: an.ReplicaSummary, *, mbu: bool = False) -> str:
    line = (
        f"{r.model} on {r.tp} x {r.gpu} ({r.dtype} weights, {r.kv_dtype} KV), "
        f"MFU {r.mfu:.4g}"
        + (f" x measured GEMM rate x{r.gemm_lift:.2f}" if r.gemm_lift != 1.0 else "")
        + f" = {r.effective_tflops:,.1f} TFLOP/s"
    )
    if mbu:
        line += f", MBU {r.mbu:.4g} = {r.effective_bandwidth_tb_per_s:,.2f} TB/s"
    return line


def _summarize_chunks(chunks: list[int], shown: int = 6) -> str:
    if len(chunks) <= shown:
        return ", ".join(f"{t:,}" for t in chunks)
    head = ", ".join(f"{t:,}" for t in chunks[: shown - 2])
    return f"{head}, ..., {chunks[-2]:,}, {chunks[-1]:,}"


def render_chunk_budget(t: an.ChunkBudgetTable) -> str:
    """The chunk-budget table with a header (replica, T*) and the shrinking schedule."""
    r = t.replica
    head = [
        f"chunk budget: {_replica_line(r)}, overlap {r.overlap_factor:g}",
        f"prompt {t.prompt_tokens:,} tokens (mean context {t.context_tokens:,.0f}: "
        f"{t.flops_per_token_g:.2f} GFLOP/token), TPOT budget {t.tpot_budget_ms:g} ms",
        f"max free chunk T* = {t.max_free_chunk_tokens:,} tokens "
        "(engine setting: vLLM max_num_batched_tokens, SGLang chunked_prefill_size; "
        "first-order, at one GEMM rate)",
        "dense GEMMs " + gemm_gain_text(r.gemm_gain, r.gemm_lift),
        "",
    ]
    headers = [
        "budget tokens",
        "chunk ms",
        "step ms",
        "TPOT penalty",
        "chunks",
        "TTFT ms",
        "KV re-read GB",
        "KV re-read ms",
    ]
    rows = [
        [
            f"{row.budget_tokens:,}",
            _f(row.chunk_ms),
            _f(row.step_ms),
            _pct(row.tpot_penalty),
            f"{row.chunks:,}",
            _f(row.ttft_ms),
            _f(row.kv_reread_gb, 3),
            _f(row.kv_reread_ms, 2),
        ]
        for row in t.rows
    ]
    s = t.shrinking
    tail = [
        "",
        f"shrinking budget: {s.chunks:,} chunks of {s.first_chunk_tokens:,} -> "
        f"{s.last_chunk_tokens:,} tokens ({_summarize_chunks(s.chunk_tokens)}), "
        f"TTFT {s.ttft_ms:,.1f} ms, slowest step {s.max_step_ms:,.1f} ms",
        "chunk ms: a chunk of T tokens at the mean context; step ms: a decode step filling "
        "the TPOT budget plus that chunk; TTFT: ceil(P/T) steps, each chunk at its own context",
    ]
    return "\n".join([*head, render_table(headers, rows), *tail])


def render_kv_transfer(t: an.KvTransferTable) -> str:
    """The KV-transfer table with a header (cache size, prefill time) and notes."""
    head = [
        f"KV transfer: {t.model}, {t.prompt_tokens:,}-token prompt, {t.kv_dtype} KV: "
        f"{t.kv_bytes_per_token:,.0f} bytes/token = {t.kv_gb:.3f} GB",
    ]
    if t.prefill_ms is not None:
        src = "given"
        if t.prefill_replica is not None:
            r = t.prefill_replica
            src = f"{r.tp} x {r.gpu}, {r.dtype}, MFU {r.mfu:.4g}"
        head.append(
            f"prefill {t.prefill_ms:,.1f} ms ({src}); layer-wise streaming hides up to "
            f"{t.overlap_fraction:.0%} of a transfer behind the last "
            f"{t.num_layers - 1}/{t.num_layers} of the prefill"
        )
    head.append("")
    headers = ["link", "kind", "GB/s", "latency us", "links", "transfer ms", "exposed ms"]
    rows = [
        [
            row.link,
            row.kind,
            _f(row.bandwidth_gb_per_s),
            f"{row.latency_us:g}",
            str(row.parallel_links),
            _f(row.transfer_ms),
            _f(row.exposed_ms),
        ]
        for row in t.rows
    ]
    tail = ["", "GB/s: gigabytes per second per direction (1e9 bytes/s)"]
    tail += [f"note: {n}" for n in t.notes]
    return "\n".join([*head, render_table(headers, rows), *tail])


def _decode_label(row: an.PoolRatioRow, budget_given: bool) -> str:
    if row.decode_point is an.DecodePointSource.GIVEN:
        return "given"
    if row.tpot_budget_ms is None:
        return "batch given"
    return f"{'budget' if budget_given else 'SLO'} {row.tpot_budget_ms:g} ms"


def render_pool_ratio(t: an.PoolRatioTable, budget_given: bool = False) -> str:
    """The pool-ratio table, and the mix's blend and load shares when there is one."""
    head = [f"pool ratio: {_replica_line(t.replica, mbu=True)}; prefill cost: {t.prefill_cost}", ""]
    headers = [
        "workload",
        "prompt",
        "output",
        "prefix hit",
        "decode B",
        "TPOT ms",
        "B sized by",
        "prefill GPU-s",
        "decode GPU-s",
        "ratio",
    ]
    rows = [
        [
            row.workload,
            f"{row.prompt_tokens:,.0f}",
            f"{row.output_tokens:,.0f}",
            _pct(row.prefix_hit_rate, 0),
            str(row.decode_batch),
            _f(row.tpot_ms),
            _decode_label(row, budget_given),
            _f(row.prefill_gpu_s, 4),
            _f(row.decode_gpu_s, 4),
            _f(row.ratio, 2),
        ]
        for row in t.rows
    ]
    out = [*head, render_table(headers, rows)]
    if t.blend is not None:
        b = t.blend
        out += [
            "",
            f"mix (by requests): {b.prefill_gpu_s:.4f} prefill GPU-s and {b.decode_gpu_s:.4f} "
            f"decode GPU-s per request: ratio {b.ratio:.2f}",
            "",
            render_table(
                ["workload", "requests", "prefill load", "decode load"],
                [
                    [
                        s.workload,
                        _pct(s.request_share),
                        _pct(s.prefill_load_share),
                        _pct(s.decode_load_share),
                    ]
                    for s in b.shares
                ],
            ),
        ]
    out += [
        "",
        "GPU-s per request; ratio = prefill GPUs per decode GPU; "
        "decode GPU-s = tp x output x TPOT / B",
    ]
    out += [f"note: {n}" for n in t.notes]
    return "\n".join(out)


# --------------------------------------------------------------------------- commands


def _emit(args: argparse.Namespace, result: Any, render: Callable[[], str]) -> int:
    return cli.print_model(args.json, result, lambda _: render())


def cmd_chunk_budget(args: argparse.Namespace) -> int:
    budgets = parse_int_list("--budgets", args.budgets, "256,512,1024")
    catalog = shipped_catalog()
    table = _run(
        CHUNK_BUDGET_OPTIONS,
        lambda: an.chunk_budget_table(
            catalog,
            args.model,
            args.gpu,
            prompt_tokens=args.prompt_tokens,
            tpot_budget_ms=args.tpot_budget_ms,
            tp=args.tp,
            dtype=args.dtype,
            kv_dtype=args.kv_dtype,
            mfu=args.mfu,
            overlap_factor=args.overlap,
            budgets=budgets,
        ),
    )
    return _emit(args, table, lambda: render_chunk_budget(table))


def cmd_kv_transfer(args: argparse.Namespace) -> int:
    bandwidths = parse_float_list("--link-gb-per-s", args.link_gb_per_s, "400,64,25")
    links = _items(_flat(args.link)) if args.link is not None else None
    if args.gpu is None:
        for option, value in (("--tp", args.tp), ("--dtype", args.dtype), ("--mfu", args.mfu)):
            if value is not None:
                raise cli.CliError(
                    option,
                    "sets the prefill replica and needs --gpu (the KV format is --kv-dtype)",
                )
    catalog = shipped_catalog()
    table = _run(
        KV_TRANSFER_OPTIONS,
        lambda: an.kv_transfer_table(
            catalog,
            args.model,
            prompt_tokens=args.prompt_tokens,
            kv_dtype=args.kv_dtype,
            link_ids=links,
            bandwidths_gb_per_s=bandwidths,
            prefill_ms=args.prefill_ms,
            gpu_id=args.gpu,
            tp=1 if args.tp is None else args.tp,
            dtype=args.dtype or "bf16",
            mfu=args.mfu,
            overlap_fraction=args.overlap,
        ),
    )
    return _emit(args, table, lambda: render_kv_transfer(table))


def cmd_pool_ratio(args: argparse.Namespace) -> int:
    mix = parse_mix("--mix", args.mix)
    workloads = _items(_flat(args.workload))
    if not workloads and mix is None:
        raise cli.CliError("--workload", "give at least one workload (or a --mix)")
    catalog = shipped_catalog()
    table = _run(
        POOL_RATIO_OPTIONS,
        lambda: an.pool_ratio_table(
            catalog,
            args.model,
            args.gpu,
            workloads,
            tp=args.tp,
            dtype=args.dtype,
            kv_dtype=args.kv_dtype,
            mfu=args.mfu,
            mbu=args.mbu,
            tpot_ms=args.tpot_ms,
            decode_batch=args.decode_batch,
            prefix_hit_rate=args.prefix_hit,
            mix=mix,
            prefill_cost=args.prefill_cost,
        ),
    )
    budget_given = args.tpot_ms is not None
    return _emit(args, table, lambda: render_pool_ratio(table, budget_given))


# --------------------------------------------------------------------------- parser


def _replica_options(p: argparse.ArgumentParser, *, gpu_required: bool = True) -> None:
    p.add_argument("--model", required=True, help="model id (fleetplan catalog list models)")
    if gpu_required:
        p.add_argument("--gpu", required=True, help="GPU id (fleetplan catalog list gpus)")
        cli.add_number(
            p, "--tp", int, default=1, help="tensor parallelism (power of two, default 1)"
        )
        p.add_argument(
            "--dtype", default="bf16", help="weight/compute dtype: bf16, fp8 or fp4 (default bf16)"
        )
        cli.add_number(p, "--mfu", float, help="model FLOP utilization (default: the GPU's)")
    p.add_argument("--kv-dtype", default="bf16", help="KV-cache dtype: bf16 or fp8 (default bf16)")


def register_analyze(sub: Subparsers) -> None:
    """Add ``analyze chunk-budget|kv-transfer|pool-ratio|capacity``."""
    p = sub.add_parser(
        "analyze",
        help="cost-model analyses: chunk budgets, KV transfers, pool ratios, replica capacity",
        description="Cost-model analyses of one model on one GPU (tables, or JSON with --json).",
    )
    asub = p.add_subparsers(
        dest="analyze_command", metavar="{chunk-budget,kv-transfer,pool-ratio,capacity}"
    )
    asub.required = True

    cb = asub.add_parser(
        "chunk-budget",
        help="chunked prefill: TPOT penalty and TTFT per chunk budget, and T*",
        description=(
            "Chunked prefill with stall-free batching (DOMAIN.md section 3). chunk ms = compute "
            "of a T-token chunk at the prompt's mean context P/2; step ms = a mixed step whose "
            "decode part fills the TPOT budget: max(budget, chunk) + (1 - overlap) x "
            "min(budget, chunk); TPOT penalty = step / budget - 1; chunks = ceil(P/T); "
            "TTFT = the sum of those steps, each chunk at its own context; KV re-read = "
            "(P^2/(2T) - P/2) x KV bytes/token. T* = the largest chunk whose compute fits "
            "the budget."
        ),
    )
    _replica_options(cb)
    cli.add_number(cb, "--prompt-tokens", int, required=True, help="prompt length P (tokens)")
    cli.add_number(cb, "--tpot-budget-ms", float, required=True, help="TPOT budget of a step (ms)")
    cli.add_number(
        cb,
        "--overlap",
        float,
        help="overlap factor of chunk compute and decode memory time, 0-1 "
        "(1 = perfect; default: the GPU's catalog value)",
    )
    cb.add_argument(
        "--budgets",
        action="append",
        metavar="T,T,...",
        help="chunk budgets in tokens, comma-separated "
        "(default: 256, 512, ... up to the prompt, plus T*)",
    )
    cb.add_argument("--json", action="store_true", help="print JSON")
    cb.set_defaults(func=cmd_chunk_budget)

    kv = asub.add_parser(
        "kv-transfer",
        help="disaggregation: time to ship a prompt's KV cache over each link",
        description=(
            "KV-cache transfer of a disaggregated prefill (DOMAIN.md section 4): "
            "transfer = KV bytes / link bandwidth + latency; exposed = what layer-wise "
            "streaming leaves on TTFT (needs a prefill time: --prefill-ms, or --gpu to "
            "compute it). Bandwidths are gigaBYTES per second (GB/s), per direction."
        ),
    )
    _replica_options(kv, gpu_required=False)
    cli.add_number(kv, "--prompt-tokens", int, required=True, help="prompt length P (tokens)")
    kv.add_argument(
        "--link",
        action="append",
        nargs="+",
        metavar="LINK",
        help="catalog link id(s) (fleetplan catalog list links; per-direction GB/s); "
        "default: every catalog link",
    )
    kv.add_argument(
        "--link-gb-per-s",
        "--link-gbps",
        dest="link_gb_per_s",
        action="append",
        metavar="GB/s,...",
        help="link bandwidths in gigaBYTES per second (GB/s, not Gbit/s), comma-separated, "
        "e.g. 400,64,25 (--link-gbps is an alias)",
    )
    cli.add_number(kv, "--prefill-ms", float, help="prefill time the transfer overlaps (ms)")
    kv.add_argument("--gpu", help="compute the prefill time on this GPU (catalog id)")
    cli.add_number(kv, "--tp", int, help="tensor parallelism of the prefill replica (--gpu)")
    kv.add_argument("--dtype", help="weight dtype of the prefill replica (--gpu; default bf16)")
    cli.add_number(kv, "--mfu", float, help="MFU of the prefill replica (--gpu)")
    cli.add_number(
        kv,
        "--overlap",
        float,
        default=an.DEFAULT_KV_STREAM_OVERLAP,
        help="share of the transfer layer-wise streaming can hide, 0-1 "
        f"(default {an.DEFAULT_KV_STREAM_OVERLAP:g})",
    )
    kv.add_argument("--json", action="store_true", help="print JSON")
    kv.set_defaults(func=cmd_kv_transfer)

    pr = asub.add_parser(
        "pool-ratio",
        help="disaggregation: prefill GPUs per decode GPU, per workload and for a mix",
        description=(
            "Per-request GPU-seconds (DOMAIN.md section 5): prefill = the prompt's new "
            "tokens priced by the cost model; decode = tp x G x TPOT / B. Without "
            "--tpot-ms/--decode-batch, each workload decodes at its own point: B = the "
            "largest batch that fits memory at context P + G/2 and keeps the step within the "
            "SLO TPOT, TPOT = the step time at B."
        ),
    )
    _replica_options(pr)
    cli.add_number(pr, "--mbu", float, help="memory-bandwidth utilization (default: the GPU's)")
    pr.add_argument(
        "--workload",
        action="append",
        nargs="+",
        metavar="W",
        help="workload id(s) (fleetplan catalog list workloads)",
    )
    cli.add_number(
        pr,
        "--tpot-ms",
        float,
        help="decode TPOT (ms): with --decode-batch, the operating point as given; "
        "alone, the TPOT budget replacing each workload's SLO",
    )
    cli.add_number(
        pr,
        "--decode-batch",
        int,
        help="decode batch B: with --tpot-ms as given; alone, TPOT = the step time at B",
    )
    cli.add_number(
        pr,
        "--prefix-hit",
        float,
        help="share of each prompt already cached, 0-1 (default: each workload's)",
    )
    pr.add_argument(
        "--mix",
        metavar="W=SHARE,...",
        help="traffic mix by request count, e.g. chat=0.8,agent=0.2 (normalized)",
    )
    pr.add_argument(
        "--prefill-cost",
        default=an.PrefillCost.ROOFLINE.value,
        help="roofline (default: attention, weight-read floor, overhead) or first-order "
        "(P x (1 - hit) x 2 N_active / F_eff, DOMAIN.md section 5)",
    )
    pr.add_argument("--json", action="store_true", help="print JSON")
    pr.set_defaults(func=cmd_pool_ratio)

    register_capacity(asub)
    register_ranking(asub)


__all__ = [
    "cmd_chunk_budget",
    "cmd_kv_transfer",
    "cmd_pool_ratio",
    "parse_float_list",
    "parse_int_list",
    "parse_mix",
    "register_analyze",
    "render_chunk_budget",
    "render_kv_transfer",
    "render_pool_ratio",
]
