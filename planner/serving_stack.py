"""Serving-stack latency in the time to first token: what a request spends outside the
engine's GPU steps (the API server, tokenization, scheduling, the first streamed chunk)
as measured on public runs, added to every predicted TTFT and never to GPU time.

Measured only for MLA models (DeepSeek-V3/R1) served by SGLang and TensorRT-LLM:
SemiAnalysis InferenceX's aggregated runs at 1-8 users measure 158-1,441 ms where queue
+ prefill predicts 34-423 ms, with 922- and 7,373-token prompts. The excess is not GPU
time: the same runs' throughputs at 16-128 users are predicted within a few percent
without it. It is ``base + per_token x prompt tokens`` per GPU vendor, the line through
the median excess of each prompt length: on NVIDIA GPUs nearly constant (B200 at one
user: +126 ms for 922-token prompts, +163 ms for 7,373), on AMD's ROCm stack growing
with the prompt (MI300X and MI325X: +210 to +531 ms at 922 tokens, +549 to +1,093 ms at
7,373). Beyond 7,373 tokens the line is extrapolated (longer prompts priced slower,
never faster). Dense models show none beyond the model's spread (NVIDIA NIM's
Llama-3.1-70B runs at 1 and 5 users: -47 and +51 ms; TensorRT-LLM's own Llama-3.1 8B/70B
runs at 2 requests/s: 0-19 ms), so they get 0. ``tests/test_serving_stack.py`` holds
the constants to the data (planner.fidelity.ttft_excess_at_low_load).
"""

from __future__ import annotations

from dataclasses import dataclass

from catalog.schema import Gpu, Model


@dataclass(frozen=True)
class StackLatency:
    """A serving stack's TTFT latency ``base_ms + per_token_ms x prompt tokens`` (ms)."""

    base_ms: float
    per_token_ms: float

    def at(self, prompt_tokens: float) -> float:
        """The latency for a prompt of ``prompt_tokens`` tokens (ms)."""
        return self.base_ms + self.per_token_ms * max(prompt_tokens, 0.0)


#: MLA models on NVIDIA GPUs: the line through the median excess of InferenceX's
#: DeepSeek runs on B200 and H200 at 1-8 users (SGLang and TensorRT-LLM, 21 runs) over the
#: model's TTFT: +131 ms at 922-token prompts, +122 ms at 7,373 (ms, ms per prompt token;
#: +144 and +130 before the model charged the step overlap scheduling queues ahead).
#: The medians fall with the prompt, which a stack's latency does not, so the line is flat
#: at the larger (conservative). Measured.
MLA_STACK_NVIDIA = StackLatency(base_ms=131.3, per_token_ms=0.0)

#: The same on AMD GPUs: SGLang on MI300X and MI325X (12 runs): +301 ms at 922-token
#: prompts, +785 ms at 7,373 (+327 and +817 before the overlap step; ms, ms per prompt
#: token; the model's prefill on xGMI's measured all-reduces). Measured.
MLA_STACK_AMD = StackLatency(base_ms=231.5, per_token_ms=0.0751)

#: No stack latency (models without MLA: none measured beyond the model's spread).
NO_STACK = StackLatency(base_ms=0.0, per_token_ms=0.0)


def serving_stack(model: Model, gpu: Gpu) -> StackLatency:
    """The serving stack's TTFT latency for ``model`` on ``gpu``: :data:`MLA_STACK_NVIDIA`
    for an MLA model on an NVIDIA GPU, :data:`MLA_STACK_AMD` on any other (the slower of
    the two measured: a stack never measured, Intel's, is not assumed faster than a
    measured one); :data:`NO_STACK` for a model without MLA. Per request: it delays the
    first token, holds no GPU."""
    if model.mla is None:
        return NO_STACK
    return MLA_STACK_NVIDIA if gpu.vendor.upper() == "NVIDIA" else MLA_STACK_AMD


def serving_stack_ttft_ms(model: Model, gpu: Gpu, prompt_tokens: float) -> float:
    """Serving-stack latency in the TTFT of a ``prompt_tokens``-token request (ms):
    ``serving_stack(model, gpu).at(prompt_tokens)``."""
    return serving_stack(model, gpu).at(prompt_tokens)


__all__ = [
    "MLA_STACK_AMD",
    "MLA_STACK_NVIDIA",
    "NO_STACK",
    "StackLatency",
    "serving_stack",
    "serving_stack_ttft_ms",
]
