"""Parameter counts, bytes and FLOPs derived from model architectures (DOMAIN.md section 2)."""

from __future__ import annotations

from typing import Any

import pytest

from catalog.loader import load_catalog
from catalog.schema import Model, ReferenceFigures
from planner import architecture as arch


def make_model(
    model_id: str,
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    head_dim: int | None,
    intermediate: int,
    vocab: int,
    reference: tuple[float, float, float],
    computed: tuple[float, float] | None = None,
    **extra: Any,
) -> Model:
    """A Model as in its config.json; ``reference`` = (total B, active B, KV bytes/token bf16)."""
    ref: dict[str, float] = {
        "total_params_b": reference[0],
        "active_params_b": reference[1],
        "kv_bytes_per_token_bf16": reference[2],
    }
    if computed:
        ref["computed_total_params_b"], ref["computed_active_params_b"] = computed
    return Model(
        id=model_id,
        name=model_id,
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=vocab,
        max_context_tokens=extra.pop("max_context_tokens", 131072),
        reference=ReferenceFigures.model_validate(ref),
        sources=["/work/shared/reference/hardware-and-models.md"],
        **extra,
    )


# Every model of /work/shared/reference/hardware-and-models.md, built here so the
# counts are tested whatever the catalog holds today.
REFERENCE_MODELS: list[Model] = [
    make_model("llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000, (6.738, 6.738, 524288)),
    make_model("llama-2-70b", 80, 8192, 64, 8, 128, 28672, 32000, (68.977, 68.977, 327680)),
    make_model("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, (8.03, 8.03, 131072)),
    make_model("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256, (70.554, 70.554, 327680)),
    make_model(
        "llama-3.1-405b", 126, 16384, 128, 8, 128, 53248, 128256, (405.853, 405.853, 516096)
    ),
    make_model(
        "mistral-7b-v0.1",
        32,
        4096,
        32,
        8,
        128,
        14336,
        32000,
        (7.242, 7.242, 131072),
        sliding_window={"window_tokens": 4096, "windowed_layers": 32},
    ),
    make_model(
        "mixtral-8x7b",
        32,
        4096,
        32,
        8,
        128,
        14336,
        32000,
        (46.703, 12.88, 131072),
        moe={"num_experts": 8, "experts_per_token": 2, "expert_intermediate_size": 14336},
    ),
    make_model(
        "qwen2.5-72b", 80, 8192, 64, 8, 128, 29568, 152064, (72.706, 72.706, 327680), qkv_bias=True
    ),
    make_model("qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936, (32.762, 32.762, 262144)),
    make_model(
        "deepseek-v3",
        61,
        7168,
        128,
        128,
        None,
        18432,
        129280,
        (671.0, 37.0, 70272),
        computed=(671.03, 37.55),
        moe={
            "num_experts": 256,
            "experts_per_token": 8,
            "expert_intermediate_size": 2048,
            "num_shared_experts": 1,
            "first_dense_layers": 3,
            "router_bias": True,
        },
        mla={
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
        },
    ),
    make_model(
        "gpt-oss-120b",
        36,
        2880,
        64,
        8,
        64,
        2880,
        201088,
        (116.8, 5.1, 73728),
        computed=(116.83, 5.71),
        qkv_bias=True,
        attention_sinks=True,
        moe={
            "num_experts": 128,
            "experts_per_token": 4,
            "expert_intermediate_size": 2880,
            "router_bias": True,
            "expert_bias": True,
        },
        sliding_window={"window_tokens": 128, "windowed_layers": 18},
    ),
]
BY_ID = {m.id: m for m in REFERENCE_MODELS}
CATALOG_MODELS = sorted(load_catalog().models.values(), key=lambda m: m.id)


def _expected_billions(model: Model) -> tuple[float, float]:
    ref = model.reference
    total = ref.computed_total_params_b or ref.total_params_b
    active = ref.computed_active_params_b or ref.active_params_b
    return total, active


def _check_against_reference(model: Model) -> None:
    total_b, active_b = _expected_billions(model)
    assert arch.total_param_count(model) / 1e9 == pytest.approx(total_b, rel=0.01)
    assert arch.active_param_count(model) / 1e9 == pytest.approx(active_b, rel=0.01)
    assert arch.kv_bytes_per_token(model, "bf16") == model.reference.kv_bytes_per_token_bf16


@pytest.mark.parametrize("model", REFERENCE_MODELS, ids=lambda m: m.id)
def test_reference_models_match_published_counts(model: Model) -> None:
    _check_against_reference(model)


@pytest.mark.parametrize("model", CATALOG_MODELS, ids=lambda m: m.id)
def test_catalog_models_match_their_reference_figures(model: Model) -> None:
    _check_against_reference(model)


def test_llama_2_7b_parameter_count() -> None:
    assert arch.total_param_count(BY_ID["llama-2-7b"]) == pytest.approx(6.738e9, rel=1e-3)
    assert arch.total_param_count(BY_ID["llama-2-7b"]) == 6_738_415_616  # config.json exact
    assert arch.active_param_count(BY_ID["llama-2-7b"]) == 6_738_415_616


def test_catalog_llama_2_7b_parameter_count() -> None:
    model = load_catalog().models["llama-2-7b"]
    assert arch.total_param_count(model) == pytest.approx(6.738e9, rel=1e-3)


def test_moe_active_counts_only_routed_top_k_and_shared() -> None:
    mixtral = BY_ID["mixtral-8x7b"]
    expert = arch.expert_param_count(mixtral)
    assert expert == 3 * 4096 * 14336
    assert arch.total_param_count(mixtral) - arch.active_param_count(mixtral) == 32 * 6 * expert
    deepseek = BY_ID["deepseek-v3"]
    assert arch.moe_layer_count(deepseek) == 58
    assert arch.total_param_count(deepseek) - arch.active_param_count(deepseek) == (
        58 * (256 - 8) * 3 * 7168 * 2048
    )
    assert arch.routed_expert_param_count(deepseek) == 58 * 256 * 3 * 7168 * 2048


def test_mla_attention_parameters() -> None:
    h, heads = 7168, 128
    expected = (
        h * 1536
        + 1536  # q_a + q_a_norm
        + 1536 * heads * (128 + 64)  # q_b
        + h * (512 + 64)
        + 512  # kv_a + kv_a_norm
        + 512 * heads * (128 + 128)  # kv_b
        + heads * 128 * h  # o
    )
    assert arch.attention_param_count_per_layer(BY_ID["deepseek-v3"]) == expected


def test_tied_embeddings_count_once() -> None:
    untied = BY_ID["llama-3.1-8b"]
    tied = untied.model_copy(update={"tie_word_embeddings": True})
    assert arch.total_param_count(untied) - arch.total_param_count(tied) == 128256 * 4096


def test_weight_bytes_follow_dtype() -> None:
    model = BY_ID["llama-2-7b"]
    n = arch.total_param_count(model)
    assert arch.weight_bytes(model, "bf16") == 2 * n
    # the embedding, lm_head and norms stay BF16 in every FP8 checkpoint
    assert arch.weight_bytes(model, "fp8") == n + arch.bf16_param_count(model)
    with pytest.raises(ValueError, match="needs the checkpoint's block format"):
        arch.weight_bytes(model, "fp4")
    with pytest.raises(ValueError, match="no nvfp4 checkpoint"):
        arch.weight_bytes(model, "fp4", "nvfp4")


def test_fp4_weight_bytes_carry_block_scales() -> None:
    """NVFP4: one FP8 scale per 16 values (4.5 bits); MXFP4: one E8M0 per 32 (4.25)."""
    assert arch.fp4_bits_per_weight("nvfp4") == 4.5
    assert arch.fp4_bits_per_weight("mxfp4") == 4.25
    cat = load_catalog()
    llama = cat.models["llama-3.1-70b"]
    oss = cat.models["gpt-oss-120b"]
    assert arch.weight_bytes_per_param(llama, "fp4", "nvfp4") == 0.5625
    assert arch.weight_bytes_per_param(llama, "fp4", "mxfp4") == 0.53125
    assert arch.weight_bytes_per_param(oss, "fp4", "mxfp4") == 0.53125
    with pytest.raises(ValueError, match="no nvfp4 checkpoint"):
        arch.weight_bytes_per_param(oss, "fp4", "nvfp4")
    n = arch.total_param_count(llama)
    wide = arch.bf16_param_count(llama)  # embedding, lm_head and norms: 2.10 B in BF16
    assert wide == 2_102_665_216
    assert arch.weight_bytes(llama, "fp4", "nvfp4") == pytest.approx(
        (n - wide) * 4.5 / 8 + 2 * wide
    )
    # 70.55 B parameters: 42.7 GB in NVFP4 (40.6 GB in MXFP4) against 72.7 GB in FP8
    assert arch.weight_bytes(llama, "fp4", "nvfp4") / 1e9 == pytest.approx(42.71, abs=0.01)
    assert arch.weight_bytes(llama, "fp4", "mxfp4") / 1e9 == pytest.approx(40.57, abs=0.01)


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("llama-2-7b", 524_288),
        ("llama-3.1-8b", 131_072),
        ("mistral-7b-v0.1", 131_072),
        ("llama-3.1-405b", 516_096),
        ("deepseek-v3", 70_272),
        ("gpt-oss-120b", 73_728),
    ],
)
def test_kv_bytes_per_token_exact(model_id: str, expected: int) -> None:
    assert arch.kv_bytes_per_token(BY_ID[model_id], "bf16") == expected
    assert arch.kv_bytes_per_token(BY_ID[model_id], "fp8") == expected / 2


def test_kv_for_a_4k_prompt_matches_domain() -> None:
    # DOMAIN.md section 2: 2.147 GB (MHA) and 0.537 GB (8 KV heads) for 4,096 tokens.
    assert arch.kv_bytes_for_sequence(BY_ID["llama-2-7b"], 4096, "bf16") / 1e9 == pytest.approx(
        2.147, abs=5e-4
    )
    assert arch.kv_bytes_for_sequence(BY_ID["llama-3.1-8b"], 4096, "bf16") / 1e9 == pytest.approx(
        0.537, abs=5e-4
    )


def test_sliding_window_layers_stop_growing() -> None:
    oss = BY_ID["gpt-oss-120b"]
    per_layer = 2 * 8 * 64 * 2  # 2,048 B per token per layer
    # Within the window every layer grows.
    assert arch.kv_bytes_for_sequence(oss, 100, "bf16") == 100 * 73_728
    # Past it, 18 full layers grow 36,864 B/token plus 18 layers x 128 tokens.
    tokens = 10_000
    expected = tokens * 36_864 + 18 * 128 * per_layer
    assert arch.kv_bytes_for_sequence(oss, tokens, "bf16") == expected
    growth = arch.kv_bytes_for_sequence(oss, tokens + 1, "bf16") - arch.kv_bytes_for_sequence(
        oss, tokens, "bf16"
    )
    assert growth == 36_864
    mistral = BY_ID["mistral-7b-v0.1"]
    assert arch.kv_bytes_for_sequence(mistral, 32_768, "bf16") == 4096 * 131_072


def test_dense_model_kv_is_linear_in_tokens() -> None:
    model = BY_ID["llama-2-7b"]
    assert arch.kv_bytes_for_sequence(model, 1000, "bf16") == 1000 * 524_288
    assert arch.kv_bytes_for_sequence(model, 0, "bf16") == 0


def test_flops_per_token_worked_check() -> None:
    # DOMAIN.md section 2: 13.48 GFLOP/token in weights, 14.55 at context 2,048.
    model = BY_ID["llama-2-7b"]
    assert round(arch.weight_flops_per_token(model) / 1e9, 2) == 13.48
    assert arch.weight_flops_per_token(model) == 2 * arch.active_param_count(model)
    assert arch.attention_flops_per_token(model, 2048) == 4 * 32 * 4096 * 2048
    assert round(arch.flops_per_token(model, 2048) / 1e9, 2) == 14.55


def test_moe_weight_flops_use_active_params() -> None:
    mixtral = BY_ID["mixtral-8x7b"]
    assert arch.weight_flops_per_token(mixtral) == 2 * arch.active_param_count(mixtral)
    assert arch.weight_flops_per_token(mixtral) / 1e9 == pytest.approx(25.76, rel=1e-3)


def test_mla_attention_flops() -> None:
    deepseek = BY_ID["deepseek-v3"]
    assert arch.attention_flops_per_token(deepseek, 1000) == 2 * 61 * 128 * (128 + 64 + 128) * 1000


def test_windowed_attention_flops() -> None:
    oss = BY_ID["gpt-oss-120b"]
    d_attn = 64 * 64
    assert arch.attention_flops_per_token(oss, 50) == 4 * d_attn * 36 * 50
    assert arch.attention_flops_per_token(oss, 10_000) == 4 * d_attn * (18 * 10_000 + 18 * 128)


def test_span_attention_is_mean_context_for_full_layers() -> None:
    model = BY_ID["llama-2-7b"]
    span = arch.attention_flops_for_span(model, 1000, 4096)
    assert span == pytest.approx(4096 * arch.attention_flops_per_token(model, 1000 + 2048))
    assert arch.prefill_flops(model, 4096) == pytest.approx(
        4096 * arch.flops_per_token(model, 2048)
    )


@pytest.mark.parametrize(("start", "new"), [(0, 64), (0, 1000), (100, 50), (500, 300)])
def test_span_attention_integrates_windows(start: int, new: int) -> None:
    oss = BY_ID["gpt-oss-120b"]
    steps = 20_000
    dx = new / steps
    numeric = sum(
        arch.attention_flops_per_token(oss, start + (i + 0.5) * dx) * dx for i in range(steps)
    )
    assert arch.attention_flops_for_span(oss, start, new) == pytest.approx(numeric, rel=1e-6)


def test_negative_tokens_rejected() -> None:
    model = BY_ID["llama-2-7b"]
    with pytest.raises(ValueError):
        arch.kv_bytes_for_sequence(model, -1, "bf16")
    with pytest.raises(ValueError):
        arch.attention_flops_per_token(model, -1)
