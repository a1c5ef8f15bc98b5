"""Copy the usable public measurements into ``catalog/measurements/reference.json``.

Reads ``../shared/reference/measurements-calibration.json`` (or the path given),
maps each entry's hardware and model names to catalog ids, converts it to a
:class:`planner.calibration.Measurement` (keeping its id and source) and writes
the usable subset with the counts of what was skipped and why. Run it again when
the shared file changes; the output is deterministic::

    .venv/bin/python scripts/import_reference_measurements.py [SOURCE] [--out PATH]

The repository never reads the shared file at test or run time: only this script
does, and its output is committed.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from catalog.loader import load_catalog  # noqa: E402
from planner.calibration import parse_json  # noqa: E402

DEFAULT_SOURCE = ROOT.parent / "shared" / "reference" / "measurements-calibration.json"
DEFAULT_OUT = ROOT / "catalog" / "measurements" / "reference.json"

#: Hardware names in the source -> catalog GPU id, with what the mapping assumes.
HARDWARE = {
    "H100 80GB HBM3": ("h100-sxm5-80gb", "HBM3 80 GB is the SXM5 part"),
    "NVIDIA H100 80GB": ("h100-sxm5-80gb", "form factor not stated; SXM5 assumed"),
    "NVIDIA H100 SXM 80GB": ("h100-sxm5-80gb", ""),
    "H200 141GB (doc label: H200 131GB HBM3)": ("h200-sxm-141gb", ""),
    "NVIDIA H200": ("h200-sxm-141gb", "form factor not stated; SXM assumed"),
    "NVIDIA A100 80GB": (
        "a100-sxm-80gb",
        "form factor not stated (PCIe and SXM4 share the 312 TFLOP/s bf16 peak; SXM4's "
        "2.04 TB/s vs PCIe's 1.94 TB/s shifts the fitted MBU by 5%)",
    ),
    "NVIDIA A100 SXM 80GB": ("a100-sxm-80gb", ""),
}

#: Model names in the source -> catalog model id (same architecture).
MODELS = {
    "LLaMA 3.1 70B": "llama-3.1-70b",
    "LLaMA 3.1 8B": "llama-3.1-8b",
    "Llama-3.3-70B-Instruct (same arch as Llama-3.1-70B)": "llama-3.1-70b",
    "Llama-3 70B": "llama-3.1-70b",
    "Llama-3.1 8B": "llama-3.1-8b",
    "Mixtral-8x7B": "mixtral-8x7b",
    "meta-llama/Llama-2-7b-hf": "llama-2-7b",
    "meta-llama/Llama-2-70b-hf": "llama-2-70b",
}

PRECISION = {
    "BF16": "bf16",
    "FP16": "bf16",  # same tensor-core peak and bytes as bf16
    "FP8": "fp8",
    "default (BF16 assumed)": "bf16",
}

#: A point of an open-loop sweep whose TTFT is this many times the sweep's lowest is
#: overloaded: its queue grew through the run, so its TTFT measures the run's length.
OVERLOAD_TTFT_RATIO = 5.0


def _engine(entry: dict[str, Any]) -> str | None:
    fw = (entry.get("framework") or "").lower()
    if "nim" in fw:
        return "nim"
    if "tensorrt-llm" in fw:
        return "trtllm"
    if "vllm" in fw:
        return "vllm"
    return None


def _num_requests(entry: dict[str, Any]) -> int | None:
    m = re.search(r"(\d+)\s+requests", entry.get("framework") or "")
    return int(m.group(1)) if m else None


def convert(entry: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(measurement fields, None) or (None, reason skipped)."""
    if entry.get("hardware") is None or entry.get("tp") is None:
        return None, "trace statistics, not a measurement of a replica"
    if (
        not isinstance(entry.get("isl"), int)
        and entry.get("category") != "Kernel profiling (Vidur)"
    ):
        return None, (
            "prompt/output lengths not stated (ShareGPT samples): the prediction depends on "
            "the length distribution, which the source does not give"
        )
    hw = HARDWARE.get(entry["hardware"])
    if hw is None:
        return None, f"hardware {entry['hardware']!r} not in the catalog"
    model = MODELS.get(entry["model"])
    if model is None:
        return None, f"model {entry['model']!r} not in the catalog"
    dtype = PRECISION.get(entry.get("precision") or "")
    if dtype is None:
        return None, f"precision {entry.get('precision')!r} not stated"
    notes = [n for n in (hw[1], entry.get("notes") or "") if n]
    base: dict[str, Any] = {
        "model": model,
        "gpu": hw[0],
        "tp": entry["tp"],
        "dtype": dtype,
        "id": entry["id"],
        "source": entry["source"],
    }
    value = entry["value"]
    if entry["category"] == "Kernel profiling (Vidur)":
        return {
            **base,
            "kind": "kernel",
            "engine": "kernels",
            "tokens": entry["tokens_in_batch"],
            "layer_ms": value,
            "note": "; ".join(notes) or None,
        }, None
    base.update({"engine": _engine(entry), "isl": entry["isl"], "osl": entry["osl"]})
    if entry["metric"] == "serving":  # TensorRT-LLM online serving at a request rate
        rate = entry.get("request_rate_qps")
        return {
            **base,
            "request_rate_rps": math.inf if str(rate).upper() == "INF" else float(rate),
            "num_requests": _num_requests(entry),
            "output_tok_s": value["output_token_tput"],
            "ttft_ms": value["mean_ttft_ms"],
            "tpot_ms": value["mean_itl_ms"],
            "note": "; ".join([*notes, "TPOT is the mean inter-token latency"]),
        }, None
    if entry["metric"] == "concurrency sweep":  # NIM / AIPerf, closed loop
        return {
            **base,
            "concurrency": entry["concurrency"],
            "output_tok_s": value["output_throughput_tok_s"],
            "ttft_ms": value["ttft_ms"],
            "tpot_ms": value["itl_ms"],
            "note": "; ".join([*notes, "TPOT is the mean inter-token latency"]),
        }, None
    if entry["metric"] == "mean end-to-end latency":  # vLLM CI: one batch of 8 requests
        batch = int(re.search(r"batch (\d+)", entry["concurrency"]).group(1))  # type: ignore[union-attr]
        latency_s = value / 1e3
        return {
            **base,
            "concurrency": batch,
            "output_tok_s": round(batch * entry["osl"] / latency_s, 3),
            "note": "; ".join(
                [
                    *notes,
                    f"output_tok_s derived here: {batch} x {entry['osl']} tokens / the batch's "
                    f"mean end-to-end latency {value} ms",
                ]
            ),
        }, None
    return None, f"metric {entry['metric']!r} not used"


def drop_overloaded_ttft(rows: list[dict[str, Any]]) -> int:
    """Remove TTFT from open-loop points whose queue grew through the run."""
    sweeps: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("request_rate_rps") is not None and r.get("ttft_ms") is not None:
            key = (r["gpu"], r["model"], r["tp"], r["dtype"], r["isl"], r["osl"], r["engine"])
            sweeps.setdefault(key, []).append(r)
    dropped = 0
    for sweep in sweeps.values():
        lowest = min(r["ttft_ms"] for r in sweep)
        for r in sweep:
            rate_inf = math.isinf(r["request_rate_rps"])
            if rate_inf or r["ttft_ms"] > OVERLOAD_TTFT_RATIO * lowest:
                r["note"] += (
                    f"; measured TTFT {r['ttft_ms']:g} ms dropped: overloaded open loop "
                    "(requests arrive faster than served; TTFT grows with the run's length)"
                )
                del r["ttft_ms"]
                dropped += 1
    return dropped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", nargs="?", default=str(DEFAULT_SOURCE))
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    args = ap.parse_args(argv)
    src = json.loads(Path(args.source).read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    for entry in src["measurements"]:
        row, why = convert(entry)
        if row is None:
            skipped[why or "unknown"] += 1
        else:
            rows.append({k: v for k, v in row.items() if v is not None})
    dropped = drop_overloaded_ttft(rows)
    for row in rows:  # standard JSON has no Infinity: "inf" (Measurement reads it back)
        if row.get("request_rate_rps") == math.inf:
            row["request_rate_rps"] = "inf"
    catalog = load_catalog()
    doc = {
        "description": (
            "Public LLM serving measurements usable to calibrate fleetplan's cost model, "
            "imported by scripts/import_reference_measurements.py from "
            "shared/reference/measurements-calibration.json; each keeps its source and id. "
            "Serving points: isl/osl mean prompt/output tokens, concurrency (closed loop) or "
            'request_rate_rps (open loop, "inf" = all at once), output_tok_s (whole replica), '
            "mean ttft_ms and tpot_ms. Kernel points: one layer's linear layers on `tokens` "
            "tokens, layer_ms per GPU shard."
        ),
        "imported": len(rows),
        "skipped": dict(sorted(skipped.items())),
        "ttft_dropped_overloaded": dropped,
        "measurements": rows,
    }
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    got, issues = parse_json(text, args.out, catalog)
    if issues:
        for where, reason in issues:
            print(f"{where}: {reason}", file=sys.stderr)
        return 1
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"imported {len(got)} of {len(src['measurements'])} measurements into {args.out}")
    for why, n in sorted(skipped.items()):
        print(f"  skipped {n}: {why}")
    print(f"  TTFT dropped on {dropped} overloaded open-loop points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
