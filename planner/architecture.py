"""What a model's architecture implies: parameter counts, weight and KV bytes, FLOPs.

Everything here is derived from a :class:`catalog.schema.Model` alone (its
config.json facts), never from a GPU. Counts are plain numbers of parameters
(not billions); bytes are bytes; FLOPs count a multiply-add as 2 FLOP
(DOMAIN.md section 2).

Parameter layout (what is counted):

- embeddings: ``vocab x hidden`` for the input table, plus the same again for
  an untied ``lm_head``;
- attention per layer: q, k, v, o projections (``hidden x heads x head_dim``,
  ``hidden x kv_heads x head_dim`` twice, ``heads x head_dim x hidden``), plus
  q/k/v biases when ``qkv_bias`` and one sink logit per head when
  ``attention_sinks``. MLA (DeepSeek-V2/V3) instead has q_a
  (``hidden x q_lora_rank``), q_a_norm (``q_lora_rank``), q_b
  (``q_lora_rank x heads x (qk_nope + qk_rope)``), kv_a
  (``hidden x (kv_lora_rank + qk_rope)``), kv_a_norm (``kv_lora_rank``), kv_b
  (``kv_lora_rank x heads x (qk_nope + v_head_dim)``) and o
  (``heads x v_head_dim x hidden``);
- MLP per layer: a gated MLP (gate, up, down) is ``3 x hidden x intermediate``.
  MoE layers hold ``num_experts`` routed experts of ``3 x hidden x
  expert_intermediate`` each (plus ``2 x expert_intermediate + hidden`` biases
  when ``expert_bias``), ``num_shared_experts`` shared experts of the same size
  and a router ``hidden x num_experts`` (+ ``num_experts`` bias when
  ``router_bias``). The first ``first_dense_layers`` layers use the dense MLP of
  ``intermediate_size``;
- norms: two RMSNorms of ``hidden`` per layer and a final one.

Active parameters (what one token touches) count only the ``experts_per_token``
routed experts plus the shared ones; everything else is as in the total. Both
include the embedding tables, as the reference figures do (DeepSeek-V3 computed
671.03 B / 37.55 B, gpt-oss-120b 116.83 B / 5.71 B).
"""

from __future__ import annotations

from collections.abc import Collection
from functools import lru_cache

import numpy as np

from catalog.schema import DTYPE_BYTES, Dtype, Fp4Format, Model, WeightGroup

#: Values sharing one block scale, and the scale's bits, per FP4 format: NVFP4 (NVIDIA
#: Blackwell) scales every 16 E2M1 values with one FP8 E4M3 (plus one FP32 per tensor,
#: negligible); MXFP4 (OCP Microscaling v1.0) every 32 with one E8M0.
FP4_BLOCK: dict[Fp4Format, tuple[int, int]] = {Fp4Format.NVFP4: (16, 8), Fp4Format.MXFP4: (32, 8)}

# --------------------------------------------------------------------------- parameters


def embedding_param_count(model: Model) -> int:
    """Embedding parameters: ``vocab x hidden`` x (1 if tied else 2, for the lm_head)."""
    tables = 1 if model.tie_word_embeddings else 2
    return tables * model.vocab_size * model.hidden_size


def attention_param_count_per_layer(model: Model) -> int:
    """Parameters of one attention block (projections, biases, sinks, MLA norms)."""
    h = model.hidden_size
    heads = model.num_attention_heads
    if model.mla is not None:
        m = model.mla
        q_a = h * m.q_lora_rank + m.q_lora_rank  # projection + q_a_layernorm
        q_b = m.q_lora_rank * heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank  # + kv_a_layernorm
        kv_b = m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
        o = heads * m.v_head_dim * h
        count = q_a + q_b + kv_a + kv_b + o
    else:
        assert model.head_dim is not None  # guaranteed by the schema without MLA
        q_width = heads * model.head_dim
        kv_width = model.num_kv_heads * model.head_dim
        count = h * q_width + 2 * h * kv_width + q_width * h
        if model.qkv_bias:
            count += q_width + 2 * kv_width
    if model.attention_sinks:
        count += heads
    return count


def attention_output_param_count_per_layer(model: Model) -> int:
    """Parameters of one attention block's output projection (``wo``/``o_proj``):
    ``heads x v_head_dim x hidden`` (MLA) or ``heads x head_dim x hidden``."""
    width = model.mla.v_head_dim if model.mla is not None else model.head_dim
    assert width is not None  # guaranteed by the schema without MLA
    return model.num_attention_heads * width * model.hidden_size


def dense_mlp_param_count(model: Model) -> int:
    """Parameters of one dense gated MLP: ``3 x hidden x intermediate_size``."""
    return 3 * model.hidden_size * model.intermediate_size


def expert_param_count(model: Model) -> int:
    """Parameters of one (routed or shared) expert: ``3 x hidden x expert_intermediate``
    (+ ``2 x expert_intermediate + hidden`` biases when ``moe.expert_bias``); 0 if dense."""
    if model.moe is None:
        return 0
    e = model.moe.expert_intermediate_size
    count = 3 * model.hidden_size * e
    if model.moe.expert_bias:
        count += 2 * e + model.hidden_size
    return count


def router_param_count(model: Model) -> int:
    """Router parameters of one MoE layer: ``hidden x num_experts`` (+ bias); 0 if dense."""
    if model.moe is None:
        return 0
    count = model.hidden_size * model.moe.num_experts
    if model.moe.router_bias:
        count += model.moe.num_experts
    return count


def moe_layer_count(model: Model) -> int:
    """Layers with experts: ``num_layers - first_dense_layers`` (0 for a dense model)."""
    if model.moe is None:
        return 0
    return model.num_layers - model.moe.first_dense_layers


def routing_exponent(model: Model, ep: int = 1) -> float:
    """The Zipf exponent of ``model``'s routing as the cost model prices it
    (dimensionless): its ``moe.routing.exponent`` (catalog, with its source) on a
    replica without expert parallelism (``ep == 1``), else 0 (uniform routing, the
    conservative count; with expert parallelism which GPU holds the popular experts
    decides, see :class:`catalog.schema.MoeRouting`); 0 for dense models."""
    if model.moe is None or model.moe.routing is None or ep != 1:
        return 0.0
    return model.moe.routing.exponent


@lru_cache(maxsize=64)
def _log_miss(num_experts: int, experts_per_token: int, exponent: float) -> np.ndarray:
    """``ln(1 - q_i)`` per expert (:func:`distinct_experts`); ``q_i`` is kept below 1 for
    the logarithm only (the catalog refuses exponents that push ``q_1`` to 1,
    :func:`catalog.layers.top_expert_share`)."""
    rank = np.arange(1, num_experts + 1, dtype=float)
    weight = rank**-exponent
    q = np.minimum(experts_per_token * weight / weight.sum(), 1.0 - 1e-12)
    return np.log1p(-q)


def distinct_experts(
    num_experts: int, experts_per_token: int, tokens: float, exponent: float = 0.0
) -> float:
    """Expected distinct routed experts ``tokens`` tokens touch in one MoE layer (each
    token picks ``k = experts_per_token`` of ``E = num_experts``):
    ``sum_i 1 - (1 - q_i)^tokens`` with ``q_i = k i^-a / sum_j j^-a`` the chance a token
    picks the ``i``-th most popular expert (``a = exponent``, a Zipf law over the experts'
    rank, :func:`routing_exponent`; ``q_i`` at most 1 at the exponents the catalog
    accepts). ``a = 0`` is uniform routing,
    ``E (1 - (1 - k/E)^tokens)``; the more skewed the routing, the fewer experts a batch
    touches from one token on (DeepSeek-V3, 256 experts, top 8, at 64 tokens: 222 uniform,
    178 at ``a = 0.75``). 0 for no tokens; ``tokens`` may be fractional (a mean batch)."""
    if tokens <= 0:
        return 0.0
    e, k = num_experts, experts_per_token
    if exponent == 0:
        return e * (1.0 - (1.0 - k / e) ** tokens)
    return float(e - np.exp(tokens * _log_miss(e, k, exponent)).sum())


def _dense_mlp_layer_count(model: Model) -> int:
    return model.num_layers - moe_layer_count(model)


def _norm_param_count(model: Model) -> int:
    """Two RMSNorms per layer plus the final norm, each ``hidden`` wide."""
    return (2 * model.num_layers + 1) * model.hidden_size


_SHARED_CACHE: dict[int, tuple[Model, int]] = {}


def _shared_param_count(model: Model) -> int:
    """Parameters every token touches: all but the routed experts (memoized per
    model object: the planner asks for it hundreds of thousands of times)."""
    hit = _SHARED_CACHE.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    count = _compute_shared_param_count(model)
    _SHARED_CACHE[id(model)] = (model, count)
    return count


def _compute_shared_param_count(model: Model) -> int:
    count = embedding_param_count(model) + _norm_param_count(model)
    count += model.num_layers * attention_param_count_per_layer(model)
    count += _dense_mlp_layer_count(model) * dense_mlp_param_count(model)
    if model.moe is not None:
        per_layer = router_param_count(model)
        per_layer += model.moe.num_shared_experts * expert_param_count(model)
        count += moe_layer_count(model) * per_layer
    return count


def total_param_count(model: Model) -> int:
    """All parameters N (a count): embeddings + attention + MLPs/experts + norms.

    For MoE, every routed expert of every MoE layer is counted:
    ``N = shared part + moe_layers x num_experts x expert_params``.
    """
    count = _shared_param_count(model)
    if model.moe is not None:
        count += moe_layer_count(model) * model.moe.num_experts * expert_param_count(model)
    return count


def active_param_count(model: Model) -> int:
    """Parameters one token touches, N_active (a count).

    Dense models: ``N_active = N``. MoE: the shared part plus
    ``moe_layers x experts_per_token x expert_params`` (shared experts are in the
    shared part).
    """
    count = _shared_param_count(model)
    if model.moe is not None:
        count += moe_layer_count(model) * model.moe.experts_per_token * expert_param_count(model)
    return count


def routed_expert_param_count(model: Model) -> int:
    """Parameters in all routed experts of all MoE layers (0 for a dense model)."""
    if model.moe is None:
        return 0
    return moe_layer_count(model) * model.moe.num_experts * expert_param_count(model)


# --------------------------------------------------------------------------- bytes


#: Bytes per activation value (bf16): what the elementwise kernels move and the
#: tensor-parallel all-reduces exchange (re-exported as planner.kernels.ACTIVATION_BYTES).
ACTIVATION_BYTES = 2.0


def elementwise_bytes_per_token(model: Model, tp: int) -> float:
    """HBM bytes one token's elementwise kernels move across the ``tp`` GPUs its attention
    runs on in a step (the kernels between the GEMMs, as aiconfigurator's model of a layer
    counts them; with data-parallel attention ``tp`` is a rank's GPUs): per layer two fused
    add + RMSNorm kernels, each reading the residual and the hidden state and writing both
    (``4 x hidden`` values; every tensor-parallel GPU holds the whole hidden state, so
    ``x tp``), and the gated activation reading gate and up and
    writing their product (``3 x`` the MLP width, split over the ranks; an MoE layer's
    width is its ``experts_per_token + num_shared_experts`` experts'). In bf16 (2 bytes):
    ``sum over layers (tp x 8 x hidden + 3 x width) x 2``. Llama-3.1-8B at tp 1:
    32 x (32,768 + 43,008) x 2 = 4.85 MB per token (2.1 us at H100's 3.35 TB/s x 0.7)."""
    moe_layers = moe_layer_count(model)
    dense_width = 3.0 * model.intermediate_size
    width = 0.0
    if model.moe is not None:
        m = model.moe
        width = 3.0 * (m.experts_per_token + m.num_shared_experts) * m.expert_intermediate_size
    norms = model.num_layers * tp * 8.0 * model.hidden_size
    mlp = (model.num_layers - moe_layers) * dense_width + moe_layers * width
    return (norms + mlp) * ACTIVATION_BYTES


def fp4_bits_per_weight(fmt: Fp4Format | str) -> float:
    """Bits one FP4 weight takes with its share of the block scale:
    ``4 + scale_bits / block`` (bits): NVFP4 4 + 8/16 = 4.5, MXFP4 4 + 8/32 = 4.25.
    From the formats' definitions (:data:`FP4_BLOCK`)."""
    block, scale_bits = FP4_BLOCK[Fp4Format(fmt)]
    return 4.0 + scale_bits / block


def weight_bytes_per_param(
    model: Model, dtype: Dtype | str, fp4_format: Fp4Format | str | None = None
) -> float:
    """Bytes per quantized weight in ``dtype`` (bytes/parameter): ``DTYPE_BYTES`` for bf16
    (2) and fp8 (1); for fp4 the block format of the checkpoint the GPU loads
    (``fp4_format``, :meth:`catalog.schema.Model.fp4_checkpoint_for`) with its block
    scales, :func:`fp4_bits_per_weight` / 8 (NVFP4 0.5625, MXFP4 0.53125). The layers a
    checkpoint keeps in BF16 are counted by :func:`bf16_param_count`; the routed experts
    are always at this width. fp4 without a format, or in a format the model has no
    checkpoint in, is an error."""
    d = Dtype(dtype)
    if d != Dtype.FP4:
        return DTYPE_BYTES[d]
    if fp4_format is None:
        raise ValueError(f"{model.id} in fp4 needs the checkpoint's block format")
    fmt = Fp4Format(fp4_format)
    if model.fp4_checkpoint_for([fmt]) is None:
        raise ValueError(f"{model.id} has no {fmt.value} checkpoint (fp4_checkpoints)")
    return fp4_bits_per_weight(fmt) / 8.0


_BF16_CACHE: dict[tuple[int, frozenset[WeightGroup]], tuple[Model, int]] = {}


def _bf16_attention_param_count(model: Model, bf16_layers: Collection[WeightGroup]) -> int:
    """One layer's attention parameters kept in BF16: all of its projections for
    ``attention``, all but the output projection for ``attention_qkv``, else none."""
    if WeightGroup.ATTENTION in bf16_layers:
        return attention_param_count_per_layer(model)
    if WeightGroup.ATTENTION_QKV in bf16_layers:
        return attention_param_count_per_layer(model) - attention_output_param_count_per_layer(
            model
        )
    return 0


def bf16_param_count(model: Model, bf16_layers: Collection[WeightGroup] = ()) -> int:
    """Parameters a quantized (fp8 or fp4) checkpoint keeps in BF16 (a count): those every
    checkpoint keeps, the embedding table and lm_head (:func:`embedding_param_count`), the
    norms and the MoE routers, plus the checkpoint's ``bf16_layers``
    (:class:`catalog.schema.WeightGroup`): ``attention`` every layer's projections,
    ``attention_qkv`` all but their output projection,
    ``dense_mlp`` the dense layers' MLPs, ``edge_mlp`` the first and last layers' MLPs,
    ``shared_experts`` the MoE layers' shared experts. Every one of them is in the
    non-routed (dense) weights. From the checkpoints' quantization configs (sources in
    the model YAMLs); memoized per model object and group set."""
    groups = frozenset(WeightGroup(g) for g in bf16_layers)
    key = (id(model), groups)
    hit = _BF16_CACHE.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    count = embedding_param_count(model) + _norm_param_count(model)
    count += moe_layer_count(model) * router_param_count(model)
    count += model.num_layers * _bf16_attention_param_count(model, groups)
    if WeightGroup.DENSE_MLP in groups:
        count += _dense_mlp_layer_count(model) * dense_mlp_param_count(model)
    if WeightGroup.EDGE_MLP in groups:
        count += min(2, _dense_mlp_layer_count(model)) * dense_mlp_param_count(model)
    if WeightGroup.SHARED_EXPERTS in groups and model.moe is not None:
        count += moe_layer_count(model) * model.moe.num_shared_experts * expert_param_count(model)
    _BF16_CACHE[key] = (model, count)
    return count


def bf16_gemm_param_count(model: Model, bf16_layers: Collection[WeightGroup] = ()) -> int:
    """GEMM parameters a quantized (fp8 or fp4) checkpoint keeps in BF16 (a count):
    :func:`bf16_param_count` less what no GEMM multiplies, the norms and an untied input
    embedding table (a step gathers one row per token); so the lm_head, the MoE routers and
    the checkpoint's ``bf16_layers``. Their GEMMs run at the BF16 rate, not the weight
    dtype's (planner.kernels). From the checkpoints' quantization configs, as
    :func:`bf16_param_count`. Llama-3.1-8B: 525,336,576 (its lm_head, 128,256 x 4,096);
    Llama-3.1-405B with attention and edge MLPs in BF16 (Meta's FP8 checkpoint):
    79,209,431,040 (attention 126 x 570M, two MLPs 5.23B, lm_head 2.10B)."""
    count = bf16_param_count(model, bf16_layers) - _norm_param_count(model)
    return count - input_embedding_param_count(model)


def _mixed_bytes(
    model: Model,
    params: int,
    dtype: Dtype | str,
    fp4_format: Fp4Format | str | None,
    bf16_layers: Collection[WeightGroup],
) -> float:
    """``(params - bf16) x b_q + bf16 x 2`` for ``params`` that hold every BF16 layer."""
    b_q = weight_bytes_per_param(model, dtype, fp4_format)
    if Dtype(dtype) == Dtype.BF16:
        return params * b_q
    wide = bf16_param_count(model, bf16_layers)
    return (params - wide) * b_q + wide * DTYPE_BYTES[Dtype.BF16]


def weight_bytes(
    model: Model,
    dtype: Dtype | str,
    fp4_format: Fp4Format | str | None = None,
    bf16_layers: Collection[WeightGroup] = (),
) -> float:
    """Bytes of all weights as a checkpoint in ``dtype`` holds them (bytes):
    ``(N - N_bf16) x weight_bytes_per_param(dtype, fp4_format) + N_bf16 x 2`` with
    ``N = total_param_count`` and ``N_bf16 = bf16_param_count(bf16_layers)`` (0 in bf16,
    where every weight is 2 bytes). Llama-3.1-8B in fp8: 6.98 B x 1 + 1.05 B x 2 = 9.08 GB
    (its untied 128,256-token embedding and lm_head are 13% of its weights)."""
    return _mixed_bytes(model, total_param_count(model), dtype, fp4_format, bf16_layers)


def dense_weight_bytes(
    model: Model,
    dtype: Dtype | str,
    fp4_format: Fp4Format | str | None = None,
    bf16_layers: Collection[WeightGroup] = (),
) -> float:
    """Bytes of the non-routed weights (:func:`dense_weight_param_count`, which hold every
    BF16 layer) as in :func:`weight_bytes` (bytes)."""
    return _mixed_bytes(model, dense_weight_param_count(model), dtype, fp4_format, bf16_layers)


def input_embedding_param_count(model: Model) -> int:
    """Parameters of an untied input embedding table (a count): ``vocab x hidden``, 0 when
    the table is tied to the lm_head. A step gathers one row of it per token: no GEMM
    multiplies it and no step reads it whole (planner.kernels prices neither).
    Llama-3.1-8B: 525,336,576."""
    return 0 if model.tie_word_embeddings else model.vocab_size * model.hidden_size


def input_embedding_bytes(model: Model) -> float:
    """Bytes of the input embedding table a step never reads whole (it gathers one row per
    token): ``vocab x hidden x 2`` (bytes; every checkpoint keeps it in BF16), 0 when tied
    to the lm_head, which every step reads. Llama-3.1-8B: 1.05 GB of its 16.06 GB in BF16.
    The weights a step reads are the weights held less this (planner.roofline.steps)."""
    return float(input_embedding_param_count(model) * DTYPE_BYTES[Dtype.BF16])


def layer_bf16_gemm_param_count(model: Model, bf16_layers: Collection[WeightGroup] = ()) -> int:
    """Parameters of one dense layer's attention projections and MLP that a checkpoint
    keeping ``bf16_layers`` holds in BF16 (a count): the attention projections for
    ``attention``, all but the output projection for ``attention_qkv``, the MLP for
    ``dense_mlp`` (``edge_mlp``, two layers of many, is left out here). Llama-3.1-405B in
    Meta's FP8 (attention): 570,425,344 of the layer's 3,187,671,040."""
    count = _bf16_attention_param_count(model, bf16_layers)
    if WeightGroup.DENSE_MLP in bf16_layers:
        count += dense_mlp_param_count(model)
    return count


def layer_linear_bytes(
    model: Model,
    dtype: Dtype | str,
    fp4_format: Fp4Format | str | None = None,
    bf16_layers: Collection[WeightGroup] = (),
) -> float:
    """Bytes of one dense layer's attention projections and MLP (bytes): those
    :func:`layer_bf16_gemm_param_count` counts at 2 bytes, the rest at
    :func:`weight_bytes_per_param`."""
    params = attention_param_count_per_layer(model) + dense_mlp_param_count(model)
    wide = layer_bf16_gemm_param_count(model, bf16_layers)
    b_q = weight_bytes_per_param(model, dtype, fp4_format)
    return (params - wide) * b_q + wide * DTYPE_BYTES[Dtype.BF16]


def kv_bytes_per_token_per_layer(model: Model, kv_dtype: Dtype | str) -> float:
    """KV bytes one token adds to one layer: ``2 x kv_heads x head_dim x b_kv``
    (MLA: ``(kv_lora_rank + qk_rope_head_dim) x b_kv``, one latent, no separate K/V)."""
    b_kv = DTYPE_BYTES[Dtype(kv_dtype)]
    if model.mla is not None:
        return (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * b_kv
    assert model.head_dim is not None
    return 2 * model.num_kv_heads * model.head_dim * b_kv


def kv_bytes_per_token(model: Model, kv_dtype: Dtype | str) -> float:
    """KV-cache bytes per token over all layers: ``2 x L x kv_heads x head_dim x b_kv``
    (MLA: ``L x (kv_lora_rank + qk_rope_head_dim) x b_kv``), bytes/token.

    This is the per-token rate with every layer growing; sliding-window layers
    stop growing past their window (see :func:`kv_bytes_for_sequence`).
    Checks (bf16): llama-2-7b 524,288; GQA-8 7-8B 131,072; llama-3.1-405b
    516,096; DeepSeek-V3 70,272; gpt-oss-120b 73,728.
    """
    return model.num_layers * kv_bytes_per_token_per_layer(model, kv_dtype)


def _windowed_layers(model: Model) -> tuple[int, int]:
    """(full-attention layers, sliding-window layers)."""
    windowed = model.sliding_window.windowed_layers if model.sliding_window else 0
    return model.num_layers - windowed, windowed


def kv_bytes_for_sequence(model: Model, tokens: float, kv_dtype: Dtype | str) -> float:
    """KV-cache bytes held for one sequence of ``tokens`` tokens (bytes).

    ``per_layer x (L_full x tokens + L_window x min(tokens, window_tokens))``:
    sliding-window layers keep at most ``window_tokens`` per sequence. gpt-oss-120b
    in bf16: 18 full layers grow 36,864 B/token, 18 windowed layers hold at most
    128 tokens each (18 x 128 x 2,048 B).
    """
    if tokens < 0:
        raise ValueError(f"tokens must be >= 0, got {tokens}")
    full, windowed = _windowed_layers(model)
    per_layer = kv_bytes_per_token_per_layer(model, kv_dtype)
    held = full * tokens
    if windowed:
        assert model.sliding_window is not None
        held += windowed * min(tokens, model.sliding_window.window_tokens)
    return per_layer * held


def kv_replication(model: Model, tp: int) -> float:
    """Copies of each token's KV that a ``tp``-way tensor-parallel replica holds (>= 1).

    GQA/MHA: the ``kv_heads`` KV heads are sharded over the ranks, and a rank holds
    whole heads, so each rank holds ``ceil(kv_heads / tp)`` heads and the replica
    ``tp x ceil(kv_heads / tp) / kv_heads`` copies: 1 while ``tp <= kv_heads``,
    ``tp / kv_heads`` beyond (heads are replicated). MLA: the latent has no head
    axis, so every rank holds it whole: ``tp`` copies (DOMAIN.md section 8;
    DeepSeek-V3 at tp 8 keeps 1/8 of the pooled capacity a sharded model assumes).
    Data-parallel attention (one latent per attention rank) is not modelled here.
    """
    if tp < 1:
        raise ValueError(f"tp must be >= 1, got {tp}")
    if model.mla is not None:
        return float(tp)
    heads = model.num_kv_heads
    return tp * -(-heads // tp) / heads


def kv_bytes_per_token_held(model: Model, kv_dtype: Dtype | str, tp: int) -> float:
    """KV bytes a ``tp``-way replica holds per token over all layers, replication included:
    ``kv_bytes_per_token x kv_replication(tp)`` (bytes/token). DeepSeek-V3 in fp8 at tp 8:
    35,136 x 8 = 281,088 bytes/token."""
    return kv_bytes_per_token(model, kv_dtype) * kv_replication(model, tp)


# --------------------------------------------------------------------------- FLOPs


def weight_flops_per_token(model: Model) -> float:
    """FLOPs per token in the weight matmuls: ``2 x N_active`` (FLOP/token).

    llama-2-7b: 2 x 6.738e9 = 13.48 GFLOP/token.
    """
    return 2.0 * active_param_count(model)


def attention_flops_per_context_token(model: Model) -> float:
    """Attention FLOPs one query token spends per context token, per layer.

    ``4 x d_attn`` with ``d_attn = heads x head_dim`` (QK^T and AV, 2 FLOP per
    multiply-add each); MLA (naive, not weight-absorbed):
    ``2 x heads x (qk_nope + qk_rope + v_head_dim)``.
    """
    heads = model.num_attention_heads
    if model.mla is not None:
        m = model.mla
        return 2.0 * heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
    assert model.head_dim is not None
    return 4.0 * heads * model.head_dim


def attention_flops_per_token(model: Model, context_tokens: float) -> float:
    """Attention FLOPs for one token attending to ``context_tokens`` earlier tokens.

    ``4 x d_attn x (L_full x s + L_window x min(s, window))`` (FLOP/token; MLA:
    ``2 x heads x (qk_nope + qk_rope + v) `` in place of ``4 x d_attn``).
    llama-2-7b at s = 2,048: 4 x 32 x 4096 x 2048 = 1.07 GFLOP.
    """
    if context_tokens < 0:
        raise ValueError(f"context_tokens must be >= 0, got {context_tokens}")
    full, windowed = _windowed_layers(model)
    ctx = full * context_tokens
    if windowed:
        assert model.sliding_window is not None
        ctx += windowed * min(context_tokens, model.sliding_window.window_tokens)
    return attention_flops_per_context_token(model) * ctx


def decode_attention_flops_per_context_token(model: Model) -> float:
    """Attention FLOPs one *decode* token spends per context token, per layer.

    Dense attention: ``4 x heads x head_dim`` (as in prefill). MLA decodes in the
    weight-absorbed form (queries projected into the latent space, attention over the
    latent): ``2 x heads x (kv_lora_rank + qk_rope) + 2 x heads x kv_lora_rank``;
    DeepSeek-V3: 2 x 128 x 576 + 2 x 128 x 512 = 278,528 (DOMAIN.md section 8).
    """
    if model.mla is not None:
        m = model.mla
        heads = model.num_attention_heads
        return 2.0 * heads * (m.kv_lora_rank + m.qk_rope_head_dim) + 2.0 * heads * m.kv_lora_rank
    return attention_flops_per_context_token(model)


def context_layer_tokens(model: Model, context_tokens: float) -> float:
    """Layer-weighted context of one token: ``L_full x s + L_window x min(s, window)``
    (layer-tokens): what attention FLOPs and KV reads scale with."""
    if context_tokens < 0:
        raise ValueError(f"context_tokens must be >= 0, got {context_tokens}")
    full, windowed = _windowed_layers(model)
    ctx = full * context_tokens
    if windowed:
        assert model.sliding_window is not None
        ctx += windowed * min(context_tokens, model.sliding_window.window_tokens)
    return ctx


def dense_weight_param_count(model: Model) -> int:
    """Parameters every token's GEMMs read, i.e. all but the routed experts (a count)."""
    return _shared_param_count(model)


def routed_active_param_count(model: Model) -> int:
    """Routed-expert parameters one token touches: ``moe_layers x k x expert_params``
    (0 for a dense model)."""
    if model.moe is None:
        return 0
    return moe_layer_count(model) * model.moe.experts_per_token * expert_param_count(model)


def flops_per_token(model: Model, context_tokens: float) -> float:
    """FLOPs per token at context s: ``2 x N_active + attention_flops_per_token(s)``.

    llama-2-7b at s = 2,048: 13.476 + 1.074 = 14.55 GFLOP/token.
    """
    return weight_flops_per_token(model) + attention_flops_per_token(model, context_tokens)


def _integral_min(a: float, b: float, w: float) -> float:
    """Integral of ``min(s, w)`` over s in [a, b] (a <= b)."""
    if b <= w:
        return (b * b - a * a) / 2.0
    if a >= w:
        return w * (b - a)
    return (w * w - a * a) / 2.0 + w * (b - w)


def attention_flops_for_span(model: Model, start_tokens: float, new_tokens: float) -> float:
    """Attention FLOPs of ``new_tokens`` tokens appended after ``start_tokens`` cached ones.

    The continuous sum ``integral_{c}^{c+S} attention_flops_per_token(s) ds`` (FLOP):
    token at position s attends to the s tokens before it (causal). For full
    layers this equals ``S x attention_flops_per_token(c + S/2)``, the doc's
    "mean context c + S/2"; windowed layers integrate ``min(s, window)`` exactly.
    """
    if start_tokens < 0 or new_tokens < 0:
        raise ValueError("start_tokens and new_tokens must be >= 0")
    full, windowed = _windowed_layers(model)
    a, b = start_tokens, start_tokens + new_tokens
    ctx = full * (b * b - a * a) / 2.0
    if windowed:
        assert model.sliding_window is not None
        ctx += windowed * _integral_min(a, b, model.sliding_window.window_tokens)
    return attention_flops_per_context_token(model) * ctx


def prefill_flops(model: Model, new_tokens: float, cached_tokens: float = 0.0) -> float:
    """FLOPs to prefill ``new_tokens`` after ``cached_tokens`` already in the cache (FLOP).

    ``S x 2 x N_active + attention_flops_for_span(cached, S)`` (mean context
    ``cached + S/2`` on full-attention layers).
    """
    return new_tokens * weight_flops_per_token(model) + attention_flops_for_span(
        model, cached_tokens, new_tokens
    )


def params_billions(count: int) -> float:
    """A parameter count in billions (for display): ``count / 1e9``."""
    return count / 1e9


__all__ = [
    "active_param_count",
    "attention_flops_for_span",
    "attention_flops_per_context_token",
    "attention_flops_per_token",
    "attention_output_param_count_per_layer",
    "attention_param_count_per_layer",
    "bf16_gemm_param_count",
    "bf16_param_count",
    "context_layer_tokens",
    "decode_attention_flops_per_context_token",
    "dense_mlp_param_count",
    "dense_weight_bytes",
    "dense_weight_param_count",
    "embedding_param_count",
    "expert_param_count",
    "flops_per_token",
    "input_embedding_bytes",
    "input_embedding_param_count",
    "kv_bytes_for_sequence",
    "kv_bytes_per_token",
    "kv_bytes_per_token_held",
    "kv_bytes_per_token_per_layer",
    "kv_replication",
    "layer_bf16_gemm_param_count",
    "layer_linear_bytes",
    "moe_layer_count",
    "params_billions",
    "prefill_flops",
    "routed_active_param_count",
    "routed_expert_param_count",
    "router_param_count",
    "total_param_count",
    "weight_bytes",
    "weight_flops_per_token",
]
