"""Content checks of the shipped catalog (catalog/data) and the loader's error paths.

Derived parameter counts are tested with planner/architecture.py, not here.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from scipy import stats

from catalog.loader import DATA_DIR, CatalogError, load_catalog, parse_entry, with_entries
from catalog.schema import MAX_CATALOG_LEVEL_SCALE, Catalog, Dtype, Gpu, LinkKind, Model

EXPECTED_GPUS = {
    "h100-sxm5-80gb",
    "h100-pcie-80gb",
    "h100-nvl-94gb",
    "h200-sxm-141gb",
    "b200",
    "gb200-per-gpu",
    "b300",
    "gb300-per-gpu",
    "a100-sxm-80gb",
    "a100-40gb",
    "l40s",
    "l4",
    "a10g",
    "mi300x",
    "mi325x",
    "mi355x",
    "gaudi3",
}
EXPECTED_MODELS = {
    "llama-2-7b",
    "llama-2-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "mistral-7b-v0.1",
    "mixtral-8x7b",
    "qwen2.5-72b",
    "qwen3-32b",
    "deepseek-v3",
    "gpt-oss-120b",
}
EXPECTED_WORKLOADS = {"chat", "agent", "rag", "summarization", "code-completion", "batch-offline"}
REQUIRED_LINKS = {
    "nvlink3": LinkKind.SCALE_UP,
    "nvlink4": LinkKind.SCALE_UP,
    "nvlink4-bridge": LinkKind.SCALE_UP,
    "nvlink5": LinkKind.SCALE_UP,
    "infinity-fabric-mi300": LinkKind.SCALE_UP,
    "infinity-fabric-mi355": LinkKind.SCALE_UP,
    "gaudi3-roce": LinkKind.SCALE_UP,
    "pcie-gen4-x16": LinkKind.PCIE,
    "pcie-gen5-x16": LinkKind.PCIE,
    "ib-ndr-400": LinkKind.NETWORK,
    "cx8-800g": LinkKind.NETWORK,
    "ib-hdr-200": LinkKind.NETWORK,
    "eth-100g": LinkKind.NETWORK,
    "eth-200g": LinkKind.NETWORK,
    "eth-400g": LinkKind.NETWORK,
}
NO_FP8 = {"a100-sxm-80gb", "a100-40gb", "a10g"}
PCIE_ONLY = {"l40s", "l4", "a10g"}


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog()


def all_entries(cat: Catalog) -> list[Any]:
    return [*cat.gpus.values(), *cat.models.values(), *cat.workloads.values(), *cat.links.values()]


# --------------------------------------------------------------------------- presence


def test_all_expected_entries_present(cat: Catalog) -> None:
    assert set(cat.gpus) == EXPECTED_GPUS
    assert set(cat.models) == EXPECTED_MODELS
    assert set(cat.workloads) >= EXPECTED_WORKLOADS
    for link_id, kind in REQUIRED_LINKS.items():
        assert link_id in cat.links, link_id
        assert cat.links[link_id].kind == kind, link_id


def test_every_entry_has_sources(cat: Catalog) -> None:
    for entry in all_entries(cat):
        assert entry.sources, entry.id
        assert all(isinstance(s, str) and s.strip() for s in entry.sources), entry.id


def test_file_names_are_ids() -> None:
    for kind in ("gpus", "models", "workloads", "links"):
        for path in (DATA_DIR / kind).glob("*.yaml"):
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
            assert raw["id"] == path.stem


# --------------------------------------------------------------------------- GPUs


def test_prices_are_estimates_inside_their_range(cat: Catalog) -> None:
    for gpu in cat.gpus.values():
        price = gpu.price
        assert price.estimate is True, gpu.id
        assert price.note.strip(), gpu.id
        if price.range_usd_per_hour is not None:
            low, high = price.range_usd_per_hour
            assert low <= price.usd_per_hour <= high, gpu.id


def test_unsourced_prices_say_so(cat: Catalog) -> None:
    for gpu_id in ("h100-pcie-80gb", "gaudi3"):
        gpu = cat.gpus[gpu_id]
        # an estimate carries a range (issue 13), even an unsourced one
        assert gpu.price.range_usd_per_hour is not None
        assert "not from a stored source" in gpu.price.note.lower()
        assert "price.usd_per_hour" in gpu.uncertain


def test_efficiency_defaults_have_reasons_and_sane_values(cat: Catalog) -> None:
    for gpu in cat.gpus.values():
        eff = gpu.efficiency
        assert len(eff.reason.strip()) >= 10, gpu.id
        # the analogy's split (or the fit) is a plausible engine efficiency; the level
        # the measurements show scales it (docs/calibration.md, "Levels")
        assert 0 < eff.level_scale <= MAX_CATALOG_LEVEL_SCALE, gpu.id
        assert 0.3 <= eff.prefill_mfu / eff.level_scale <= 0.65, gpu.id
        assert 0.55 <= eff.decode_mbu / eff.level_scale <= 0.8, gpu.id
        if eff.level_scale > 1.0:
            # measurements lift a guess at most to the reference GPUs' 0.5 / 0.7
            assert eff.prefill_mfu <= 0.5 + 1e-3 and eff.decode_mbu <= 0.7 + 1e-3, gpu.id
        assert 0 <= eff.step_overhead_ms <= 10, gpu.id
        assert 0 < eff.overlap_factor <= 1, gpu.id


def test_h100_prefill_mfu_matches_domain_worked_check(cat: Catalog) -> None:
    from planner.calibration import UNCALIBRATED_DEFAULTS

    h100 = cat.gpus["h100-sxm5-80gb"]
    # DOMAIN.md section 3: F_eff = 494.5 TFLOP/s on H100: the analogy MFU the catalog
    # started from; the shipped MFU is it scaled to H100's measured level
    mfu, mbu, _ = UNCALIBRATED_DEFAULTS["h100-sxm5-80gb"]
    assert h100.bf16_dense_tflops * mfu == pytest.approx(494.7, abs=0.5)
    eff = h100.efficiency
    assert eff.level_scale is not None
    # (the level is stored to 3 decimals, the factors to 4)
    assert eff.prefill_mfu == pytest.approx(mfu * eff.level_scale, abs=mfu * 5e-4)
    assert eff.decode_mbu == pytest.approx(mbu * eff.level_scale, abs=mbu * 5e-4)


def test_fp8_null_exactly_for_pre_hopper_parts(cat: Catalog) -> None:
    no_fp8 = {g.id for g in cat.gpus.values() if g.fp8_dense_tflops is None}
    assert no_fp8 == NO_FP8
    for gpu in cat.gpus.values():
        assert (Dtype.FP8 in gpu.supported_dtypes()) == (gpu.id not in NO_FP8)


def test_fp4_only_on_blackwell_and_cdna4(cat: Catalog) -> None:
    fp4 = {g.id for g in cat.gpus.values() if g.fp4_dense_tflops is not None}
    assert fp4 == {"b200", "gb200-per-gpu", "b300", "gb300-per-gpu", "mi355x"}
    assert {g.arch for g in cat.gpus.values() if g.id in fp4} == {"Blackwell", "CDNA 4"}


def test_scale_up_domains(cat: Catalog) -> None:
    for gpu in cat.gpus.values():
        if gpu.id in PCIE_ONLY:
            assert gpu.scale_up_link is None and gpu.scale_up_domain_size == 1, gpu.id
        else:
            assert gpu.scale_up_link is not None and gpu.scale_up_domain_size >= 2, gpu.id
    assert cat.gpus["gb200-per-gpu"].scale_up_domain_size == 72
    assert cat.gpus["gb200-per-gpu"].server.gpus_per_server == 72


def test_gpu_links_exist_with_the_right_kind(cat: Catalog) -> None:
    for gpu in cat.gpus.values():
        if gpu.scale_up_link is not None:
            assert cat.links[gpu.scale_up_link].kind == LinkKind.SCALE_UP
        assert cat.links[gpu.pcie_link].kind == LinkKind.PCIE
        assert cat.links[gpu.network_link].kind == LinkKind.NETWORK


def test_link_bandwidth_is_per_direction(cat: Catalog) -> None:
    # Reference figures are total bidirectional GB/s; the catalog stores half.
    bidir = {
        "nvlink3": 600,
        "nvlink4": 900,
        "nvlink4-bridge": 600,
        "nvlink5": 1800,
        "infinity-fabric-mi300": 896,
        "infinity-fabric-mi355": 1075.2,  # 7 links x 153.6 GB/s (Hume Consulting)
        "gaudi3-roce": 1050,  # 21 of its 24 ports face the 7 peers (docs.habana.ai)
        "pcie-gen4-x16": 64,
        "pcie-gen5-x16": 128,
    }
    for link_id, total in bidir.items():
        assert cat.links[link_id].bandwidth_gb_per_s == pytest.approx(total / 2), link_id
    gbit = {
        "ib-ndr-400": 400,
        "ib-hdr-200": 200,
        "eth-100g": 100,
        "eth-200g": 200,
        "cx8-800g": 800,
    }
    for link_id, gbps in gbit.items():
        assert cat.links[link_id].bandwidth_gb_per_s == pytest.approx(gbps / 8), link_id


def _has_field_path(model: type[Any], path: str) -> bool:
    head, _, rest = path.partition(".")
    field = model.model_fields.get(head)
    if field is None:
        return False
    if not rest:
        return True
    sub = field.annotation
    return isinstance(sub, type) and hasattr(sub, "model_fields") and _has_field_path(sub, rest)


def test_uncertain_names_real_fields(cat: Catalog) -> None:
    for gpu in cat.gpus.values():
        for path in gpu.uncertain:
            assert _has_field_path(Gpu, path), f"{gpu.id}: {path}"


def test_reference_warnings_are_marked_uncertain(cat: Catalog) -> None:
    # Fields marked as estimates or conflicting in shared/reference/hardware-and-models.md.
    expected = {
        "h100-pcie-80gb": {"bf16_dense_tflops", "fp8_dense_tflops", "scale_up_link"},
        "h100-nvl-94gb": {"bf16_dense_tflops", "fp8_dense_tflops", "mem_bw_tbps"},
        "gb200-per-gpu": {"bf16_dense_tflops", "fp8_dense_tflops"},
        "a10g": {"bf16_dense_tflops", "tdp_w"},
        "mi325x": {"scale_up_link"},
    }
    for gpu_id, fields in expected.items():
        assert fields <= set(cat.gpus[gpu_id].uncertain), gpu_id


def test_server_power_and_size(cat: Catalog) -> None:
    for gpu in cat.gpus.values():
        server = gpu.server
        assert server.server_overhead_w > 0, gpu.id
        # Host power (CPUs, NICs, fans, switches) is hundreds of watts per GPU, not kilowatts.
        assert server.server_overhead_w / server.gpus_per_server < 1000, gpu.id
        assert server.rack_units <= 48, gpu.id


# --------------------------------------------------------------------------- models


def _kv_bytes_bf16(model: Model) -> int:
    if model.mla is not None:
        return model.num_layers * (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * 2
    assert model.head_dim is not None
    return 2 * model.num_layers * model.num_kv_heads * model.head_dim * 2


def test_reference_kv_bytes_match_the_architecture(cat: Catalog) -> None:
    for model in cat.models.values():
        assert _kv_bytes_bf16(model) == model.reference.kv_bytes_per_token_bf16, model.id


def test_dense_models_have_total_equal_active(cat: Catalog) -> None:
    for model in cat.models.values():
        ref = model.reference
        if model.moe is None:
            assert ref.total_params_b == ref.active_params_b, model.id
        else:
            assert ref.active_params_b < ref.total_params_b, model.id


def test_model_special_features(cat: Catalog) -> None:
    moe = {m.id for m in cat.models.values() if m.is_moe}
    assert moe == {"mixtral-8x7b", "deepseek-v3", "gpt-oss-120b"}

    mixtral = cat.models["mixtral-8x7b"]
    assert mixtral.moe is not None
    assert mixtral.intermediate_size == mixtral.moe.expert_intermediate_size == 14336
    assert (mixtral.moe.num_experts, mixtral.moe.experts_per_token) == (8, 2)

    ds = cat.models["deepseek-v3"]
    assert ds.head_dim is None and ds.mla is not None and ds.moe is not None
    assert (ds.moe.num_experts, ds.moe.experts_per_token, ds.moe.num_shared_experts) == (256, 8, 1)
    assert ds.moe.first_dense_layers == 3 and ds.intermediate_size == 18432
    assert ds.weight_dtypes[0] == Dtype.FP8

    oss = cat.models["gpt-oss-120b"]
    assert oss.moe is not None and oss.sliding_window is not None
    assert oss.attention_sinks and oss.qkv_bias and oss.moe.router_bias and oss.moe.expert_bias
    assert oss.sliding_window.window_tokens == 128
    assert oss.sliding_window.windowed_layers == oss.num_layers // 2
    assert Dtype.FP4 in oss.weight_dtypes

    mistral = cat.models["mistral-7b-v0.1"]
    assert mistral.sliding_window is not None
    assert mistral.sliding_window.window_tokens == 4096
    assert mistral.sliding_window.windowed_layers == mistral.num_layers

    assert cat.models["qwen2.5-72b"].qkv_bias
    assert not cat.models["qwen3-32b"].qkv_bias
    assert cat.models["qwen3-32b"].head_dim == 128  # != hidden / heads


# --------------------------------------------------------------------------- workloads


def test_workload_shapes(cat: Catalog) -> None:
    for w in cat.workloads.values():
        for dist in (w.prompt_tokens, w.output_tokens):
            assert 1 < dist.p90_tokens / dist.mean_tokens <= 2.27, w.id
        assert w.slo.percentile == 90, w.id
        assert w.notes.strip(), w.id
    assert cat.workloads["agent"].prompt_tokens.mean_tokens == 97000
    assert cat.workloads["agent"].output_tokens.mean_tokens == 1600
    assert cat.workloads["agent"].prefix_hit_rate == pytest.approx(0.92)
    assert cat.workloads["chat"].prompt_tokens.mean_tokens == 2000
    assert cat.workloads["chat"].output_tokens.mean_tokens == 300
    # Tight classes are tighter than chat, relaxed ones looser.
    chat = cat.workloads["chat"].slo
    assert cat.workloads["code-completion"].slo.ttft_ms < chat.ttft_ms
    assert cat.workloads["code-completion"].slo.tpot_ms < chat.tpot_ms
    assert cat.workloads["batch-offline"].slo.ttft_ms > cat.workloads["summarization"].slo.ttft_ms


def test_lognormal_parameters_reproduce_mean_and_p90(cat: Catalog) -> None:
    for w in cat.workloads.values():
        for dist in (w.prompt_tokens, w.output_tokens):
            ln = stats.lognorm(s=dist.sigma, scale=math.exp(dist.mu))
            assert ln.mean() == pytest.approx(dist.mean_tokens, rel=1e-9), w.id
            assert ln.ppf(0.9) == pytest.approx(dist.p90_tokens, rel=1e-9), w.id
            assert dist.quantile_tokens(0.9) == pytest.approx(dist.p90_tokens, rel=1e-9)
            assert dist.quantile_tokens(0.5) == pytest.approx(ln.median(), rel=1e-9)


# --------------------------------------------------------------------------- loader errors


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(DATA_DIR, dst)
    return dst


def _edit(path: Path, **changes: Any) -> None:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw.update(changes)
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")


def test_copy_of_shipped_data_loads_with_same_hash(data_copy: Path, cat: Catalog) -> None:
    first = load_catalog(data_copy)
    second = load_catalog(data_copy)
    assert first.content_hash == second.content_hash == cat.content_hash


def test_hash_changes_when_one_value_changes(data_copy: Path, cat: Catalog) -> None:
    _edit(data_copy / "gpus" / "l4.yaml", tdp_w=75)
    assert load_catalog(data_copy).content_hash != cat.content_hash


def test_unknown_link_is_named(data_copy: Path) -> None:
    _edit(data_copy / "gpus" / "l40s.yaml", network_link="eth-9000g")
    with pytest.raises(CatalogError) as info:
        load_catalog(data_copy)
    err = info.value
    assert "gpus.l40s.network_link" in str(err) and "eth-9000g" in str(err)
    assert [f for f, _ in err.issues] == ["gpus.l40s.network_link"]


def test_link_of_wrong_kind_is_named(data_copy: Path) -> None:
    _edit(data_copy / "gpus" / "mi300x.yaml", pcie_link="ib-ndr-400")
    with pytest.raises(CatalogError) as info:
        load_catalog(data_copy)
    assert "gpus.mi300x.pcie_link" in str(info.value)
    assert "network" in str(info.value)


def test_predecessor_must_be_another_gpu_of_the_same_vendor(data_copy: Path) -> None:
    """MI355X names MI300X as its predecessor (the GPU whose measured dense level it is
    judged by); an unknown id, itself or another vendor's GPU is refused, field named."""
    cases = (
        ("mi999x", "unknown GPU"),
        ("mi355x", "its own predecessor"),
        ("h100-sxm5-80gb", "NVIDIA"),
    )
    for bad, why in cases:
        _edit(data_copy / "gpus" / "mi355x.yaml", predecessor=bad)
        with pytest.raises(CatalogError) as info:
            load_catalog(data_copy)
        assert [f for f, _ in info.value.issues] == ["gpus.mi355x.predecessor"], bad
        assert why in str(info.value)
    _edit(data_copy / "gpus" / "mi355x.yaml", predecessor="mi325x")
    assert load_catalog(data_copy).gpus["mi355x"].predecessor == "mi325x"


def test_new_generation_gpus_are_in_the_catalog(cat: Catalog) -> None:
    """MI355X, B300 and GB300 (run in public benchmarks: InferenceX's DeepSeek-R1 sweeps)
    with their dense peaks (no sparsity), the FP4 formats they run natively and the
    conservative reading where sources conflict (B300's lowest FP4 peak, usable HBM)."""
    mi, b3, gb3 = cat.gpus["mi355x"], cat.gpus["b300"], cat.gpus["gb300-per-gpu"]
    assert (mi.bf16_dense_tflops, mi.fp8_dense_tflops) == (2516.6, 5033.2)
    assert [f.value for f in mi.fp4_formats] == ["mxfp4"]  # no NVFP4 on CDNA 4
    assert mi.predecessor == "mi300x" and mi.arch != cat.gpus["mi300x"].arch
    assert mi.scale_up_link is not None and cat.links[mi.scale_up_link].mesh_peers == 7
    assert b3.fp4_dense_tflops == 13125 and b3.memory_gb < 288 and b3.tdp_w == 1100
    assert gb3.scale_up_domain_size == 72 and gb3.server.gpus_per_node == 4
    for g in (b3, gb3):
        assert g.arch == cat.gpus["b200"].arch  # Blackwell's measured kernel tables
        assert {f.value for f in g.fp4_formats} == {"nvfp4", "mxfp4"}
        assert cat.links[g.network_link].bandwidth_gb_per_s == 100
    for g in (mi, b3, gb3):  # estimated prices: never below the middle of their range
        assert g.price.range_usd_per_hour is not None
        lo, hi = g.price.range_usd_per_hour
        assert g.price.estimate and g.price.usd_per_hour >= (lo + hi) / 2 - 1e-9


def test_domain_without_scale_up_link_is_rejected(data_copy: Path) -> None:
    _edit(data_copy / "gpus" / "l4.yaml", scale_up_domain_size=2)
    with pytest.raises(CatalogError, match=r"gpus\.l4\.scale_up_domain_size"):
        load_catalog(data_copy)


def test_typo_in_a_field_names_file_and_field(data_copy: Path) -> None:
    path = data_copy / "gpus" / "a10g.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw["tdp_watts"] = raw.pop("tdp_w")
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    with pytest.raises(CatalogError) as info:
        load_catalog(data_copy)
    err = info.value
    assert str(path) in str(err)
    assert "tdp_watts" in str(err)
    fields = dict(err.issues)
    assert "tdp_watts" in fields and "tdp_w" in fields


def test_typo_in_a_nested_field_is_named(data_copy: Path) -> None:
    path = data_copy / "gpus" / "b200.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    raw["efficiency"]["prefil_mfu"] = raw["efficiency"].pop("prefill_mfu")
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    with pytest.raises(CatalogError) as info:
        load_catalog(data_copy)
    assert str(path) in str(info.value)
    assert "efficiency.prefil_mfu" in dict(info.value.issues)


def test_id_must_match_file_name(data_copy: Path) -> None:
    path = data_copy / "workloads" / "rag.yaml"
    _edit(path, id="rag-v2")
    with pytest.raises(CatalogError) as info:
        load_catalog(data_copy)
    assert str(path) in str(info.value) and "rag-v2" in str(info.value)
    assert dict(info.value.issues).keys() == {"id"}


def test_invalid_lognormal_shape_is_rejected(data_copy: Path) -> None:
    path = data_copy / "workloads" / "chat.yaml"
    _edit(path, prompt_tokens={"mean_tokens": 2000, "p90_tokens": 5000})
    with pytest.raises(CatalogError, match="prompt_tokens"):
        load_catalog(data_copy)


def test_with_entries_adds_new_and_rejects_duplicate_ids(cat: Catalog) -> None:
    raw = cat.gpus["h100-sxm5-80gb"].model_dump(mode="json")
    custom = parse_entry("gpus", {**raw, "id": "h100-sxm5-80gb-reserved"}, "custom")
    extended = with_entries(cat, {"gpus": {custom.id: custom}})  # type: ignore[attr-defined]
    assert "h100-sxm5-80gb-reserved" in extended.gpus
    assert extended.content_hash != cat.content_hash

    duplicate = parse_entry("gpus", raw, "custom")
    with pytest.raises(CatalogError, match=r"gpus\.h100-sxm5-80gb: already in the catalog"):
        with_entries(cat, {"gpus": {"h100-sxm5-80gb": duplicate}})


# --------------------------------------------------------------------------- prices (issue 13)


def test_every_sku_but_cloud_only_ones_has_a_sourced_server_price(cat: Catalog) -> None:
    for gpu in cat.gpus.values():
        if gpu.id == "a10g":  # an AWS-only part: rented, never bought
            assert gpu.price.purchase is None
            continue
        buy = gpu.price.purchase
        assert buy is not None, gpu.id
        assert buy.sources and all(s.startswith("https://") for s in buy.sources), gpu.id
        assert buy.date, gpu.id
        # an estimate carries a range and is priced no lower than its middle
        assert buy.estimate and buy.range_usd_per_server is not None, gpu.id
        lo, hi = buy.range_usd_per_server
        assert (lo + hi) / 2 <= buy.usd_per_server <= hi, gpu.id
        for term in (gpu.price.reserved_1y, gpu.price.reserved_3y):
            assert term is not None and term.range_usd_per_hour is not None, gpu.id
            # a commitment is cheaper than on demand
            assert term.usd_per_hour < gpu.price.usd_per_hour, gpu.id
        assert gpu.price.reserved_3y.usd_per_hour < gpu.price.reserved_1y.usd_per_hour  # type: ignore[union-attr]


def test_gb200_is_bought_as_one_72_gpu_rack(cat: Catalog) -> None:
    gb = cat.gpus["gb200-per-gpu"]
    assert gb.server.gpus_per_server == 72
    assert gb.price.purchase is not None
    assert 2_000_000 <= gb.price.purchase.usd_per_server <= 3_500_000


def test_an_estimated_price_needs_a_range_holding_it_above_its_middle() -> None:
    from catalog.schema import ReservedPrice, ServerPurchase

    base: dict[str, Any] = {
        "networking_usd_per_server": 1000,
        "sources": ["https://x.test"],
        "date": "2026-12",
    }
    with pytest.raises(ValidationError, match="needs a range"):
        ServerPurchase(usd_per_server=100_000, estimate=True, **base)
    with pytest.raises(ValidationError, match="at least the middle"):
        ServerPurchase(
            usd_per_server=100_000,
            range_usd_per_server=(90_000, 200_000),
            networking_range_usd_per_server=(500, 1500),
            estimate=True,
            **base,
        )
    with pytest.raises(ValidationError, match="outside"):
        ReservedPrice(
            usd_per_hour=5.0,
            range_usd_per_hour=(1.0, 2.0),
            estimate=False,
            sources=["https://x.test"],
            date="2026-12",
        )
    with pytest.raises(ValidationError, match="date"):
        ReservedPrice(usd_per_hour=1.0, estimate=False, sources=["https://x.test"], date="Dec 2026")
    # a quote needs no range
    assert ServerPurchase(usd_per_server=100_000, estimate=False, **base).usd_per_server == 100_000
