"""Speculative decoding on a replica: what the drafter costs and holds, and checks of a
class's settings against the catalog.

Per verification step the target runs every resident sequence over ``k + 1`` tokens (its
last token and ``k`` drafts: GEMMs over ``B (k + 1)`` tokens with the weights read once,
attention FLOPs x (k + 1) over a KV cache read once) and the drafter proposes the next
``k``: 1.5 target layers per draft token for an EAGLE-3 head, one for DeepSeek's MTP
module (``planner.kernels.DRAFT_TARGET_LAYERS``), nothing on the GPU for n-gram lookup,
``k`` decode steps of a draft model (``planner.kernels.StepCoefficients.step_ms`` and
``.draft_ms``).
Each sequence advances ``a`` tokens per step on average (the acceptance length, the
user's assumption), so TPOT is ``step / a`` and a replica of ``B`` sequences makes
``B x a / step`` tokens/s (:func:`planner.kernels.effective_tpot_ms`,
:func:`planner.kernels.decode_tokens_per_s`).

Memory: the drafter's weights sit next to the target's (``DRAFT_TARGET_LAYERS`` target
layers' worth for a head; the whole draft model) and its KV grows with every sequence
(as many target layers' KV per token for a head; the draft model's KV).
"""

from __future__ import annotations

import dataclasses
import math

from catalog.schema import Catalog, Dtype, Model
from planner import architecture as arch
from planner import kernels as kn
from planner.errors import PlanningError
from planner.roofline.replica import (
    Replica,
    build_replica,
    dp_level_ratio,
    fp4_format_error,
    moe_level_ratio,
)

#: Largest ``draft_tokens`` accepted: engines run 1-8 in practice; beyond 16 the
#: verification step is a prefill and acceptance has long flattened.
MAX_DRAFT_TOKENS = 16


def _draft_factors(replica: Replica, d_model: Model) -> tuple[float, float]:
    """A draft model's prefill MFU and decode MBU on its target's GPUs: the target's, with
    the ratios the catalog priced it at (its family's measured MoE ratio and, at ``dp >
    1``, its data-parallel-attention ratio; the draft runs neither) swapped for the
    draft's family's; a factor the user set (not the catalog's) as it is."""
    gpu = replica.gpu
    eff = gpu.efficiency_for(replica.weight_dtype)
    ratio = moe_level_ratio(gpu, replica.model) * dp_level_ratio(gpu, replica.dp)
    swap = moe_level_ratio(gpu, d_model) / ratio

    def drafted(value: float, catalog_value: float) -> float:
        return value * swap if math.isclose(value, catalog_value * ratio) else value

    return drafted(replica.prefill_mfu, eff.prefill_mfu), drafted(
        replica.decode_mbu, eff.decode_mbu
    )


def check_speculation(
    catalog: Catalog,
    model: Model,
    method: kn.SpecMethod | str,
    draft_tokens: int,
    acceptance_length: float,
    draft_model: str | None,
    draft_repo: str | None,
    field: str,
) -> None:
    """Refuse settings the cost model cannot price, naming the field under ``field``
    (e.g. ``traffic.classes[0].speculative``): ``acceptance_length`` outside
    [1, draft_tokens + 1] (a verification step advances at least its bonus token and at
    most all drafts plus it); ``mtp`` on a model without MTP modules (catalog
    ``mtp_modules``); ``eagle3`` with no draft head (catalog ``eagle3_draft_repo`` or
    ``draft_repo``); ``draft_model`` without a catalog model id, or one with another
    vocabulary (the drafts must be the target's tokens); ``draft_model`` given for
    another method."""
    m = kn.SpecMethod(method)
    if not 1 <= draft_tokens <= MAX_DRAFT_TOKENS:
        raise PlanningError.for_field(
            f"{field}.draft_tokens", f"must be in [1, {MAX_DRAFT_TOKENS}], got {draft_tokens}"
        )
    if not 1.0 <= acceptance_length <= draft_tokens + 1:
        raise PlanningError.for_field(
            f"{field}.acceptance_length",
            f"must be in [1, draft_tokens + 1 = {draft_tokens + 1}] (mean tokens a sequence "
            f"advances per verification step), got {acceptance_length:g}",
        )
    if m == kn.SpecMethod.MTP and model.mtp_modules < 1:
        raise PlanningError.for_field(
            f"{field}.method",
            f"mtp needs a model with multi-token-prediction modules; {model.id} has none "
            "(catalog mtp_modules)",
        )
    if m == kn.SpecMethod.EAGLE3 and not (draft_repo or model.eagle3_draft_repo):
        raise PlanningError.for_field(
            f"{field}.draft_repo",
            f"eagle3 needs a draft head: the catalog names none for {model.id} "
            "(eagle3_draft_repo); give its Hugging Face repository",
        )
    if m == kn.SpecMethod.DRAFT_MODEL:
        if draft_model is None:
            raise PlanningError.for_field(
                f"{field}.draft_model", "method draft_model needs a draft model id from the catalog"
            )
        draft = catalog.models.get(draft_model)
        if draft is None:
            raise PlanningError.for_field(
                f"{field}.draft_model",
                f"unknown model {draft_model[:80]!r}; known: {', '.join(sorted(catalog.models))}",
            )
        if draft.vocab_size != model.vocab_size:
            raise PlanningError.for_field(
                f"{field}.draft_model",
                f"{draft.id}'s vocabulary ({draft.vocab_size:,}) is not {model.id}'s "
                f"({model.vocab_size:,}): its drafts cannot be verified",
            )
        if draft.id == model.id:
            raise PlanningError.for_field(f"{field}.draft_model", "the draft is the target model")
    elif draft_model is not None:
        raise PlanningError.for_field(
            f"{field}.draft_model", f"only for method draft_model, not {m}"
        )


def draft_repo_for(
    model: Model,
    method: kn.SpecMethod,
    given: str | None,
    catalog: Catalog,
    draft_model: str | None,
) -> str | None:
    """What the engine loads as the drafter: the given repository, else the catalog's
    EAGLE-3 head (eagle3) or the draft model's repository (draft_model); None for mtp
    (the target's own module) and ngram."""
    if given:
        return given
    if method == kn.SpecMethod.EAGLE3:
        return model.eagle3_draft_repo
    if method == kn.SpecMethod.DRAFT_MODEL and draft_model in catalog.models:
        return catalog.models[draft_model].hf_repo or draft_model
    return None


def with_speculation(
    catalog: Catalog,
    replica: Replica,
    method: kn.SpecMethod | str,
    draft_tokens: int,
    acceptance_length: float,
    draft_model: str | None = None,
    draft_repo: str | None = None,
) -> Replica:
    """``replica`` running speculative decoding (:class:`planner.kernels.Speculation`).

    Drafter weights (bytes): a head, ``DRAFT_TARGET_LAYERS x total params / L x bytes per
    weight`` (EAGLE-3 on Llama-3.1-70B: 1.5 x 0.88 = 1.32 B params in BF16, as the heads
    are published; DeepSeek-V3's MTP module: 11 B, as published, in the checkpoint's
    dtype); a draft
    model, its own weights in the target's dtype when it is served in it, else BF16, on
    the same ``tp`` GPUs. Settings are checked by
    :func:`check_speculation` (field ``speculative``)."""
    m = kn.SpecMethod(method)
    model = replica.model
    check_speculation(
        catalog, model, m, draft_tokens, acceptance_length, draft_model, draft_repo, "speculative"
    )
    draft_coeffs = None
    if m == kn.SpecMethod.DRAFT_MODEL:
        assert draft_model is not None
        d_model = catalog.models[draft_model]
        # the target's dtype when the draft is served in it (FP4: in a format this GPU runs)
        same = replica.weight_dtype in d_model.weight_dtypes and (
            replica.weight_dtype != Dtype.FP4 or fp4_format_error(d_model, replica.gpu) is None
        )
        d_dtype = replica.weight_dtype if same else Dtype.BF16
        factors = _draft_factors(replica, d_model)
        draft = build_replica(
            catalog,
            draft_model,
            replica.gpu.id,
            tp=replica.tp,
            dtype=d_dtype,
            kv_dtype=replica.kv_dtype,
            mfu=factors[0],
            mbu=factors[1],
            overlap_factor=replica.overlap_factor,
            check_fit=False,
            engine=replica.engine,
            kernel_gemm_rate=replica.kernel_gemm_rate,
        )
        draft_coeffs = draft.coefficients
        weights = arch.weight_bytes(*draft.weight_layout)
    else:
        # EAGLE-3 heads are published in BF16; an MTP module ships in the checkpoint's dtype
        # (a layer's share of the checkpoint's bytes, its BF16 layers included)
        total = (
            arch.weight_bytes(model, Dtype.BF16)
            if m == kn.SpecMethod.EAGLE3
            else arch.weight_bytes(*replica.weight_layout)
        )
        weights = kn.DRAFT_TARGET_LAYERS[m] * total / model.num_layers
    spec = kn.Speculation(
        method=m,
        draft_tokens=draft_tokens,
        acceptance_length=float(acceptance_length),
        draft_repo=draft_repo_for(model, m, draft_repo, catalog, draft_model),
        draft=draft_coeffs,
        draft_weight_bytes=weights,
    )
    return dataclasses.replace(replica, speculative=spec)


__all__ = ["MAX_DRAFT_TOKENS", "check_speculation", "draft_repo_for", "with_speculation"]
