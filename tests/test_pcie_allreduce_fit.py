"""The all-reduce over PCIe fitted to each GPU's own tp 8 runs (server.pcie_allreduce,
scripts/fit_pcie_allreduce.py, planner.collectives.pcie_allreduce_alpha_beta)."""

from __future__ import annotations

from statistics import median

import pytest
from pydantic import ValidationError
from script_support import load_script

from catalog.loader import load_catalog
from catalog.schema import PcieAllReduce
from planner import calibration as cb
from planner import kernels
from planner import roofline as rl

CAT = load_catalog()
FIT = load_script("fit_pcie_allreduce")
POINTS = [m for m in cb.load_reference_measurements(CAT) if m.usable]


def test_fitted_bus_replaces_the_tp8_figure_and_never_slows_a_smaller_ring():
    """Llama-70B's decode all-reduce of 64 tokens (1,048,576 bytes) at tp 8 on a server
    fitted at 16.5 GB/s: 24.53 us + 1.75 x 1,048,576 B / 16.5e9 B/s = 0.1357 ms (0.2122
    ms at the conservative 9.78). A smaller ring takes max(measured, fitted): a server
    fitted at 26.6 GB/s runs tp 4 at 26.6, not 19.56; one fitted at 1.74 keeps 19.56 at
    tp 4 (no measurement says a smaller ring is slower there). Never past the link."""
    pcie = CAT.links["pcie-gen4-x16"]
    m = 64 * 8192 * 2
    fitted = pcie.model_copy(update={"pcie_tp8_bus_gb_per_s": 16.5})
    assert kernels.pcie_allreduce_alpha_beta(fitted, 8) == (24.53, 16.5)
    assert kernels.allreduce_ms(fitted, 8, m) == pytest.approx(24.53e-3 + 1.75 * m / 16.5e9 * 1e3)
    assert kernels.allreduce_ms(fitted, 8, m) == pytest.approx(0.1357, abs=1e-4)
    assert kernels.allreduce_ms(pcie, 8, m) == pytest.approx(0.2122, abs=1e-4)
    assert kernels.pcie_allreduce_alpha_beta(fitted, 16) == (24.53, 16.5)
    assert kernels.pcie_allreduce_alpha_beta(fitted, 4) == (12.41, 19.56)
    fast = pcie.model_copy(update={"pcie_tp8_bus_gb_per_s": 26.6})
    assert kernels.pcie_allreduce_alpha_beta(fast, 4) == (12.41, 26.6)
    assert kernels.pcie_allreduce_alpha_beta(fast, 2) == (7.0, 26.6)
    slow = pcie.model_copy(update={"pcie_tp8_bus_gb_per_s": 1.74})
    assert kernels.pcie_allreduce_alpha_beta(slow, 8) == (24.53, 1.74)
    assert kernels.pcie_allreduce_alpha_beta(slow, 4) == (12.41, 19.56)
    huge = pcie.model_copy(update={"pcie_tp8_bus_gb_per_s": 500.0})
    assert kernels.pcie_allreduce_alpha_beta(huge, 8) == (24.53, pcie.bandwidth_gb_per_s)


def test_a_replica_carries_its_servers_fit_only_over_pcie():
    l40s = rl.build_replica(CAT, "llama-2-70b", "l40s", tp=8, dtype="fp8", engine="trtllm")
    fit = CAT.gpus["l40s"].server.pcie_allreduce
    assert fit is not None and l40s.scale_up_link is not None
    assert l40s.scale_up_link.id == "pcie-gen4-x16"
    assert l40s.scale_up_link.pcie_tp8_bus_gb_per_s == fit.tp8_bus_gb_per_s
    # the catalog's link itself is unchanged (other GPUs on it keep the measured figure)
    assert CAT.links["pcie-gen4-x16"].pcie_tp8_bus_gb_per_s is None
    l4 = rl.build_replica(CAT, "llama-3.1-8b", "l4", tp=8, engine="trtllm")
    assert CAT.gpus["l4"].server.pcie_allreduce is None
    assert l4.scale_up_link is not None and l4.scale_up_link.pcie_tp8_bus_gb_per_s is None
    # H100 NVL: its NVLink pairs are the catalog's bridge; past a pair, PCIe with the fit
    nvl2 = rl.build_replica(CAT, "llama-2-70b", "h100-nvl-94gb", tp=2, dtype="fp8")
    nvl8 = rl.build_replica(CAT, "llama-2-70b", "h100-nvl-94gb", tp=8, dtype="fp8")
    assert nvl2.scale_up_link == CAT.links["nvlink4-bridge"]
    assert nvl8.scale_up_link is not None and nvl8.scale_up_link.pcie_tp8_bus_gb_per_s == 26.6
    # a GPU on NVSwitch never crosses PCIe
    h100 = rl.build_replica(CAT, "llama-2-70b", "h100-sxm5-80gb", tp=8, dtype="fp8")
    assert h100.scale_up_link == CAT.links["nvlink4"]


def test_faster_servers_predict_more_throughput_at_tp8_only():
    """The fit moves tp 8 (and nothing at tp 1): L40S Llama-2-70B FP8 decode per GPU."""
    runs = FIT.tp8_runs(POINTS, CAT, "l40s")
    assert runs
    slow = FIT.with_bus(CAT, "l40s", 4.0)
    fast = FIT.with_bus(CAT, "l40s", 16.0)
    assert FIT.throughput_ratio(runs, slow) > FIT.throughput_ratio(runs, fast)
    tp1 = [m for m in POINTS if m.gpu == "l40s" and m.tp == 1]
    assert tp1
    for m in tp1:
        assert cb.predict(m, slow).output_tok_s == cb.predict(m, fast).output_tok_s


def test_fit_recovers_a_known_bus_bandwidth():
    """Measurements made by the model itself at 7.0 GB/s (times a per-run error whose
    median is 1) are fitted back to 7.0 GB/s."""
    truth = FIT.with_bus(CAT, "l40s", 7.0)
    runs = FIT.tp8_runs(POINTS, CAT, "l40s")
    errors = [0.9, 1.0, 1.1, 1.05, 0.95][: len(runs)]
    assert median(errors) == 1.0
    synthetic = [
        m.model_copy(update={"output_tok_s": cb.predict(m, truth).output_tok_s * e})
        for m, e in zip(runs, errors, strict=False)
    ]
    fit = FIT.fit_tp8_bus_gb_per_s(synthetic, FIT.with_bus(CAT, "l40s", None), "l40s")
    assert fit is not None
    bus, n = fit
    assert n == len(runs)
    assert bus == pytest.approx(7.0, rel=0.01)


def test_fit_is_bounded_and_needs_pcie_runs():
    runs = FIT.tp8_runs(POINTS, CAT, "l40s")
    impossible = [m.model_copy(update={"output_tok_s": m.output_tok_s * 100}) for m in runs]
    bus, _ = FIT.fit_tp8_bus_gb_per_s(impossible, CAT, "l40s")
    assert bus == CAT.links["pcie-gen4-x16"].bandwidth_gb_per_s
    hopeless = [m.model_copy(update={"output_tok_s": m.output_tok_s / 100}) for m in runs]
    bus, _ = FIT.fit_tp8_bus_gb_per_s(hopeless, CAT, "l40s")
    assert bus == FIT.MIN_BUS_GB_PER_S
    # NVSwitch GPUs have no PCIe tp 8 runs to fit; nor does a GPU without tp 8 runs
    assert FIT.tp8_runs(POINTS, CAT, "h100-sxm5-80gb") == []
    assert FIT.fit_tp8_bus_gb_per_s(POINTS, CAT, "h100-sxm5-80gb") is None
    assert FIT.fit_tp8_bus_gb_per_s(POINTS, CAT, "l4") is None


@pytest.mark.parametrize("gpu", ["l40s", "h100-nvl-94gb", "a10g"])
def test_shipped_fit_is_the_fit_of_the_shipped_data(gpu):
    """The catalog's figure is what the script fits on the shipped measurements with the
    shipped factors (rerun scripts/fit_pcie_allreduce.py --write after a recalibration)."""
    shipped = CAT.gpus[gpu].server.pcie_allreduce
    assert shipped is not None
    fit = FIT.fit_tp8_bus_gb_per_s(POINTS, FIT.with_bus(CAT, gpu, None), gpu)
    assert fit is not None
    bus, n = fit
    assert n == shipped.points
    assert shipped.tp8_bus_gb_per_s == pytest.approx(bus, rel=0.02)
    assert "fit_pcie_allreduce" in shipped.source


def test_l40s_servers_fit_between_the_measured_rings_and_a10g_below():
    """What the fits say about the servers: NVIDIA's L40S server runs an 8-GPU ring at
    16-17 GB/s (between the aiconfigurator server's tp 2 19.56 and the conservative 9.78);
    AWS g5 (A10G) at under 2 GB/s, as slow as aiconfigurator's L40S server without
    peer-to-peer measured at tp 8 (1.51); H100 NVL on PCIe Gen5 faster than Gen4 allows."""

    def bus(g: str) -> float:
        fit = CAT.gpus[g].server.pcie_allreduce
        assert fit is not None
        return fit.tp8_bus_gb_per_s

    assert 9.78 < bus("l40s") < 19.56
    assert bus("a10g") < 2.5
    assert bus("h100-nvl-94gb") > CAT.links["pcie-gen4-x16"].bandwidth_gb_per_s * 0.75
    assert bus("h100-nvl-94gb") <= CAT.links["pcie-gen5-x16"].bandwidth_gb_per_s


def test_bad_fit_entries_are_refused():
    with pytest.raises(ValidationError, match="tp8_bus_gb_per_s"):
        PcieAllReduce(tp8_bus_gb_per_s=0.0, points=3, source="fitted to three runs")
    with pytest.raises(ValidationError, match="points"):
        PcieAllReduce(tp8_bus_gb_per_s=10.0, points=0, source="fitted to three runs")
    with pytest.raises(ValidationError, match="source"):
        PcieAllReduce(tp8_bus_gb_per_s=10.0, points=3, source="x")


def test_write_fit_folds_the_source_and_replaces_an_earlier_fit(tmp_path, monkeypatch):
    """``write_fit`` writes ``server.pcie_allreduce`` with its source folded by the one
    helper the calibration scripts share (scripts/calibration_levels.folded, at 6 spaces
    under the block), and a rerun replaces the block instead of adding a second one."""
    import yaml

    (tmp_path / "gpus").mkdir()
    path = tmp_path / "gpus" / "x.yaml"
    path.write_text("id: x\nserver:\n  gpus_per_server: 8\nefficiency:\n  points: 3\n")
    monkeypatch.setattr(FIT, "DATA_DIR", tmp_path)
    source = " ".join(f"word{i}" for i in range(60))
    FIT.write_fit("x", 16.54, 3, source)
    FIT.write_fit("x", 12.0, 4, source)
    text = path.read_text()
    assert text.count("pcie_allreduce:") == 1
    block = text[text.index("    source: >-\n") :].split("efficiency:")[0]
    lines = block.splitlines()[1:]
    assert len(lines) > 1 and all(ln.startswith("      w") and len(ln) <= 94 for ln in lines)
    data = yaml.safe_load(text)
    assert data["server"]["pcie_allreduce"] == {
        "tp8_bus_gb_per_s": 12.0,
        "points": 4,
        "source": source,
    }
    assert data["server"]["gpus_per_server"] == 8 and data["efficiency"] == {"points": 3}


def test_folded_wraps_at_the_width_with_the_indent_asked():
    lv = load_script("calibration_levels")
    words = ["a" * 10] * 20
    for indent in (4, 6):
        lines = lv.folded(words, indent=indent)
        assert all(len(ln) <= 94 and ln.startswith(" " * indent + "a") for ln in lines)
        assert " ".join(" ".join(ln.split()) for ln in lines) == " ".join(words)
    # a word longer than a line stands alone, without an empty line before it
    assert lv.folded(["x" * 120]) == ["    " + "x" * 120]
