"""Published quantized checkpoints (split from :mod:`catalog.schema`, which re-exports
them): which repository an engine loads, its FP4 block format, and which of the model's
layers it keeps in BF16.

A quantized checkpoint never stores every weight at its nominal width. Every FP8 and FP4
checkpoint this catalog knows keeps the embedding table, the lm_head, the norms and the
MoE routers in BF16 (ModelOpt, Quark, llm-compressor, vLLM's on-the-fly ``fp8``); some
keep more (:class:`WeightGroup`): Meta's FP8 Llama-3.1-405B quantizes only the MLPs of
layers 1..n-2, NVIDIA's NVFP4 DeepSeek-R1 leaves attention in BF16. Those layers take
memory the KV cache would have had and bandwidth every decode step reads.

This module imports nothing of the project but :mod:`catalog.fields`.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from catalog.fields import Frozen, Name, Text

#: A Hugging Face repository id, ``owner/name``.
Repo = Annotated[
    str, Field(min_length=3, max_length=200, pattern=r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
]


class Fp4Format(StrEnum):
    """How 4-bit weights are scaled in blocks: ``nvfp4`` (NVIDIA: one FP8 E4M3 scale per
    16 values) or ``mxfp4`` (OCP microscaling: one E8M0 scale per 32 values)."""

    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"


class WeightGroup(StrEnum):
    """Layers a quantized checkpoint may keep in BF16 beyond the ones every checkpoint
    keeps (embedding, lm_head, norms, routers):

    - ``attention``: every layer's attention projections (QKV/MLA and output);
    - ``attention_qkv``: the same but the output projection (NVIDIA's NVFP4 DeepSeek-R1
      "v2" quantizes ``wo`` as well);
    - ``dense_mlp``: the MLPs of the dense layers (all of a dense model's, the first
      ``moe.first_dense_layers`` of an MoE model);
    - ``shared_experts``: the MoE layers' shared experts;
    - ``edge_mlp``: the MLPs of the first and the last layer only (dense models; Meta's
      FP8 recipe skips them).

    Routed experts are always quantized: they are what a quantized MoE checkpoint is for.
    """

    ATTENTION = "attention"
    ATTENTION_QKV = "attention_qkv"
    DENSE_MLP = "dense_mlp"
    SHARED_EXPERTS = "shared_experts"
    EDGE_MLP = "edge_mlp"


def _distinct(groups: list[WeightGroup]) -> list[WeightGroup]:
    if len(set(groups)) != len(groups):
        raise ValueError(f"bf16_layers lists a group twice: {[g.value for g in groups]}")
    return groups


class _Quantized(Frozen):
    repo: Repo
    bf16_layers: list[WeightGroup] = Field(
        default_factory=list,
        description="Layers the checkpoint keeps in BF16 besides the embedding, lm_head, "
        "norms and routers (which every checkpoint keeps): attention, attention_qkv, "
        "dense_mlp, shared_experts, edge_mlp.",
    )
    bf16_layers_source: Text = Field(
        default="",
        description="Where bf16_layers is read from (the checkpoint's quantization config "
        "or the recipe that made it), or why it is assumed.",
    )

    @model_validator(mode="after")
    def _groups(self) -> _Quantized:
        _distinct(self.bf16_layers)
        if self.bf16_layers and not self.bf16_layers_source.strip():
            raise ValueError("bf16_layers needs bf16_layers_source (where it is read from)")
        for a, b in (
            (WeightGroup.DENSE_MLP, WeightGroup.EDGE_MLP),
            (WeightGroup.ATTENTION, WeightGroup.ATTENTION_QKV),
        ):
            if a in self.bf16_layers and b in self.bf16_layers:
                raise ValueError(f"bf16_layers: {a.value} already holds {b.value}; give one")
        return self

    def check_layers(self, moe: Any) -> None:
        """``bf16_layers`` must name layers the model has (``moe``: its
        :class:`catalog.schema.Moe` or None): edge_mlp a dense model, dense_mlp a dense
        layer, shared_experts an MoE model with shared experts; ValueError otherwise."""
        repo = self.repo
        groups = self.bf16_layers
        if WeightGroup.EDGE_MLP in groups and moe is not None:
            raise ValueError(f"{repo}: bf16_layers edge_mlp is for dense models")
        if WeightGroup.DENSE_MLP in groups and moe is not None and not moe.first_dense_layers:
            raise ValueError(f"{repo}: bf16_layers dense_mlp, but the model has no dense layer")
        if WeightGroup.SHARED_EXPERTS in groups and not (moe and moe.num_shared_experts):
            raise ValueError(f"{repo}: bf16_layers shared_experts, but the model has none")


class Fp4Checkpoint(_Quantized):
    """A published checkpoint with 4-bit weights: the Hugging Face ``repo`` engines load
    (the launch command names it rather than quantizing on the fly), its block
    ``format`` and the layers it keeps in BF16. The KV cache is served in FP8 with it."""

    format: Fp4Format
    weights_of: Name | None = Field(
        default=None,
        description="The model whose trained weights the checkpoint quantizes, when they are "
        "not this entry's (the same architecture, another release or fine-tune: AMD's MXFP4 "
        "DeepSeek is DeepSeek-R1-0528's weights); plans name it.",
    )


class MeasuredCheckpoint(_Quantized):
    """A published checkpoint a measurement ran that plans do not launch (Meta's FP8
    Llama-3.1-405B, NVIDIA's NVFP4 DeepSeek-R1 "v2"): a measurement names it
    (``checkpoint``) and is priced with its ``dtype``, FP4 block ``format`` and BF16
    layers. Plans launch FP8 quantized on load and the model's ``fp4_checkpoints``."""

    dtype: Literal["fp8", "fp4"]
    format: Fp4Format | None = Field(default=None, description="The FP4 block format (fp4 only).")
    weights_of: Name | None = Field(
        default=None, description="The model whose trained weights it quantizes, if not this one."
    )

    @model_validator(mode="after")
    def _format(self) -> MeasuredCheckpoint:
        if (self.dtype == "fp4") != (self.format is not None):
            raise ValueError("format is given for an fp4 checkpoint, and only for one")
        return self


def checkpoint_named(
    model_id: str, repo: str, fp4: Sequence[Fp4Checkpoint], measured: Sequence[MeasuredCheckpoint]
) -> MeasuredCheckpoint:
    """The checkpoint published as ``repo`` among a model's ``fp4`` checkpoints (the ones
    plans load, as a :class:`MeasuredCheckpoint` in fp4 with their format, weights and
    BF16 layers) and its ``measured`` ones; ValueError naming the known ones if neither
    lists it."""
    for c in fp4:
        if c.repo == repo:
            return MeasuredCheckpoint(
                repo=c.repo,
                dtype="fp4",
                format=c.format,
                weights_of=c.weights_of,
                bf16_layers=list(c.bf16_layers),
                bf16_layers_source=c.bf16_layers_source,
            )
    found = next((c for c in measured if c.repo == repo), None)
    if found is None:
        known = ", ".join(c.repo for c in [*fp4, *measured]) or "none"
        raise ValueError(f"{model_id} has no checkpoint {repo!r} (known: {known})")
    return found


def check_checkpoints(
    fp4: Sequence[Fp4Checkpoint], measured: Sequence[MeasuredCheckpoint], dtypes: Any, moe: Any
) -> None:
    """A model's checkpoints hold together (ValueError naming the entry otherwise): each
    one's BF16 layers exist in the model (``moe``: its MoE block or None), no repository
    is listed twice, a measured checkpoint is in one of the model's weight ``dtypes`` and,
    in fp4, in a block format one of its ``fp4`` checkpoints has (the format plans price)."""
    for ckpt in [*fp4, *measured]:
        ckpt.check_layers(moe)
    repos = [c.repo for c in [*fp4, *measured]]
    if len(set(repos)) != len(repos):
        raise ValueError(f"a checkpoint repository is listed twice: {repos}")
    formats = {c.format for c in fp4}
    for c in measured:
        if c.dtype not in {str(d) for d in dtypes}:
            raise ValueError(f"measured_checkpoints: {c.repo} is {c.dtype}, not in weight_dtypes")
        if c.format is not None and c.format not in formats:
            raise ValueError(
                f"measured_checkpoints: {c.repo} is {c.format.value}, a format no "
                "fp4_checkpoints entry has"
            )


__all__ = [
    "Fp4Checkpoint",
    "Fp4Format",
    "MeasuredCheckpoint",
    "Repo",
    "WeightGroup",
    "check_checkpoints",
    "checkpoint_named",
]
