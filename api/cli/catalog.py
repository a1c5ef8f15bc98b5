"""``fleetplan catalog list|show``: browse the shipped catalog."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

import yaml
from pydantic import BaseModel

from api.cli.common import EXIT_OK, Subparsers, print_json
from api.services.catalog import KIND_SCHEMAS, shipped_catalog
from api.services.reports import render_table
from catalog.schema import Catalog, Gpu, Link, Model, Workload
from planner.errors import UnknownEntryError


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


# --------------------------------------------------------------------------- catalog

KINDS = tuple(KIND_SCHEMAS)
SINGULAR = {"gpus": "GPU", "models": "model", "workloads": "workload", "links": "link"}


def register_catalog(sub: Subparsers) -> None:
    p = sub.add_parser("catalog", help="browse the shipped catalog")
    csub = p.add_subparsers(dest="catalog_command", metavar="{list,show}")
    csub.required = True

    ls = csub.add_parser("list", help="list entries of one kind as a table")
    ls.add_argument("kind", choices=KINDS)
    ls.add_argument("--json", action="store_true", help="print the entries as JSON")
    ls.set_defaults(func=cmd_catalog_list)

    show = csub.add_parser("show", help="print one entry (YAML, or --json)")
    show.add_argument("kind", choices=KINDS)
    show.add_argument("id")
    show.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    show.set_defaults(func=cmd_catalog_show)


def _entries(catalog: Catalog, kind: str) -> list[BaseModel]:
    return [entry for _, entry in sorted(getattr(catalog, kind).items())]


def gpu_rows(gpus: Sequence[Gpu]) -> tuple[list[str], list[list[str]]]:
    headers = ["id", "name", "bf16 TFLOP/s", "fp8 TFLOP/s", "mem GB", "BW TB/s", "domain", "$/h"]
    rows = [
        [
            g.id,
            g.name,
            _num(g.bf16_dense_tflops),
            _num(g.fp8_dense_tflops),
            _num(g.memory_gb),
            _num(g.mem_bw_tbps, 2),
            str(g.scale_up_domain_size),
            ("~" if g.price.estimate else "") + f"{g.price.usd_per_hour:.2f}",
        ]
        for g in gpus
    ]
    return headers, rows


def model_rows(models: Sequence[Model]) -> tuple[list[str], list[list[str]]]:
    headers = ["id", "layers", "params (B)", "active (B)", "KV bytes/token (bf16)"]
    rows = [
        [
            m.id,
            str(m.num_layers),
            _num(m.reference.total_params_b, 1),
            _num(m.reference.active_params_b, 1),
            _num(m.reference.kv_bytes_per_token_bf16),
        ]
        for m in models
    ]
    return headers, rows


def workload_rows(workloads: Sequence[Workload]) -> tuple[list[str], list[list[str]]]:
    headers = ["id", "prompt mean/p90", "output mean/p90", "prefix hit", "SLO TTFT/TPOT ms"]
    rows = [
        [
            w.id,
            f"{w.prompt_tokens.mean_tokens:.0f}/{w.prompt_tokens.p90_tokens:.0f}",
            f"{w.output_tokens.mean_tokens:.0f}/{w.output_tokens.p90_tokens:.0f}",
            f"{w.prefix_hit_rate:.0%}",
            f"{w.slo.ttft_ms:g}/{w.slo.tpot_ms:g} @p{w.slo.percentile:g}",
        ]
        for w in workloads
    ]
    return headers, rows


def link_rows(links: Sequence[Link]) -> tuple[list[str], list[list[str]]]:
    headers = ["id", "kind", "GB/s", "latency us", "name"]
    rows = [
        [lk.id, str(lk.kind), _num(lk.bandwidth_gb_per_s, 1), f"{lk.latency_us:g}", lk.name]
        for lk in links
    ]
    return headers, rows


ROWS: dict[str, Callable[[Any], tuple[list[str], list[list[str]]]]] = {
    "gpus": gpu_rows,
    "models": model_rows,
    "workloads": workload_rows,
    "links": link_rows,
}


def render_catalog_table(kind: str, entries: Sequence[BaseModel]) -> str:
    headers, rows = ROWS[kind](entries)
    return render_table(headers, rows)


def cmd_catalog_list(args: argparse.Namespace) -> int:
    entries = _entries(shipped_catalog(), args.kind)
    if args.json:
        print_json([e.model_dump(mode="json") for e in entries])
    else:
        print(render_catalog_table(args.kind, entries))
    return EXIT_OK


def cmd_catalog_show(args: argparse.Namespace) -> int:
    by_id: dict[str, BaseModel] = getattr(shipped_catalog(), args.kind)
    entry = by_id.get(args.id)
    if entry is None:
        known = ", ".join(sorted(by_id)) or "none"
        raise UnknownEntryError.for_field(
            "id", f"unknown {SINGULAR[args.kind]} {args.id!r}; known: {known}"
        )
    data = entry.model_dump(mode="json")
    if args.json:
        print_json(data)
    else:
        print(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), end="")
    return EXIT_OK
