"""A replica and whether it fits: :class:`Replica` (``tp`` GPUs of one SKU holding one
copy of a model, with its efficiency factors), :func:`build_replica` from the catalog,
the memory it needs and the KV cache it has left.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property

from catalog.fields import device_memory_bytes
from catalog.schema import (
    Catalog,
    Dtype,
    Fp4Checkpoint,
    Fp4Format,
    Gpu,
    Link,
    LinkKind,
    MeasuredCheckpoint,
    Model,
    WeightGroup,
)
from planner import architecture as arch
from planner import engines
from planner import kernels as kn
from planner.errors import DoesNotFitError, PlanningError, UnknownEntryError
from planner.serving_stack import StackLatency, serving_stack

#: The default engine's (vLLM's, as plans launch it) ``gpu_memory_utilization``: the
#: share of each GPU's memory the engine may use for weights, activations and the KV
#: cache (see :mod:`planner.engines` for why 0.92 and not vLLM's 0.9).
DEFAULT_MEMORY_UTILIZATION = engines.ENGINES[engines.DEFAULT_ENGINE].memory_utilization


#: Memory kept per GPU for activations, CUDA graphs and the sampler's logits (GB) by a
#: :class:`Replica` built without :func:`build_replica` (which takes the engine's own,
#: :func:`planner.engines.activation_reserve_gb`: vLLM's is measured per model and tp).
DEFAULT_ACTIVATION_RESERVE_GB = engines.ENGINES[engines.DEFAULT_ENGINE].activation_reserve_gb


#: Bytes per activation element exchanged in tensor-parallel all-reduces (bf16).
ACTIVATION_BYTES = kn.ACTIVATION_BYTES


#: A replica "fits" when, after weights and the activation reserve, its KV cache
#: holds at least one sequence of min(model.max_context_tokens, this) tokens.
MIN_FIT_CONTEXT_TOKENS = 4096


#: KV-cache formats an engine can store (fp4 KV is not offered by mainstream engines).
KV_DTYPES = (Dtype.BF16, Dtype.FP8)


@dataclass(frozen=True)
class Replica:
    """One serving replica: ``tp`` GPUs of ``gpu`` holding one copy of ``model``.

    ``prefill_mfu``: achieved / peak FLOP/s (compute-bound phases);
    ``decode_mbu``: achieved / peak HBM bandwidth (memory-bound phases);
    ``step_overhead_ms``: fixed cost per engine step (scheduling, launches);
    ``overlap_factor``: how well a chunk's compute hides under decode memory
    traffic in a mixed step (1 = perfectly); ``scale_up_link``: the link the TP
    all-reduces use (None when ``tp == 1`` or the SKU has none);
    ``memory_utilization``: share of GPU memory the engine may use (vLLM's
    ``gpu_memory_utilization``); ``activation_reserve_gb``: per-GPU memory kept
    for activations (see :data:`DEFAULT_ACTIVATION_RESERVE_GB`); ``attention_dtype``:
    the precision attention kernels run at (:func:`planner.engines.attention_dtype`);
    ``engine``: the serving engine the factors describe (:mod:`planner.engines`).
    ``speculative``: speculative decoding on this replica (:class:`planner.kernels.Speculation`,
    set per traffic class by :func:`planner.roofline.with_speculation`; None: plain decode).
    ``scale_up_link`` is the link the TP collectives cross: the NVLink/xGMI link within
    the scale-up domain, or the PCIe link when ``tp`` spans more GPUs than that domain
    (TP over PCIe, e.g. L40S or H100 PCIe at tp 4-8).
    """

    model: Model
    gpu: Gpu
    tp: int
    weight_dtype: Dtype
    kv_dtype: Dtype
    prefill_mfu: float
    decode_mbu: float
    step_overhead_ms: float
    overlap_factor: float
    scale_up_link: Link | None
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    activation_reserve_gb: float = DEFAULT_ACTIVATION_RESERVE_GB
    attention_dtype: Dtype = Dtype.BF16
    engine: str = engines.DEFAULT_ENGINE
    speculative: kn.Speculation | None = None
    #: Pipeline stages (each ``tp`` GPUs holding ``num_layers / pp`` layers) and the link
    #: between consecutive stages (the network across nodes; None at ``pp == 1``).
    pp: int = 1
    pp_link: Link | None = None
    #: MoE serving with data-parallel attention and expert parallelism: ``dp`` attention
    #: ranks of ``tp / dp`` GPUs each (every rank its own sequences and KV cache, its own
    #: copy of the non-expert weights), the routed experts spread over ``ep`` GPUs (1, 1:
    #: plain tensor parallelism).
    dp: int = 1
    ep: int = 1
    #: Whether the dense GEMMs run at the measured kernel rate over the catalog's factors
    #: (:func:`planner.kernel_floors.dense_gemm_lift`): False when the MFU was set by the
    #: user (an analysis's ``mfu``, a request's ``efficiency.prefill_mfu``), which is taken
    #: as the rate their GEMMs run at.
    kernel_gemm_rate: bool = True
    #: A published checkpoint a measurement ran that plans do not launch
    #: (:class:`catalog.schema.MeasuredCheckpoint`: its BF16 layers and FP4 format price
    #: the replica); None: the checkpoint plans load (FP8 quantized on load, or the
    #: model's FP4 checkpoint in the GPU's format).
    measured_checkpoint: MeasuredCheckpoint | None = None

    @property
    def gpus(self) -> int:
        """GPUs of one replica: ``tp x pp``."""
        return self.tp * self.pp

    @property
    def fp4_checkpoint(self) -> Fp4Checkpoint | None:
        """The FP4 checkpoint the replica loads (fp4 weights only, else None): the model's
        checkpoint in the first of the GPU's FP4 formats it has one in
        (:meth:`catalog.schema.Model.fp4_checkpoint_for`)."""
        if self.weight_dtype != Dtype.FP4:
            return None
        return self.model.fp4_checkpoint_for(self.gpu.fp4_formats)

    @property
    def fp4_format(self) -> Fp4Format | None:
        """The block format of the FP4 checkpoint loaded (None unless fp4): the measured
        checkpoint's, else :attr:`fp4_checkpoint`'s."""
        if self.measured_checkpoint is not None and self.measured_checkpoint.format:
            return self.measured_checkpoint.format
        ckpt = self.fp4_checkpoint
        return ckpt.format if ckpt is not None else None

    @property
    def bf16_layers(self) -> tuple[WeightGroup, ...]:
        """Layers the loaded checkpoint keeps in BF16 beyond those every checkpoint keeps
        (:func:`planner.architecture.bf16_param_count`): the measured checkpoint's, else
        the FP4 checkpoint's; none for FP8 quantized on load or BF16."""
        ckpt = self.measured_checkpoint or self.fp4_checkpoint
        return tuple(ckpt.bf16_layers) if ckpt is not None else ()

    @property
    def weight_layout(self) -> tuple[Model, Dtype, Fp4Format | None, tuple[WeightGroup, ...]]:
        """The arguments :func:`planner.architecture.weight_bytes` and its kin price this
        replica's weights with: model, weight dtype, FP4 format and BF16 layers."""
        return self.model, self.weight_dtype, self.fp4_format, self.bf16_layers

    @property
    def attention_tp(self) -> int:
        """GPUs one attention rank spans: ``tp / dp`` (KV replication follows it)."""
        return self.tp // self.dp

    @property
    def stack(self) -> StackLatency:
        """Serving-stack latency in every request's TTFT, outside the GPU steps:
        :func:`planner.serving_stack.serving_stack` (measured; none for models without
        MLA)."""
        return serving_stack(self.model, self.gpu)

    def stack_ttft_ms(self, prompt_tokens: float) -> float:
        """The serving stack's latency in the TTFT of a ``prompt_tokens``-token request
        (ms): ``stack.at(prompt_tokens)``."""
        return self.stack.at(prompt_tokens)

    @cached_property
    def coefficients(self) -> kn.StepCoefficients:
        """The cost model's constants for this replica (:mod:`planner.kernels`)."""
        return kn.coefficients_of(self)

    def __post_init__(self) -> None:
        if isinstance(self.tp, bool) or not isinstance(self.tp, int) or self.tp < 1:
            raise PlanningError.for_field("tp", f"must be a positive integer, got {self.tp!r}")
        if self.gpu.peak_tflops(self.weight_dtype) is None:
            raise PlanningError.for_field(
                "dtype", f"{self.gpu.id} has no {Dtype(self.weight_dtype)} tensor cores"
            )
        for name, value in (("mfu", self.prefill_mfu), ("mbu", self.decode_mbu)):
            if not (0.0 < value <= 1.0):
                raise PlanningError.for_field(name, f"must be in (0, 1], got {value}")
        if not (0.0 <= self.overlap_factor <= 1.0):
            raise PlanningError.for_field(
                "overlap_factor", f"must be in [0, 1], got {self.overlap_factor}"
            )
        ckpt = self.measured_checkpoint
        if ckpt is not None and ckpt.dtype != Dtype(self.weight_dtype).value:
            raise PlanningError.for_field(
                "checkpoint", f"{ckpt.repo} is {ckpt.dtype} but the weights are {self.weight_dtype}"
            )
        if not (self.step_overhead_ms >= 0.0 and math.isfinite(self.step_overhead_ms)):
            raise PlanningError.for_field(
                "step_overhead_ms", f"must be >= 0, got {self.step_overhead_ms}"
            )
        if not (0.0 < self.memory_utilization <= 1.0):
            raise PlanningError.for_field(
                "memory_utilization", f"must be in (0, 1], got {self.memory_utilization}"
            )
        if not (self.activation_reserve_gb >= 0.0):
            raise PlanningError.for_field(
                "activation_reserve_gb", f"must be >= 0, got {self.activation_reserve_gb}"
            )
        if isinstance(self.pp, bool) or not isinstance(self.pp, int) or self.pp < 1:
            raise PlanningError.for_field("pp", f"must be a positive integer, got {self.pp!r}")
        for name, value in (("dp", self.dp), ("ep", self.ep)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PlanningError.for_field(name, f"must be a positive integer, got {value!r}")
            if self.tp % value:
                raise PlanningError.for_field(name, f"{name}={value} must divide tp={self.tp}")
        if self.ep > 1:
            if self.model.moe is None:
                raise PlanningError.for_field(
                    "ep", f"{self.model.id} has no experts to spread (not a mixture of experts)"
                )
            if self.model.moe.num_experts % self.ep:
                raise PlanningError.for_field(
                    "ep",
                    f"ep={self.ep} does not divide {self.model.id}'s "
                    f"{self.model.moe.num_experts} experts",
                )
        if self.pp > 1 and self.pp_link is None:
            raise PlanningError.for_field("pp", f"pp={self.pp} needs a link between stages")
        if self.tp > 1 and self.scale_up_link is None:
            raise PlanningError.for_field(
                "tp", f"tp={self.tp} needs a scale-up link and {self.gpu.id} has none"
            )


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


def _parse_dtype(value: Dtype | str, field: str) -> Dtype:
    try:
        return Dtype(value)
    except ValueError:
        known = ", ".join(d.value for d in Dtype)
        raise PlanningError.for_field(field, f"unknown dtype {value!r} (known: {known})") from None


def _check_fraction(field: str, value: float | None) -> None:
    if value is not None and not (0.0 < value <= 1.0):
        raise PlanningError.for_field(field, f"must be in (0, 1], got {value}")


def memory_needed_gb(replica: Replica) -> float:
    """Memory a replica needs to fit (GB): weights + ``tp x pp x activation_reserve`` + the
    KV cache of one sequence of ``min(max_context, MIN_FIT_CONTEXT_TOKENS)`` tokens, held
    ``kv_replication(tp)`` times (heads or an MLA latent replicated over ranks; pipeline
    stages split layers, so they add no copies). Stages are taken as balanced (layers
    split evenly)."""
    ctx = min(replica.model.max_context_tokens, MIN_FIT_CONTEXT_TOKENS)
    kv = arch.kv_bytes_for_sequence(replica.model, ctx, replica.kv_dtype) * arch.kv_replication(
        replica.model, replica.attention_tp
    )
    weights = replica_weight_bytes(replica) + draft_weight_bytes(replica)
    return (weights + kv) / 1e9 + replica.gpus * replica.activation_reserve_gb


def draft_weight_bytes(replica: Replica) -> float:
    """Bytes of a speculative drafter's weights held next to the target's (an EAGLE-3 head,
    an MTP module, a draft model; :class:`planner.kernels.Speculation`), 0 without."""
    return replica.speculative.draft_weight_bytes if replica.speculative else 0.0


def gpu_memory_bytes(gpu: Gpu) -> float:
    """One GPU's device memory (bytes), the figure engines take their share of: the
    driver's reported total when the catalog has it (``reported_memory.mib x 2^20``,
    measured: an "80GB" H100 reports 81,559 MiB = 85.5e9 bytes), else ``memory_gb x 1e9``
    (the nominal figure read as decimal GB, below what every measured device reports:
    conservative for a GPU nobody has read)."""
    return device_memory_bytes(gpu.memory_gb, gpu.reported_memory)


def usable_memory_gb(replica: Replica) -> float:
    """Memory the engine may use (GB of 1e9 bytes):
    ``tp x pp x gpu_memory_bytes / 1e9 x memory_utilization``."""
    return replica.gpus * gpu_memory_bytes(replica.gpu) / 1e9 * replica.memory_utilization


def _reserve_at(replica: Replica, tp: int) -> float:
    """The per-GPU reserve ``replica`` would have at ``tp`` (GB): its engine's
    (:func:`planner.engines.activation_reserve_gb`) when it has its engine's own, else
    the one it was given."""
    profile = engines.engine_profile(replica.engine)
    own = engines.activation_reserve_gb(profile, replica.model, replica.tp, replica.gpu)
    if replica.activation_reserve_gb != own:
        return replica.activation_reserve_gb
    return engines.activation_reserve_gb(profile, replica.model, tp, replica.gpu)


def check_memory_fit(replica: Replica) -> None:
    """Raise :class:`DoesNotFitError` when the model does not fit the replica's memory.

    Names ``tp`` when a larger power-of-two tp within the scale-up domain would
    fit, else ``gpu``; the message says how many GB are needed vs available.
    """
    needed = memory_needed_gb(replica)
    available = usable_memory_gb(replica)
    if needed <= available:
        return
    m, g = replica.model, replica.gpu
    ctx = min(m.max_context_tokens, MIN_FIT_CONTEXT_TOKENS)
    weights_gb = replica_weight_bytes(replica) / 1e9
    reserve_gb = replica.gpus * replica.activation_reserve_gb
    shape = f"tp={replica.tp}" + (f" x pp={replica.pp}" if replica.pp > 1 else "")
    text = (
        f"{m.id} in {replica.weight_dtype} needs {needed:.1f} GB ({weights_gb:.1f} GB weights "
        f"+ {reserve_gb:.1f} GB activations + {needed - weights_gb - reserve_gb:.1f} GB for one "
        f"{ctx}-token KV cache) but {shape} x {g.id} offers {available:.1f} GB usable "
        f"({gpu_memory_bytes(g) / 1e9:.1f} GB x {replica.memory_utilization:g} per GPU)"
    )
    larger = [
        t
        for t in (2**k for k in range(1, 11))
        if replica.tp < t <= max_tp(g)
        and needed - replica.tp * replica.activation_reserve_gb + t * _reserve_at(replica, t)
        <= t * gpu_memory_bytes(g) / 1e9 * replica.memory_utilization
    ]
    if larger and replica.pp == 1:
        raise DoesNotFitError.for_field("tp", f"{text}; tp={larger[0]} would fit")
    stages = [
        k
        for k in PP_OPTIONS
        if k > replica.pp
        and needed + (replica.tp * k - replica.gpus) * replica.activation_reserve_gb
        <= replica.tp * k * gpu_memory_bytes(g) / 1e9 * replica.memory_utilization
    ]
    if stages:
        raise DoesNotFitError.for_field(
            "pp", f"{text}; pipeline parallelism across nodes (pp={stages[0]}) would fit"
        )
    raise DoesNotFitError.for_field("gpu", f"{text}, even at the largest tp of its domain")


#: Pipeline-parallel degrees offered (stages across nodes).
PP_OPTIONS = (2, 4, 8)


def pp_link_id(gpu: Gpu, tp: int, pp: int) -> str | None:
    """The link between a replica's pipeline stages: None at pp 1, the scale-up link
    when all ``tp x pp`` GPUs share one scale-up domain (e.g. NVL72), else the GPU's
    network link (stages on separate nodes)."""
    if pp <= 1:
        return None
    if tp * pp <= gpu.scale_up_domain_size and gpu.scale_up_link is not None:
        return gpu.scale_up_link
    return gpu.network_link


def fp4_format_error(model: Model, gpu: Gpu) -> str | None:
    """Why ``model`` cannot run in fp4 on ``gpu``, or None: the model needs a published
    FP4 checkpoint (``fp4_checkpoints``) in a block format the GPU has an FP4 peak for
    (``fp4_dense_tflops``, ``fp4_formats``: NVFP4 and MXFP4 on Blackwell, MXFP4 on
    MI355X)."""
    if not model.fp4_checkpoints:
        return f"{model.id} has no published FP4 checkpoint in the catalog (fp4_checkpoints)"
    if gpu.fp4_dense_tflops is None:
        return f"{gpu.id} has no FP4 tensor cores (no fp4_dense_tflops in the catalog)"
    if model.fp4_checkpoint_for(gpu.fp4_formats) is None:
        have = "; ".join(f"{c.repo} is {c.format.value}" for c in model.fp4_checkpoints)
        formats = ", ".join(f.value for f in gpu.fp4_formats)
        return (
            f"{model.id}'s FP4 checkpoints in the catalog: {have}; {gpu.id} runs {formats} natively"
        )
    return None


def max_tp(gpu: Gpu) -> int:
    """Largest tensor parallelism of one replica on ``gpu`` (GPUs): its scale-up domain,
    or a whole server over PCIe when the server holds more GPUs than that domain
    (``max(scale_up_domain_size, server.gpus_per_server)``; L40S 8, H100 PCIe 8)."""
    return max(gpu.scale_up_domain_size, gpu.server.gpus_per_server)


def tp_link_id(gpu: Gpu, tp: int) -> str | None:
    """The link a ``tp``-way replica's collectives cross: None at tp 1, the scale-up link
    within the scale-up domain, else the PCIe link (TP over PCIe)."""
    if tp <= 1:
        return None
    if tp <= gpu.scale_up_domain_size and gpu.scale_up_link is not None:
        return gpu.scale_up_link
    return gpu.pcie_link


def server_tp_link(gpu: Gpu, link: Link) -> Link:
    """``link`` as ``gpu``'s tensor parallelism crosses it: a PCIe link carries the bus
    bandwidth fitted to the GPU's own servers (``server.pcie_allreduce``, used by
    :func:`planner.collectives.pcie_allreduce_alpha_beta`); any other link, or a GPU
    without such a fit, is the catalog's link unchanged."""
    fit = gpu.server.pcie_allreduce
    if link.kind != LinkKind.PCIE or fit is None:
        return link
    return link.model_copy(update={"pcie_tp8_bus_gb_per_s": fit.tp8_bus_gb_per_s})


def _measured_checkpoint(
    model: Model, gpu: Gpu, dtype: Dtype, repo: str | None
) -> MeasuredCheckpoint | None:
    """The model's checkpoint ``repo`` a measurement ran (None when not given); a
    :class:`PlanningError` on field ``checkpoint`` when the model lists no such
    checkpoint or it is in an FP4 format ``gpu`` does not run (one in another dtype than
    the weights is refused by :class:`Replica` itself)."""
    if repo is None:
        return None
    try:
        ckpt = model.measured_checkpoint(repo)
    except ValueError as exc:
        raise PlanningError.for_field("checkpoint", str(exc)) from None
    if ckpt.format is not None and ckpt.format not in gpu.fp4_formats:
        raise PlanningError.for_field(
            "checkpoint", f"{repo} is {ckpt.format.value}, a format {gpu.id} does not run"
        )
    return ckpt


def build_replica(
    catalog: Catalog,
    model_id: str,
    gpu_id: str,
    tp: int = 1,
    dtype: Dtype | str = "bf16",
    kv_dtype: Dtype | str | None = None,
    mfu: float | None = None,
    mbu: float | None = None,
    step_overhead_ms: float | None = None,
    overlap_factor: float | None = None,
    check_fit: bool = True,
    memory_utilization: float | None = None,
    activation_reserve_gb: float | None = None,
    engine: str | None = None,
    pp: int = 1,
    dp: int = 1,
    ep: int = 1,
    kernel_gemm_rate: bool | None = None,
    checkpoint: str | None = None,
) -> Replica:
    """Validate the arguments against the catalog and build a :class:`Replica`.

    Efficiency defaults come from ``gpu.efficiency_for(dtype)`` (the SKU's factors, or a
    calibration's for that dtype), times :func:`moe_level_ratio` for an MoE model, and
    are overridden per call (an ``mfu`` or ``mbu`` given is taken as it is: an ``mfu``
    given is the rate the GEMMs run at, without the measured kernel rate on top, unless
    ``kernel_gemm_rate`` says otherwise; :attr:`Replica.kernel_gemm_rate`).
    ``kv_dtype`` defaults to bf16 (vLLM's ``kv_cache_dtype="auto"`` stores the
    activation dtype, bf16, even for fp8 weights). ``engine`` (default vLLM) sets the
    memory defaults and the attention precision (:mod:`planner.engines`). ``tp`` may
    exceed the scale-up domain up to a whole server (TP over PCIe); ``pp`` pipeline
    stages of ``tp`` GPUs each split the layers (:func:`pp_link_id` between them); ``dp``
    data-parallel attention ranks and ``ep``-way expert parallelism (MoE models) within
    the ``tp`` GPUs (:class:`Replica`). ``checkpoint`` names a published checkpoint of the model a
    measurement ran (``measured_checkpoints``), priced with its BF16 layers and FP4 format
    (:attr:`Replica.measured_checkpoint`). Raises
    :class:`UnknownEntryError` (fields ``model``, ``gpu``) or
    :class:`PlanningError` (``tp``, ``dtype``, ``kv_dtype``, ``mfu``, ``mbu``,
    ``step_overhead_ms``, ``overlap_factor``) and, with ``check_fit``,
    :class:`DoesNotFitError` (``tp`` or ``gpu``).
    """
    model = catalog.models.get(model_id)
    if model is None:
        raise UnknownEntryError.for_field(
            "model", f"unknown model {model_id!r} (known: {', '.join(sorted(catalog.models))})"
        )
    gpu = catalog.gpus.get(gpu_id)
    if gpu is None:
        raise UnknownEntryError.for_field(
            "gpu", f"unknown gpu {gpu_id!r} (known: {', '.join(sorted(catalog.gpus))})"
        )
    if isinstance(tp, bool) or not isinstance(tp, int) or not _is_power_of_two(tp):
        raise PlanningError.for_field("tp", f"must be a positive power of two, got {tp!r}")
    if tp > max_tp(gpu):
        raise PlanningError.for_field(
            "tp",
            f"{tp} exceeds the scale-up domain of {gpu.id} ({gpu.scale_up_domain_size}) and "
            f"its {gpu.server.gpus_per_server}-GPU server: the largest replica is "
            f"{max_tp(gpu)} GPUs (TP over PCIe beyond the scale-up domain)",
        )
    if isinstance(pp, bool) or not isinstance(pp, int) or not (pp == 1 or pp in PP_OPTIONS):
        raise PlanningError.for_field(
            "pp", f"must be 1 or one of {', '.join(map(str, PP_OPTIONS))}, got {pp!r}"
        )
    if pp > 1 and model.num_layers < pp:
        raise PlanningError.for_field(
            "pp", f"{model.id} has {model.num_layers} layers, fewer than pp={pp} stages"
        )
    profile = engines.engine_profile(engine)
    w_dtype = _parse_dtype(dtype, "dtype")
    if gpu.peak_tflops(w_dtype) is None:
        supported = ", ".join(d.value for d in gpu.supported_dtypes())
        raise PlanningError.for_field(
            "dtype", f"{gpu.id} has no {w_dtype} tensor cores (supported: {supported})"
        )
    if w_dtype not in model.weight_dtypes:
        served = ", ".join(d.value for d in model.weight_dtypes)
        raise PlanningError.for_field(
            "dtype", f"{model.id} is not served in {w_dtype} (served in: {served})"
        )
    fmt_error = fp4_format_error(model, gpu) if w_dtype == Dtype.FP4 else None
    if fmt_error:
        raise PlanningError.for_field("dtype", fmt_error)
    measured = _measured_checkpoint(model, gpu, w_dtype, checkpoint)
    k_dtype = Dtype.BF16 if kv_dtype is None else _parse_dtype(kv_dtype, "kv_dtype")
    if k_dtype not in KV_DTYPES:
        raise PlanningError.for_field(
            "kv_dtype", f"{k_dtype} KV cache is not supported (use bf16 or fp8)"
        )
    _check_fraction("mfu", mfu)
    _check_fraction("mbu", mbu)
    eff = gpu.efficiency_for(w_dtype)
    family = moe_level_ratio(gpu, model) * dp_level_ratio(gpu, dp)
    link_id = tp_link_id(gpu, tp)
    link = server_tp_link(gpu, catalog.links[link_id]) if link_id is not None else None
    stage_link_id = pp_link_id(gpu, tp, pp)
    replica = Replica(
        model=model,
        gpu=gpu,
        tp=tp,
        weight_dtype=w_dtype,
        kv_dtype=k_dtype,
        prefill_mfu=eff.prefill_mfu * family if mfu is None else mfu,
        decode_mbu=eff.decode_mbu * family if mbu is None else mbu,
        step_overhead_ms=eff.step_overhead_ms if step_overhead_ms is None else step_overhead_ms,
        overlap_factor=eff.overlap_factor if overlap_factor is None else overlap_factor,
        scale_up_link=link,
        memory_utilization=(
            profile.memory_utilization if memory_utilization is None else memory_utilization
        ),
        activation_reserve_gb=(
            engines.activation_reserve_gb(profile, model, tp, gpu)
            if activation_reserve_gb is None
            else activation_reserve_gb
        ),
        attention_dtype=engines.attention_dtype(profile, k_dtype),
        engine=profile.name,
        pp=pp,
        pp_link=catalog.links[stage_link_id] if stage_link_id is not None else None,
        dp=dp,
        ep=ep,
        kernel_gemm_rate=(mfu is None) if kernel_gemm_rate is None else kernel_gemm_rate,
        measured_checkpoint=measured,
    )
    if memory_utilization is None:  # the engine's own share (fixed, sized or free-based)
        share = engines.memory_utilization(
            profile,
            replica_weight_bytes(replica) / 1e9 / replica.gpus,
            replica.activation_reserve_gb,
            gpu_memory_bytes(gpu) / 1e9,
            tp=tp,
            pp=pp,
            dp=dp,
        )
        if share != replica.memory_utilization:
            replica = dataclasses.replace(replica, memory_utilization=share)
    if check_fit:
        check_memory_fit(replica)
    return replica


def moe_level_ratio(gpu: Gpu, model: Model) -> float:
    """The factor on ``gpu``'s prefill MFU and decode MBU when it serves ``model``
    (dimensionless, <= 1): ``gpu.efficiency.moe_level_ratio`` for a mixture-of-experts
    model, else 1. Measured (``make calibrate-defaults``: the median level of the GPU's
    MoE LLMs over its level, planner.fidelity.level_scale), never above 1: a GPU whose
    MoE kernels lag its dense ones (MI300X on DeepSeek-V3) is not priced at its dense
    level on MoE models, and none is lifted above it."""
    return gpu.efficiency.moe_level_ratio if model.is_moe else 1.0


def dp_level_ratio(gpu: Gpu, dp: int) -> float:
    """The factor on ``gpu``'s prefill MFU and decode MBU for a replica with ``dp``
    data-parallel attention ranks (dimensionless, <= 1):
    ``gpu.efficiency.dp_attention_level_ratio`` when ``dp > 1``, else 1. Measured (``make
    calibrate-defaults``: the level at which the GPU's data-parallel-attention runs are
    predicted as measured, over the level its factors carry,
    planner.fidelity.dp_attention_ratio), never above 1: a GPU whose wide
    expert-parallel serving lags its other runs (MI355X) is not priced at their level
    there, and none is lifted above it."""
    return gpu.efficiency.dp_attention_level_ratio if dp > 1 else 1.0


def replica_weight_bytes(replica: Replica) -> float:
    """Bytes of the replica's weights in its dtype, all shards together:
    ``weight_bytes + (dp - 1) x dense (non-expert) weight bytes`` (every data-parallel
    attention rank holds its own copy of the non-expert weights; conservative, as
    engines may shard the dense MLPs over the ranks)."""
    layout = replica.weight_layout
    return arch.weight_bytes(*layout) + (replica.dp - 1) * arch.dense_weight_bytes(*layout)


def kv_capacity_bytes(replica: Replica) -> float:
    """Bytes left for the KV cache:
    ``(G x gpu_memory_bytes / 1e9 x memory_utilization - G x activation_reserve_gb) x 1e9
    - weights``
    with ``G = tp x pp`` GPUs (bytes; 0 if negative); the weights include a speculative
    drafter's (:func:`draft_weight_bytes`)."""
    usable = usable_memory_gb(replica) - replica.gpus * replica.activation_reserve_gb
    held = replica_weight_bytes(replica) + draft_weight_bytes(replica)
    return max(usable * 1e9 - held, 0.0)


def kv_capacity_tokens(replica: Replica) -> int:
    """KV-cache capacity in tokens:
    ``floor(kv_capacity_bytes / (kv_bytes_per_token x kv_replication(tp)))``.

    Counts every layer growing (the per-token rate); sliding windows help only per
    sequence (see :func:`max_resident_batch`). Replicated KV heads (tp > kv_heads) and
    MLA's latent (whole on every rank) divide the pooled capacity.
    """
    per_token = arch.kv_bytes_per_token_held(replica.model, replica.kv_dtype, replica.attention_tp)
    return math.floor(kv_capacity_bytes(replica) / per_token)


def max_resident_batch(replica: Replica, context_tokens: float) -> int:
    """Most sequences of ``context_tokens`` that fit in the KV cache at once:
    ``floor(kv_capacity_bytes / (kv_bytes_for_sequence(context) x kv_replication(tp)))``
    (sequences). DeepSeek-V3 fp8 on 8 x H200 at 2,300 tokens: 606, not thousands
    (the latent is held whole on each of the 8 ranks)."""
    if context_tokens <= 0:
        raise PlanningError.for_field("context_tokens", f"must be > 0, got {context_tokens}")
    per_seq = replica.coefficients.kv_held_bytes(context_tokens)
    return math.floor(kv_capacity_bytes(replica) / per_seq)
