"""Speculative decoding's step arithmetic (split from :mod:`planner.kernels`, which
re-exports it): the draft methods, the target layers a draft token costs, and the tokens
a verification step advances, and :class:`Speculation`, a replica's speculative decoding."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class _Accepting(Protocol):
    """What the step arithmetic reads of a :class:`planner.kernels.Speculation`."""

    @property
    def acceptance_length(self) -> float: ...


class _Drafter(Protocol):
    """What a verification step reads of a draft model's step coefficients
    (:class:`planner.kernels.StepCoefficients`)."""

    def step_ms(self, batch: float, context: float) -> float: ...


class SpecMethod(StrEnum):
    """How draft tokens are proposed: an EAGLE-3 head, the model's own multi-token-
    prediction module, n-gram lookup in the context (CPU), or a smaller draft model."""

    EAGLE3 = "eagle3"
    MTP = "mtp"
    NGRAM = "ngram"
    DRAFT_MODEL = "draft_model"


#: Target layers' worth of work (FLOPs, weight bytes, KV) one draft token costs, per
#: method with a head on the target. EAGLE-3: one decoder layer fed the target's hidden
#: states, plus the projection fusing three of them (3 h^2) and an LM head over its draft
#: vocabulary (32 k x h): on Llama-3.1-70B 0.86 + 0.20 + 0.26 = 1.32 B parameters, 1.5
#: target layers (rounded up; the published head is "~1 B"). DeepSeek-V3's MTP module: one
#: transformer block (11.5 B parameters, 671 B / 61 layers = 11 B). Assumed from the
#: architectures, not measured; n-gram lookup runs on the CPU (0); a draft model is
#: priced as itself.
DRAFT_TARGET_LAYERS: dict[SpecMethod, float] = {
    SpecMethod.EAGLE3: 1.5,
    SpecMethod.MTP: 1.0,
    SpecMethod.NGRAM: 0.0,
    SpecMethod.DRAFT_MODEL: 0.0,
}


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding on a replica (per traffic class; the user's assumption).

    ``draft_tokens`` k proposed per verification step; ``acceptance_length`` a = mean
    tokens each sequence advances per verification step (accepted drafts + the bonus
    token), 1 <= a <= k + 1, assumed by the user (measured acceptance depends on the
    traffic: code-like agent turns reach 2-3 at k = 3); ``draft_repo`` what the engine
    loads as the drafter; ``draft`` the draft model's step coefficients
    (:class:`planner.kernels.StepCoefficients`) on the same GPUs (method ``draft_model``
    only); ``draft_weight_bytes`` the drafter's weights held next to the target's
    (bytes)."""

    method: SpecMethod
    draft_tokens: int
    acceptance_length: float
    draft_repo: str | None = None
    draft: _Drafter | None = None
    draft_weight_bytes: float = 0.0

    @property
    def tokens_per_step(self) -> int:
        """Query tokens per sequence in one verification step: ``k + 1``."""
        return self.draft_tokens + 1


def tokens_per_verification_step(spec: _Accepting | None) -> float:
    """Mean output tokens a sequence advances per engine step (tokens): the assumed
    acceptance length ``a`` with speculative decoding, else 1."""
    return 1.0 if spec is None else spec.acceptance_length


def effective_tpot_ms(step_ms: float, tokens_per_step: float) -> float:
    """Time per output token with speculative decoding (ms): ``step / a`` (a verification
    step of ``step_ms`` advances each sequence by ``a`` tokens on average)."""
    return step_ms / tokens_per_step


def decode_tokens_per_s(batch: float, step_ms: float, tokens_per_step: float) -> float:
    """Output tokens/s of a replica running ``batch`` sequences: ``B x a / step``
    (tokens/s; a = 1 without speculation)."""
    return batch * tokens_per_step / step_ms * 1e3


def verification_steps(output_tokens: float, tokens_per_step: float) -> float:
    """Engine steps a sequence spends decoding ``output_tokens`` after its first token:
    ``(G - 1) / a`` (steps, at least 1 when G > 1; the first token comes from prefill)."""
    if output_tokens <= 1:
        return 0.0
    return max(1.0, (output_tokens - 1.0) / tokens_per_step)
