"""``fleetplan analyze gpus``: every catalog GPU priced on one workload, side by side.

Calls :func:`api.services.analyses.gpu_ranking` (``planner.gpu_ranking``) and prints a
table, or JSON with ``--json``. Bad input exits with status 2 and one line naming the
option, e.g. ``fleetplan: error: --model: unknown model 'nope' (fleetplan catalog list
models)``.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from api.cli import common as cli
from api.schemas.analyses import GpuRanking, GpuRankingRequest
from api.services.analyses import gpu_ranking
from api.services.catalog import shipped_catalog
from api.services.reports import render_table
from planner import gpu_ranking as gr
from planner.errors import PlanningError

#: Request field -> command-line option.
RANKING_OPTIONS = {
    "model": "--model",
    "prompt_tokens": "--prompt-tokens",
    "output_tokens": "--output-tokens",
    "reference": "--reference",
    "dtype": "--dtype",
}


def render_ranking(r: GpuRanking) -> str:
    """The ranking as a table with a heading, the GPUs that cannot run the workload and
    the note on what the numbers are."""
    head = (
        f"{r.model}, {r.prompt_tokens:,} prompt / {r.output_tokens:,} output tokens, every "
        f"prompt queued: predicted output tokens/s per GPU, relative to {r.reference}"
        + (f", every GPU in {r.dtype.value.upper()}" if r.dtype is not None else "")
    )
    table = gr.ranking_table(r.gpus, r.reference)
    lines = [head, "", render_table(table[0], table[1:])]
    if r.cannot_run:
        lines += ["", "cannot run it in any tried configuration: " + ", ".join(r.cannot_run)]
    lines += ["", textwrap.fill(r.note, width=100)]
    return "\n".join(lines)


def cmd_gpus(args: argparse.Namespace) -> int:
    fields = {
        "model": args.model,
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "reference": args.reference,
        "dtype": args.dtype,
    }
    req = cli.validated_request(GpuRankingRequest, fields, RANKING_OPTIONS)
    try:
        ranking = gpu_ranking(None, req, shipped_catalog())
    except PlanningError as err:
        raise cli.planning_error(err, RANKING_OPTIONS) from None
    return cli.print_model(args.json, ranking, render_ranking)


def register_ranking(asub: Any) -> None:
    """Add ``analyze gpus`` to the ``analyze`` subparsers."""
    p = asub.add_parser(
        "gpus",
        help="every catalog GPU on one workload: predicted tokens/s per GPU, relative to one",
        description=(
            "Every catalog GPU priced on one workload (planner/gpu_ranking.py): the "
            "predicted output tokens/s per GPU at its best tensor parallelism (1-8) and "
            "weight format, every prompt queued, relative to a reference GPU, with what its "
            "factors rest on (provenance, sigma_log) and, for a GPU measured on MoE LLMs "
            "only, the GPU a dense LLM's level is borrowed from. Default workload: "
            f"MLPerf's {gr.RANKING_MODEL} shape ({gr.RANKING_PROMPT_TOKENS} / "
            f"{gr.RANKING_OUTPUT_TOKENS} tokens)."
        ),
    )
    p.add_argument("--model", help=f"model id (default {gr.RANKING_MODEL})")
    cli.add_number(
        p, "--prompt-tokens", int, help=f"prompt length (default {gr.RANKING_PROMPT_TOKENS})"
    )
    cli.add_number(
        p,
        "--output-tokens",
        int,
        help=f"output length, >= 2 (default {gr.RANKING_OUTPUT_TOKENS})",
    )
    p.add_argument(
        "--reference", help=f"GPU id the others are compared with (default {gr.RANKING_REFERENCE})"
    )
    p.add_argument(
        "--dtype",
        help="rank every GPU in this weight format, like for like: fp4, fp8 or bf16 "
        "(default: each GPU at its best of the three)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_gpus)


__all__ = ["RANKING_OPTIONS", "cmd_gpus", "register_ranking", "render_ranking"]
