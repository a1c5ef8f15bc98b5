"""``fleetplan analyze ...`` through ``api.cli.main``: tables, JSON and one-line errors."""

from __future__ import annotations

import json

import pytest

from api import cli
from catalog.loader import load_catalog
from planner import roofline as rl
from planner import sizing as sz

H100 = "h100-sxm5-80gb"
CHUNK = [
    "analyze",
    "chunk-budget",
    "--model",
    "llama-2-7b",
    "--gpu",
    H100,
    "--mfu",
    "0.5",
    "--overlap",
    "1",
    "--prompt-tokens",
    "4096",
    "--tpot-budget-ms",
    "20.1",
]
KV = ["analyze", "kv-transfer", "--model", "llama-3.1-8b", "--prompt-tokens", "4096"]
POOL = ["analyze", "pool-ratio", "--model", "llama-3.1-8b", "--gpu", H100, "--mfu", "0.5"]
# DOMAIN.md section 5 under tests/test_sizing.py's assumptions: first-order prefill, no
# prefix hits, every class decoding at chat's point (B = 178 at 2,300 tokens, 30.2 ms).
DOC_POOL = [
    *POOL,
    "--workload",
    "chat",
    "agent",
    "--prefix-hit",
    "0",
    "--tpot-ms",
    "30.2",
    "--decode-batch",
    "178",
    "--prefill-cost",
    "first-order",
]


def run(capsys, argv: list[str]) -> str:
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


def run_json(capsys, argv: list[str]) -> dict:
    return json.loads(run(capsys, [*argv, "--json"]))


def table_rows(out: str, header_start: str) -> list[list[str]]:
    """The rows (split on runs of 2+ spaces) of the table whose header starts so."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    assert set(lines[start + 1]) <= {"-", " "}
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        rows.append([c for c in line.strip().split("  ") if c])
    return [[c.strip() for c in row] for row in rows]


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("fleetplan: error: ")
    return lines[0]


# --------------------------------------------------------------------------- chunk-budget


def test_chunk_budget_table(capsys) -> None:
    out = run(capsys, CHUNK)
    assert "max free chunk T* = 683 tokens" in out
    assert "TPOT budget 20.1 ms" in out and "494.7 TFLOP/s" in out
    rows = table_rows(out, "budget tokens")
    assert [r[0] for r in rows] == ["256", "512", "683", "1,024", "2,048", "4,096"]
    by_budget = {r[0]: r for r in rows}
    # budget, chunk ms, step ms, penalty, chunks, TTFT ms, KV re-read GB, KV re-read ms
    # the chunk of T* tokens fits with room to spare: H100's GEMMs run 1.7% faster at 683
    # tokens than at 512 (measured, planner.kernels.gemm_token_gain); T* is first-order
    assert by_budget["683"][1:6] == ["19.8", "20.1", "0.0%", "6", "121.8"]
    assert by_budget["1,024"][3] == "44.1%"
    assert by_budget["512"][6] == "7.516"
    assert "shrinking budget: 6 chunks of 743 -> 582 tokens" in out
    assert "TTFT 120.6 ms" in out


def test_chunk_budget_json(capsys) -> None:
    data = run_json(capsys, [*CHUNK, "--budgets", "256,683", "--budgets", "1024"])
    assert data["max_free_chunk_tokens"] == 683
    assert data["prompt_tokens"] == 4096 and data["tpot_budget_ms"] == 20.1
    assert [r["budget_tokens"] for r in data["rows"]] == [256, 683, 1024]
    row = data["rows"][1]
    assert set(row) == {
        "budget_tokens",
        "chunk_ms",
        "step_ms",
        "tpot_penalty",
        "chunks",
        "ttft_ms",
        "kv_reread_gb",
        "kv_reread_ms",
    }
    assert row["tpot_penalty"] == 0.0 and row["chunks"] == 6
    replica = rl.build_replica(load_catalog(), "llama-2-7b", H100, mfu=0.5, overlap_factor=1.0)
    # perfect overlap: six steps of max(20.1 ms, the chunk's compute at its context)
    starts = [683 * i for i in range(6)]
    sizes = [683] * 5 + [4096 - 5 * 683]
    assert row["ttft_ms"] == pytest.approx(
        sum(
            max(20.1, rl.chunk_compute_ms(replica, t, s))
            for t, s in zip(sizes, starts, strict=True)
        )
    )
    assert data["shrinking"]["chunk_tokens"] == [743, 721, 701, 683, 666, 582]
    assert data["replica"]["overlap_factor"] == 1.0


def test_chunk_budget_overlap_defaults_to_the_catalog(capsys) -> None:
    argv = [a for a in CHUNK if a not in ("--overlap", "1")]
    data = run_json(capsys, argv)
    assert data["replica"]["overlap_factor"] == 0.8
    assert data["max_free_chunk_tokens"] == 683


# --------------------------------------------------------------------------- kv-transfer


def test_kv_transfer_table_gqa8(capsys) -> None:
    out = run(capsys, [*KV, "--link-gbps", "400,64,25", "--prefill-ms", "129"])
    assert "131,072 bytes/token = 0.537 GB" in out
    assert "prefill 129.0 ms (given)" in out
    rows = table_rows(out, "link")
    assert [(r[0], r[5]) for r in rows] == [
        ("400 GB/s", "1.3"),
        ("64 GB/s", "8.4"),
        ("25 GB/s", "21.5"),
    ]
    assert [r[6] for r in rows] == ["0.1", "0.8", "2.1"]  # 10% left after streaming
    assert "gigabytes per second" in out


def test_kv_transfer_json_mha(capsys) -> None:
    argv = ["analyze", "kv-transfer", "--model", "llama-2-7b", "--prompt-tokens", "4096"]
    data = run_json(capsys, [*argv, "--link-gb-per-s", "400", "--link-gb-per-s", "64,25"])
    assert round(data["kv_gb"], 3) == 2.147
    assert [round(r["transfer_ms"], 1) for r in data["rows"]] == [5.4, 33.6, 85.9]
    assert [r["exposed_ms"] for r in data["rows"]] == [r["transfer_ms"] for r in data["rows"]]
    assert data["prefill_source"] == "none" and data["notes"]
    assert set(data["rows"][0]) == {
        "link",
        "kind",
        "bandwidth_gb_per_s",
        "latency_us",
        "parallel_links",
        "transfer_ms",
        "exposed_ms",
    }


def test_kv_transfer_aliases_agree(capsys) -> None:
    a = run_json(capsys, [*KV, "--link-gbps", "400,64,25"])
    b = run_json(capsys, [*KV, "--link-gb-per-s", "400,64,25"])
    assert a == b


def test_kv_transfer_catalog_links_and_gpu_prefill(capsys) -> None:
    catalog = load_catalog()
    data = run_json(capsys, KV)
    assert sorted(r["link"] for r in data["rows"]) == sorted(catalog.links)
    picked = run_json(
        capsys, [*KV, "--link", "pcie-gen5-x16", "ib-ndr-400", "--gpu", H100, "--mfu", "0.5"]
    )
    assert [r["link"] for r in picked["rows"]] == ["pcie-gen5-x16", "ib-ndr-400"]
    assert picked["prefill_source"] == "roofline"
    replica = rl.build_replica(catalog, "llama-3.1-8b", H100, mfu=0.5)
    assert picked["prefill_ms"] == pytest.approx(rl.prefill_ms(replica, 4096))
    out = run(capsys, [*KV, "--link", "nvlink4"])
    assert table_rows(out, "link")[0][:2] == ["nvlink4", "scale_up"]


def test_kv_transfer_help_says_gigabytes(capsys) -> None:
    assert cli.main(["analyze", "kv-transfer", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "gigaBYTES per second (GB/s" in text
    assert "--link-gb-per-s" in text and "--link-gbps" in text


# --------------------------------------------------------------------------- pool-ratio


def test_pool_ratio_table_reproduces_domain_figures(capsys) -> None:
    out = run(capsys, [*DOC_POOL, "--mix", "chat=0.8,agent=0.2"])
    assert "prefill cost: first-order" in out
    rows = {r[0]: r for r in table_rows(out, "workload  prompt")}
    # workload, prompt, output, prefix hit, B, TPOT, sized by, prefill, decode, ratio
    assert rows["chat"][1:7] == ["2,000", "300", "0%", "178", "30.2", "given"]
    assert round(float(rows["chat"][-1]), 1) == 1.3
    assert round(float(rows["agent"][-1])) == 12
    shares = {r[0]: r for r in table_rows(out, "workload  requests")}
    assert shares["agent"][1] == "20.0%"
    assert float(shares["agent"][2].rstrip("%")) > 90


def test_pool_ratio_json(capsys) -> None:
    data = run_json(capsys, [*DOC_POOL, "--mix", "chat=0.8,agent=0.2"])
    chat, agent = data["rows"]
    assert round(chat["ratio"], 1) == 1.3 and round(agent["ratio"]) == 12
    assert {"workload", "prompt_tokens", "output_tokens", "prefill_gpu_s"} <= set(chat)
    assert {"decode_gpu_s", "ratio", "decode_batch", "tpot_ms", "decode_point"} <= set(chat)
    assert chat["decode_batch"] == 178 and chat["tpot_ms"] == 30.2
    assert chat["decode_point"] == "given"
    blend = data["blend"]
    assert blend["ratio"] == pytest.approx(blend["prefill_gpu_s"] / blend["decode_gpu_s"])
    agent_share = next(s for s in blend["shares"] if s["workload"] == "agent")
    assert agent_share["prefill_load_share"] > 0.9
    assert data["prefill_cost"] == "first-order"


def test_pool_ratio_reports_the_cost_model_decode_point(capsys) -> None:
    catalog = load_catalog()
    data = run_json(capsys, [*POOL, "--workload", "chat"])
    (row,) = data["rows"]
    replica = rl.build_replica(catalog, "llama-3.1-8b", H100, mfu=0.5)
    point = sz.decode_operating_point(replica, 2150, 2150, tpot_budget_ms=50)
    assert (row["decode_batch"], row["tpot_ms"]) == (point.batch, point.tpot_ms)
    assert row["decode_point"] == "cost model" and row["tpot_budget_ms"] == 50
    out = run(capsys, [*POOL, "--workload", "chat"])
    assert "SLO 50 ms" in out and data["blend"] is None
    out = run(capsys, [*POOL, "--workload", "chat", "--tpot-ms", "20"])
    assert "budget 20 ms" in out


def test_pool_ratio_mix_alone_names_the_rows(capsys) -> None:
    data = run_json(capsys, [*POOL, "--mix", "chat=4,agent=1"])
    assert [r["workload"] for r in data["rows"]] == ["chat", "agent"]
    assert [s["request_share"] for s in data["blend"]["shares"]] == [0.8, 0.2]


# --------------------------------------------------------------------------- errors

BAD = [
    # chunk-budget
    ([*CHUNK, "--tp", "16"], "--tp: 16 exceeds the scale-up domain of h100-sxm5-80gb (8)"),
    ([*CHUNK, "--tp", "3"], "--tp: "),
    ([*CHUNK, "--tp", "two"], "--tp: 'two' is not an integer"),
    ([*CHUNK, "--model", "gpt-9"], "--model: unknown model 'gpt-9'"),
    ([*CHUNK, "--gpu", "h1000"], "--gpu: unknown gpu 'h1000'"),
    ([*CHUNK, "--prompt-tokens", "0"], "--prompt-tokens: "),
    ([*CHUNK, "--prompt-tokens", "-4096"], "--prompt-tokens: "),
    ([*CHUNK, "--prompt-tokens", "8192"], "--prompt-tokens: 8,192 tokens exceed"),
    ([*CHUNK, "--tpot-budget-ms", "0"], "--tpot-budget-ms: "),
    ([*CHUNK, "--budgets", "256,abc"], "--budgets: 'abc' is not a positive integer"),
    ([*CHUNK, "--budgets", "256,-1"], "--budgets: '-1' is not a positive integer"),
    ([*CHUNK, "--dtype", "fp4"], "--dtype: h100-sxm5-80gb has no fp4"),
    ([*CHUNK, "--kv-dtype", "int4"], "--kv-dtype: "),
    ([*CHUNK, "--mfu", "1.5"], "--mfu: "),
    ([*CHUNK, "--overlap", "2"], "--overlap: "),
    ([*CHUNK, "--model", "llama-3.1-70b"], "--tp: llama-3.1-70b in bf16 needs"),
    ([*CHUNK, "--model", "llama-3.1-405b", "--tp", "8"], "--gpu: llama-3.1-405b in bf16 needs"),
    # kv-transfer
    ([*KV, "--prompt-tokens", "0"], "--prompt-tokens: "),
    ([*KV, "--model", "gpt-9"], "--model: unknown model 'gpt-9'"),
    ([*KV, "--link", "warp-drive"], "--link: unknown link 'warp-drive'"),
    ([*KV, "--link-gbps", "400,fast"], "--link-gb-per-s: 'fast' is not a positive number"),
    ([*KV, "--link-gb-per-s", "0"], "--link-gb-per-s: '0' is not a positive number"),
    ([*KV, "--prefill-ms", "-1"], "--prefill-ms: "),
    ([*KV, "--prefill-ms", "10", "--gpu", H100], "--prefill-ms: "),
    ([*KV, "--gpu", H100, "--tp", "16"], "--tp: 16 exceeds the scale-up domain"),
    ([*KV, "--tp", "2"], "--tp: sets the prefill replica and needs --gpu"),
    ([*KV, "--overlap", "1.5"], "--overlap: "),
    # pool-ratio
    (POOL, "--workload: give at least one workload"),
    ([*POOL, "--workload", "gossip"], "--workload: unknown workload 'gossip'"),
    ([*POOL, "--mix", "chat=0.8,agent"], "--mix: 'agent' is not class=share"),
    ([*POOL, "--mix", "chat=0.8,gossip=0.2"], "--mix: unknown workload 'gossip'"),
    ([*POOL, "--workload", "chat", "--tpot-ms", "1"], "--tpot-ms: chat: TPOT 1 ms is below"),
    ([*POOL, "--workload", "chat", "--decode-batch", "0"], "--decode-batch: "),
    ([*POOL, "--workload", "chat", "--decode-batch", "99999"], "--decode-batch: 99999"),
    ([*POOL, "--workload", "chat", "--prefix-hit", "1"], "--prefix-hit: "),
    ([*POOL, "--workload", "chat", "--prefill-cost", "vibes"], "--prefill-cost: "),
    ([*POOL, "--workload", "chat", "--tp", "16"], "--tp: 16 exceeds"),
    ([*POOL, "--workload", "agent", "--model", "llama-2-7b"], "--workload: agent: prompt"),
]


@pytest.mark.parametrize(
    ("argv", "expected"), BAD, ids=[" ".join(b[0][1:2] + b[0][-2:]) for b in BAD]
)
def test_bad_input_exits_2_with_one_line_naming_the_option(capsys, argv, expected) -> None:
    assert cli.main(argv) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"fleetplan: error: {expected}"), line


def test_missing_required_option_is_a_usage_error(capsys) -> None:
    assert cli.main(["analyze", "chunk-budget", "--model", "llama-2-7b"]) == 2
    assert "--gpu" in one_error_line(capsys)
