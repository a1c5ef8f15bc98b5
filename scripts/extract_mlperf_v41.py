"""Extract MLPerf Inference v4.1 Llama-2-70B results into
``catalog/measurements/sources/mlperf-inference-v4.1.json``.

Reads ``mlperf_log_summary.txt`` of the closed-division ``llama2-70b-99`` Offline and
Server runs of the systems in :data:`SYSTEMS` from a git checkout (or bare mirror) of
https://github.com/mlcommons/inference_results_v4.1 and writes one record per run,
per replica (the harness runs ``gpus / tp`` independent replicas; totals are divided
by that count), with the file's GitHub URL at the commit read:

- Offline: every sample submitted at once; measured output tokens/s (``Tokens per
  second``), generated tokens per sample = tokens / samples;
- Server: Poisson arrivals at the completed rate, under MLPerf's latency limits (TTFT
  p99 <= 2 s, TPOT p99 <= 200 ms); measured output tokens/s, mean first-token latency
  and mean time per output token.

Prompt length: the benchmark's OpenOrca set (24,576 samples) has 5,463,976 input
tokens (mean 222.3), as recorded with the set's SHA-256 in
https://github.com/FlashLab-MBZUAI/HBFSim/blob/96cf1b37cd60e8fabb77967a591cf60edb8d1f23/validation/calibration/h100-llama2-70b-calibration-protocol.json
(MLPerf's summaries state output tokens only). Mixtral-8x7B runs are not extracted: no
stored source states the mean prompt length of its set. MLPerf v5.0/v5.1 results are
never read (the project's validation set).

    .venv/bin/python scripts/extract_mlperf_v41.py /path/to/inference_results_v4.1[.git]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "catalog" / "measurements" / "sources" / "mlperf-inference-v4.1.json"
REPO_URL = "https://github.com/mlcommons/inference_results_v4.1"
DATASET_INPUT_TOKENS = 5_463_976
DATASET_SAMPLES = 24_576
DATASET_SOURCE = (
    "https://github.com/FlashLab-MBZUAI/HBFSim/blob/96cf1b37cd60e8fabb77967a591cf60edb8d1f23/"
    "validation/calibration/h100-llama2-70b-calibration-protocol.json"
)

#: (submitter, system) -> catalog gpu, GPUs, tp, engine, dtype, kv dtype, max batch
#: per scenario (the submitter's config class), and what the mapping assumes.
SYSTEMS = {
    ("NVIDIA", "DGX-H100_H100-SXM-80GBx8_TRT"): (
        "h100-sxm5-80gb",
        8,
        2,
        "trtllm",
        "fp8",
        "fp8",
        {"Offline": 896, "Server": 1024},
        "closed/NVIDIA/configs/llama2-70b: H100_SXM_80GB_TP2x4",
    ),
    ("NVIDIA", "H200-SXM-141GBx8_TRT"): (
        "h200-sxm-141gb",
        8,
        1,
        "trtllm",
        "fp8",
        "fp8",
        {"Offline": 806, "Server": 896},
        "closed/NVIDIA/configs/llama2-70b: H200_SXM_141GBx8 (tp 1)",
    ),
    ("HPE", "HPE_ProLiant_DL380a_H100_NVL_94GBx4_TRT"): (
        "h100-nvl-94gb",
        4,
        2,
        "trtllm",
        "fp8",
        "fp8",
        {"Offline": 1300, "Server": 1024},
        "closed/HPE/configs/llama2-70b: HPE_PROLIANT_DL380A_H100_NVL_94GBX4 (TP2x2)",
    ),
    ("Lenovo", "SR675_V3_8xH100_NVL_TRT"): (
        "h100-nvl-94gb",
        8,
        1,
        "trtllm",
        "fp8",
        "fp8",
        {"Offline": 1300, "Server": 640},
        "closed/Lenovo/configs/llama2-70b: SR675_V3_8XH100_NVL (tp 1)",
    ),
    ("Fujitsu", "CDI_L40Sx8_TRT"): (
        "l40s",
        8,
        4,
        "trtllm",
        "fp8",
        "fp8",
        {"Offline": 1024, "Server": 1024},
        "closed/Fujitsu/configs/llama2-70b: CDI_L40SX8 (tp 4); FP8 as NVIDIA's harness",
    ),
    ("AMD", "8xMI300X_2xEPYC-9374F"): (
        "mi300x",
        8,
        1,
        "vllm",
        "fp8",
        "fp8",
        {},
        "closed/AMD/code/llama2-70b-99.9/test_VllmFp8: TP=1, --quantization fp8, "
        "--kv-cache-dtype fp8 (vLLM 0.4.3+rocm)",
    ),
    ("AMD", "1xMI300X_2xEPYC-9374F"): (
        "mi300x",
        1,
        1,
        "vllm",
        "fp8",
        "fp8",
        {},
        "closed/AMD/code/llama2-70b-99.9/test_VllmFp8: TP=1, FP8 weights and KV (vLLM 0.4.3+rocm)",
    ),
    ("NVIDIA", "B200-SXM-180GBx1_TRT"): (
        "b200",
        1,
        1,
        "trtllm",
        "fp4",
        "fp8",
        {},
        "preview system; NVIDIA's calibration.md: FP4 on accelerators that support it",
    ),
}


def _git_show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={repo}", "show", f"{commit}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _number(text: str, label: str) -> float:
    m = re.search(rf"^{re.escape(label)}\s*:\s*([0-9.]+)", text, flags=re.M)
    if m is None:
        raise ValueError(f"no {label!r}")
    return float(m.group(1))


def parse_summary(text: str, scenario: str) -> dict[str, float]:
    """Measured values of an LLM ``mlperf_log_summary.txt`` (whole system): samples/s,
    output tokens/s, and for Server the mean first-token latency and mean time per
    output token (ms, from ns)."""
    if "Result is : VALID" not in text:
        raise ValueError("result not VALID")
    if scenario == "Offline":
        return {
            "samples_per_s": _number(text, "Samples per second"),
            "tokens_per_s": _number(text, "Tokens per second"),
        }
    return {
        "samples_per_s": _number(text, "Completed samples per second"),
        "tokens_per_s": _number(text, "Completed tokens per second"),
        "ttft_ms": _number(text, "Mean First Token latency (ns)") / 1e6,
        "tpot_ms": _number(text, "Mean Time to Output Token (ns)") / 1e6,
    }


def records(repo: Path, commit: str) -> list[dict]:
    isl = round(DATASET_INPUT_TOKENS / DATASET_SAMPLES)
    out = []
    for (sub, system), (gpu, gpus, tp, engine, dtype, kv, batch, why) in SYSTEMS.items():
        for scenario in ("Offline", "Server"):
            path = (
                f"closed/{sub}/results/{system}/llama2-70b-99/{scenario}/performance/"
                "run_1/mlperf_log_summary.txt"
            )
            v = parse_summary(_git_show(repo, commit, path), scenario)
            replicas = gpus // tp
            rec: dict[str, Any] = {
                "id": f"mlperf41-{sub.lower()}-{system.lower()}-{scenario.lower()}",
                "model": "llama-2-70b",
                "gpu": gpu,
                "tp": tp,
                "dtype": dtype,
                "kv_dtype": kv,
                "engine": engine,
                "num_gpus": gpus,
                "isl": isl,
                "osl": round(v["tokens_per_s"] / v["samples_per_s"]),
                "output_tok_s": round(v["tokens_per_s"] / replicas, 3),
                "max_batch": batch.get(scenario),
                "source": f"{REPO_URL}/blob/{commit}/{path}",
                "note": (
                    f"MLPerf Inference v4.1 closed llama2-70b-99 {scenario}, {sub} {system}: "
                    f"{gpus} GPUs as {replicas} replica(s) of tp {tp} ({why}); totals divided "
                    f"by {replicas}. isl = mean prompt of the OpenOrca set ({DATASET_SOURCE}); "
                    "osl = generated tokens per sample (tokens / samples)."
                ),
            }
            if scenario == "Server":
                rec.update(
                    request_rate_rps=round(v["samples_per_s"] / replicas, 4),
                    ttft_ms=round(v["ttft_ms"], 3),
                    tpot_ms=round(v["tpot_ms"], 3),
                )
                rec["note"] += (
                    " Server: Poisson arrivals at the completed rate under TTFT p99 <= 2 s and "
                    "TPOT p99 <= 200 ms; TTFT / TPOT are the means."
                )
            else:
                rec["note"] += " Offline: every sample submitted at once."
            out.append({k: x for k, x in rec.items() if x is not None})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", help="git dir of mlcommons/inference_results_v4.1")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    repo = Path(args.repo)
    git_dir = repo / ".git" if (repo / ".git").is_dir() else repo
    commit = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    doc = {
        "description": (
            "MLPerf Inference v4.1 (closed) Llama-2-70B Offline and Server results per replica, "
            f"extracted by scripts/extract_mlperf_v41.py from {REPO_URL} at {commit}."
        ),
        "measurements": records(git_dir, commit),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(doc['measurements'])} records to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
