"""Extract NVIDIA's LLM-sizing course benchmarks into
``catalog/measurements/sources/nvidia-dli-benchmarks.json``.

NVIDIA's Deep Learning Institute course on sizing LLM inference systems ships two
tables of measured runs, redistributed in
https://github.com/wbing520/ai-performance-engineering (``code/ch1*_inference/
inference_gpu_cluster_sizing/dataset/``). Both are read from a git checkout or bare
mirror (``git show``) and written as per-replica records in catalog names:

* ``trt_llm_0_9_0_dli.csv``: TensorRT-LLM 0.9.0 static-batch runs (the
  ``gptSessionBenchmark`` harness: ``Batch Size`` prompts of fixed input/output length
  run together, fake weights, paged KV cache, XQA on) on A100 80GB, H100 SXM, H100 NVL,
  H200 and L40S. A run of batch ``B`` is recorded as ``B`` requests submitted at once
  (``request_rate_rps`` inf, ``num_requests`` = ``max_batch`` = B): measured output
  tokens/s (``Throughput``, output tokens over the whole run, first token included).
  The first-token and token-to-token latencies are kept in the note only: in a static
  batch the first is the whole batch's prefill and the second a decode step without
  prefill work, not the per-request means of in-flight batching the model predicts.
  Kept per configuration (model, GPU, precision, tp): for every input/output shape the
  largest batch that ran, the saturated point (the calibration's levels read
  saturated runs as the GPU's throughput; a batch of 1-8 measures the per-step latency
  floor, which depends on the engine version more than on the GPU).
  Mixture-of-experts runs (Mixtral) are recorded, not fitted (:data:`MOE_SKIP_REASON`):
  with fake weights the router sends every token to the same experts, so a decode
  step reads two experts' weights, not the eight a trained router spreads a batch over
  (at batch 64 on two H100s a step took 11.9 ms; reading all eight experts' BF16
  weights, 46.7 GB per GPU, takes 13.9 ms at the peak 3.35 TB/s alone).
* ``nim.csv``: NIM (TensorRT-LLM backend) runs measured with GenAI-Perf, a closed
  loop of ``concurrency`` users with fixed input/output lengths (``max_tokens`` set,
  every output full length), on A100 80GB and H100 SXM: output tokens/s and mean
  TTFT / inter-token latency. Kept per configuration and shape: concurrency 250, the
  saturated point (for the same reason). They are recorded, not fitted
  (:data:`NIM_SKIP_REASON`): NIM 1.0's H100 runs are 35-55% below what the newer
  TensorRT-LLM measurements of the same LLMs give, and the calibration's levels compare
  GPUs per LLM, not per harness, so its A100 runs would be judged against another
  software generation's H100.

Precision: ``Mixed``/``fp16``/``bf16`` are 16-bit weights (``bf16`` here, the same bytes
and peak); ``FP8`` is FP8 weights (the importer's TensorRT-LLM default, an FP8 KV cache,
applies). Model names map to catalog architectures (Llama-3-8B/70B to
``llama-3.1-8b``/``70b``: the same layers, heads and widths). Rows for GPUs or models
the catalog lacks (GH200, L40, GPT-J, Falcon, Llama-2-13B) and failed runs (no
throughput) are left out.

    .venv/bin/python scripts/extract_dli_benchmarks.py /path/to/ai-performance-engineering[.git]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from catalog.loader import load_catalog  # noqa: E402

OUT = ROOT / "catalog" / "measurements" / "sources" / "nvidia-dli-benchmarks.json"
REPO_URL = "https://github.com/wbing520/ai-performance-engineering"
#: (commit, path) of the two tables (the commits that added them).
TRT_FILE = (
    "5a4d0c37a3231b2ff8a268df7f129be259c48a48",
    "code/ch11_inference/inference_gpu_cluster_sizing/dataset/trt_llm_0_9_0_dli.csv",
)
NIM_FILE = (
    "0e25b2e236211ad01ed2221bd2c1cfa5b3f47b55",
    "code/ch10_inference/inference_gpu_cluster_sizing/dataset/nim.csv",
)

GPUS = {
    "A100-SXM4-80GB": "a100-sxm-80gb",
    "H100 80GB HBM3": "h100-sxm5-80gb",
    "H100_80GB_HBM3": "h100-sxm5-80gb",
    "H100 NVL": "h100-nvl-94gb",
    "H200 141GB HBM3": "h200-sxm-141gb",
    "L40S": "l40s",
}
MODELS = {
    "LLaMA v2 7B": "llama-2-7b",
    "LLaMA v2 70B": "llama-2-70b",
    "Mistral 7B": "mistral-7b-v0.1",
    "Mixtral 8x7B": "mixtral-8x7b",
    "meta-llama3-8b-instruct": "llama-3.1-8b",
    "meta-llama3-70b-instruct": "llama-3.1-70b",
}
DTYPES = {"mixed": "bf16", "fp16": "bf16", "bf16": "bf16", "fp8": "fp8"}
NIM_CONCURRENCY = 250
MOE_SKIP_REASON = (
    "TensorRT-LLM 0.9.0 with fake weights: the router sends every token to the same "
    "experts, so a step reads two of Mixtral's eight experts (at batch 64 on two H100s a "
    "step took 11.9 ms, below the 13.9 ms that reading all eight experts' BF16 weights "
    "takes at peak HBM bandwidth); not a trained router's expert load (recorded, not fitted)"
)
NIM_SKIP_REASON = (
    "NIM 1.0 (2024, GenAI-Perf): its H100 runs are 35-55% below the newer TensorRT-LLM "
    "measurements of the same LLMs, and levels compare GPUs per LLM, not per harness "
    "(recorded, not fitted)"
)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _url(commit: str, path: str) -> str:
    return f"{REPO_URL}/blob/{commit}/{path}"


def _replica(model: str, gpu: str, dtype: str, tp: int) -> dict[str, Any]:
    """The replica fields every record shares: one TensorRT-LLM engine over ``tp`` GPUs."""
    return {
        "model": model, "gpu": gpu, "tp": tp, "dtype": dtype, "engine": "trtllm", "num_gpus": tp,
    }  # fmt: skip


def trt_records(rows: Iterable[dict[str, str]], source: str) -> list[dict[str, Any]]:
    """Static-batch rows -> records (see the module docstring): per configuration and
    shape the largest batch that ran."""
    groups: dict[tuple[Any, ...], list[dict[str, str]]] = {}
    for r in rows:
        gpu, model = GPUS.get(r["GPU"]), MODELS.get(r["Model"])
        dtype = DTYPES.get(r["Precision"].strip().lower())
        if not (gpu and model and dtype) or not r["Throughput (tokens / sec)"].strip():
            continue
        if r["Pipeline Model Parallel Size"].strip() not in ("", "1"):
            continue
        isl, osl = (int(v) for v in r["Input/Output Lengths"].split(","))
        key = (model, gpu, dtype, int(r["Tensor Model Parallel Size"]), isl, osl)
        groups.setdefault(key, []).append(r)
    models = load_catalog().models
    out: list[dict[str, Any]] = []
    for (model, gpu, dtype, tp, isl, osl), runs in sorted(groups.items()):
        r = max(runs, key=lambda r: int(r["Batch Size"]))
        batch = int(r["Batch Size"])
        tpot = r["Token-to-token Latency (ms)"].strip()
        out.append(
            {
                "id": f"dli-trt09-{model}-{gpu}-{dtype}-tp{tp}-{isl}x{osl}-b{batch}",
                **_replica(model, gpu, dtype, tp),
                "isl": isl,
                "osl": osl,
                "output_tok_s": round(float(r["Throughput (tokens / sec)"]), 2),
                "request_rate_rps": "inf",
                "num_requests": batch,
                "max_batch": batch,
                **({"skip_reason": MOE_SKIP_REASON} if models[model].moe is not None else {}),
                "source": source,
                "note": (
                    f"TensorRT-LLM 0.9.0 static batch of {batch} ({r['GPU']}, "
                    f"{r['Precision']}, tp {tp}, fake weights, XQA on, custom all-reduce "
                    f"{r['Enable Custom All Reduce'].lower()}): output tokens/s over the "
                    f"whole run; measured first-token latency {r['1st Token Latency (ms)']} "
                    f"ms (the whole batch's prefill) and token-to-token latency {tpot} ms "
                    "(decode steps without prefill) not compared: a static batch's, not "
                    "in-flight batching's means (NVIDIA DLI LLM-sizing course dataset)"
                ),
            }
        )
    return out


def nim_records(rows: Iterable[dict[str, str]], source: str) -> list[dict[str, Any]]:
    """GenAI-Perf closed-loop rows -> records at :data:`NIM_CONCURRENCY` (the first run
    of a repeated configuration)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        gpu, model = GPUS.get(r["task_inputs-GPU"]), MODELS.get(r["task_inputs-model"])
        dtype = DTYPES.get(r["task_inputs-precision"].strip().lower())
        if not (gpu and model and dtype):
            continue
        isl = int(r["input_config-synthetic_input_tokens_mean"])
        osl = int(r["input_config-output_tokens_mean"])
        conc = int(r["input_config-concurrency"])
        if conc != NIM_CONCURRENCY:
            continue
        tp = int(r["task_inputs-n_gpus"])
        precision = _slug(r["task_inputs-precision"])
        ident = f"dli-nim-{model}-{gpu}-{precision}-tp{tp}-{isl}x{osl}-c{conc}"
        if ident in out:
            continue
        out[ident] = {
            "id": ident,
            **_replica(model, gpu, dtype, tp),
            "isl": round(float(r["num_input_token-avg"])),
            "osl": round(float(r["num_output_token-avg"])),
            "output_tok_s": round(float(r["output_token_throughput-avg"]), 2),
            "ttft_ms": round(float(r["time_to_first_token-avg"]) / 1e6, 2),
            "tpot_ms": round(float(r["inter_token_latency-avg"]) / 1e6, 3),
            "concurrency": conc,
            "skip_reason": NIM_SKIP_REASON,
            "source": source,
            "note": (
                f"NIM (TensorRT-LLM backend, {r['task_inputs-precision']}, {tp} GPU(s)) measured "
                f"with GenAI-Perf: closed loop of {conc} users, synthetic prompts of {isl} "
                f"tokens, max_tokens {osl} (every output full length); TTFT and TPOT are the "
                "means (inter-token latency) (NVIDIA DLI LLM-sizing course dataset)"
            ),
        }
    return list(out.values())


def _read_csv(repo: str, commit: str, path: str) -> list[dict[str, str]]:
    text = subprocess.run(
        ["git", "-C", repo, "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout
    return list(csv.DictReader(io.StringIO(text)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", help="a checkout or bare mirror of ai-performance-engineering")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    records = trt_records(_read_csv(args.repo, *TRT_FILE), _url(*TRT_FILE))
    records += nim_records(_read_csv(args.repo, *NIM_FILE), _url(*NIM_FILE))
    doc = {
        "description": (
            "NVIDIA DLI LLM-sizing course benchmarks (TensorRT-LLM 0.9.0 static batches; "
            "NIM with GenAI-Perf), per replica in catalog names, extracted by "
            f"scripts/extract_dli_benchmarks.py from {REPO_URL} at {TRT_FILE[0]} and "
            f"{NIM_FILE[0]}."
        ),
        "measurements": records,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
