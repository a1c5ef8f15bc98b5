"""Serving-stack latency in the time to first token: what a request spends outside the
engine's GPU steps (the API server, tokenization, scheduling, the first streamed chunk)
as measured on public runs, added to every predicted TTFT and never to GPU time.

Measured only for MLA models (DeepSeek-V3/R1) served by SGLang and TensorRT-LLM:
SemiAnalysis InferenceX's aggregated runs at 1-8 users measure 158-1,441 ms where queue
+ prefill predicts 34-423 ms. The excess is about constant in the prompt on NVIDIA
GPUs (B200 at one user: +126 ms for 922-token prompts, +163 ms for 7,373) and not GPU
time: the same runs' throughputs at 16-128 users are predicted within a few percent
without it. Dense models show none beyond the model's spread (NVIDIA NIM's Llama-3.1-70B
runs at 1 and 5 users: -47 and +51 ms; TensorRT-LLM's own Llama-3.1 8B/70B runs at 2
requests/s: 0-19 ms), so they get 0. ``tests/test_serving_stack.py`` holds both
constants to the data (planner.fidelity.ttft_excess_at_low_load).
"""

from __future__ import annotations

from catalog.schema import Gpu, Model

#: Median serving-stack TTFT of an MLA model on an NVIDIA GPU (ms): InferenceX's
#: DeepSeek runs on B200 and H200 at 1-8 users, SGLang (12 runs, median +156 ms) and
#: TensorRT-LLM (9 runs, +148 ms) together, beyond queue + prefill as priced. Measured.
MLA_STACK_TTFT_MS_NVIDIA = 150.0

#: The same on AMD GPUs (ms): SGLang on MI300X and MI325X (12 runs, median +433 ms;
#: +210 to +531 ms with 922-token prompts, +549 to +1,093 ms with 7,373: the ROCm stack's
#: excess grows with the prompt, which this constant does not follow). Measured.
MLA_STACK_TTFT_MS_AMD = 430.0


def serving_stack_ttft_ms(model: Model, gpu: Gpu) -> float:
    """Serving-stack latency in a request's TTFT (ms): :data:`MLA_STACK_TTFT_MS_NVIDIA`
    for an MLA model on an NVIDIA GPU, :data:`MLA_STACK_TTFT_MS_AMD` on any other (the
    larger of the two measured: a stack never measured, Intel's, is not assumed
    faster than a measured one); 0 for a model without MLA (measured within the
    model's spread). A constant per request: it delays the first token, holds no GPU."""
    if model.mla is None:
        return 0.0
    return MLA_STACK_TTFT_MS_NVIDIA if gpu.vendor.upper() == "NVIDIA" else MLA_STACK_TTFT_MS_AMD


__all__ = ["MLA_STACK_TTFT_MS_AMD", "MLA_STACK_TTFT_MS_NVIDIA", "serving_stack_ttft_ms"]
