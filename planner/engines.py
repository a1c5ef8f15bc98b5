"""What a serving engine changes in the cost model: memory it leaves, attention precision,
and what its token budget counts (DOMAIN.md section 8).

Three engines are modelled, by the facts that move a plan:

* **memory**: the share of each GPU's memory the engine may use for weights, the KV
  cache and activations (``memory_utilization``) and the memory per GPU kept for
  activations, CUDA graphs and the sampler (:func:`activation_reserve_gb`: on vLLM what
  its start-up profile measures, see there; 1 GB on TensorRT-LLM, none on SGLang). Vendors run
  Llama-3.1-70B FP8 at tp 1 on an H100 80GB and BF16 at tp 2 on an A100 80GB
  (TensorRT-LLM), so those must fit. Shares are of the memory the driver reports
  (:func:`planner.roofline.gpu_memory_bytes`: an "80GB" H100 reports 81,559 MiB =
  85.5e9 bytes): with 0.92 and vLLM's measured 4.6 GB per GPU, 70B FP8 on one H100
  leaves 85.5 x 0.92 - 4.6 - 70.6 = 3.5 GB of KV cache (about 21,000 fp8 tokens).
  vLLM's default ``gpu_memory_utilization`` is 0.9; deployments raise it to
  0.92-0.95 for large models, and the launch commands say which value the plan
  assumes. SGLang's ``mem_fraction_static`` covers weights and KV only (activations
  come from the rest, no reserve inside it); when not told, SGLang sets it from the
  device's memory and the parallelism (:func:`sglang_memory_share`: 0.835 of an H100 at
  tp 1, 0.897 of an H200 at tp 8; 0.88 only when it cannot read the device).
  TensorRT-LLM gives the KV cache 90% of the memory free after weights and activations
  (``KvCacheConfig.free_gpu_memory_fraction``): it uses ``0.9 x (C - W - A) + W + A``
  of each GPU's ``C`` (:func:`memory_utilization`): 0.91 of an H100 for an 8B in FP8,
  0.98 for a 70B in FP8 on one H100.
* **attention precision**: attention runs at the attention kernel's precision, BF16
  on vLLM and SGLang even with FP8 weights and an FP8 KV cache (the KV is
  dequantized in the kernel); TensorRT-LLM's FP8 attention kernels (XQA/FMHA) run
  at the FP8 peak when the KV cache is FP8.
* **token budget**: vLLM's ``max_num_batched_tokens`` and TensorRT-LLM's
  ``max_num_tokens`` count one token per running decode plus the prefill chunk;
  SGLang's ``chunked_prefill_size`` counts the prefill chunk alone. A pool modelled
  as "chunk T plus batch B" is launched with ``T + B`` on vLLM and ``T`` on SGLang
  (:func:`launch_token_budget`).
* **KV admission**: vLLM admits a request when its prompt fits and lets sequences grow
  into the cache, preempting (recomputing) the newest when it runs out, so at
  saturation the cache holds sequences at their mean context ``P + G/2``; SGLang
  likewise (it admits on an estimate of future tokens and retracts on overflow).
  TensorRT-LLM's default capacity scheduler, ``GUARANTEED_NO_EVICT``, admits a request
  only when the blocks for its prompt *and its whole maximum output* are free and
  never evicts it, so each resident sequence holds ``P + G`` tokens of cache
  (:func:`kv_admission_context_tokens`). For a decode-heavy shape that is nearly half
  the sequences (128/2,048 tokens: 2,176 reserved against 1,152 held on average); where
  the weight read dominates the step (70B FP8 on one H100) it nearly halves the
  throughput, where attention and GEMMs grow with the batch it costs a few per cent.

* **first token one step later**: all three overlap the scheduling of the next step with
  the GPU's current one by default, so a request arriving while the engine is busy joins
  the step after the one already scheduled: one decode step more before its first token
  than a synchronous engine (:attr:`EngineProfile.first_token_extra_steps`). vLLM enables
  async scheduling unless an option forbids it (``VllmConfig``: "Enable async scheduling
  unless there is an incompatible option", vllm/config/vllm.py at commit 000fc94b); SGLang
  runs its overlap scheduler unless ``--disable-overlap-schedule``; TensorRT-LLM's
  overlap scheduler is "enabled by default" and "introduces one extra decoding step"
  (its Overlap Scheduler page; ``disable_overlap_scheduler``). Measured: TensorRT-LLM's
  Llama-3.1 8B/70B runs at 2 requests/s on H100 and H200 (vLLM's nightly dashboards) show
  0.4-1.1 steps of TTFT above a synchronous engine's (planner.capacity's TTFT).

* **batch cap**: when not told, vLLM caps the running sequences at ``max_num_seqs`` =
  1,024 on GPUs with at least 70 GiB that are not A100s and 256 elsewhere (its server
  defaults, ``EngineArgs.get_batch_defaults``), TensorRT-LLM at ``max_batch_size`` =
  2,048 (the LLM API's default); SGLang sizes its running requests from the KV cache
  (:func:`default_max_num_seqs`).

Sources: vLLM ``EngineArgs`` (gpu_memory_utilization, max_num_batched_tokens),
SGLang ``ServerArgs`` (mem_fraction_static, chunked_prefill_size), TensorRT-LLM
``KvCacheConfig.free_gpu_memory_fraction``, ``max_num_tokens`` and
``SchedulerConfig.capacity_scheduler_policy`` documentation (default
``GUARANTEED_NO_EVICT``; its performance-tuning guide: "guarantee that a started request
is never paused"; NVIDIA Dynamo's mocker models it as "reserve prompt + max_output per
admitted request up front; never preempt").
The values are set from those defaults and the vendor configurations above
(assumed, not fitted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from catalog.fields import device_memory_bytes
from catalog.schema import Dtype, Gpu, Model
from planner.errors import PlanningError


@dataclass(frozen=True)
class EngineProfile:
    """The cost-model facts of one serving engine (see the module docstring).

    ``memory_utilization``: share of GPU memory for weights + KV (+ activations);
    ``activation_reserve_gb``: GB per GPU kept for activations within that share (vLLM's
    is measured per model and tp instead: :func:`activation_reserve_gb`);
    ``fp8_attention``: attention runs at the FP8 peak when the KV cache is FP8;
    ``budget_counts_decodes``: the engine's token budget counts running decodes;
    ``reserves_max_output``: admission reserves KV for the prompt and the whole maximum
    output (TensorRT-LLM ``GUARANTEED_NO_EVICT``) instead of letting sequences grow;
    ``profiles_memory``: the engine measures what it keeps outside weights and KV at
    start-up (vLLM; :func:`activation_reserve_gb`) rather than a fixed reserve;
    ``max_num_seqs``: its default running-sequence cap on (large, other) GPUs, None for
    none; ``batched_tokens``: its default token budget per step on (large, other) GPUs
    (large: at least 70 GiB and not an A100, vLLM's test: :func:`large_device`);
    ``kv_free_fraction``: the engine gives the KV cache this share of the memory free
    after weights and its reserve instead of a fixed share of the GPU (TensorRT-LLM's
    ``free_gpu_memory_fraction``; :func:`memory_utilization`), None for a fixed share;
    ``sizes_share_from_device``: when not told, the engine sets its share from the
    device's memory and the parallelism (SGLang: :func:`sglang_memory_share`), and
    ``memory_utilization`` is only its fallback; ``first_token_extra_steps``: decode steps
    a request arriving at a busy engine waits beyond the one in flight before it is
    scheduled (1 with overlap or async scheduling, the default of all three engines; 0 for
    a synchronous scheduler).
    """

    name: str
    memory_utilization: float
    activation_reserve_gb: float
    fp8_attention: bool
    budget_counts_decodes: bool
    reserves_max_output: bool = False
    profiles_memory: bool = False
    max_num_seqs: tuple[int | None, int | None] = (None, None)
    batched_tokens: tuple[int, int] = (8192, 8192)
    kv_free_fraction: float | None = None
    sizes_share_from_device: bool = False
    first_token_extra_steps: int = 1


#: Defaults from vLLM's ``EngineArgs.get_batch_defaults`` (server: ``max_num_seqs`` 1,024 /
#: 256, ``max_num_batched_tokens`` 8,192 / 2,048 on large / other GPUs), TensorRT-LLM's LLM
#: API (``max_batch_size`` 2,048, ``max_num_tokens`` 8,192) and SGLang (running requests
#: sized from the KV cache, chunked prefill 8,192).
ENGINES: dict[str, EngineProfile] = {
    "vllm": EngineProfile(
        "vllm",
        0.92,
        1.0,
        fp8_attention=False,
        budget_counts_decodes=True,
        profiles_memory=True,
        max_num_seqs=(1024, 256),
        batched_tokens=(8192, 2048),
    ),
    "sglang": EngineProfile(
        "sglang",
        0.88,
        0.0,
        fp8_attention=False,
        budget_counts_decodes=False,
        sizes_share_from_device=True,
    ),
    "trtllm": EngineProfile(
        "trtllm",
        0.95,
        1.0,
        fp8_attention=True,
        budget_counts_decodes=True,
        reserves_max_output=True,
        max_num_seqs=(2048, 2048),
        kv_free_fraction=0.9,
    ),
}

#: The engine plans are made for unless a request says otherwise.
DEFAULT_ENGINE = "vllm"


def busy_wait_ms(engine: str | None, resident: float, tpot_ms: float) -> float:
    """Mean wait of a request arriving at a replica of ``engine`` for the steps ahead of
    it (ms): ``min(1, n) x t x (1/2 + k)``, ``n`` the resident sequences (the chance the
    engine is busy, at most 1), ``t`` the mean step (``tpot_ms``), ``k`` the engine's
    :attr:`EngineProfile.first_token_extra_steps` (the step already scheduled under
    overlap or async scheduling; 1 on all three engines): half the step in flight plus
    ``k`` whole ones. ``t`` and ``n`` are the cost model's; ``k`` is the engines'
    documented default (module docstring), checked against TensorRT-LLM's runs at 2
    requests/s (0.4-1.1 steps above the synchronous ``k = 0``)."""
    return min(1.0, max(resident, 0.0)) * (tpot_ms / 2.0 + scheduled_step_ms(engine, tpot_ms))


def scheduled_step_ms(engine: str | None, step_ms: float) -> float:
    """The steps already scheduled ahead of a request arriving at a busy replica of
    ``engine`` (ms): ``k x step_ms``, ``k`` its
    :attr:`EngineProfile.first_token_extra_steps` and ``step_ms`` one engine step. What
    the capacity model (:func:`busy_wait_ms`), screening (``Candidate.overlap_ttft_ms``)
    and the simulation add to a busy arrival's first token."""
    return engine_profile(engine).first_token_extra_steps * step_ms


def engine_profile(name: str | None) -> EngineProfile:
    """The profile of engine ``name`` (None: :data:`DEFAULT_ENGINE`); unknown engines are
    refused naming the field ``engine``. Aliases: ``tensorrt-llm``/``trt-llm``/``tensorrt_llm``
    are ``trtllm``."""
    key = (name or DEFAULT_ENGINE).strip().lower()
    key = {"tensorrt-llm": "trtllm", "trt-llm": "trtllm", "tensorrt_llm": "trtllm"}.get(key, key)
    profile = ENGINES.get(key)
    if profile is None:
        known = ", ".join(sorted(ENGINES))
        raise PlanningError.for_field("engine", f"unknown engine {name!r} (known: {known})")
    return profile


def attention_dtype(profile: EngineProfile, kv_dtype: Dtype) -> Dtype:
    """The precision attention runs at: FP8 when the engine has FP8 attention kernels and
    the KV cache is FP8, else BF16."""
    if profile.fp8_attention and Dtype(kv_dtype) == Dtype.FP8:
        return Dtype.FP8
    return Dtype.BF16


def launch_token_budget(profile: EngineProfile, chunk_tokens: int, max_batch: int) -> int:
    """The engine's token-budget setting for a pool of prefill chunks of ``chunk_tokens``
    and at most ``max_batch`` running decodes (tokens): ``chunk + max_batch`` when the
    budget counts decodes (vLLM ``max_num_batched_tokens``, TensorRT-LLM
    ``max_num_tokens``), else ``chunk`` (SGLang ``chunked_prefill_size``).

    The 80/20 agent pool's chunk of 256 with 48 decodes is launched with 304 on vLLM.
    """
    if chunk_tokens < 1 or max_batch < 0:
        raise PlanningError.for_field(
            "chunk_budget_tokens", "chunk must be >= 1 token and the batch >= 0"
        )
    return chunk_tokens + max_batch if profile.budget_counts_decodes else chunk_tokens


def kv_admission_context_tokens(
    profile: EngineProfile, prompt_tokens: float, output_tokens: float
) -> float:
    """The KV cache one resident sequence of ``prompt_tokens`` + ``output_tokens`` takes
    against the engine's admission limit, in tokens of context.

    ``P + G`` when the engine reserves the whole output at admission (TensorRT-LLM's
    default ``GUARANTEED_NO_EVICT``), else the mean context it holds while decoding,
    ``P + G/2`` (vLLM and SGLang grow sequences into the cache). ``G`` is the request's
    maximum output; in a benchmark of fixed lengths it is the output length. Inputs are
    the request's shape (tokens); the semantics are the engines' documented defaults
    (see the module docstring), not fitted.

    128 + 2,048 tokens: 2,176 on TensorRT-LLM, 1,152 on vLLM.
    """
    if prompt_tokens < 0 or output_tokens < 0:
        raise PlanningError.for_field(
            "prompt_tokens", "prompt and output lengths must be >= 0 tokens"
        )
    if profile.reserves_max_output:
        return float(prompt_tokens + output_tokens)
    return prompt_tokens + output_tokens / 2.0


#: vLLM's "large GPU" threshold for its batch defaults (``EngineArgs.get_batch_defaults``).
VLLM_LARGE_DEVICE_BYTES = 70 * 2**30


#: vLLM's start-up memory profile (vLLM PR 10511, Dec 2024: Llama-3-8B on one and two
#: H100s at its default 8,192 batched tokens): memory outside PyTorch's allocator (CUDA
#: context and cuBLAS workspaces; with tp > 1 also NCCL and the custom all-reduce
#: buffers) 1.79 GiB at tp 1 and 3.58 GiB at tp 2, and a PyTorch activation peak of 1.26
#: GiB at both. Measured; larger tp assumed as tp 2.
VLLM_NON_TORCH_GIB = {1: 1.79, 2: 3.58}
VLLM_ACTIVATION_PEAK_GIB = 1.26
#: The per-token activation width of that measurement, ``2 I + 4 H`` of Llama-3-8B (I =
#: 14,336, H = 4,096): the peak of another model is scaled by its own width (assumed).
VLLM_ACTIVATION_REF_WIDTH = 2 * 14_336 + 4 * 4_096


def activation_reserve_gb(profile: EngineProfile, model: Model, tp: int, gpu: Gpu) -> float:
    """Memory per GPU (GB of 1e9 bytes) an engine keeps outside weights and KV cache.

    vLLM measures it at start-up (non-torch memory + the activation peak of a dummy
    step of ``max_num_batched_tokens`` tokens, :func:`default_batched_tokens`) and gives
    the KV cache only what is left: here ``(VLLM_NON_TORCH_GIB[1 if tp == 1 else 2] +
    1.26 x (2 I + 4 H) / 45,056 x T / 8,192) x 2^30 / 1e9``, with ``I`` the model's MLP
    intermediate width, ``H`` its hidden size and ``T`` vLLM's default token budget on the
    GPU (the measured Llama-3-8B values scaled by width and tokens, as its MLP and hidden
    states dominate the peak; the peak did not shrink from tp 1 to tp 2, so it is not
    divided by tp). Llama-3-8B on H100: 3.27 GB at tp 1, 5.20 at tp 2 (as measured);
    Llama-3.1-70B: 4.63 GB at tp 1 on an H100, 4.52 at tp 8 on A10Gs (2,048 tokens).
    Other engines: their profile's ``activation_reserve_gb`` (TensorRT-LLM 1 GB, assumed;
    SGLang 0, its ``mem_fraction_static`` covers weights and KV only).
    """
    if not profile.profiles_memory:
        return profile.activation_reserve_gb
    non_torch = VLLM_NON_TORCH_GIB[1 if tp <= 1 else 2]
    width = 2 * model.intermediate_size + 4 * model.hidden_size
    tokens = default_batched_tokens(profile, gpu)
    peak = VLLM_ACTIVATION_PEAK_GIB * width / VLLM_ACTIVATION_REF_WIDTH * tokens / 8192
    return (non_torch + peak) * 2**30 / 1e9


def memory_utilization(
    profile: EngineProfile,
    weights_gb: float,
    reserve_gb: float,
    device_gb: float,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
) -> float:
    """Share of a GPU's memory ``device_gb`` (as the driver reports it) the engine uses for
    weights, KV cache and its reserve (dimensionless, in (0, 1]) when not told: the
    profile's fixed ``memory_utilization``; the share an engine that sizes it from the
    device computes (SGLang: :func:`sglang_memory_share` of ``device_gb`` and the replica's
    ``tp``, ``pp``, ``dp``); or with ``kv_free_fraction`` ``f`` (TensorRT-LLM, 0.9) the
    weights and reserve per GPU plus ``f`` of what they leave free:
    ``f + (1 - f) x min(weights_gb + reserve_gb, device_gb) / device_gb``. Llama-3.1-8B in
    FP8 on an H100 (8.03 GB of weights + 1 GB of 85.52 GB): 0.911, a 68.8 GB KV cache;
    Llama-3.1-70B in FP8 (70.55 + 1 GB): 0.984, 12.6 GB. Inputs: the catalog's weights,
    the profile's reserve (assumed) and the GPU's reported memory."""
    if profile.sizes_share_from_device:
        return sglang_memory_share(device_gb * 1e9 / 2**20, tp, pp, dp)
    f = profile.kv_free_fraction
    if f is None:
        return profile.memory_utilization
    return f + (1.0 - f) * min(weights_gb + reserve_gb, device_gb) / device_gb


#: SGLang's defaults by the device memory it reads (MiB, ``get_device_memory_capacity``):
#: (below this many MiB, chunked-prefill size in tokens, CUDA-graph max batch at tp < 4,
#: at tp >= 4), from ``ServerArgs._handle_gpu_memory_settings`` (T4/4080; A10/4090; A100
#: 40GB/L40; H100/A100 80GB; H20/H200; above: B200/MI300X, 16,384 and 512).
SGLANG_MEMORY_TIERS: tuple[tuple[float, int, int, int], ...] = (
    (20 * 1024, 2048, 8, 8),
    (35 * 1024, 2048, 24, 80),
    (60 * 1024, 4096, 32, 160),
    (90 * 1024, 8192, 256, 512),
    (160 * 1024, 8192, 256, 512),
    (math.inf, 16384, 512, 512),
)


def sglang_memory_share(
    device_mib: float, tp: int, pp: int = 1, dp: int = 1, speculative: bool = False
) -> float:
    """The ``mem_fraction_static`` SGLang picks when not told (dimensionless, 3 decimals):
    ``round((M - R) / M, 3)`` of the device's ``M`` MiB, keeping ``R`` MiB outside the
    weights and KV cache for activations, CUDA graphs and metadata:
    ``R = 512 + 1.5 x max(C, 2048) + 2 x B + 1024 x tp x pp / 8``, plus with data-parallel
    attention (``dp`` > 1) ``3 x B x dp`` and, when ``B`` > 300, ``1.5 x B x dp``; at least
    10,240 MiB on a device over 60 GiB; plus 2,048 MiB with a speculative draft. ``C`` is
    its default chunked-prefill size and ``B`` its CUDA-graph max batch for the device
    (:data:`SGLANG_MEMORY_TIERS`). Transcribed from SGLang's
    ``ServerArgs._handle_gpu_memory_settings`` (assumed current; not fitted). Inputs: the
    memory the driver reports (:func:`planner.roofline.gpu_memory_bytes` / 2^20, or the
    nominal figure) and the replica's parallelism.

    H100 (81,559 MiB) at tp 1: R = 512 + 12,288 + 512 + 128 = 13,440 MiB, 0.835;
    H200 (143,771 MiB) at tp 8: 14,848 MiB, 0.897.
    """
    if device_mib <= 0 or tp < 1 or pp < 1 or dp < 1:
        raise PlanningError.for_field(
            "memory_utilization", "SGLang's share needs device memory > 0 and tp, pp, dp >= 1"
        )
    _, chunk, small_bs, large_bs = next(t for t in SGLANG_MEMORY_TIERS if device_mib < t[0])
    graph_bs = small_bs if tp < 4 else large_bs
    reserve = 512 + 1.5 * max(chunk, 2048) + 2 * graph_bs + 1024 * tp * pp / 8
    if dp > 1:
        reserve += 3 * graph_bs * dp + (1.5 * graph_bs * dp if graph_bs > 300 else 0.0)
    if device_mib > 60 * 1024:
        reserve = max(reserve, 10 * 1024)
    if speculative:
        reserve += 2 * 1024
    return max(round((device_mib - reserve) / device_mib, 3), 0.0)


def sglang_share_for(share: float, reserve_gb: float, device_gb: float) -> float:
    """The ``--mem-fraction-static`` that gives SGLang the weights and KV cache of a replica
    planned at ``share`` of each GPU's ``device_gb`` with ``reserve_gb`` per GPU kept inside
    that share for activations (vLLM's accounting; :func:`activation_reserve_gb`):
    ``share - reserve_gb / device_gb``, rounded down to 3 decimals so it never claims more
    than the plan (SGLang's share covers weights and KV only). H100 (85.52 GB) at 0.92
    with vLLM's 4.63 GB for Llama-3.1-70B: 0.865. Inputs are the plan's own figures."""
    return math.floor((share - reserve_gb / device_gb) * 1000 + 1e-9) / 1000


def large_device(gpu: Gpu) -> bool:
    """vLLM's "large GPU" test for its batch defaults: at least 70 GiB as the driver
    reports it (:func:`catalog.fields.device_memory_bytes`) and not an A100."""
    memory = device_memory_bytes(gpu.memory_gb, gpu.reported_memory)
    return memory >= VLLM_LARGE_DEVICE_BYTES and "a100" not in gpu.id.lower()


def default_batched_tokens(profile: EngineProfile, gpu: Gpu) -> int:
    """The token budget per step an engine uses when not told (tokens), from its profile's
    ``batched_tokens``: vLLM's server default ``max_num_batched_tokens``, 8,192 on a large
    GPU (:func:`large_device`) and 2,048 elsewhere; 8,192 for the others (TensorRT-LLM's
    ``max_num_tokens``, SGLang's chunked-prefill size). Documented defaults, not fitted."""
    large, other = profile.batched_tokens
    return large if large_device(gpu) else other


def default_max_num_seqs(profile: EngineProfile, gpu: Gpu) -> int | None:
    """The running-sequence cap an engine applies when the user sets none (sequences), from
    its profile's ``max_num_seqs``: vLLM 1,024 on a large GPU (:func:`large_device`), else
    256; TensorRT-LLM 2,048; SGLang None (it sizes the running requests from the KV cache,
    which the capacity model bounds anyway). The engines' documented defaults, not fitted.

    H100 (85.5e9 bytes): 1,024 on vLLM; A100 80GB and L40S: 256.
    """
    large, other = profile.max_num_seqs
    return large if large_device(gpu) else other


__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "EngineProfile",
    "activation_reserve_gb",
    "attention_dtype",
    "default_batched_tokens",
    "default_max_num_seqs",
    "engine_profile",
    "kv_admission_context_tokens",
    "large_device",
    "launch_token_budget",
    "sglang_memory_share",
    "sglang_share_for",
]
