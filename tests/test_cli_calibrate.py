"""``fleetplan analyze capacity``, ``calibrate`` and ``calibrations`` through api.cli.main."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api import cli

DATA = Path(__file__).parent / "data" / "calibration"
H100 = "h100-sxm5-80gb"
CAPACITY = [
    "analyze",
    "capacity",
    "--model",
    "llama-3.1-70b",
    "--gpu",
    H100,
    "--tp",
    "2",
    "--dtype",
    "fp8",
    "--prompt-tokens",
    "5000",
    "--output-tokens",
    "500",
]


def run(capsys, argv: list[str]) -> str:
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    assert out.err == ""
    return out.out


def fail(capsys, argv: list[str]) -> str:
    assert cli.main(argv) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.startswith("fleetplan: error: ") and out.err.count("\n") == 1
    return out.err


@pytest.fixture(autouse=True)
def calibration_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "calibrations"
    monkeypatch.setenv("FLEETPLAN_CALIBRATION_DIR", str(d))
    return d


# --------------------------------------------------------------------------- analyze capacity


def test_capacity_table(capsys):
    out = run(capsys, CAPACITY)
    assert "llama-3.1-70b on 2 x h100-sxm5-80gb (fp8 weights, fp8 KV, vllm)" in out
    assert "maximum throughput" in out
    for label in ("output tokens/s", "requests/s", "batch", "TTFT ms", "TPOT ms", "bound"):
        assert label in out


def test_capacity_json_at_a_concurrency(capsys):
    data = json.loads(run(capsys, [*CAPACITY, "--concurrency", "25", "--json"]))
    res = data["result"]
    assert res["mode"] == "concurrency" and res["concurrency"] == 25
    assert res["output_tokens_per_s_per_gpu"] == pytest.approx(res["output_tokens_per_s"] / 2)
    assert res["bound"] in ("compute", "memory_bandwidth", "kv_capacity", "slo", "max_batch")
    assert data["replica"]["kv_dtype"] == "fp8" and data["calibration"] is None


def test_capacity_with_slos(capsys):
    data = json.loads(run(capsys, [*CAPACITY, "--tpot-ms", "50", "--ttft-ms", "2000", "--json"]))
    assert data["result"]["mode"] == "slo" and data["result"]["tpot_ms"] <= 50.0 + 1e-6


def test_capacity_on_tensorrt_llm_reserves_each_output(capsys):
    """``--engine trtllm``: GUARANTEED_NO_EVICT admits a 128 + 2,048-token request against
    2,176 tokens of cache (vLLM against its mean 1,152), and the text names the engine."""
    shape = ["--prompt-tokens", "128", "--output-tokens", "2048", "--json"]
    vllm = json.loads(run(capsys, [*CAPACITY[:-4], *shape]))
    trt = json.loads(run(capsys, [*CAPACITY[:-4], *shape, "--engine", "trtllm"]))
    assert vllm["replica"]["engine"] == "vllm" and trt["replica"]["engine"] == "trtllm"
    # same memory rule (tests/test_engine_memory.py): TensorRT-LLM's cache, reserved at
    # 2,176 tokens a request, holds what its KV bytes allow at that context
    assert trt["result"]["max_resident_sequences"] >= 1
    assert trt["replica"]["kv_dtype"] == "fp8"
    text = run(capsys, [*CAPACITY, "--engine", "trtllm"])
    assert "(fp8 weights, fp8 KV, trtllm)" in text


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--engine", "tgi"], "--engine"),
        (["--tpot-ms", "1"], "--tpot-ms"),
        (["--output-tokens", "1"], "--output-tokens"),
        (["--gpu", "nope"], "--gpu"),
        (["--tp", "16"], "--tp"),
        (["--concurrency", "x"], "--concurrency"),
        (["--calibration", "missing"], "--calibration"),
        (["--concurrency", "4", "--request-rate", "2"], "--request-rate"),
    ],
)
def test_capacity_errors_name_the_option(capsys, extra, option):
    err = fail(capsys, [*CAPACITY, *extra])
    assert err.startswith(f"fleetplan: error: {option}: ")


# --------------------------------------------------------------------------- calibrate


def test_calibrate_csv_stores_and_lists(capsys, calibration_dir):
    out = run(capsys, ["calibrate", str(DATA / "measurements.csv"), "--name", "lab"])
    assert "calibration lab" in out and "residuals per point" in out
    assert "h100-sxm5-80gb" in out and f"stored as {calibration_dir / 'lab.yaml'}" in out
    assert (calibration_dir / "lab.yaml").is_file()
    listed = run(capsys, ["calibrations", "list"])
    assert "lab" in listed and "h100-sxm5-80gb bf16" in listed
    shown = json.loads(run(capsys, ["calibrations", "show", "lab", "--json"]))
    assert shown["name"] == "lab" and len(shown["residuals"]) == 12
    argv = [
        "analyze",
        "capacity",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        H100,
        "--prompt-tokens",
        "1000",
        "--output-tokens",
        "100",
        "--calibration",
        "lab",
    ]
    data = json.loads(run(capsys, [*argv, "--json"]))
    assert data["calibration"] == "lab"
    fitted = shown["factors"][0]
    assert data["replica"]["mbu"] == fitted["decode_mbu"]


def test_calibrate_vllm_file_needs_the_replica_flags(capsys, calibration_dir):
    path = str(DATA / "vllm_bench_serve.json")
    err = fail(capsys, ["calibrate", path, "--name", "v"])
    assert f"{path}:1" in err and "--gpu" in err and "nothing stored" in err
    out = run(
        capsys,
        [
            "calibrate",
            path,
            "--name",
            "v",
            "--gpu",
            H100,
            "--tp",
            "1",
            "--dtype",
            "bf16",
            "--dry-run",
            "--json",
        ],
    )
    data = json.loads(out)
    assert data["stored_at"] is None and data["factors"][0]["gpu"] == H100
    assert not calibration_dir.exists()


@pytest.mark.parametrize(
    ("name", "line", "reason"),
    [
        ("bad_missing_column.csv", 1, "missing column(s) tpot_ms"),
        ("bad_values.csv", 3, "output_tok_s: Input should be greater than 0"),
        ("bad_unknown.csv", 4, "unknown model 'not-a-model'"),
    ],
)
def test_bad_files_are_refused_and_nothing_is_stored(capsys, calibration_dir, name, line, reason):
    good, bad = str(DATA / "measurements.csv"), str(DATA / name)
    err = fail(capsys, ["calibrate", good, bad, "--name", "lab"])
    assert err.startswith(f"fleetplan: error: {bad}:{line}: {reason}")
    assert "nothing stored" in err
    assert not calibration_dir.exists()


def test_calibrate_checks_the_name(capsys):
    err = fail(capsys, ["calibrate", str(DATA / "measurements.csv"), "--name", "Bad Name"])
    assert err.startswith("fleetplan: error: --name: ")


def test_calibrations_empty_and_unknown(capsys):
    assert "no calibrations" in run(capsys, ["calibrations", "list"])
    assert fail(capsys, ["calibrations", "show", "nope"]).startswith("fleetplan: error: name:")
