"""Field types and physical bounds of catalog entries (split from :mod:`catalog.schema`,
which re-exports them): text without control characters, ids, positive and bounded
numbers, and the generous upper bounds that keep a hostile custom entry from
overflowing the cost model.

This module imports nothing of the project.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def control_character(text: str, allowed: str = "") -> str | None:
    """The first control character (Unicode category Cc: U+0000-U+001F, U+007F-U+009F)
    in ``text`` that is not in ``allowed``, described with its position; None if none."""
    for i, ch in enumerate(text):
        if ch not in allowed and unicodedata.category(ch) == "Cc":
            return f"U+{ord(ch):04X} at position {i}"
    return None


def no_control_characters(text: str) -> str:
    found = control_character(text)
    if found:
        raise ValueError(
            f"must not contain control characters (found {found}); names are one line of "
            "printable text (a NUL cannot even be stored in PostgreSQL)"
        )
    return text


def _printable_text(text: str) -> str:
    found = control_character(text, allowed="\t\n\r")
    if found:
        raise ValueError(
            f"must not contain control characters other than tab and line breaks (found {found})"
        )
    return text


#: A user-supplied name or label: no control characters (NUL, newline, escape...).
Name = Annotated[str, AfterValidator(no_control_characters)]
#: Free text (notes, reasons, sources): line breaks and tabs allowed, no other control.
Text = Annotated[str, AfterValidator(_printable_text)]

# ``$`` in these patterns is pydantic's (Rust) regex: it matches only at the very end
# of the text, so a trailing newline is refused (Python's ``re`` would need ``\Z``).
Id = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", max_length=64)]
Sources = Annotated[list[Text], Field(min_length=1, max_length=50)]
PosFloat = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False, strict=True)]


# Physical upper bounds of custom entries: generous (several times the largest part
# shipped or announced today), but finite, so that a typo or a hostile value (1e308 GB
# of memory, 10^12 layers) is refused with the field named instead of overflowing the
# cost model. Largest shipped or announced today, for scale: 288 GB of HBM and 8 TB/s
# (B300, MI355X), ~10 PFLOP/s dense FP4, 1.4 kW TDP, 1.8 TB/s NVLink 5; models with
# 126 layers, hidden 18,432 (GPT-3 175B: 12,288; Llama 405B: 16,384), 256 experts,
# vocab 256k, 10M-token context (Llama 4 Scout), 2T parameters.
MAX_MEMORY_GB = 10_000.0  # 10 TB per accelerator
MAX_HOST_MEMORY_GB = 1_000_000.0  # 1 PB of DRAM per server (a rack counts as one)
MAX_TFLOPS = 200_000.0  # 200 PFLOP/s dense per accelerator
MAX_MEM_BW_TBPS = 200.0
MAX_TDP_W = 20_000.0
MAX_LINK_GB_PER_S = 100_000.0  # 100 TB/s per GPU and direction
MAX_LATENCY_US = 10_000_000.0  # 10 s
MAX_USD_PER_HOUR = 100_000.0  # per GPU-hour
MAX_PURCHASE_USD = 100_000_000.0  # per GPU
MAX_LAYERS = 2_000
MAX_WIDTH = 1_000_000  # hidden, intermediate and per-expert widths
MAX_HEADS = 16_384
MAX_HEAD_DIM = 16_384
MAX_VOCAB = 100_000_000
MAX_CONTEXT_TOKENS = 1_000_000_000
MAX_EXPERTS = 100_000
MAX_PARAMS_B = 1_000_000.0  # 1,000 T parameters
MAX_TOKENS = 100_000_000.0  # a length distribution's mean or p90
MAX_SLO_MS = 86_400_000.0  # one day

Tflops = Annotated[float, Field(gt=0, le=MAX_TFLOPS, allow_inf_nan=False, strict=True)]
UsdPerHour = Annotated[float, Field(gt=0, le=MAX_USD_PER_HOUR, allow_inf_nan=False, strict=True)]
Width = Annotated[int, Field(ge=1, le=MAX_WIDTH, strict=True)]
HeadDim = Annotated[int, Field(ge=1, le=MAX_HEAD_DIM, strict=True)]
ParamsB = Annotated[float, Field(gt=0, le=MAX_PARAMS_B, allow_inf_nan=False, strict=True)]
#: A token count of a length distribution: at least one token (a mean of 1e-300 tokens
#: made the solver's tables degenerate), at most MAX_TOKENS.
Tokens = Annotated[float, Field(ge=1, le=MAX_TOKENS, allow_inf_nan=False, strict=True)]
#: A latency objective: at least a microsecond, at most a day.
SloMs = Annotated[float, Field(ge=0.001, le=MAX_SLO_MS, allow_inf_nan=False, strict=True)]


class Frozen(BaseModel):
    """Base of every catalog entry: immutable, unknown fields refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ReportedMemory(Frozen):
    """A GPU's device memory as its driver reports it (``nvidia-smi``'s total, MiB).

    Vendors round device memory in their names: an "80GB" H100 reports 81,559 MiB
    (85.5e9 bytes), a "141GB" H200 143,771 MiB (150.8e9 bytes); serving engines take
    their memory share of what the driver reports. ``mib`` is that total (measured, on
    the GPU itself), ``source`` where it was read.
    """

    mib: PosFloat = Field(le=MAX_MEMORY_GB * 1.1 * 1e9 / 2**20)
    source: Text = Field(min_length=1)


def device_memory_bytes(memory_gb: float, reported: ReportedMemory | None) -> float:
    """A GPU's device memory (bytes): the driver's reported total when known
    (``reported.mib x 2^20``, measured), else ``memory_gb x 1e9`` (the nominal figure as
    decimal GB, below what every read device reports: conservative)."""
    if reported is not None:
        return reported.mib * 2**20
    return memory_gb * 1e9
