"""A model's non-dense layer layouts (split from :mod:`catalog.schema`, which re-exports
them): mixture-of-experts (with the routing skew its experts see), multi-head latent
attention and sliding-window attention."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from catalog.fields import (
    MAX_CONTEXT_TOKENS,
    MAX_EXPERTS,
    MAX_LAYERS,
    Frozen,
    HeadDim,
    Text,
    Width,
)

#: Largest routing exponent accepted: at 2 the most popular of 256 experts takes 61% of
#: one pick's probability, far beyond any estimate published for a trained router.
MAX_ROUTING_EXPONENT = 2.0


class MoeRouting(Frozen):
    """How unevenly a trained router spreads tokens over the experts, as the cost model
    counts the experts a step reads (:func:`planner.architecture.distinct_experts`).

    ``exponent`` ``a``: the experts' popularity falls as a power of their rank (a Zipf
    law), a token picks expert ``i`` (of ``E``, ``k`` per token) with probability
    ``q_i = k i^-a / sum_j j^-a`` (the model refuses an exponent at which ``q_1`` would
    exceed 1, :func:`top_expert_share`); ``a = 0`` is uniform routing (no ``routing``
    block). Dimensionless. ``source``: where the exponent comes from (a measurement of
    the model's routing on real text, or a benchmark that estimated it). Applied without
    expert parallelism only: a step's expert reads then are every GPU's share of every
    touched expert; with it, which GPU holds the popular experts decides, and the
    uniform count with ``planner.kernels.EP_LOAD_IMBALANCE`` stays."""

    exponent: Annotated[float, Field(gt=0, le=MAX_ROUTING_EXPONENT, allow_inf_nan=False)]
    source: Text = Field(min_length=10)


class Moe(Frozen):
    """Mixture-of-experts layout. ``expert_intermediate_size`` is per expert;
    ``routing``: the router's skew over the experts (:class:`MoeRouting`), None for
    uniform routing (every expert equally likely, the conservative count: the most
    experts a step can touch on average)."""

    num_experts: Annotated[int, Field(ge=2, le=MAX_EXPERTS, strict=True)]
    experts_per_token: Annotated[int, Field(ge=1, le=MAX_EXPERTS, strict=True)]
    expert_intermediate_size: Width
    num_shared_experts: Annotated[int, Field(ge=0, le=MAX_EXPERTS, strict=True)] = 0
    first_dense_layers: Annotated[int, Field(ge=0, le=MAX_LAYERS, strict=True)] = 0
    router_bias: bool = False
    expert_bias: bool = False
    routing: MoeRouting | None = None

    @model_validator(mode="after")
    def _topk(self) -> Moe:
        if self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token must not exceed num_experts")
        if self.routing is not None:
            share = top_expert_share(self.num_experts, self.routing.exponent)
            if self.experts_per_token * share > 1:
                raise ValueError(
                    f"routing.exponent {self.routing.exponent:g} would have each token pick "
                    f"its most popular expert {self.experts_per_token * share:.2f} times "
                    f"(experts_per_token x its share {share:.3f} must be at most 1): use a "
                    "smaller exponent"
                )
        return self


def top_expert_share(num_experts: int, exponent: float) -> float:
    """The most popular expert's share of one pick under a Zipf law of ``exponent`` over
    ``num_experts`` ranks: ``1 / sum_j j^-exponent`` (dimensionless)."""
    return 1.0 / sum(j**-exponent for j in range(1, num_experts + 1))


class Mla(Frozen):
    """Multi-head latent attention (DeepSeek-V2/V3): the KV cache holds a latent."""

    q_lora_rank: Width
    kv_lora_rank: Width
    qk_nope_head_dim: HeadDim
    qk_rope_head_dim: HeadDim
    v_head_dim: HeadDim


class SlidingWindow(Frozen):
    """Sliding-window attention on some layers: those layers keep at most
    ``window_tokens`` of KV per sequence."""

    window_tokens: Annotated[int, Field(ge=1, le=MAX_CONTEXT_TOKENS, strict=True)]
    windowed_layers: Annotated[int, Field(ge=1, le=MAX_LAYERS, strict=True)]
