"""The shipped calibration data: the importer's refusals, the fit / holdout split,
planner.fidelity's error and ratio functions, and whether a fit on the fit split
helps on the held-out split (on the shipped measurements)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections import Counter
from pathlib import Path
from statistics import median

import pytest
from script_support import load_script

from catalog.loader import load_catalog
from catalog.schema import Dtype
from planner import calibration as cb
from planner import fidelity as fd
from planner.levels import saturated_throughput

CAT = load_catalog()
ROOT = Path(__file__).resolve().parent.parent
H100 = "h100-sxm5-80gb"


IMPORTER = load_script("import_reference_measurements")


def more_entry(ident: str, **update) -> dict:
    """A measurements-more.json entry (an InferenceMAX DeepSeek-R1 run on 8 x H200)."""
    entry = {
        "category": "InferenceMAX / InferenceX (SemiAnalysis)",
        "framework": "SGLang (lmsysorg/sglang:v0.5.12-cu130)",
        "hardware": "NVIDIA H200 (SXM)",
        "num_accelerators": 8,
        "tp": 8,
        "pp": 1,
        "ep": 1,
        "dp_attention": False,
        "model": "DeepSeek-R1-0528 (deepseek-v3 architecture)",
        "precision": "FP8",
        "kv_dtype": None,
        "isl": 921.6,
        "osl": 921.6,
        "concurrency": 4,
        "request_rate_qps": None,
        "metric": "serving",
        "value": {"output_token_tput": 393.4, "mean_ttft_ms": 157.767, "mean_tpot_ms": 9.7},
        "source": "https://example.org/run",
        "notes": "decode TP8/EP1/dp-attn=False.",
        "id": ident,
    }
    entry.update(update)
    return entry


def write_sources(tmp_path: Path, entries: list[dict]) -> tuple[Path, Path, Path]:
    base = tmp_path / "calibration.json"
    base.write_text(json.dumps({"measurements": []}))
    more = tmp_path / "more.json"
    more.write_text(json.dumps({"measurements": entries}, indent=1))
    return base, more, tmp_path / "out" / "reference.json"


# --------------------------------------------------------------------------- importer


def test_importer_refuses_bad_records_with_file_line_and_reason(tmp_path, capsys):
    entries = [
        more_entry("x1"),
        more_entry("x2", source=None),
        more_entry("x3", value={"output_token_tput": -5.0}),
        more_entry("x1"),
        more_entry("x5", tp="eight"),
    ]
    base, more, out = write_sources(tmp_path, entries)
    lines = cb._array_entry_lines(more.read_text(), "measurements")
    assert (
        IMPORTER.main(
            [str(base), "--more", str(more), "--mlperf", "", "--dli", "", "--out", str(out)]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert f"{more}:{lines[1]}: missing source" in err
    assert f"{more}:{lines[2]}: value.output_token_tput must be a positive number" in err
    assert f"{more}:{lines[3]}: duplicate id 'x1'" in err
    assert f"{more}:{lines[4]}: tp must be a positive integer" in err
    assert f"{more}:{lines[0]}" not in err
    assert "4 bad entries: nothing written" in err
    assert not out.exists() and not out.parent.exists()


def test_importer_prices_expert_parallelism_and_keeps_unmodelled_runs_recorded(tmp_path):
    entries = [
        more_entry("a1"),
        more_entry("a2", ep=8, notes="decode TP8/EP8/dp-attn=False."),
        more_entry("a3", hardware="AMD Instinct MI455X"),
        more_entry("a4", framework="SGLang disagg", notes="PD-disaggregated"),
        more_entry("a5", notes="MI300X run used --enforce-eager (no HIP graphs)."),
    ]
    base, more, out = write_sources(tmp_path, entries)
    args = [str(base), "--more", str(more), "--mlperf", "", "--dli", "", "--out", str(out)]
    assert IMPORTER.main([*args, "--launch-settings", ""]) == 0
    doc = json.loads(out.read_text())
    by_id = {m["id"]: m for m in doc["measurements"]}
    assert set(by_id) == {"a1", "a2", "a4", "a5"}
    assert doc["skipped"] == {"hardware 'AMD Instinct MI455X' not in the catalog": 1}
    assert by_id["a1"]["model"] == "deepseek-v3" and "skip_reason" not in by_id["a1"]
    assert (by_id["a1"]["isl"], by_id["a1"]["concurrency"]) == (922, 4)
    assert by_id["a2"]["ep"] == 8 and "skip_reason" not in by_id["a2"]
    assert "disaggregated" in by_id["a4"]["skip_reason"]
    # an eager run (every kernel launched one by one) is not what the planner launches
    assert by_id["a5"]["skip_reason"] == "not modelled by the planner: " + IMPORTER.EAGER_REASON
    assert all(m["split"] in ("fit", "holdout") for m in doc["measurements"])
    got = cb.load_measurements([out], CAT)
    assert [m.usable for m in got] == [True, True, False, False]
    # a re-import keeps every point's split (held-out data stays held out)
    doc["measurements"][0]["split"] = "holdout"
    doc["measurements"][1]["split"] = "fit"
    # a recorded-only point was never fitted nor evaluated: its split is assigned afresh
    fresh_a4 = by_id["a4"]["split"]
    doc["measurements"][2]["split"] = "holdout" if fresh_a4 == "fit" else "fit"
    out.write_text(json.dumps(doc, indent=1))
    args = [str(base), "--more", str(more), "--mlperf", "", "--dli", "", "--out", str(out)]
    assert IMPORTER.main([*args, "--launch-settings", ""]) == 0
    again = {m["id"]: m["split"] for m in json.loads(out.read_text())["measurements"]}
    assert (again["a1"], again["a2"], again["a4"]) == ("holdout", "fit", fresh_a4)


#: The fields AMD's ROCm table rows share (MI300X, Llama-3.1-70B FP8, offline, 3,200 prompts).
AMD_TABLE_ROW = {
    "framework": "vLLM 0.11.1",
    "hardware": "AMD Instinct MI300X (192GB HBM3, 750W)",
    "model": "Llama 3.1 70B (amd/Llama-3.1-70B-Instruct-FP8-KV)",
    "kv_dtype": "FP8 (FP8-KV checkpoint)",
    "metric": "offline",
    "concurrency": 3200,
}


def test_an_ambiguous_throughput_is_read_as_total_tokens_where_the_readings_are_close():
    """AMD's table does not say whether "Throughput" counts output or all tokens: at
    128/2048 (output share 0.941) it is used, read as total tokens (the lower output
    throughput); at 2048/2048 (share 0.5) the readings differ 2x and it is recorded only."""
    amd = {
        **AMD_TABLE_ROW,
        "value": {"throughput_tok_s_as_reported": 13279.6},
        "notes": "AMBIGUITY: output-token or total-token throughput.",
    }
    row, why = IMPORTER.convert_more(more_entry("u1", **amd, isl=128, osl=2048))
    assert why is None and row is not None and row["skip_reason"] is None
    assert row["output_tok_s"] == pytest.approx(13279.6 * 2048 / 2176, abs=0.06)
    assert "read as total tokens" in row["note"] and "6.2% higher" in row["note"]
    assert row["num_requests"] == 3200 and math.isinf(row["request_rate_rps"])
    row, why = IMPORTER.convert_more(more_entry("u2", **amd, isl=2048, osl=2048))
    assert why is None and row is not None
    assert "ambiguous measurement" in row["skip_reason"] and "more than 11%" in row["skip_reason"]
    assert IMPORTER.output_share({"isl": 500, "osl": 2000}) == pytest.approx(0.8)
    assert IMPORTER.output_share({"isl": None, "osl": 2000}) == 0.0
    # a stated output throughput is taken as it is, whatever the notes say
    stated = {**amd, "value": {"output_token_tput": 5000.0}}
    row, _ = IMPORTER.convert_more(more_entry("u3", **stated, isl=128, osl=2048))
    assert row is not None and row["output_tok_s"] == 5000.0 and row["skip_reason"] is None


def test_a_stated_max_num_seqs_is_the_runs_batch_cap(tmp_path, capsys):
    """AMD ran its vLLM table with max-num-seqs equal to the prompt count (3,200), far
    above vLLM's default 1,024 that a run without one is priced at: the importer carries
    the stated cap into ``max_batch`` (notes or framework, either spelling), the prediction
    uses it, and an entry stating two different caps is refused with file, line and
    reason, nothing written."""
    amd = {
        **AMD_TABLE_ROW,
        "value": {"output_token_tput": 12498.4},
        "notes": "local client, 3200 prompts, max-num-seqs 3200, fixed ISL/OSL.",
    }
    row, why = IMPORTER.convert_more(more_entry("s1", **amd, isl=128, osl=2048))
    assert why is None and row is not None and row["max_batch"] == 3200
    row, _ = IMPORTER.convert_more(
        more_entry("s2", **{**amd, "notes": "", "framework": "vLLM 0.7.3 (max_num_seqs 512)"})
    )
    assert row is not None and row["max_batch"] == 512
    row, _ = IMPORTER.convert_more(more_entry("s3", **{**amd, "notes": "no cap stated"}))
    assert row is not None and row["max_batch"] is None
    # priced at the stated cap: 3,200 running sequences, not vLLM's default 1,024
    capped = cb.Measurement.model_validate(
        {"model": "llama-3.1-70b", "gpu": "mi300x", "tp": 8, "dtype": "fp8", "engine": "vllm",
         "isl": 128, "osl": 2048, "request_rate_rps": "inf", "num_requests": 3200,
         "output_tok_s": 12498.4}
    )  # fmt: skip
    default = cb.predict(capped, CAT).output_tok_s
    stated = cb.predict(capped.model_copy(update={"max_batch": 3200}), CAT).output_tok_s
    assert default and stated and stated > 1.05 * default
    bad = more_entry("s4", **{**amd, "framework": "vLLM (max-num-seqs 256)"})
    refused_on_import(tmp_path, capsys, bad, "states several max-num-seqs (256, 3200)")


def refused_on_import(tmp_path, capsys, entry, reason):
    """Importing ``entry`` fails naming its file, line and ``reason``; nothing is written."""
    base, more, out = write_sources(tmp_path, [entry])
    args = [str(base), "--more", str(more), "--mlperf", "", "--dli", "", "--out", str(out)]
    assert IMPORTER.main(args) == 1
    line = cb._array_entry_lines(more.read_text(), "measurements")[0]
    assert f"{more}:{line}: {reason}" in capsys.readouterr().err
    assert not out.exists()


def test_a_stated_memory_share_is_the_runs_kv_budget(tmp_path, capsys):
    """AccelMark ran vLLM at ``gpu_memory_utilization 0.9``, below the 0.92 plans launch
    with: the importer carries a stated share (vLLM's or SGLang's spelling) into
    ``memory_utilization``, the prediction gives the KV cache that share, and an entry
    stating two shares, or one outside (0, 1], is refused with file, line and reason."""
    amd = {**AMD_TABLE_ROW, "value": {"output_token_tput": 12498.4}}
    row, why = IMPORTER.convert_more(
        more_entry("m1", **{**amd, "notes": "vLLM 0.7.3, gpu_memory_utilization 0.9"})
    )
    assert why is None and row is not None and row["memory_utilization"] == 0.9
    row, _ = IMPORTER.convert_more(
        more_entry("m2", **{**amd, "framework": "SGLang (--mem-fraction-static=0.95)"})
    )
    assert row is not None and row["memory_utilization"] == 0.95
    row, _ = IMPORTER.convert_more(more_entry("m3", **{**amd, "notes": "defaults"}))
    assert row is not None and row["memory_utilization"] is None
    # a KV-bound run (70B FP8 on one H100 NVL, 2,048/2,048): less memory, fewer sequences
    # (on one H100 SXM its 72.7 GB of weights leave nothing at 0.9)
    point = cb.Measurement.model_validate(
        {"model": "llama-3.1-70b", "gpu": "h100-nvl-94gb", "tp": 1, "dtype": "fp8",
         "engine": "vllm", "isl": 2048, "osl": 2048, "request_rate_rps": "inf", "num_requests": 512,
         "output_tok_s": 1000.0}
    )  # fmt: skip
    default = cb.predict(point, CAT).output_tok_s
    stated = cb.predict(point.model_copy(update={"memory_utilization": 0.9}), CAT).output_tok_s
    assert default and stated and stated < 0.9 * default
    with pytest.raises(ValueError, match="memory_utilization"):
        cb.Measurement.model_validate({**point.model_dump(), "memory_utilization": 1.5})
    for notes, reason in (
        (
            "gpu_memory_utilization 0.9, mem-fraction-static 0.95",
            "states several memory shares (0.9, 0.95)",
        ),
        ("gpu-memory-utilization 1.5", "a memory share must be in (0, 1]"),
    ):
        refused_on_import(tmp_path, capsys, more_entry("m4", **{**amd, "notes": notes}), reason)


def test_launch_settings_reach_the_points_their_scripts_launched(tmp_path, capsys):
    """InferenceX's records do not state SGLang's memory share or KV format; its launch
    scripts do. A launch-settings group gives its ids the script's values and cites the
    script in their notes; an id not imported, one set twice, a value outside its range, a
    group without a cited script or one contradicting what the entry states is refused
    with file, line and reason, and nothing is written."""
    stated = {"notes": "decode TP8/EP1/dp-attn=False. mem-fraction-static 0.9"}
    base, more, out = write_sources(tmp_path, [more_entry("a1"), more_entry("a2", **stated)])
    script = "https://github.com/SemiAnalysisAI/InferenceX/blob/abc/benchmarks/x.sh#L40"
    settings = tmp_path / "launch.json"
    args = [str(base), "--more", str(more), "--mlperf", "", "--dli", "", "--out", str(out)]
    args += ["--launch-settings", str(settings)]

    def write(*groups: dict) -> list[int]:
        settings.write_text(json.dumps({"settings": list(groups)}, indent=1))
        return cb._array_entry_lines(settings.read_text(), "settings")

    good = {"ids": ["a1"], "memory_utilization": 0.82, "kv_dtype": "fp8", "source": script}
    write({**good, "token_budget": 512, "max_batch": 256})
    assert IMPORTER.main(args) == 0
    by_id = {m["id"]: m for m in json.loads(out.read_text())["measurements"]}
    assert (by_id["a1"]["token_budget"], by_id["a1"]["max_batch"]) == (512, 256)
    out.unlink()
    write(good)
    assert IMPORTER.main(args) == 0
    by_id = {m["id"]: m for m in json.loads(out.read_text())["measurements"]}
    assert (by_id["a1"]["memory_utilization"], by_id["a1"]["kv_dtype"]) == (0.82, "fp8")
    assert script in by_id["a1"]["note"]
    assert by_id["a2"]["memory_utilization"] == 0.9 and "kv_dtype" not in by_id["a2"]
    (point,) = [m for m in cb.load_measurements([out], CAT) if m.id == "a1"]
    assert point.memory_utilization == 0.82 and point.kv_dtype == Dtype.FP8
    out.unlink()
    for groups, reason in (
        ([{**good, "ids": ["a1", "zz"]}], "ids not imported: zz"),
        ([good, good], "a1 is already set by the group at"),
        ([{**good, "memory_utilization": 1.5}], "memory_utilization must be a number in (0, 1]"),
        ([{**good, "kv_dtype": "int4"}], "kv_dtype must be one of ('bf16', 'fp8')"),
        ([{**good, "token_budget": 512.5}], "token_budget must be an integer >= 2, not 512.5"),
        ([{**good, "max_batch": 0}], "max_batch must be an integer >= 1, not 0"),
        ([{**good, "max_batch": True}], "max_batch must be an integer >= 1, not True"),
        ([{**good, "source": "the script"}], "source must cite the launch script"),
        ([{"ids": ["a1"], "source": script}], "no setting given"),
        ([{**good, "ids": ["a2"]}], "a2 states memory_utilization 0.9, not the group's 0.82"),
    ):
        lines = write(*groups)
        assert IMPORTER.main(args) == 1
        assert f"{settings}:{lines[-1]}: {reason}" in capsys.readouterr().err
        assert not out.exists()


def test_the_shipped_launch_settings_cite_scripts_and_fit_what_was_run():
    """Every shipped launch setting names a script at a commit, and the run it describes
    fits at it: InferenceX ran DeepSeek-R1 FP8 on 4 x B200 at SGLang's 0.95 with an FP8
    KV cache (p0019), which SGLang's own default share (0.855) would not hold."""
    doc = json.loads(IMPORTER.DEFAULT_LAUNCH.read_text())
    assert doc["settings"]
    for group in doc["settings"]:
        assert "/blob/" in group["source"] and group["note"]
    points = {m.id: m for m in cb.load_reference_measurements(CAT)}
    p0019 = points["p0019"]
    assert (p0019.memory_utilization, p0019.kv_dtype, p0019.tp) == (0.95, Dtype.FP8, 4)
    assert cb.predict(p0019, CAT).output_tok_s
    assert cb.check_measurement(p0019, CAT) is None
    why = cb.check_measurement(p0019.model_copy(update={"memory_utilization": None}), CAT)
    assert why and "x 0.855 per GPU" in why


def test_schema_refuses_unmodelled_parallelism_without_a_reason(tmp_path):
    """DP attention without expert parallelism is not priced: it needs a skip_reason."""
    good = {
        "model": "llama-3.1-8b",
        "gpu": H100,
        "tp": 1,
        "dtype": "bf16",
        "isl": 128,
        "osl": 128,
        "concurrency": 4,
        "output_tok_s": 500.0,
        "id": "g",
    }
    path = tmp_path / "m.json"
    entries = [
        good,
        {**good, "id": "p", "dp_attention": True},
        {**good, "id": "s", "split": "test"},
    ]
    path.write_text(json.dumps({"measurements": entries}, indent=1))
    with pytest.raises(cb.MeasurementError) as info:
        cb.load_measurements([path], CAT)
    lines = cb._array_entry_lines(path.read_text(), "measurements")
    issues = dict(info.value.issues)
    assert "not modelled by the planner: give skip_reason" in issues[f"{path}:{lines[1]}"]
    assert "split" in issues[f"{path}:{lines[2]}"]
    assert f"{path}:{lines[0]}" not in issues


# --------------------------------------------------------------------------- split


def test_split_is_deterministic_and_stratified():
    items = [(f"id{i}", "g1", "serving") for i in range(20)]
    items += [(f"k{i}", "g1", "kernel") for i in range(3)]  # too few: no holdout of its own
    items += [(f"s{i}", "g2", "serving") for i in range(2)] + [("t0", "g2", "kernel")]
    items += [(f"u{i}", "g2", "recorded") for i in range(1)]  # g2 has 4 points in all
    first = cb.assign_splits(items)
    shuffled = items[:]
    random.Random(7).shuffle(shuffled)
    assert cb.assign_splits(shuffled) == first
    held = Counter((g, s) for i, g, s in items if first[i] == cb.Split.HOLDOUT)
    assert held[("g1", "serving")] == 5  # round(0.25 x 20)
    assert held[("g1", "kernel")] == 0
    assert sum(n for (g, _), n in held.items() if g == "g2") == 1  # the GPU's own minimum
    # the held-out ids are the lowest SHA-256 ranks of their stratum
    serving = sorted((i for i, g, s in items if (g, s) == ("g1", "serving")), key=cb.split_rank)
    assert {i for i in serving if first[i] == cb.Split.HOLDOUT} == set(serving[:5])


def test_shipped_split_is_the_assigned_one_and_every_gpu_with_data_has_holdout():
    everything = cb.load_reference_measurements(CAT, include_skipped=True)
    strata = [(m.id, m.gpu, "recorded" if not m.usable else m.kind.value) for m in everything]
    assigned = cb.assign_splits(strata)
    # a re-import keeps the split of every point already priced (held-out data stays out,
    # fitted data is not relabelled held out), so a stratum that grew may differ from a
    # fresh assignment on a few priced points; recorded points always follow it
    moved = [m for m in everything if m.split != assigned[m.id]]
    assert all(m.usable for m in moved)
    assert len(moved) <= 0.02 * len(everything)
    usable = [m for m in everything if m.usable]
    for gpu in {m.gpu for m in usable}:
        pts = [m for m in usable if m.gpu == gpu]
        if len(pts) >= cb.MIN_POINTS_FOR_HOLDOUT:
            assert cb.holdout_points(pts), gpu
    share = len(cb.holdout_points(usable)) / len(usable)
    assert 0.2 <= share <= 0.3
    assert not set(map(id, cb.fit_points(usable))) & set(map(id, cb.holdout_points(usable)))


def test_a_fit_reads_only_the_fit_split():
    pts = [m for m in cb.load_reference_measurements(CAT) if m.gpu == "a100-sxm-80gb"]
    cal = cb.fit_calibration("a100", pts, CAT)
    (f,) = cal.factors
    assert f.points == len(cb.fit_points(pts)) < len(pts)
    assert {r.point for r in cal.residuals} == {m.id for m in cb.fit_points(pts)}


# --------------------------------------------------------------------------- fidelity functions


def row(gpu, tp, measured, before, after, split="fit", model="m", shape="s", q="output_tok_s"):
    isl, osl = {"s": (100, 200), "near": (101, 203)}.get(shape, (100, 900))
    return fd.Row(
        isl=isl,
        osl=osl,
        load="offline",
        id=f"{gpu}-{shape}-{split}-{measured}",
        gpu=gpu,
        model=model,
        dtype="fp8",
        tp=tp,
        engine="-",
        shape=shape,
        split=split,
        quantity=q,
        measured=measured,
        before=before,
        after=after,
    )


def test_summaries_are_medians_of_signed_and_absolute_errors_per_split():
    rows = [
        row("g", 1, 100.0, 120.0, 101.0),  # +20% / +1%
        row("g", 1, 100.0, 70.0, 95.0),  # -30% / -5%
        row("g", 1, 100.0, 110.0, 104.0),  # +10% / +4%
        row("g", 1, 200.0, 100.0, None, split="holdout"),  # -50% / not predicted
    ]
    (fit, hold) = fd.summarize(rows, fd.overall)
    assert (fit.split, fit.values, fit.predicted) == ("fit", 3, 3)
    assert fit.median_abs_before == pytest.approx(0.2)
    assert fit.median_signed_before == pytest.approx(0.1)
    assert fit.median_abs_after == pytest.approx(0.04)
    assert fit.median_signed_after == pytest.approx(0.01)
    assert (hold.values, hold.predicted, hold.median_abs_after) == (1, 0, None)
    assert hold.median_signed_before == pytest.approx(-0.5)


def test_throughput_errors_are_split_by_shape_class_and_engine():
    """Decode-heavy (output >= 4x prompt), prefill-heavy (prompt >= 4x output) and
    balanced shapes are summarized apart, per engine; other measured values are left out."""
    assert fd.shape_class(128, 2048) == "decode-heavy"
    assert fd.shape_class(500, 2000) == "decode-heavy"  # exactly 4x
    assert fd.shape_class(2048, 128) == "prefill-heavy"
    assert fd.shape_class(1000, 1000) == fd.shape_class(501, 2000) == "balanced"
    rows = [
        row("g", 1, 100.0, 150.0, 140.0, shape="x"),  # 100/900: decode-heavy, +40%
        row("g", 1, 100.0, 130.0, 120.0, shape="x"),  # +20%
        row("g", 1, 100.0, 90.0, 95.0),  # 100/200: balanced, -5%
        row("g", 1, 50.0, 10.0, 10.0, shape="x", q="ttft_ms"),  # not a throughput
    ]
    dh, bal = sorted(fd.throughput_by_shape(rows), key=lambda s: s.key)[::-1]
    assert dh.key == ("decode-heavy", "-") and dh.values == 2
    assert dh.median_signed_after == pytest.approx(0.3)
    assert bal.key == ("balanced", "-") and bal.median_signed_after == pytest.approx(-0.05)
    by_value = {s.key for s in fd.summarize(rows, fd.by_engine_quantity)}
    assert by_value == {("-", "output_tok_s"), ("-", "ttft_ms")}


def test_errors_by_gpu_and_publisher():
    """Rows group by GPU and publisher (unknown: ``-``), each with its own medians."""
    amd, dstack = "amd.com", "github.com/dstackai/benchmarks"
    rows = [
        dataclasses.replace(row("mi300x", 8, 100.0, 130.0, 96.0), family=amd),  # -4%
        dataclasses.replace(row("mi300x", 8, 100.0, 140.0, 98.0, shape="near"), family=amd),  # -2%
        dataclasses.replace(
            row("mi300x", 8, 100.0, 150.0, 127.0, shape="x"), family=dstack
        ),  # +27%
        row("mi300x", 1, 100.0, 90.0, 93.0, shape="y"),  # -7%, publisher unknown
    ]
    got = {s.key: s for s in fd.summarize(rows, fd.by_gpu_publisher)}
    assert set(got) == {("mi300x", amd), ("mi300x", dstack), ("mi300x", "-")}
    assert got[("mi300x", amd)].values == 2
    assert got[("mi300x", amd)].median_signed_after == pytest.approx(-0.03)
    assert got[("mi300x", dstack)].median_signed_after == pytest.approx(0.27)


def test_cross_vendor_ratio_is_per_gpu_throughput_over_h100s():
    rows = [
        row(H100, 2, 1000.0, 1100.0, 1050.0),
        row("mi300x", 1, 800.0, 400.0, 700.0),
        row("l40s", 4, 900.0, 800.0, 1000.0, shape="near"),  # 101/203: the same workload
        row("mi300x", 1, 10.0, 10.0, 10.0, shape="other"),  # no H100 on that shape
    ]
    got = {x.gpu: x for x in fd.cross_vendor_ratios(rows)}
    assert set(got) == {"mi300x", "l40s"}
    r, n = got["mi300x"], got["l40s"]
    assert r.shape == "s"
    assert r.measured == pytest.approx(800.0 / (1000.0 / 2))
    assert r.predicted_before == pytest.approx(400.0 / 550.0)
    assert r.predicted_after == pytest.approx(700.0 / 525.0)
    assert n.measured == pytest.approx(225.0 / 500.0)
    assert (fd.round_sig(203.0), fd.round_sig(0.01234, 3), fd.round_sig(0.0)) == (200, 0.0123, 0)
    # a run is paired with the reference run of its own publication (MLPerf round) first
    v40, v41 = (
        "github.com/mlcommons/inference_results_v4.0",
        "github.com/mlcommons/inference_results_v4.1",
    )
    paired = [
        dataclasses.replace(row(H100, 2, 1000.0, 1100.0, 1050.0), id="a", family=v40),
        dataclasses.replace(row(H100, 2, 1200.0, 1100.0, 1050.0), id="b", family=v41),
        dataclasses.replace(row("mi300x", 1, 900.0, 400.0, 700.0), family=v41),
        dataclasses.replace(row("l40s", 1, 300.0, 400.0, 700.0), family="elsewhere"),
    ]
    got = {x.gpu: x.measured for x in fd.cross_vendor_ratios(paired)}
    assert got == pytest.approx({"mi300x": 900.0 / 600.0, "l40s": 300.0 / 500.0})
    url = "https://github.com/mlcommons/inference_results_v4.0/blob/3c4a1cf/closed/x.txt"
    assert fd.source_root(url) == v40
    assert fd.source_root("https://docs.nvidia.com/nim/benchmarking/x") == "docs.nvidia.com"
    assert fd.source_root(None) == ""


def test_shapes_and_gpus_without_data():
    m = cb.Measurement(
        model="llama-3.1-8b", gpu=H100, tp=1, dtype="bf16", isl=100, osl=50,
        request_rate_rps=float("inf"), num_requests=64, output_tok_s=1.0,
    )  # fmt: skip
    assert fd.shape(m) == "100/50 rate=inf N=64"
    assert fd.shape(m.model_copy(update={"request_rate_rps": None, "num_requests": None})) == (
        "100/50 offline"
    )
    everything = cb.load_reference_measurements(CAT, include_skipped=True)
    none = fd.gpus_without_data(CAT, everything)
    assert none == []  # every GPU in the catalog has a measurement
    # L40S at tp 4 runs over PCIe (cost model v2), so MLPerf's L40S points are priced;
    # Gaudi 3, A100 40GB, L4 and H100 PCIe (TensorRT-LLM issue #6294) from
    # catalog/measurements/sources/measurements-more-2.json; H100 PCIe's Llama-2-70B from
    # MLPerf v4.0 (HPE's bridged pairs priced, QCT's unbridged run recorded only)
    h100_pcie = {m.id: m for m in everything if m.gpu == "h100-pcie-80gb"}
    x032 = h100_pcie.pop("x032")
    assert (x032.output_tok_s, x032.isl, x032.osl, x032.num_requests) == (17500.0, 128, 128, 30000)
    assert sorted((m.id.split("-")[1], m.usable) for m in h100_pcie.values()) == [
        ("hpe", True), ("hpe", True), ("quanta_cloud_technology", False),
        ("quanta_cloud_technology", False),
    ]  # fmt: skip
    hpe = h100_pcie["mlperf40-hpe-hpe_proliant_dl380a_h100_pcie_80gbx4_trt_trt-offline"]
    assert (hpe.tp, hpe.num_gpus, hpe.output_tok_s, hpe.max_batch) == (2, 4, 3167.85, 896)
    assert "/inference_results_v4.0/blob/" in str(hpe.source)


# --------------------------------------------------------------------------- fit vs holdout


@pytest.fixture(scope="module")
def a100_fit_rows():
    points = [m for m in cb.load_reference_measurements(CAT) if m.gpu == "a100-sxm-80gb"]
    fits = fd.fit_per_gpu(points, CAT)
    return fd.evaluate(points, CAT, {g: r.fit.factors for g, r in fits.items()})


def _holdout_medians(rows, gpu=None, quantity=None):
    sel = [r for r in rows if r.split == "holdout" and (gpu is None or r.gpu == gpu)]
    sel = [r for r in sel if quantity is None or r.quantity == quantity]
    sel = [r for r in sel if r.signed_before is not None and r.signed_after is not None]
    return (
        len(sel),
        median(abs(r.signed_before) for r in sel),
        median(abs(r.signed_after) for r in sel),
    )


def test_a_calibration_on_the_fit_split_improves_the_held_out_split():
    """The shipped calibration (levels and fits set on the fit split only,
    scripts/calibrate_defaults.py) predicts the held-out split better than the analogy
    factors: 12.9% -> 11.4% median |error| over its 188 values (12.4% -> 12.2% before
    dense GEMMs and all-reduces ran at their measured kernel rates; 12.8% before the
    serving stack's TTFT of MLA models was priced, which helps both; 11.4% before MI300X's
    level was lifted to its MLPerf Llama-2-70B throughput and its DeepSeek-V3 priced at
    its own measured level: four DeepSeek closed-loop points of one sweep and two MLPerf
    server runs are held out); 13.3% -> 10.4% on the 168 values of the other GPUs."""
    rows = fd.evaluate(cb.load_reference_measurements(CAT), CAT, fd.shipped_factors(CAT))
    n, before, after = _holdout_medians(rows)
    assert n >= 150
    assert after < 0.99 * before
    others = [r for r in rows if r.gpu != "mi300x"]
    n, before, after = _holdout_medians(others)
    assert n >= 150
    assert after < 0.92 * before


def test_a100_kernels_at_the_measured_gemm_rate_and_the_a100_stays_scaled(a100_fit_rows):
    """Vidur's A100 profiles of a layer's linear layers (held out): with the GEMM rate's
    measured gain by token count (planner.kernels.gemm_token_gain) the analogy factors
    predicted them to 3% (13.7% without it); at aiconfigurator's measured kernel rate
    (0.9 x 0.734 of the peak at 512 tokens against the analogy MFU 0.55,
    planner.kernel_floors.dense_gemm_lift) they are 7-18% fast on the 2,048-4,096-token
    layers: Vidur's 2024 kernels ran slower than the engines' 2025-26 ones. 11.5% median;
    a free two-factor fit on the fit split (26 values, serving runs too) would take it to
    10%, but does not pass make calibrate-defaults' adoption rule, so A100 80GB stays
    scaled (its level 0.99)."""
    n, before, _ = _holdout_medians(a100_fit_rows, "a100-sxm-80gb", "layer_ms")
    assert n >= 3
    assert before < 0.15
    eff = CAT.gpus["a100-sxm-80gb"].efficiency
    assert eff.provenance == "scaled" and 0.95 < eff.level_scale <= 1.0


def test_the_shipped_levels_keep_held_out_throughput_within_target_and_not_optimistic():
    """The catalog's levels are set on the fit split's saturated throughputs
    (scripts/calibrate_defaults.py). On the held-out split's (86 values), the shipped
    factors are within the +-5% target and not optimistic (-4.6%), with a median |error|
    no more than 2 points above the analogy factors' (17.7% vs 16.5%). Before the measured
    FP8 GEMM efficiency and PCIe all-reduce, the analogy factors were optimistic there by
    +13.5% and the levels were what cut it (to +0.7%); with those kernels the analogy is
    at +1.6% and the levels lean conservative."""
    points = cb.load_reference_measurements(CAT)
    shipped = fd.shipped_factors(CAT)
    sat = {m.label for m in points if fd.saturated_throughput(m)}
    rows = [
        r
        for r in fd.evaluate([m for m in points if m.label in sat], CAT, shipped)
        if r.split == "holdout" and r.quantity == "output_tok_s" and r.before and r.after
    ]
    assert len(rows) >= 30
    after = median(r.signed_after for r in rows)
    assert -0.05 <= after <= 0.01
    assert (
        median(abs(r.signed_after) for r in rows)
        <= median(abs(r.signed_before) for r in rows) + 0.02
    )


def test_the_shipped_factors_are_what_plans_are_priced_with():
    """bench/fidelity.py's "after" column (fd.shipped_factors) predicts every point as
    the catalog itself does (no per-dtype entry or derating lost by passing the three
    factors), one point per GPU, dtype and kind; and a GPU's entry follows its catalog
    efficiency (a changed catalog is what is reported)."""
    shipped = fd.shipped_factors(CAT)
    assert set(shipped) == set(CAT.gpus)
    seen = set()
    for m in cb.load_reference_measurements(CAT):
        key = (m.gpu, m.dtype, m.kind, m.disaggregated)
        if not m.usable or key in seen:
            continue
        seen.add(key)
        a, b = cb.predict(m, CAT, shipped[m.gpu]), cb.predict(m, CAT)
        assert a == b, m.label
    assert len(seen) >= 20
    gpu = CAT.gpus[H100]
    eff = gpu.efficiency.model_copy(update={"decode_mbu": 0.61})
    other = CAT.model_copy(
        update={"gpus": {**CAT.gpus, H100: gpu.model_copy(update={"efficiency": eff})}}
    )
    assert fd.shipped_factors(other)[H100] == (eff.prefill_mfu, 0.61, eff.step_overhead_ms)


def _extractor():
    return load_script("extract_mlperf_v41")


def test_mlperf_summaries_are_read_in_their_units():
    ex = _extractor()
    offline = "Samples per second: 84.4792\nTokens per second: 24524.9\nResult is : VALID\n"
    assert ex.parse_summary(offline, "Offline") == {
        "samples_per_s": 84.4792,
        "tokens_per_s": 24524.9,
    }
    server = (
        "Completed samples per second    : 74.42\nCompleted tokens per second: 21605.79\n"
        "Result is : VALID\nMean First Token latency (ns)               : 275926440\n"
        "Mean Time to Output Token (ns)                : 154960329\n"
    )
    got = ex.parse_summary(server, "Server")
    assert got["ttft_ms"] == pytest.approx(275.92644) and got["tpot_ms"] == pytest.approx(
        154.960329
    )
    with pytest.raises(ValueError, match="not VALID"):
        ex.parse_summary(offline.replace("VALID", "INVALID"), "Offline")
    # the shipped records: per replica, isl = the OpenOrca mean, osl = tokens / samples
    doc = json.loads((ROOT / "catalog/measurements/sources/mlperf-inference-v4.1.json").read_text())
    h100 = next(
        m for m in doc["measurements"] if m["id"].endswith("dgx-h100_h100-sxm-80gbx8_trt-offline")
    )
    assert (h100["tp"], h100["isl"], h100["osl"]) == (2, 222, 290)
    assert h100["output_tok_s"] == pytest.approx(24524.9 / 4, rel=1e-4)
    assert all("inference_results_v4.1" in m["source"] for m in doc["measurements"])


def test_mlperf_server_runs_are_closed_loops_of_their_measured_occupancy():
    """Little's law: MI300X's Server run, 8.59 requests/s with TTFT 401.874 ms and TPOT
    153.378 ms over 293 tokens, held 8.59 x (401.874 + 292 x 153.378) / 1000 = 388.2
    requests in the system; the record is priced as that closed loop."""
    assert IMPORTER.littles_law_concurrency(8.59, 401.874, 153.378, 293) == pytest.approx(
        8.59 * (401.874 + 292 * 153.378) / 1000
    )
    src = "https://github.com/mlcommons/inference_results_v4.1/blob/x/closed/AMD/s.txt"
    entry = {
        "id": "mlperf41-amd-server",
        "model": "llama-2-70b",
        "gpu": "mi300x",
        "tp": 1,
        "dtype": "fp8",
        "isl": 222,
        "osl": 293,
        "output_tok_s": 2520.27,
        "request_rate_rps": 8.59,
        "ttft_ms": 401.874,
        "tpot_ms": 153.378,
        "source": src,
        "note": "n.",
    }
    row, _ = IMPORTER.convert_mlperf(entry)
    assert row["concurrency"] == 388.2 and "request_rate_rps" not in row
    assert row["offered_rate_rps"] == 8.59
    assert "Little's law: 8.59 requests/s" in row["note"]
    # per replica: the rate is the record's throughput over its output length
    assert row["output_tok_s"] / row["osl"] == pytest.approx(8.59, rel=0.01)
    # its throughput is the offered load: no level rests on it
    m = cb.Measurement.model_validate({**row, "split": "fit"})
    assert not saturated_throughput(m)
    assert saturated_throughput(m.model_copy(update={"offered_rate_rps": None}))
    with pytest.raises(ValueError, match="give concurrency with it"):
        cb.Measurement.model_validate({**entry, "offered_rate_rps": 8.59})
    # every sample at once (rate inf) with latencies: not an open loop to convert
    assert (
        IMPORTER.convert_mlperf({**entry, "request_rate_rps": "inf"})[0]["request_rate_rps"]
        == math.inf
    )
    assert entry["request_rate_rps"] == 8.59  # the source entry is not changed
    # an Offline run (every sample at once) and a DLI course run stay as they are
    offline = {k: v for k, v in entry.items() if k not in ("ttft_ms", "tpot_ms")}
    assert (
        IMPORTER.convert_mlperf({**offline, "request_rate_rps": "inf"})[0]["request_rate_rps"]
        == math.inf
    )
    dli = {**entry, "source": "https://github.com/NVIDIA/dli/x.csv"}
    assert IMPORTER.convert_mlperf(dli)[0]["request_rate_rps"] == 8.59
    # the shipped points: every MLPerf Server run is such a closed loop
    points = {m.id: m for m in cb.load_reference_measurements(CAT, include_skipped=True)}
    servers = [m for i, m in points.items() if i.startswith("mlperf4") and i.endswith("-server")]
    assert len(servers) >= 10
    assert all(m.concurrency and m.request_rate_rps is None for m in servers)
    assert all(m.offered_rate_rps and not saturated_throughput(m) for m in servers)
    amd = points["mlperf41-amd-1xmi300x_2xepyc-9374f-server"]
    assert amd.concurrency == pytest.approx(388.2, abs=0.05)


# --------------------------------------------------------------------------- NVIDIA DLI course runs


def _dli():
    return load_script("extract_dli_benchmarks")


def _trt_row(**update) -> dict:
    row = {
        "Model": "LLaMA v2 70B",
        "GPU": "L40S",
        "Precision": "FP8",
        "Tensor Model Parallel Size": "4",
        "Pipeline Model Parallel Size": "1",
        "Input/Output Lengths": "128,2048",
        "Batch Size": "64",
        "Throughput (tokens / sec)": "1000.5",
        "Token-to-token Latency (ms)": "50.0",
        "1st Token Latency (ms)": "900.0",
        "Enable Custom All Reduce": "No",
    }
    row.update(update)
    return row


def test_dli_static_batches_keep_the_saturated_run_and_its_throughput_only():
    ex = _dli()
    rows = [
        _trt_row(),
        _trt_row(**{"Batch Size": "256", "Throughput (tokens / sec)": "2500.0"}),
        _trt_row(**{"Batch Size": "512", "Throughput (tokens / sec)": ""}),  # failed run
        _trt_row(GPU="L40"),  # not in the catalog
        _trt_row(Model="Falcon 180B"),
        _trt_row(**{"Pipeline Model Parallel Size": "2"}),
        _trt_row(Precision="Mixed", GPU="A100-SXM4-80GB", **{"Batch Size": "8"}),
    ]
    got = {r["id"]: r for r in ex.trt_records(rows, "https://example.org/trt.csv")}
    assert sorted(got) == [
        "dli-trt09-llama-2-70b-a100-sxm-80gb-bf16-tp4-128x2048-b8",
        "dli-trt09-llama-2-70b-l40s-fp8-tp4-128x2048-b256",
    ]
    r = got["dli-trt09-llama-2-70b-l40s-fp8-tp4-128x2048-b256"]
    assert (r["gpu"], r["model"], r["dtype"], r["tp"], r["engine"]) == (
        "l40s", "llama-2-70b", "fp8", 4, "trtllm",
    )  # fmt: skip
    assert (r["isl"], r["osl"], r["output_tok_s"]) == (128, 2048, 2500.0)
    assert (r["request_rate_rps"], r["num_requests"], r["max_batch"]) == ("inf", 256, 256)
    # a static batch's latencies are not in-flight batching's means: note only
    assert "ttft_ms" not in r and "tpot_ms" not in r and "50.0 ms" in r["note"]


def test_dli_moe_runs_are_recorded_not_fitted_fake_weights_route_alike():
    """Fake weights send every token to the same experts: Mixtral's static batches are
    kept with a skip_reason that says why; dense models' runs are fitted."""
    ex = _dli()
    rows = [
        _trt_row(Model="Mixtral 8x7B", GPU="H100 80GB HBM3", Precision="Mixed",
                 **{"Tensor Model Parallel Size": "2"}),
        _trt_row(),
    ]  # fmt: skip
    got = {r["model"]: r for r in ex.trt_records(rows, "https://example.org/trt.csv")}
    assert got["mixtral-8x7b"]["skip_reason"] == ex.MOE_SKIP_REASON
    assert "fake weights" in ex.MOE_SKIP_REASON and "not fitted" in ex.MOE_SKIP_REASON
    assert "skip_reason" not in got["llama-2-70b"]


def test_dli_mixtral_steps_are_faster_than_reading_every_expert_allows():
    """The evidence behind MOE_SKIP_REASON, from the committed records: on A100, H100 SXM
    and L40S every Mixtral static batch of at most 64 sequences decoded a token faster
    than reading its weights (all eight experts) and its KV cache once at the peak HBM
    bandwidth allows, so its router did not spread the batch over the experts."""
    from planner import architecture as arch

    cat = load_catalog()
    model = cat.models["mixtral-8x7b"]
    assert model.reference is not None
    doc = json.loads((ROOT / "catalog/measurements/sources/nvidia-dli-benchmarks.json").read_text())
    mixtral = [m for m in doc["measurements"] if m["model"] == model.id]
    assert mixtral and all(m.get("skip_reason") for m in mixtral)
    runs = [
        m for m in mixtral
        if m["gpu"] in ("a100-sxm-80gb", "h100-sxm5-80gb", "l40s") and m["max_batch"] <= 64
    ]  # fmt: skip
    assert len(runs) == 8
    kv_per_token = arch.kv_bytes_per_token_per_layer(model, Dtype.BF16) * model.num_layers
    for m in runs:
        tpot_ms = float(m["note"].split("token-to-token latency ")[1].split(" ms")[0])
        weights = model.reference.total_params_b * 1e9 * 2
        kv = m["max_batch"] * (m["isl"] + m["osl"] / 2) * kv_per_token
        floor_ms = (weights + kv) / m["tp"] / (cat.gpus[m["gpu"]].mem_bw_tbps * 1e9)
        assert tpot_ms < 0.95 * floor_ms, m["id"]


def test_dli_nim_runs_are_recorded_at_saturation_with_their_units():
    ex = _dli()
    base = {
        "task_inputs-model": "meta-llama3-8b-instruct",
        "task_inputs-GPU": "A100-SXM4-80GB",
        "task_inputs-n_gpus": "1",
        "task_inputs-precision": "fp16",
        "input_config-synthetic_input_tokens_mean": "200",
        "input_config-output_tokens_mean": "1000",
        "input_config-concurrency": "250",
        "num_input_token-avg": "199.6",
        "num_output_token-avg": "1000.0",
        "output_token_throughput-avg": "3000.0",
        "time_to_first_token-avg": "120500000.0",  # ns
        "inter_token_latency-avg": "40250000.0",
    }
    rows = [base, {**base, "input_config-concurrency": "10"}, {**base, "task_inputs-GPU": "L40"}]
    (r,) = ex.nim_records(rows, "https://example.org/nim.csv")
    assert (r["model"], r["gpu"], r["dtype"], r["tp"], r["concurrency"]) == (
        "llama-3.1-8b", "a100-sxm-80gb", "bf16", 1, 250,
    )  # fmt: skip
    assert (r["isl"], r["osl"]) == (200, 1000)
    assert r["ttft_ms"] == pytest.approx(120.5) and r["tpot_ms"] == pytest.approx(40.25)
    assert r["skip_reason"] == ex.NIM_SKIP_REASON  # recorded, not fitted


def test_dli_records_are_imported_with_their_source_at_a_commit():
    """The shipped file is what the importer took in: every record is in reference.json
    with its source at a commit, TensorRT-LLM 0.9.0 runs priced on five GPUs, NIM runs
    recorded only; none comes from the validation set."""
    doc = json.loads((ROOT / "catalog/measurements/sources/nvidia-dli-benchmarks.json").read_text())
    ref = {m.id: m for m in cb.load_reference_measurements(CAT, include_skipped=True)}
    ids = [m["id"] for m in doc["measurements"]]
    assert ids and all(i in ref for i in ids)
    assert all(
        "/blob/" in m["source"] and "perf-overview" not in m["source"] for m in doc["measurements"]
    )
    trt = [ref[i] for i in ids if i.startswith("dli-trt09-")]
    assert {m.gpu for m in trt if m.usable} == {
        "a100-sxm-80gb", "h100-nvl-94gb", "h100-sxm5-80gb", "h200-sxm-141gb", "l40s",
    }  # fmt: skip
    assert all(not ref[i].usable for i in ids if i.startswith("dli-nim-"))


def test_importer_reads_all_at_once_runs_of_normalized_records(tmp_path, capsys):
    base, more, out = write_sources(tmp_path, [])
    rec = {
        "id": "n1", "model": "llama-2-7b", "gpu": H100, "tp": 1, "dtype": "bf16",
        "engine": "trtllm", "isl": 128, "osl": 128, "output_tok_s": 5000.0,
        "request_rate_rps": "inf", "num_requests": 64, "max_batch": 64,
        "source": "https://example.org/x",
    }  # fmt: skip
    norm = tmp_path / "norm.json"
    norm.write_text(json.dumps({"measurements": [rec, {**rec, "id": "n2", "request_rate_rps": 0}]}))
    args = [str(base), "--more", str(more), "--mlperf", "", "--dli", str(norm), "--out", str(out)]
    args += ["--launch-settings", ""]
    assert IMPORTER.main(args) == 1
    assert "value.request_rate_rps must be a positive number" in capsys.readouterr().err
    norm.write_text(json.dumps({"measurements": [rec]}))
    assert IMPORTER.main(args) == 0
    (m,) = cb.load_measurements([out], CAT)
    assert math.isinf(m.request_rate_rps) and m.num_requests == 64 and m.usable


def test_mlperf_v41_offline_ratios_to_h100_are_within_the_target():
    """MLPerf Inference v4.1 offline Llama-2-70B (in the fit split, priced with the shipped
    factors): per-GPU throughput relative to H100 SXM within +-15% of the measured ratio
    for H200 (1.21 against 1.28, since dense GEMMs and all-reduces run at their measured
    rates: H200's tp-1 run has no all-reduce, H100's tp-2 one has; it was 1.07 before),
    MI300X (0.88 against 0.96-1.00), L40S, H100 NVL and B200 in FP4 (3.61 against 3.67
    since its NVFP4 GEMMs run at their measured rate and gain and its DeepSeek-V3 runs no
    longer pull its dense level down; 3.07 before, when FP4 GEMMs took an assumed derate
    and no gain with the step's tokens)."""
    points = [m for m in cb.load_reference_measurements(CAT) if m.id and "offline" in m.id]
    points = [m for m in points if m.id.startswith("mlperf41-")]
    per_gpu: dict[str, list[tuple[float, float]]] = {}
    for m in points:
        pred = cb.predict(m, CAT).output_tok_s
        assert pred and m.output_tok_s
        per_gpu.setdefault(m.gpu, []).append((pred / m.tp, m.output_tok_s / m.tp))
    (h100,) = per_gpu.pop("h100-sxm5-80gb")
    checked = set()
    for gpu, runs in per_gpu.items():
        for pred, meas in runs:
            off = (pred / h100[0]) / (meas / h100[1]) - 1
            assert abs(off) <= 0.15, (gpu, off)
            checked.add(gpu)
    assert checked == {"mi300x", "l40s", "h100-nvl-94gb", "h200-sxm-141gb", "b200"}


def test_mlperf_v40_h100_variants_against_the_same_rounds_h100_sxm():
    """MLPerf Inference v4.0 offline Llama-2-70B, each GPU against the same round's H100
    SXM (TensorRT 9.3, 10% below its prediction where v4.1's sits on it): H100 PCIe in
    bridged pairs (HPE; measured 0.58) predicted within +-15% since its level is set on
    these runs (0.69 with its one Llama-3.1-8B point, +18%), H100 NVL (0.69) too."""
    points = [
        m for m in cb.load_reference_measurements(CAT)
        if m.id and m.id.startswith("mlperf40-") and m.id.endswith("-offline")
    ]  # fmt: skip
    per_gpu = {}
    for m in points:
        pred = cb.predict(m, CAT).output_tok_s
        assert pred and m.output_tok_s
        per_gpu[m.gpu] = (pred / m.tp, m.output_tok_s / m.tp)
    h100 = per_gpu.pop("h100-sxm5-80gb")
    assert set(per_gpu) == {"h100-pcie-80gb", "h100-nvl-94gb"}
    measured = {g: meas / h100[1] for g, (_, meas) in per_gpu.items()}
    assert measured["h100-pcie-80gb"] == pytest.approx(0.581, abs=0.001)
    for gpu, (pred, meas) in per_gpu.items():
        off = (pred / h100[0]) / (meas / h100[1]) - 1
        assert abs(off) <= 0.15, (gpu, off)


def test_mi300x_held_out_error_stays_bounded():
    """MI300X's held-out values (22: four DeepSeek-V3 closed-loop points of one sweep,
    Llama-3.1-405B runs on an old vLLM, two MLPerf server runs) are its worst: 51% median
    |error| since its level was lifted to its MLPerf Llama-2-70B throughput (23.5%
    before). A fence: the next change to MI300X's pricing must not make them worse."""
    rows = fd.evaluate(cb.load_reference_measurements(CAT), CAT, fd.shipped_factors(CAT))
    n, _, after = _holdout_medians([r for r in rows if r.gpu == "mi300x"])
    assert n >= 20
    assert after <= 0.53


def test_eager_runs_are_recorded_not_fitted_and_pay_what_their_reason_says():
    """dstack's MI300X 405B runs launched vLLM with --enforce-eager. 6 of the 15 pair with
    an AMD graph-captured run of the same GPU, model, tp, shape and batch: all prompts at
    once, so a step is about ``1000 x prompts / output_tok_s`` ms. The eager steps are the
    5-17 ms longer that the recorded reason states, the gap growing with the prompt (the
    pairs also differ in KV dtype, vLLM version and harness: not launches alone)."""
    everything = cb.load_reference_measurements(CAT, include_skipped=True)
    eager = [m for m in everything if "--enforce-eager" in (m.note or "")]
    assert len(eager) == 15
    assert all(not m.usable and IMPORTER.EAGER_REASON in (m.skip_reason or "") for m in eager)

    def key(m):
        return (m.gpu, m.model, m.tp, m.isl, m.osl, m.num_requests)

    graph = {key(m): m for m in everything if m.usable and m.id.startswith("x")}
    pairs = [(m, graph[key(m)]) for m in eager if key(m) in graph]
    assert len(pairs) == 6
    extra = {}
    for e, g in pairs:
        assert (e.kv_dtype, g.kv_dtype) == (Dtype.FP8, Dtype.BF16)
        extra[(e.isl, e.num_requests)] = (
            1000 * e.num_requests * (1 / e.output_tok_s - 1 / g.output_tok_s)
        )
    assert all(5.0 <= ms <= 17.0 for ms in extra.values()), extra
    assert extra[(2048, 64)] > 2 * extra[(128, 64)]  # longer prompts, a larger gap
