"""Copy the usable public measurements into ``catalog/measurements/reference.json``.

Reads ``../shared/reference/measurements-calibration.json`` (or the path given),
``../shared/reference/measurements-more.json`` (``--more``) and the MLPerf Inference
v4.1 records of ``catalog/measurements/sources/mlperf-inference-v4.1.json``
(``--mlperf``, written by ``scripts/extract_mlperf_v41.py``) and v4.0's H100 variants
(``mlperf-inference-v4.0.json``, transcribed with each file's source), maps each entry's
hardware and model names to catalog ids, converts it to a
:class:`planner.calibration.Measurement` (keeping its id and source) and writes
the usable subset with the counts of what was skipped and why. Entries whose
configuration the planner does not model (expert parallelism, DP attention,
disaggregated prefill/decode, multi-token prediction, prefix caching, eager launches)
are kept with their fields and a ``skip_reason``: recorded, never fitted. Every point gets a
``split`` (fit / holdout) from :func:`planner.calibration.assign_splits`. Settings a
run was launched with that its entry does not state (its engine's memory share) come from
``catalog/measurements/sources/launch-settings.json`` (``--launch-settings``; each group
cites the run's launch script; :mod:`launch_settings`).

A malformed source entry (a missing field, a non-positive measured value, a
duplicate id) is reported with its file, line and reason, and nothing is written.
Run it again when the shared files change; the output is deterministic::

    .venv/bin/python scripts/import_reference_measurements.py [SOURCE] [--more PATH] [--out PATH]

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
from planner.calibration import (  # noqa: E402
    Measurement,
    _array_entry_lines,
    assign_splits,
    check_measurement,
    parse_json,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from launch_settings import apply_launch_settings, published_checkpoints  # noqa: E402
from reference_fields import (  # noqa: E402  (re-exported for the tests)
    AMBIGUOUS_MIN_OUTPUT_SHARE,
    HARDWARE_MORE,
    MODELS_MORE,
    PRECISION_MORE,
    BadEntry,
    kv_dtype_more,
    output_share,
    stated_max_batch,
    stated_memory_share,
)

DEFAULT_SOURCE = ROOT.parent / "shared" / "reference" / "measurements-calibration.json"
DEFAULT_MORE = ROOT.parent / "shared" / "reference" / "measurements-more.json"
#: MLPerf Inference v4.1 Llama-2-70B results per replica (scripts/extract_mlperf_v41.py).
#: More measurements gathered for the GPUs without data (Gaudi 3, A100 40GB, L4): same
#: entry shape as measurements-more.json, committed beside the MLPerf records.
DEFAULT_MORE_2 = ROOT / "catalog" / "measurements" / "sources" / "measurements-more-2.json"
DEFAULT_MLPERF = ROOT / "catalog" / "measurements" / "sources" / "mlperf-inference-v4.1.json"
#: MLPerf v4.0's H100 variants (SXM, NVL, PCIe), transcribed with their sources.
DEFAULT_MLPERF_40 = ROOT / "catalog" / "measurements" / "sources" / "mlperf-inference-v4.0.json"
#: NVIDIA DLI LLM-sizing course runs (TensorRT-LLM 0.9.0 static batches, NIM with
#: GenAI-Perf), per replica in catalog names (scripts/extract_dli_benchmarks.py).
DEFAULT_DLI = ROOT / "catalog" / "measurements" / "sources" / "nvidia-dli-benchmarks.json"
DEFAULT_OUT = ROOT / "catalog" / "measurements" / "reference.json"
#: Settings runs were launched with that their entries do not state (scripts/launch_settings.py).
DEFAULT_LAUNCH = ROOT / "catalog" / "measurements" / "sources" / "launch-settings.json"

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
            "request_rate_rps": math.inf if str(rate).upper() == "INF" else float(str(rate)),
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


REQUIRED_MORE = ("id", "hardware", "model", "precision", "tp", "metric", "value", "source")

#: An open-loop rate at or above this is "all at once" in the source (vLLM's 1000).
RATE_ALL_AT_ONCE = 1000.0


def _engine_more(framework: str) -> str | None:
    fw = framework.lower()
    for key, name in (
        ("tensorrt-llm", "trtllm"),
        ("sglang", "sglang"),
        ("vllm", "vllm"),
        ("atom", "atom"),
        ("tgi", "tgi"),
    ):
        if key in fw:
            return name
    return None


def _positive(value: dict[str, Any], key: str) -> float | None:
    x = value.get(key)
    if x is None:
        return None
    if not isinstance(x, int | float) or isinstance(x, bool) or not x > 0 or math.isinf(x):
        raise BadEntry(f"value.{key} must be a positive number, not {x!r}")
    return float(x)


#: InferenceMAX's description of a disaggregated deployment: workers, TP, EP, DP attention
#: and GPUs, for the prefill and the decode side.
_WORKERS = re.compile(
    r"(\d+) (prefill|decode) worker\(s\) TP(\d+)/EP(\d+)/dp-attn=(True|False) \((\d+) GPUs\)"
)


def disaggregated_layout(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The measurement fields of a disaggregated entry's workers, read from its notes
    (``1 prefill worker(s) TP8/EP8/dp-attn=True (8 GPUs) + 3 decode worker(s)
    TP8/EP1/dp-attn=False (24 GPUs)``): ``prefill_workers``, ``prefill_tp``,
    ``prefill_ep``, ``prefill_dp_attention``, ``decode_workers`` and the decode side as
    ``tp``/``ep``/``dp_attention``. None when the notes do not state both sides, when a
    side's GPUs are not its workers x TP (a layout the notes leave ambiguous), or when a
    side runs DP attention without expert parallelism or an EP not dividing its TP (not
    priced)."""
    sides = {m[1]: m for m in _WORKERS.findall(entry.get("notes") or "")}
    if set(sides) != {"prefill", "decode"}:
        return None
    out: dict[str, Any] = {}
    for side, (workers, _, tp, ep, dp, gpus) in sides.items():
        w, t, e = int(workers), int(tp), int(ep)
        if int(gpus) != w * t or t % e or (dp == "True" and e <= 1):
            return None
        key = "prefill_" if side == "prefill" else ""
        out[key + "tp"] = t
        out[key + "ep"] = e if e > 1 else None
        out[key + "dp_attention"] = True if dp == "True" else None
        out[side + "_workers"] = w
    return out


#: Why an eager run is not fitted: every step launches its kernels one by one, which the
#: planner never launches. dstack's MI300X 405B runs (Nov 2024) also differ from AMD's
#: graph-captured runs of the same shapes in their KV cache (FP8 against BF16), vLLM
#: version and harness; the 6 of 15 that pair with one (tests/test_calibration_data.py)
#: take 5-17 ms more per step, more with longer prompts, so not launches alone.
EAGER_REASON = (
    "eager launches (--enforce-eager, no CUDA/HIP graphs) with one scheduler step, which "
    "the planner's launch commands never use; the runs that pair with graph-captured runs "
    "of the same GPU, model and shape (which differ in KV dtype, engine version and "
    "harness too) take 5-17 ms more per step, the gap growing with the prompt"
)


def _skip_reason_more(entry: dict[str, Any]) -> str | None:
    """Why the planner cannot price this entry's configuration (None: it can)."""
    notes = entry.get("notes") or ""
    framework = entry.get("framework") or ""
    reasons = []
    disaggregated = "disagg" in framework.lower() or "PD-disaggregated" in notes
    if disaggregated and (disaggregated_layout(entry) is None or entry.get("concurrency") is None):
        reasons.append("disaggregated prefill/decode workers in a layout not stated per worker")
    # expert parallelism (with or without data-parallel attention) and pipeline
    # stages are priced (planner.kernels); only an ep that does not divide tp is not
    ep = entry.get("ep") or 1
    if ep > 1 and entry["tp"] % ep and not disaggregated:
        reasons.append(f"expert parallelism ep={ep} across tp={entry['tp']} replicas")
    stages = entry.get("pp") or 1
    if (entry.get("num_accelerators") or entry["tp"] * stages) > entry["tp"] * stages and not (
        reasons or disaggregated
    ):
        reasons.append(
            f"{entry['num_accelerators']} GPUs behind a router for tp={entry['tp']} replicas"
        )
    if re.search(r"MTP[^.]*\bON\b", notes):
        reasons.append("multi-token prediction (speculative decoding) on")
    if re.search(r"enable-prefix-caching|prefix-cache hits", notes):
        reasons.append("prefix-cache hits of unknown share")
    if "--enforce-eager" in notes:  # dstack's MI300X 405B runs (Nov 2024)
        reasons.append(EAGER_REASON)
    if entry.get("osl") == 0 or "DECODE-ONLY" in notes or "PREFILL-ONLY" in notes:
        reasons.append("phase-isolated (prefill-only or decode-only) throughput")
    parts = ["not modelled by the planner: " + "; ".join(reasons)] if reasons else []
    if "AMBIGUITY" in notes and output_share(entry) < AMBIGUOUS_MIN_OUTPUT_SHARE:
        parts.append(
            "ambiguous measurement: the source does not say whether its throughput is output "
            "or total tokens, and at this shape the two readings differ by more than "
            f"{1 / AMBIGUOUS_MIN_OUTPUT_SHARE - 1:.0%}"
        )
    return "; ".join(parts) or None


def convert_more(entry: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """An entry of measurements-more.json: (measurement fields, None) or (None, reason
    skipped); raises :class:`BadEntry` for a malformed entry."""
    missing = [k for k in REQUIRED_MORE if entry.get(k) in (None, "")]
    if missing:
        raise BadEntry(f"missing {', '.join(missing)}")
    if not isinstance(entry["value"], dict):
        raise BadEntry("value must be an object")
    if not isinstance(entry["tp"], int) or entry["tp"] < 1:
        raise BadEntry(f"tp must be a positive integer, not {entry['tp']!r}")
    value = entry["value"]
    out_tok_s = _positive(value, "output_token_tput")
    ambiguous_note = None
    if out_tok_s is None:  # AMD's table: output or total tokens/s (see output_share)
        out_tok_s = _positive(value, "throughput_tok_s_as_reported")
        share = output_share(entry)
        if (
            out_tok_s is not None
            and "AMBIGUITY" in (entry.get("notes") or "")
            and share >= AMBIGUOUS_MIN_OUTPUT_SHARE
        ):
            ambiguous_note = (
                f"reported throughput {out_tok_s:g} tokens/s read as total tokens (the "
                f"conservative reading): output = reported x osl / (isl + osl) = x{share:.3f}; "
                f"read as output tokens it would be {1 / share - 1:.1%} higher"
            )
            out_tok_s = round(out_tok_s * share, 1)
    ttft = _positive(value, "mean_ttft_ms")
    tpot = _positive(value, "mean_tpot_ms")
    hw = HARDWARE_MORE.get(entry["hardware"])
    if hw is None:
        return None, f"hardware {entry['hardware']!r} not in the catalog"
    model = MODELS_MORE.get(entry["model"])
    if model is None:
        return None, f"model {entry['model']!r} not in the catalog"
    dtype = PRECISION_MORE.get(entry["precision"])
    if dtype is None:
        return None, f"precision {entry['precision']!r} not in the catalog"
    isl, osl = entry.get("isl"), entry.get("osl")
    if not isinstance(isl, int | float) or not isinstance(osl, int | float):
        return None, "prompt/output lengths not stated"
    skip = _skip_reason_more(entry)
    if out_tok_s is None and skip is None:
        return None, "no output throughput (phase-isolated or prefill-only measurement)"
    notes = [n for n in (hw[1], model[1], entry.get("notes") or "", ambiguous_note) if n]
    row: dict[str, Any] = {
        "model": model[0],
        "gpu": hw[0],
        "tp": entry["tp"],
        "dtype": dtype,
        "engine": _engine_more(entry.get("framework") or ""),
        "id": entry["id"],
        "source": entry["source"],
        "isl": max(1, round(isl)),
        "osl": max(2, round(osl)),
        "num_gpus": entry.get("num_accelerators"),
        "ep": entry.get("ep") if (entry.get("ep") or 1) > 1 else None,
        "pp": entry.get("pp") if (entry.get("pp") or 1) > 1 else None,
        "dp_attention": True if entry.get("dp_attention") else None,
        "skip_reason": skip,
        **(layout if (layout := disaggregated_layout(entry)) and skip is None else {}),
        "kv_dtype": kv_dtype_more(entry.get("kv_dtype")),
        "max_batch": stated_max_batch(entry),
        "memory_utilization": stated_memory_share(entry),
        "output_tok_s": out_tok_s,
        "ttft_ms": ttft,
        "tpot_ms": tpot,
    }
    conc, rate = entry.get("concurrency"), entry.get("request_rate_qps")
    if entry["metric"] == "offline":
        # all prompts at once (vLLM benchmark_throughput.py / a local client at rate inf)
        row.update(request_rate_rps=math.inf, num_requests=conc, ttft_ms=None, tpot_ms=None)
        notes.append("offline: every prompt submitted at once; output throughput only")
    elif rate is not None:
        r = float(rate)
        row["request_rate_rps"] = math.inf if r >= RATE_ALL_AT_ONCE else r
        m = re.search(r"(\d+) prompts", entry.get("notes") or "")
        row["num_requests"] = int(m.group(1)) if m else None
    elif conc is not None:
        row["concurrency"] = conc
    elif skip is None:
        return None, "neither concurrency nor request rate stated"
    if not any(row.get(q) for q in ("output_tok_s", "ttft_ms", "tpot_ms")):
        return None, "no output throughput, TTFT or TPOT (a prefill-only measurement)"
    row["note"] = "; ".join(notes) or None
    return row, None


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


MLPERF_FIELDS = (
    "id", "model", "gpu", "tp", "dtype", "kv_dtype", "engine", "num_gpus", "isl", "osl",
    "output_tok_s", "ttft_ms", "tpot_ms", "request_rate_rps", "num_requests", "concurrency",
    "max_batch", "skip_reason", "source", "note",
)  # fmt: skip


def littles_law_concurrency(rate_rps: float, ttft_ms: float, tpot_ms: float, osl: int) -> float:
    """Mean requests in the system of a steady open loop (Little's law, requests): the
    arrival rate times the mean time in the system, ``rate_rps x (ttft_ms + (osl - 1) x
    tpot_ms) / 1000``. All four measured (an MLPerf Server run: completed samples/s, mean
    first-token latency, mean time per output token, generated tokens per sample)."""
    return rate_rps * (ttft_ms + (osl - 1) * tpot_ms) / 1000.0


def mlperf_server_as_closed_loop(row: dict[str, Any]) -> None:
    """An MLPerf Server record as the closed loop of its measured occupancy: ``concurrency``
    = :func:`littles_law_concurrency` of its rate, TTFT, TPOT and output length (1
    decimal), in place of ``request_rate_rps``, which is kept as ``offered_rate_rps`` (its
    throughput is that offered load: no level rests on it,
    ``planner.levels.saturated_throughput``).

    Why: the submitters' harnesses hold Poisson arrivals to form large batches (the
    TPOT p99 limit is 200 ms), so the runs sit far above the occupancy a scheduler that
    admits every request at once would settle at for that rate: MI300X's 8.59 requests/s
    of Llama-2-70B held about 388 in the system, where such a scheduler would hold about
    142 (TPOT 56 ms predicted, 153 ms measured). Read as an open loop, the latencies test
    the harness's batching, not the cost model (TPOT -69% to +92%); as a closed loop of
    the measured occupancy, every value tests the step time at the measured batch (the
    shipped factors predict the TPOTs within -14% to +7%). Records without both latencies stay
    as they are."""
    rate, ttft, tpot = row.get("request_rate_rps"), row.get("ttft_ms"), row.get("tpot_ms")
    if rate is None or ttft is None or tpot is None or math.isinf(rate):
        return
    c = round(littles_law_concurrency(rate, ttft, tpot, int(row["osl"])), 1)
    del row["request_rate_rps"]
    row["concurrency"] = c
    row["offered_rate_rps"] = rate
    row["note"] = (
        row.get("note", "")
        + f" Priced as a closed loop of {c:g} requests in the system (Little's law: "
        f"{rate:g} requests/s x (TTFT {ttft:g} ms + {int(row['osl']) - 1} x TPOT {tpot:g} ms); "
        "scripts/import_reference_measurements.mlperf_server_as_closed_loop)."
    )


def convert_mlperf(entry: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """A record already per replica and in catalog names (mlperf-inference-v4.1.json,
    nvidia-dli-benchmarks.json); raises :class:`BadEntry` for a malformed one. An MLPerf
    Server run becomes the closed loop of its measured occupancy
    (:func:`mlperf_server_as_closed_loop`)."""
    missing = [k for k in ("id", "model", "gpu", "tp", "dtype", "isl", "osl", "source") if
               entry.get(k) in (None, "")]  # fmt: skip
    if missing:
        raise BadEntry(f"missing {', '.join(missing)}")
    unknown = sorted(set(entry) - set(MLPERF_FIELDS))
    if unknown:
        raise BadEntry(f"unknown field(s) {', '.join(unknown)}")
    for key in ("output_tok_s", "ttft_ms", "tpot_ms", "concurrency"):
        _positive(entry, key)
    row = dict(entry)
    if row.get("request_rate_rps") == "inf":  # all requests at once (JSON has no Infinity)
        row["request_rate_rps"] = math.inf
    else:
        _positive(entry, "request_rate_rps")
    if "/inference_results_v5." in entry["source"]:
        raise BadEntry("MLPerf v5.x results are the validation set: never imported")
    if "/inference_results_v4." in entry["source"]:
        mlperf_server_as_closed_loop(row)
    return row, None


def _rows(
    path: Path, convert_fn: Any, skipped: Counter[str], bad: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """Converted rows of one source file; malformed entries go to ``bad`` as
    (``file:line``, reason), skips are counted by reason."""
    text = path.read_text(encoding="utf-8")
    try:
        src = json.loads(text)
    except json.JSONDecodeError as err:
        bad.append((f"{path}:{err.lineno}", f"not valid JSON: {err.msg}"))
        return []
    entries = src.get("measurements") if isinstance(src, dict) else None
    if not isinstance(entries, list):
        bad.append((f"{path}:1", 'expected {"measurements": [...]}'))
        return []
    lines = _array_entry_lines(text, "measurements")
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        here = f"{path}:{lines[i] if i < len(lines) else 1}"
        if not isinstance(entry, dict):
            bad.append((here, "expected an object"))
            continue
        if entry.get("id") in seen:
            bad.append((here, f"duplicate id {entry['id']!r}"))
            continue
        seen.add(str(entry.get("id")))
        try:
            row, why = convert_fn(entry)
        except BadEntry as err:
            bad.append((here, str(err)))
            continue
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            bad.append((here, f"cannot read the entry: {type(err).__name__}: {err}"))
            continue
        if row is None:
            skipped[why or "unknown"] += 1
        else:
            rows.append({k: v for k, v in row.items() if v is not None})
    return rows


def previous_splits(path: Path) -> dict[str, str]:
    """The split of every priced point already in ``path`` (id -> fit/holdout); empty
    when the file does not exist. A re-import keeps them, so a point once held out is
    never fitted because the cost model learned to price points around it. A point
    recorded there (``skip_reason``) was neither fitted nor evaluated: it is not kept,
    and gets the split of its stratum when the planner learns to price it."""
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    return {
        str(r["id"]): str(r["split"])
        for r in doc.get("measurements", [])
        if r.get("id") and r.get("split") and not r.get("skip_reason")
    }


def _split_stratum(row: dict[str, Any]) -> str:
    """The stratum of a point for the split: kernel, serving, or recorded-only."""
    if row.get("skip_reason"):
        return "recorded"
    return row.get("kind", "serving")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", nargs="?", default=str(DEFAULT_SOURCE))
    ap.add_argument(
        "--more",
        action="append",
        help="a file shaped like measurements-more.json (repeatable; default: the shared "
        "measurements-more.json and catalog/measurements/sources/measurements-more-2.json)",
    )
    ap.add_argument(
        "--mlperf",
        action="append",
        help="MLPerf records (repeatable; default: v4.1 and v4.0; '' for none)",
    )
    ap.add_argument(
        "--dli", default=str(DEFAULT_DLI), help="NVIDIA DLI course records ('' for none)"
    )
    ap.add_argument(
        "--launch-settings",
        default=str(DEFAULT_LAUNCH),
        help="settings runs were launched with, by id ('' for none)",
    )
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    args = ap.parse_args(argv)
    skipped: Counter[str] = Counter()
    bad: list[tuple[str, str]] = []
    rows = _rows(Path(args.source), convert, skipped, bad)
    for more in args.more or [str(DEFAULT_MORE), str(DEFAULT_MORE_2)]:
        if more:
            rows += _rows(Path(more), convert_more, skipped, bad)
    mlperf = args.mlperf or [str(DEFAULT_MLPERF), str(DEFAULT_MLPERF_40)]
    for normalized in (*mlperf, args.dli):
        if normalized:
            rows += _rows(Path(normalized), convert_mlperf, skipped, bad)
    if args.launch_settings and not bad:
        published = published_checkpoints(load_catalog())
        apply_launch_settings(rows, Path(args.launch_settings), bad, published)
    if bad:
        for where, reason in bad:
            print(f"{where}: {reason}", file=sys.stderr)
        print(
            f"{len(bad)} bad entr{'y' if len(bad) == 1 else 'ies'}: nothing written",
            file=sys.stderr,
        )
        return 1
    ids = [r["id"] for r in rows]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        print(f"ids in both sources: {', '.join(dupes)}: nothing written", file=sys.stderr)
        return 1
    dropped = drop_overloaded_ttft(rows)
    catalog = load_catalog()
    for row in rows:  # kept for the record (and a later cost model), never fitted
        m = Measurement.model_validate(row)
        why = check_measurement(m, catalog)
        if why is not None:
            row["skip_reason"] = f"cannot be priced on the catalog: {why}"
    splits = assign_splits([(r["id"], r["gpu"], _split_stratum(r)) for r in rows])
    kept = previous_splits(Path(args.out))
    for row in rows:  # a point keeps the split it was given: held-out data stays out
        # (a recorded-only point is neither fitted nor evaluated: its split is assigned
        # afresh, in its stratum, until the planner can price it)
        fresh = splits[row["id"]].value
        row["split"] = fresh if row.get("skip_reason") else kept.get(row["id"], fresh)
    for row in rows:  # standard JSON has no Infinity: "inf" (Measurement reads it back)
        if row.get("request_rate_rps") == math.inf:
            row["request_rate_rps"] = "inf"
    doc = {
        "description": (
            "Public LLM serving measurements usable to calibrate fleetplan's cost model, "
            "imported by scripts/import_reference_measurements.py from "
            "shared/reference/measurements-calibration.json, measurements-more.json, "
            "catalog/measurements/sources/measurements-more-2.json, "
            "catalog/measurements/sources/mlperf-inference-v4.1.json, "
            "mlperf-inference-v4.0.json and "
            "catalog/measurements/sources/nvidia-dli-benchmarks.json (launch settings "
            "they do not state from catalog/measurements/sources/launch-settings.json); each "
            "keeps its source and id. Serving points: isl/osl mean prompt/output tokens, "
            'concurrency (closed loop) or request_rate_rps (open loop, "inf" = all at once; '
            "num_requests in the run), output_tok_s (whole replica), mean ttft_ms and tpot_ms. "
            "Kernel points: one layer's linear layers on `tokens` tokens, layer_ms per GPU "
            "shard. split: fit or holdout (planner.calibration.assign_splits). Points with a "
            "skip_reason (disaggregation, MTP, prefix hits of unknown share...) are recorded "
            "with their fields and never fitted; a point keeps the split it was first given."
        ),
        "imported": len(rows),
        "recorded_not_fitted": sum(1 for r in rows if r.get("skip_reason")),
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
    n_hold = sum(1 for r in rows if r["split"] == "holdout")
    print(
        f"imported {len(got)} measurements into {args.out} "
        f"({doc['recorded_not_fitted']} recorded only; {n_hold} held out)"
    )
    for why, n in sorted(skipped.items()):
        print(f"  skipped {n}: {why}")
    print(f"  TTFT dropped on {dropped} overloaded open-loop points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
