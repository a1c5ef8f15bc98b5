"""What a measured point is (:class:`Measurement`), and the deterministic fit / holdout
split of the shipped points (:func:`assign_splits`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from catalog.schema import Dtype
from planner.errors import PlanningError


class MeasurementError(PlanningError):
    """Measurements that cannot be used. ``issues`` are (``file:line``, reason)."""

    code = "invalid_measurements"


Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class MeasurementKind(StrEnum):
    SERVING = "serving"  # a serving benchmark: throughput / TTFT / TPOT
    KERNEL = "kernel"  # one layer's linear layers (QKV, O, MLP) on ``tokens`` tokens


class Split(StrEnum):
    """Which part of the data a measurement belongs to: fitted, or held out to check
    the fit (:func:`assign_splits`)."""

    FIT = "fit"
    HOLDOUT = "holdout"


class Measurement(BaseModel):
    """One measured point. Serving: ``isl``/``osl`` mean prompt/output tokens, and
    ``concurrency`` (closed loop) or ``request_rate_rps`` (open loop; ``inf`` = all
    at once) or neither (offline: maximum throughput); measured ``output_tok_s``
    (whole replica), mean ``ttft_ms`` and mean ``tpot_ms`` (or mean ITL).
    ``num_requests``: requests in an open-loop run (its ramp-down is then priced).
    ``offered_rate_rps``: with ``concurrency``, the open loop's arrival rate the
    occupancy was derived from (Little's law; an MLPerf Server run): its throughput is
    that offered load, not the GPU's saturation (``planner.levels.saturated_throughput``).
    ``max_batch`` / ``memory_utilization``: the engine's running-sequence cap and memory
    share (vLLM ``gpu_memory_utilization``, SGLang ``mem_fraction_static``) the run stated;
    None: the engine's defaults (planner.engines). ``checkpoint``: the published
    checkpoint the run loaded, one of the model's ``measured_checkpoints`` or
    ``fp4_checkpoints`` (priced with its dtype, FP4 format and BF16 layers); None: the
    checkpoint a plan loads.
    Kernel: ``tokens`` in the batch and ``layer_ms`` per layer per GPU shard.
    ``where``: ``file:line`` it came from.

    ``split``: fit or holdout (None: fit). ``ep``/``pp``/``dp_attention``: expert,
    pipeline and data-parallel-attention settings of the run (priced: ``dp = tp`` with
    DP attention, :class:`planner.roofline.Replica`), and ``num_gpus`` the accelerators
    of the whole deployment measured. A point with a ``skip_reason`` is kept with its
    fields for the record, and neither priced nor fitted.

    A disaggregated run (``prefill_workers`` set): ``prefill_workers`` workers of
    ``prefill_tp`` GPUs (``prefill_ep``, ``prefill_dp_attention``) hand their KV to
    ``decode_workers`` workers laid out as ``tp``/``ep``/``dp_attention``; a closed loop
    (``concurrency``), its ``output_tok_s`` the whole deployment's; its ``ttft_ms`` is
    taken as measured, and the throughput and TPOT check the decode workers
    (:func:`planner.calibration.disagg.disaggregated_closed_loop`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1)
    gpu: str = Field(min_length=1)
    tp: Annotated[int, Field(ge=1, le=1024)]
    dtype: Dtype
    kv_dtype: Dtype | None = None
    engine: str | None = None
    kind: MeasurementKind = MeasurementKind.SERVING
    isl: Annotated[int, Field(ge=1)] | None = None
    osl: Annotated[int, Field(ge=2)] | None = None
    concurrency: Positive | None = None
    request_rate_rps: Annotated[float, Field(gt=0)] | None = None
    offered_rate_rps: Annotated[float, Field(gt=0)] | None = None
    num_requests: Annotated[int, Field(ge=1)] | None = None
    token_budget: Annotated[int, Field(ge=2)] | None = None
    max_batch: Annotated[int, Field(ge=1)] | None = None
    memory_utilization: Annotated[float, Field(gt=0, le=1)] | None = None
    checkpoint: str | None = Field(default=None, min_length=3, max_length=200)
    output_tok_s: Positive | None = None
    ttft_ms: Positive | None = None
    tpot_ms: Positive | None = None
    tokens: Annotated[int, Field(ge=1)] | None = None
    layer_ms: Positive | None = None
    id: str | None = None
    source: str | None = None
    note: str | None = None
    split: Split | None = None
    ep: Annotated[int, Field(ge=1, le=1024)] | None = None
    pp: Annotated[int, Field(ge=1, le=1024)] | None = None
    dp_attention: bool | None = None
    num_gpus: Annotated[int, Field(ge=1, le=100_000)] | None = None
    prefill_workers: Annotated[int, Field(ge=1, le=10_000)] | None = None
    prefill_tp: Annotated[int, Field(ge=1, le=1024)] | None = None
    prefill_ep: Annotated[int, Field(ge=1, le=1024)] | None = None
    prefill_dp_attention: bool | None = None
    decode_workers: Annotated[int, Field(ge=1, le=10_000)] | None = None
    skip_reason: str | None = Field(default=None, min_length=10)
    where: str | None = None

    @field_validator("request_rate_rps", mode="before")
    @classmethod
    def _inf(cls, value: Any) -> Any:
        """``"inf"`` (JSON has no Infinity): every request sent at once."""
        if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
            return math.inf
        return value

    @model_validator(mode="after")
    def _complete(self) -> Measurement:
        if self.dp_attention and (self.ep or 1) <= 1 and self.skip_reason is None:
            raise ValueError(
                "dp_attention without expert parallelism (ep > 1) is not modelled by the "
                "planner: give skip_reason (the point is then recorded, not fitted)"
            )
        if self.skip_reason is None:
            self._check_disaggregation()
        if self.kind == MeasurementKind.KERNEL:
            if self.tokens is None or self.layer_ms is None:
                raise ValueError("a kernel measurement needs tokens and layer_ms")
            return self
        if self.isl is None or self.osl is None:
            raise ValueError("a serving measurement needs isl and osl (mean prompt/output tokens)")
        if self.output_tok_s is None and self.ttft_ms is None and self.tpot_ms is None:
            raise ValueError("measures nothing: give output_tok_s, ttft_ms or tpot_ms")
        if self.concurrency is not None and self.request_rate_rps is not None:
            raise ValueError("give concurrency or request_rate_rps, not both")
        if self.offered_rate_rps is not None and self.concurrency is None:
            raise ValueError(
                "offered_rate_rps is the rate a closed loop's concurrency was derived from: "
                "give concurrency with it (or request_rate_rps alone for an open loop)"
            )
        return self

    def _check_disaggregation(self) -> None:
        given = [
            f
            for f in ("prefill_workers", "prefill_tp", "decode_workers")
            if getattr(self, f) is not None
        ]
        if not given and self.prefill_ep is None and self.prefill_dp_attention is None:
            return
        if len(given) < 3:
            raise ValueError(
                "a disaggregated run needs prefill_workers, prefill_tp and decode_workers"
            )
        if self.concurrency is None or self.kind != MeasurementKind.SERVING:
            raise ValueError("a disaggregated run is priced as a closed loop: give concurrency")
        if self.prefill_dp_attention and (self.prefill_ep or 1) <= 1:
            raise ValueError(
                "prefill_dp_attention without expert parallelism (prefill_ep > 1) is not "
                "modelled by the planner: give skip_reason (the point is then recorded)"
            )

    @property
    def disaggregated(self) -> bool:
        """Whether the run had separate prefill and decode workers."""
        return self.prefill_workers is not None

    @property
    def label(self) -> str:
        return self.id or self.where or f"{self.model}/{self.gpu}"

    @property
    def usable(self) -> bool:
        """Whether the cost model can price it (no ``skip_reason``)."""
        return self.skip_reason is None

    @property
    def in_fit(self) -> bool:
        """Whether a fit uses it: usable and not held out."""
        return self.usable and self.split != Split.HOLDOUT

    def quantities(self) -> dict[str, float]:
        """The measured values, by name (``output_tok_s``, ``ttft_ms``, ``tpot_ms``,
        ``layer_ms``); a disaggregated run's TTFT is not among them (the calibration
        takes it as measured, :mod:`planner.calibration.disagg`)."""
        names: tuple[str, ...] = (
            ("layer_ms",) if self.kind == MeasurementKind.KERNEL else QUANTITIES
        )
        if self.disaggregated:  # its TTFT is an input (planner.calibration.disagg)
            names = tuple(n for n in names if n != "ttft_ms")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}


QUANTITIES = ("output_tok_s", "ttft_ms", "tpot_ms")


# --------------------------------------------------------------------------- fit / holdout split

#: Share of each stratum's points held out (:func:`assign_splits`).
HOLDOUT_SHARE = 0.25
#: A stratum (or GPU) with at least this many points has held-out points.
MIN_POINTS_FOR_HOLDOUT = 4


def split_rank(ident: str) -> int:
    """A stable pseudo-random rank of a measurement id: the first 64 bits of
    SHA-256(id) as an integer (the same on every machine and Python version)."""
    return int(hashlib.sha256(ident.encode("utf-8")).hexdigest()[:16], 16)


def assign_splits(points: Sequence[tuple[str, str, str]]) -> dict[str, Split]:
    """Deterministic, stratified fit / holdout split of ``(id, gpu, stratum)`` triples.

    Within each (gpu, stratum) with ``n >= MIN_POINTS_FOR_HOLDOUT`` points, the
    ``max(1, round(HOLDOUT_SHARE x n))`` ids of lowest :func:`split_rank` are held out;
    a GPU with at least ``MIN_POINTS_FOR_HOLDOUT`` points in total whose strata are all
    too small still holds out its lowest-ranked point. Everything else is fit. The
    result depends only on the ids and their groups, not on their order."""
    strata: dict[tuple[str, str], list[str]] = {}
    per_gpu: dict[str, list[str]] = {}
    for ident, gpu, stratum in points:
        strata.setdefault((gpu, stratum), []).append(ident)
        per_gpu.setdefault(gpu, []).append(ident)
    out = {ident: Split.FIT for ident, _, _ in points}
    for ids in strata.values():
        if len(ids) < MIN_POINTS_FOR_HOLDOUT:
            continue
        k = max(1, round(HOLDOUT_SHARE * len(ids)))
        for ident in sorted(ids, key=split_rank)[:k]:
            out[ident] = Split.HOLDOUT
    for ids in per_gpu.values():
        if len(ids) >= MIN_POINTS_FOR_HOLDOUT and all(out[i] == Split.FIT for i in ids):
            out[min(ids, key=split_rank)] = Split.HOLDOUT
    return out


def fit_points(measurements: Iterable[Measurement]) -> list[Measurement]:
    """The points a fit uses: priceable (no ``skip_reason``) and not held out."""
    return [m for m in measurements if m.in_fit]


def holdout_points(measurements: Iterable[Measurement]) -> list[Measurement]:
    """The priceable points held out of the fit, to check it."""
    return [m for m in measurements if m.usable and m.split == Split.HOLDOUT]
