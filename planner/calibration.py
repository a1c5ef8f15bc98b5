"""Calibrate the cost model's efficiency factors from measured serving results.

A roofline with guessed efficiency factors is tens of percent off real engines.
This module turns measurements into fitted factors and says how far the
predictions are from what was measured:

* :class:`Measurement` — one measured point: a serving run (prompt/output
  tokens, concurrency or request rate, and the measured output tokens/s, mean
  TTFT, mean TPOT) or a kernel timing (one transformer layer's linear layers on
  ``tokens`` tokens, as a profiler reports them);
* parsers for ``vllm bench serve --save-result`` JSON, genai-perf / AIPerf
  profile exports, a plain CSV (:data:`CSV_COLUMNS`) and fleetplan's own JSON
  (``{"measurements": [...]}``); every problem is reported with its file, line
  and reason (:class:`MeasurementError`), and a file with any problem is refused
  whole;
* :func:`predict` — the cost model's prediction for a point
  (:func:`planner.capacity.replica_capacity` for serving runs,
  :func:`kernel_layer_ms` for kernels);
* :func:`fit_calibration` — least squares (``scipy.optimize.least_squares``)
  over (prefill MFU, decode MBU, per-step overhead) per (GPU, dtype[, engine]),
  minimizing the log-ratio residuals ``ln(predicted / measured)`` of every
  measured quantity (a symmetric relative error; soft-L1 loss, so a few points
  the model cannot represent do not dominate) with a weak pull toward the
  catalog's factors; factors the data do not determine are held at the
  catalog's value;
* :class:`Calibration` — a named set of fitted factors, stored as a YAML overlay
  (``$FLEETPLAN_CALIBRATION_DIR/NAME.yaml``, default ``./calibrations``) and, by
  the service, in its database; :func:`apply_calibration` returns a catalog whose
  GPUs carry the factors (per dtype), with a new content hash.

Errors are absolute percentage errors ``|predicted / measured - 1|`` (APE).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from statistics import median
from typing import Annotated, Any

import numpy as np
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from scipy.optimize import least_squares

from catalog.loader import DATA_DIR, build_catalog
from catalog.schema import (
    ANALOGY_SIGMA_LOG,
    DTYPE_BYTES,
    Catalog,
    Dtype,
    DtypeEfficiency,
    Provenance,
)
from planner import architecture as arch
from planner import engines
from planner import roofline as rl
from planner.capacity import DEFAULT_TOKEN_BUDGET, replica_capacity
from planner.errors import PlanningError, UnknownEntryError

#: Parameter bounds of the fit: prefill MFU, decode MBU, per-step overhead (ms).
LOWER = (0.05, 0.05, 0.0)
UPPER = (1.0, 1.0, 50.0)
PARAMS = ("prefill_mfu", "decode_mbu", "step_overhead_ms")
#: Weight of the pull toward the catalog's factors (per parameter, in log units for
#: MFU/MBU and per OVERHEAD_SCALE_MS for the overhead), against 1 per measured value.
PRIOR_WEIGHT = 0.05
OVERHEAD_SCALE_MS = 2.0
#: Residual of a measured value the model cannot predict at some factors (the model
#: says the open loop is overloaded, so no TTFT): ln 3, i.e. "off by 200%".
MISSING_PENALTY = math.log(3.0)
#: Robust loss of the fit: residuals beyond LOSS_SCALE (a log ratio, ~20%) count
#: linearly, not squared, so a few points the model cannot represent (an engine limit
#: it does not know) do not drag the factors away from the bulk of the data.
LOSS = "soft_l1"
LOSS_SCALE = 0.2
#: Coarse grid the fit starts from (its best points), per factor.
GRID = ((0.3, 0.45, 0.6, 0.75, 0.9), (0.4, 0.55, 0.7, 0.85), (0.5, 2.0, 6.0))
#: A factor is determined by the data when its standard error (from the Jacobian of
#: the data residuals at the fit) is below this share of its value (overhead: ms).
MAX_REL_STD_ERROR = 0.25
MAX_OVERHEAD_STD_ERROR_MS = 1.0

CSV_COLUMNS = (
    "model",
    "gpu",
    "tp",
    "dtype",
    "isl",
    "osl",
    "concurrency",
    "output_tok_s",
    "ttft_ms",
    "tpot_ms",
)
#: Optional CSV columns (any order, after or among the required ones).
CSV_OPTIONAL = (
    "engine",
    "kv_dtype",
    "request_rate_rps",
    "num_requests",
    "token_budget",
    "max_batch",
    "id",
    "source",
    "note",
)

NAME_PATTERN = r"^[a-z0-9][a-z0-9._\-]*$"
CALIBRATION_DIR_ENV = "FLEETPLAN_CALIBRATION_DIR"
DEFAULT_CALIBRATION_DIR = "calibrations"

#: The analogy factors the shipped catalog had before ``make calibrate-defaults`` fitted
#: them (prefill MFU, decode MBU, step overhead ms), kept so "before calibration" stays
#: reproducible once the YAML files hold the fitted values.
#: Every GPU of the shipped catalog is listed (the values its YAML had when it was set
#: by analogy), so a GPU whose defaults a later fit replaces keeps its "before".
UNCALIBRATED_DEFAULTS: dict[str, tuple[float, float, float]] = {
    "a100-40gb": (0.55, 0.7, 2.0),
    "a100-sxm-80gb": (0.55, 0.7, 2.0),
    "a10g": (0.45, 0.6, 2.0),
    "b200": (0.45, 0.65, 2.0),
    "gaudi3": (0.4, 0.6, 3.0),
    "gb200-per-gpu": (0.45, 0.65, 2.0),
    "h100-nvl-94gb": (0.5, 0.7, 2.0),
    "h100-pcie-80gb": (0.5, 0.7, 2.0),
    "h100-sxm5-80gb": (0.5, 0.7, 2.0),
    "h200-sxm-141gb": (0.5, 0.7, 2.0),
    "l4": (0.4, 0.6, 2.0),
    "l40s": (0.45, 0.6, 2.0),
    "mi300x": (0.4, 0.6, 3.0),
    "mi325x": (0.4, 0.6, 3.0),
}


class MeasurementError(PlanningError):
    """Measurements that cannot be used. ``issues`` are (``file:line``, reason)."""

    code = "invalid_measurements"


# --------------------------------------------------------------------------- measurements

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
    Kernel: ``tokens`` in the batch and ``layer_ms`` per layer per GPU shard.
    ``where``: ``file:line`` it came from.

    ``split``: fit or holdout (None: fit). ``ep``/``pp``/``dp_attention``: expert,
    pipeline and data-parallel-attention settings of the run, and ``num_gpus`` the
    accelerators of the whole deployment measured; the planner models none of the
    first three, so a point with any of them needs a ``skip_reason``: it is kept
    with its fields for the record, and neither priced nor fitted."""

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
    num_requests: Annotated[int, Field(ge=1)] | None = None
    token_budget: Annotated[int, Field(ge=2)] | None = None
    max_batch: Annotated[int, Field(ge=1)] | None = None
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
        unmodelled = [
            name
            for name, on in (
                ("ep", (self.ep or 1) > 1),
                ("pp", (self.pp or 1) > 1),
                ("dp_attention", bool(self.dp_attention)),
            )
            if on
        ]
        if unmodelled and self.skip_reason is None:
            raise ValueError(
                f"{', '.join(unmodelled)} not modelled by the planner: give skip_reason "
                "(the point is then recorded, not fitted)"
            )
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
        return self

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
        ``layer_ms``)."""
        names = ("layer_ms",) if self.kind == MeasurementKind.KERNEL else QUANTITIES
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


# --------------------------------------------------------------------------- name mapping

_MODEL_ALIASES = {
    "llama-3.3-70b": "llama-3.1-70b",
    "llama-3-70b": "llama-3.1-70b",
    "llama-3-8b": "llama-3.1-8b",
    "mistral-7b": "mistral-7b-v0.1",
}


def _normalize(name: str) -> str:
    s = name.strip().lower().split("/")[-1]
    s = s.replace("_", "-").replace(" ", "-")
    s = re.sub(r"^meta-", "", s)
    for suffix in ("-instruct", "-chat", "-hf", "-fp8", "-bf16", "-it"):
        s = s.replace(suffix, "")
    return s


def resolve_model(catalog: Catalog, name: str) -> str | None:
    """A catalog model id for ``name`` (an id, or a Hugging Face name such as
    ``meta-llama/Llama-3.1-8B-Instruct``), or None."""
    if name in catalog.models:
        return name
    key = _normalize(name)
    key = _MODEL_ALIASES.get(key, key)
    for mid, m in catalog.models.items():
        if key in (mid, _normalize(m.name)):
            return mid
    return None


# --------------------------------------------------------------------------- parsing


@dataclasses.dataclass
class _Issues:
    items: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def add(self, where: str, reason: str) -> None:
        self.items.append((where, reason))


def _validation_reason(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"])
        msg = str(e["msg"]).removeprefix("Value error, ")
        parts.append(f"{field}: {msg}" if field else msg)
    return "; ".join(parts)


def check_measurement(m: Measurement, catalog: Catalog) -> str | None:
    """Why ``m`` cannot be priced with ``catalog`` (None when it can): an unknown model
    or GPU, a replica that cannot be built or does not fit, a sequence too long."""
    if m.model not in catalog.models:
        return f"unknown model {m.model!r} (known: {', '.join(sorted(catalog.models))})"
    if m.gpu not in catalog.gpus:
        return f"unknown gpu {m.gpu!r} (known: {', '.join(sorted(catalog.gpus))})"
    if not m.usable:
        return None  # recorded, never priced
    try:
        replica = base_replica(m, catalog)
    except PlanningError as err:
        return err.message
    if m.kind == MeasurementKind.KERNEL:
        if replica.model.is_moe:
            return "kernel measurements need a dense model"
        return None
    assert m.isl is not None and m.osl is not None
    if m.isl + m.osl > replica.model.max_context_tokens:
        return (
            f"isl + osl = {m.isl + m.osl:,} exceeds {m.model}'s context "
            f"({replica.model.max_context_tokens:,})"
        )
    if rl.max_resident_batch(replica, m.isl + m.osl / 2.0) < 1:
        return f"one {m.isl + m.osl:,}-token sequence does not fit the KV cache"
    return None


def _build(
    raw: Mapping[str, Any],
    where: str,
    catalog: Catalog,
    issues: _Issues,
    out: list[Measurement],
) -> None:
    data = {k: v for k, v in raw.items() if v is not None and v != ""}
    data["where"] = where
    if isinstance(data.get("model"), str):
        data["model"] = resolve_model(catalog, data["model"]) or data["model"]
    try:
        m = Measurement.model_validate(data)
    except ValidationError as err:
        issues.add(where, _validation_reason(err))
        return
    why = check_measurement(m, catalog)
    if why is not None:
        issues.add(where, why)
        return
    out.append(m)


def _csv_value(text: str) -> Any:
    t = text.strip()
    if t == "":
        return None
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


def parse_csv(
    text: str, where: str, catalog: Catalog, defaults: Mapping[str, Any] | None = None
) -> tuple[list[Measurement], list[tuple[str, str]]]:
    """Measurements from CSV text with a header row naming :data:`CSV_COLUMNS` (and
    any of :data:`CSV_OPTIONAL`); ``defaults`` fill empty model/gpu/tp/dtype/engine."""
    issues = _Issues()
    out: list[Measurement] = []
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        return [], [(f"{where}:1", "empty file: expected a header row")]
    header = [h.strip() for h in header]
    known = set(CSV_COLUMNS) | set(CSV_OPTIONAL)
    missing = [c for c in CSV_COLUMNS if c not in header and not (defaults or {}).get(c)]
    unknown = [h for h in header if h not in known]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing column(s) {', '.join(missing)}")
        if unknown:
            parts.append(f"unknown column(s) {', '.join(unknown)}")
        return [], [(f"{where}:1", "; ".join(parts) + f" (columns: {', '.join(CSV_COLUMNS)})")]
    for lineno, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        here = f"{where}:{lineno}"
        if len(row) != len(header):
            issues.add(here, f"{len(row)} values for {len(header)} columns")
            continue
        raw: dict[str, Any] = {k: v for k, v in (defaults or {}).items() if v is not None}
        for name, cell in zip(header, row, strict=True):
            value = _csv_value(cell)
            if value is not None:
                raw[name] = value
        for key in ("model", "gpu", "dtype", "kv_dtype", "engine", "id", "source", "note"):
            if key in raw:
                raw[key] = str(raw[key])
        _build(raw, here, catalog, issues, out)
    return out, issues.items


def _line_of(text: str, needle: str) -> int:
    pos = text.find(needle)
    return text.count("\n", 0, pos) + 1 if pos >= 0 else 1


def _array_entry_lines(text: str, key: str) -> list[int]:
    """Start line of every element of the top-level array ``key`` in JSON ``text``."""
    m = re.search(r'"' + re.escape(key) + r'"\s*:\s*\[', text)
    if m is None:
        return []
    dec = json.JSONDecoder()
    pos, lines = m.end(), list[int]()
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return lines
        lines.append(text.count("\n", 0, pos) + 1)
        try:
            _, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            return lines


def _metric(data: Mapping[str, Any], key: str, to_ms: bool) -> float | None:
    """A genai-perf/AIPerf metric's mean, in ms when ``to_ms`` (unit from the file;
    nanoseconds when the file gives none, as genai-perf's raw export)."""
    value = data.get(key)
    if not isinstance(value, Mapping):
        return None
    avg = value.get("avg", value.get("value"))
    if not isinstance(avg, int | float) or isinstance(avg, bool):
        return None
    if not to_ms:
        return float(avg)
    unit = str(value.get("unit", "ns")).lower()
    scale = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}.get(unit)
    if scale is None:
        raise ValueError(f"{key}: unknown time unit {unit!r}")
    return float(avg) * scale


def _genai_perf_raw(data: Mapping[str, Any]) -> dict[str, Any]:
    raw_cfg = data.get("input_config")
    cfg: Mapping[str, Any] = raw_cfg if isinstance(raw_cfg, Mapping) else {}
    raw_loadgen = cfg.get("loadgen")
    loadgen: Mapping[str, Any] = raw_loadgen if isinstance(raw_loadgen, Mapping) else {}
    stim = cfg.get("perf_analyzer", {}).get("stimulus", {}) if isinstance(cfg, Mapping) else {}
    concurrency = loadgen.get("concurrency", cfg.get("concurrency", stim.get("concurrency")))
    rate = loadgen.get("request_rate", cfg.get("request_rate", stim.get("request_rate")))
    models = cfg.get("model") or cfg.get("model_names") or []
    if isinstance(cfg.get("models"), Mapping):
        models = [i.get("name") for i in cfg["models"].get("items", []) if isinstance(i, Mapping)]
    isl = _metric(data, "input_sequence_length", False)
    osl = _metric(data, "output_sequence_length", False)
    raw: dict[str, Any] = {
        "output_tok_s": _metric(data, "output_token_throughput", False),
        "ttft_ms": _metric(data, "time_to_first_token", True),
        "tpot_ms": _metric(data, "inter_token_latency", True),
        "isl": round(isl) if isl else None,
        "osl": round(osl) if osl else None,
        "concurrency": concurrency,
        "request_rate_rps": rate,
    }
    if isinstance(models, list) and models and isinstance(models[0], str):
        raw["model"] = models[0]
    elif isinstance(models, str):
        raw["model"] = models
    return raw


def _vllm_raw(data: Mapping[str, Any]) -> dict[str, Any]:
    completed = data.get("completed")
    isl = osl = None
    if isinstance(completed, int) and completed > 0:
        if isinstance(data.get("total_input_tokens"), int | float):
            isl = round(data["total_input_tokens"] / completed)
        if isinstance(data.get("total_output_tokens"), int | float):
            osl = round(data["total_output_tokens"] / completed)
    for key, target in (("input_lens", "isl"), ("output_lens", "osl")):
        lens = data.get(key)
        if (isl if target == "isl" else osl) is None and isinstance(lens, list) and lens:
            value = round(sum(lens) / len(lens))
            if target == "isl":
                isl = value
            else:
                osl = value
    rate = data.get("request_rate")
    if isinstance(rate, str):
        rate = math.inf if rate.strip().lower() in ("inf", "infinity") else rate
    raw: dict[str, Any] = {
        "output_tok_s": data.get("output_throughput"),
        "ttft_ms": data.get("mean_ttft_ms"),
        "tpot_ms": data.get("mean_tpot_ms"),
        "isl": isl,
        "osl": osl,
        "concurrency": data.get("max_concurrency"),
        "request_rate_rps": None if data.get("max_concurrency") else rate,
        "num_requests": data.get("completed") if data.get("max_concurrency") is None else None,
        "engine": "vllm"
        if data.get("backend") in (None, "vllm", "openai", "openai-chat")
        else None,
    }
    model = data.get("model_id") or data.get("model")
    if isinstance(model, str):
        raw["model"] = model
    return raw


def parse_json(
    text: str, where: str, catalog: Catalog, defaults: Mapping[str, Any] | None = None
) -> tuple[list[Measurement], list[tuple[str, str]]]:
    """Measurements from a JSON file: fleetplan's ``{"measurements": [...]}``, a
    ``vllm bench serve --save-result`` file, or a genai-perf/AIPerf profile export.
    ``defaults`` (model, gpu, tp, dtype, engine...) fill what the file does not say
    (vLLM and genai-perf files name neither the GPU nor the parallelism)."""
    issues = _Issues()
    out: list[Measurement] = []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        return [], [(f"{where}:{err.lineno}", f"not valid JSON: {err.msg}")]
    if not isinstance(data, Mapping):
        return [], [(f"{where}:1", "expected a JSON object")]
    fill = {k: v for k, v in (defaults or {}).items() if v is not None}
    if isinstance(data.get("measurements"), list):
        lines = _array_entry_lines(text, "measurements")
        seen: dict[str, str] = {}
        for i, entry in enumerate(data["measurements"]):
            here = f"{where}:{lines[i] if i < len(lines) else 1}"
            if not isinstance(entry, Mapping):
                issues.add(here, f"measurements[{i}]: expected an object")
                continue
            ident = entry.get("id")
            if isinstance(ident, str) and ident in seen:
                issues.add(here, f"duplicate id {ident!r} (first at {seen[ident]})")
                continue
            if isinstance(ident, str):
                seen[ident] = here
            _build({**fill, **entry}, here, catalog, issues, out)
        return out, issues.items
    if "output_token_throughput" in data or "time_to_first_token" in data:
        try:
            raw = _genai_perf_raw(data)
        except ValueError as err:
            return [], [(f"{where}:{_line_of(text, 'time_to_first_token')}", str(err))]
    elif "output_throughput" in data or "mean_ttft_ms" in data:
        raw = _vllm_raw(data)
    else:
        return [], [
            (
                f"{where}:1",
                "not a known format (fleetplan measurements, vllm bench serve --save-result, "
                "genai-perf/AIPerf profile export)",
            )
        ]
    raw = {k: v for k, v in raw.items() if v is not None}
    for key, value in fill.items():
        if key in ("model", "gpu", "tp", "dtype") or key not in raw:
            raw[key] = value
    missing = [k for k in ("model", "gpu", "tp", "dtype") if k not in raw]
    if missing:
        flags = " ".join(f"--{k}" for k in missing)
        return [], [(f"{where}:1", f"the file does not say its {', '.join(missing)}: pass {flags}")]
    _build(raw, f"{where}:1", catalog, issues, out)
    return out, issues.items


def load_measurements(
    paths: Sequence[str | Path],
    catalog: Catalog,
    defaults: Mapping[str, Any] | None = None,
) -> list[Measurement]:
    """Read every file (CSV by its ``.csv`` suffix, else JSON); raise
    :class:`MeasurementError` listing every ``file:line: reason`` if any is bad."""
    all_issues: list[tuple[str, str]] = []
    out: list[Measurement] = []
    for path in paths:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            all_issues.append((f"{p}:0", f"cannot read: {getattr(err, 'strerror', None) or err}"))
            continue
        parse = parse_csv if p.suffix.lower() == ".csv" else parse_json
        got, issues = parse(text, str(p), catalog, defaults)
        out += got
        all_issues += issues
    if all_issues:
        raise measurement_error(all_issues)
    if not out:
        raise MeasurementError.for_field("files", "no measurements in the files given")
    return out


def measurement_error(issues: Sequence[tuple[str, str]]) -> MeasurementError:
    shown = "; ".join(f"{w}: {r}" for w, r in issues[:5])
    more = f" (and {len(issues) - 5} more)" if len(issues) > 5 else ""
    return MeasurementError(f"{len(issues)} bad measurement(s): {shown}{more}", list(issues))


# --------------------------------------------------------------------------- predictions


def _kv_dtype(m: Measurement) -> Dtype:
    """The KV-cache format a measurement ran with: its ``kv_dtype`` when stated; else
    bf16 for bf16 weights, and for FP8/FP4 weights the engine's default: vLLM and
    SGLang keep ``kv_cache_dtype="auto"`` (the activation dtype, bf16) unless told,
    TensorRT-LLM's quantized checkpoints ship an FP8 cache."""
    if m.kv_dtype is not None:
        return m.kv_dtype
    if m.dtype == Dtype.BF16:
        return Dtype.BF16
    return Dtype.FP8 if measurement_engine(m) == "trtllm" else Dtype.BF16


def source_weights(points: Sequence[Measurement]) -> list[float]:
    """Least-squares weight of each point (dimensionless): ``1 / sqrt(n)`` with ``n`` the
    number of points sharing its source and model, so a sweep of many correlated points
    from one benchmark counts like about sqrt(n) independent ones rather than n (one
    long sweep with an engine-specific bottleneck does not set a GPU's factors alone).
    Measured on the shipped data with cost model v2 (bench/fidelity.py): 1/sqrt(n) takes
    the held-out median error from 21.3% (analogy factors) to 19.0%; 1/n (every
    benchmark once) to 21.9%."""
    groups: dict[tuple[str, str], int] = {}
    for m in points:
        k = (m.source or m.id or "", m.model)
        groups[k] = groups.get(k, 0) + 1
    return [1.0 / math.sqrt(groups[(m.source or m.id or "", m.model)]) for m in points]


def measurement_engine(m: Measurement) -> str:
    """The engine profile a measurement ran on (:mod:`planner.engines`): its ``engine``
    field's name (``vllm``, ``sglang``, ``trtllm`` and aliases; a version or a framework
    string containing one of them counts), else the default engine."""
    name = (m.engine or "").lower()
    for key, aliases in (
        ("trtllm", ("trtllm", "tensorrt", "trt-llm")),
        ("sglang", ("sglang",)),
        ("vllm", ("vllm",)),
    ):
        if any(a in name for a in aliases):
            return key
    return engines.DEFAULT_ENGINE


def base_replica(m: Measurement, catalog: Catalog) -> rl.Replica:
    """The replica a measurement ran on, with the catalog's factors and the memory and
    attention precision of the engine it ran on (:func:`measurement_engine`)."""
    return rl.build_replica(
        catalog,
        m.model,
        m.gpu,
        tp=m.tp,
        dtype=m.dtype,
        kv_dtype=_kv_dtype(m),
        engine=measurement_engine(m),
    )


def with_factors(replica: rl.Replica, factors: Sequence[float]) -> rl.Replica:
    mfu, mbu, overhead = factors
    return dataclasses.replace(
        replica, prefill_mfu=float(mfu), decode_mbu=float(mbu), step_overhead_ms=float(overhead)
    )


def kernel_layer_ms(replica: rl.Replica, tokens: float) -> float:
    """One transformer layer's linear layers (QKV, O, MLP) on ``tokens`` tokens, per GPU
    shard (ms): ``max(tokens x 2 x params / F_eff, params x b_w / W_eff)`` with
    ``params`` the layer's attention-projection and MLP parameters (dense models)."""
    model = replica.model
    params = arch.attention_param_count_per_layer(model) + arch.dense_mlp_param_count(model)
    compute = tokens * 2.0 * params / rl.effective_flops(replica)
    memory = (
        params * DTYPE_BYTES[replica.weight_dtype] / rl.effective_bandwidth_bytes_per_s(replica)
    )
    return max(compute, memory) * 1e3


class Prediction(BaseModel):
    model_config = ConfigDict(frozen=True)

    output_tok_s: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    layer_ms: float | None = None

    def get(self, name: str) -> float | None:
        return getattr(self, name)


def predict_with(m: Measurement, replica: rl.Replica) -> Prediction:
    """The cost model's prediction of ``m`` on ``replica`` (its factors as they are)."""
    if m.kind == MeasurementKind.KERNEL:
        assert m.tokens is not None
        return Prediction(layer_ms=kernel_layer_ms(replica, m.tokens))
    assert m.isl is not None and m.osl is not None
    budget = m.token_budget or DEFAULT_TOKEN_BUDGET
    if m.concurrency is not None:
        res = replica_capacity(
            replica,
            m.isl,
            m.osl,
            concurrency=m.concurrency,
            token_budget=budget,
            max_batch=m.max_batch,
        )
        return Prediction(
            output_tok_s=res.output_tokens_per_s, ttft_ms=res.ttft_ms, tpot_ms=res.tpot_ms
        )
    rate = m.request_rate_rps if m.request_rate_rps is not None else math.inf
    if m.num_requests is not None:
        # A run of N requests never holds more than N at once: the most it can carry is
        # a closed loop of N users. Beyond that rate it runs at that loop's point (TTFT
        # then measures the queue, not predicted); below it, the run lasts N / rate plus
        # the last request's own latency.
        full = replica_capacity(
            replica,
            m.isl,
            m.osl,
            concurrency=m.num_requests,
            token_budget=budget,
            max_batch=m.max_batch,
        )
        if rate >= full.requests_per_s:
            return Prediction(output_tok_s=full.output_tokens_per_s, tpot_ms=full.tpot_ms)
    res = replica_capacity(
        replica, m.isl, m.osl, request_rate_rps=rate, token_budget=budget, max_batch=m.max_batch
    )
    out = res.output_tokens_per_s
    if m.num_requests is not None:
        latency_s = (res.prefill_ms + (m.osl - 1) * res.tpot_ms) / 1e3
        out = m.num_requests * m.osl / (m.num_requests / res.requests_per_s + latency_s)
    offline = m.request_rate_rps is None
    return Prediction(
        output_tok_s=out, ttft_ms=None if offline else res.ttft_ms, tpot_ms=res.tpot_ms
    )


def predict(m: Measurement, catalog: Catalog, factors: Sequence[float] | None = None) -> Prediction:
    """The prediction of ``m`` with the catalog's factors, or with ``factors``
    (prefill MFU, decode MBU, step overhead ms)."""
    replica = base_replica(m, catalog)
    if factors is not None:
        replica = with_factors(replica, factors)
    return predict_with(m, replica)


def ape(predicted: float | None, measured: float) -> float | None:
    """Absolute percentage error ``|predicted / measured - 1|`` (None when not predicted)."""
    if predicted is None:
        return None
    return abs(predicted / measured - 1.0)


# --------------------------------------------------------------------------- fitting


class GroupFit(BaseModel):
    """Fitted factors of one (GPU, dtype[, engine]) group, with the errors before
    (the catalog's factors) and after the fit over the group's measured values."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str
    dtype: Dtype | None
    engine: str | None
    prefill_mfu: float
    decode_mbu: float
    step_overhead_ms: float
    determined: dict[str, bool]
    std_errors: dict[str, float | None]
    points: int
    values: int
    median_ape_before: float | None
    worst_ape_before: float | None
    median_ape_after: float | None
    worst_ape_after: float | None
    sigma_log: float | None = Field(
        default=None,
        description="Residual spread of the fit: residual_sigma_log of its values after "
        "the fit (None in calibrations stored before it was recorded).",
    )

    @property
    def factors(self) -> tuple[float, float, float]:
        return (self.prefill_mfu, self.decode_mbu, self.step_overhead_ms)


class Residual(BaseModel):
    """One measured value against its predictions before and after the fit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    point: str
    gpu: str
    dtype: Dtype
    engine: str | None
    model: str
    quantity: str
    measured: float
    predicted_before: float | None
    predicted_after: float | None
    ape_before: float | None
    ape_after: float | None


class Calibration(BaseModel):
    """A named set of fitted efficiency factors (per GPU and dtype, optionally engine)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, max_length=64)
    created_at: str
    description: str = ""
    factors: list[GroupFit] = Field(min_length=1)
    residuals: list[Residual] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "created_at": self.created_at,
            "groups": [
                {"gpu": f.gpu, "dtype": f.dtype, "engine": f.engine, "points": f.points}
                for f in self.factors
            ],
        }


GroupKey = tuple[str, Dtype | None, str | None]


def group_key(m: Measurement, by: Sequence[str]) -> GroupKey:
    return (
        m.gpu,
        m.dtype if "dtype" in by else None,
        (m.engine or None) if "engine" in by else None,
    )


def _prior(catalog: Catalog, gpu: str, dtype: Dtype | None) -> tuple[float, float, float]:
    eff = catalog.gpus[gpu].efficiency_for(dtype) if dtype else catalog.gpus[gpu].efficiency
    return (eff.prefill_mfu, eff.decode_mbu, eff.step_overhead_ms)


class _Problem:
    """Residuals of one group's measurements as a function of the free factors."""

    def __init__(self, points: Sequence[Measurement], catalog: Catalog, prior: Sequence[float]):
        self.points = list(points)
        self.replicas = [base_replica(m, catalog) for m in self.points]
        self.measured = [m.quantities() for m in self.points]
        self.weights = [math.sqrt(w) for w in source_weights(self.points)]
        self.prior = tuple(float(x) for x in prior)

    def predictions(self, factors: Sequence[float]) -> list[Prediction]:
        return [
            predict_with(m, with_factors(r, factors))
            for m, r in zip(self.points, self.replicas, strict=True)
        ]

    def data_residuals(self, factors: Sequence[float]) -> np.ndarray:
        out = []
        preds = self.predictions(factors)
        for pred, meas, w in zip(preds, self.measured, self.weights, strict=True):
            for name, value in meas.items():
                p = pred.get(name)
                r = math.log(p / value) if p is not None and p > 0 else MISSING_PENALTY
                out.append(w * r)  # w = sqrt(source weight): squared, it is the weight
        return np.array(out)

    def prior_residuals(self, factors: Sequence[float]) -> np.ndarray:
        mfu, mbu, oh = factors
        return PRIOR_WEIGHT * np.array(
            [
                math.log(mfu / self.prior[0]),
                math.log(mbu / self.prior[1]),
                (oh - self.prior[2]) / OVERHEAD_SCALE_MS,
            ]
        )

    def full(
        self, free: Sequence[bool], x: np.ndarray | Sequence[float]
    ) -> tuple[float, float, float]:
        it = iter(x)
        vals = [float(next(it)) if f else self.prior[i] for i, f in enumerate(free)]
        return (vals[0], vals[1], vals[2])

    def solve(self, free: Sequence[bool], starts: Iterable[Sequence[float]]) -> tuple[float, ...]:
        lo = [LOWER[i] for i in range(3) if free[i]]
        hi = [UPPER[i] for i in range(3) if free[i]]
        if not lo:
            return self.prior

        def fun(x: np.ndarray) -> np.ndarray:
            f = self.full(free, x)
            return np.concatenate([self.data_residuals(f), self.prior_residuals(f)])

        best = None
        for start in starts:
            x0 = np.clip([start[i] for i in range(3) if free[i]], lo, hi)
            x0 = np.minimum(np.maximum(x0, np.array(lo) + 1e-6), np.array(hi) - 1e-6)
            res = least_squares(
                fun,
                x0,
                bounds=(lo, hi),
                diff_step=1e-4,
                x_scale="jac",
                max_nfev=200,
                loss=LOSS,
                f_scale=LOSS_SCALE,
            )
            if best is None or res.cost < best.cost:
                best = res
        assert best is not None
        return self.full(free, best.x)

    def cost(self, factors: Sequence[float]) -> float:
        r = np.concatenate([self.data_residuals(factors), self.prior_residuals(factors)])
        z = (r / LOSS_SCALE) ** 2
        return float(np.sum(2.0 * (np.sqrt(1.0 + z) - 1.0)))  # soft_l1, as the solver's

    def best_starts(
        self, free: Sequence[bool], extra: Sequence[Sequence[float]], keep: int = 1
    ) -> list[Sequence[float]]:
        """``extra`` plus the ``keep`` best points of a coarse grid (the max() of the
        roofline makes the cost piecewise: a local search alone can stall where one
        factor has no effect, e.g. MBU while every point is compute-bound)."""
        axes = [GRID[i] if free[i] else (self.prior[i],) for i in range(3)]
        grid = [(a, b, c) for a in axes[0] for b in axes[1] for c in axes[2]]
        grid.sort(key=self.cost)
        return [*extra, *grid[:keep]]

    def std_errors(
        self, factors: Sequence[float], free: Sequence[bool] = (True, True, True)
    ) -> list[float | None]:
        """Standard errors of the free factors (None for held ones, and for factors
        the data cannot separate): ``sqrt(diag(s^2 (J^T J)^-1))`` with ``J`` the
        Jacobian of the data residuals in the free factors and ``s^2`` their variance."""
        base = self.data_residuals(factors)
        idx = [i for i in range(3) if free[i]]
        cols = []
        for i in idx:
            h = max(abs(factors[i]) * 1e-3, 1e-3 if i == 2 else 1e-4)
            f = list(factors)
            f[i] = f[i] + h if f[i] + h <= UPPER[i] else f[i] - h
            cols.append((self.data_residuals(f) - base) / (f[i] - factors[i]))
        out: list[float | None] = [None, None, None]
        if not cols:
            return out
        jac = np.column_stack(cols)
        s2 = float(base @ base) / max(len(base) - len(idx), 1)
        info = jac.T @ jac
        if not np.all(np.isfinite(info)) or np.linalg.cond(info) > 1e12:
            return out
        cov = np.linalg.inv(info) * s2
        for k, i in enumerate(idx):
            out[i] = math.sqrt(max(float(cov[k, k]), 0.0))
        return out


def _se_limit(i: int, factors: Sequence[float]) -> float:
    return MAX_OVERHEAD_STD_ERROR_MS if i == 2 else MAX_REL_STD_ERROR * factors[i]


def _looseness(err: float | None, limit: float) -> float:
    """How far a factor's standard error is past its limit (inf when undetermined)."""
    return math.inf if err is None else err / limit


def _free(mask: Sequence[bool], factors: Sequence[float]) -> list[float]:
    return [f for m, f in zip(mask, factors, strict=True) if m]


def _determined(factors: Sequence[float], errs: Sequence[float | None]) -> list[bool]:
    """Whether each factor's standard error is within its limit (:func:`_se_limit`)."""
    return [
        e is not None and math.isfinite(e) and e <= _se_limit(i, factors)
        for i, e in enumerate(errs)
    ]


#: Smallest spread recorded for fitted factors: a fit that happens to match a handful of
#: points exactly still predicts new models and loads only this well (ln units, ~5%).
MIN_SIGMA_LOG = 0.05


#: Normal-consistency constant of the median absolute deviation: for normal errors
#: ``MAD_TO_SIGMA x median |x|`` estimates their standard deviation.
MAD_TO_SIGMA = 1.4826


def residual_sigma_log(
    residuals: Sequence[Residual], *, after: bool = True, fitted_factors: int = 0
) -> float | None:
    """The spread of a fit in log space, robustly: ``1.4826 x median |ln(measured /
    predicted)| x sqrt(n / (n - k))`` over the ``n`` measured values that were predicted
    (after the fit, or with ``after=False`` before it), with ``k = fitted_factors``
    degrees of freedom used by the fit (``n - k`` at least 1); floored at
    :data:`MIN_SIGMA_LOG`. Dimensionless (natural log); None without values.

    The median is taken about zero, not about the mean: a bias of the model is part
    of its error. It is a median, not a root mean square, so that a few points the
    model cannot represent (a benchmark with its own bottleneck, 2-6x off) widen the
    band no more than their share: with a root mean square one such sweep made every
    fitted GPU look less certain than a GPU set by analogy. This is
    ``Efficiency.sigma_log`` of fitted factors."""
    logs = [
        abs(math.log(r.measured / p))
        for r in residuals
        if (p := (r.predicted_after if after else r.predicted_before)) is not None
        and p > 0
        and r.measured > 0
    ]
    if not logs:
        return None
    n = len(logs)
    dof = max(n - fitted_factors, 1)
    return max(MAD_TO_SIGMA * float(np.median(logs)) * math.sqrt(n / dof), MIN_SIGMA_LOG)


def _errors(
    points: Sequence[Measurement], preds: Sequence[Prediction]
) -> tuple[float | None, float | None]:
    apes = [
        a
        for m, p in zip(points, preds, strict=True)
        for name, value in m.quantities().items()
        if (a := ape(p.get(name), value)) is not None
    ]
    if not apes:
        return None, None
    return median(apes), max(apes)


@dataclasses.dataclass
class _GroupResult:
    fit: GroupFit
    residuals: list[Residual]


def fit_group(
    points: Sequence[Measurement],
    catalog: Catalog,
    key: GroupKey,
    prior: Sequence[float] | None = None,
    free: Sequence[bool] | None = None,
) -> _GroupResult:
    """Fit one group's factors; ``prior`` defaults to the catalog's factors.

    Least squares from the prior and from the best point of a coarse grid. A factor
    the data do not determine (standard error from the Jacobian of the data
    residuals above :func:`_se_limit`) is held at the prior and the others refitted,
    the overhead first, until every fitted factor is determined; ``determined``
    records which were fitted. ``free`` fixes the fitted factors instead.
    """
    gpu, dtype, engine = key
    prior = tuple(prior) if prior is not None else _prior(catalog, gpu, dtype)
    prob = _Problem(points, catalog, prior)
    starts = [prior]
    mask = list(free) if free is not None else [True, True, True]
    fitted = prob.solve(mask, prob.best_starts(mask, starts))
    errs = prob.std_errors(fitted, mask)
    det = _determined(fitted, errs)
    while free is None and any(m and not d for m, d in zip(mask, det, strict=True)):
        # Hold one undetermined factor at the prior and refit the others: the overhead
        # first (it trades off against both MBU and MFU), else the least determined.
        loose = [i for i in range(3) if mask[i] and not det[i]]
        worst = (
            2
            if 2 in loose
            else max(
                loose,
                key=lambda i: _looseness(errs[i], _se_limit(i, fitted)),
            )
        )
        mask[worst] = False
        fitted = prob.solve(mask, prob.best_starts(mask, [prob.full(mask, _free(mask, fitted))]))
        errs = prob.std_errors(fitted, mask)
        det = [d and m for d, m in zip(_determined(fitted, errs), mask, strict=True)]
    det = [d and m for d, m in zip(det, mask, strict=True)]
    fitted = (round(fitted[0], 4), round(fitted[1], 4), round(fitted[2], 3))
    before = prob.predictions(prior)
    after = prob.predictions(fitted)
    residuals = [
        Residual(
            point=m.label,
            gpu=m.gpu,
            dtype=m.dtype,
            engine=m.engine,
            model=m.model,
            quantity=name,
            measured=value,
            predicted_before=b.get(name),
            predicted_after=a.get(name),
            ape_before=ape(b.get(name), value),
            ape_after=ape(a.get(name), value),
        )
        for m, b, a in zip(points, before, after, strict=True)
        for name, value in m.quantities().items()
    ]
    mb, wb = _errors(points, before)
    ma, wa = _errors(points, after)
    fit = GroupFit(
        gpu=gpu,
        dtype=dtype,
        engine=engine,
        prefill_mfu=fitted[0],
        decode_mbu=fitted[1],
        step_overhead_ms=fitted[2],
        determined=dict(zip(PARAMS, det, strict=True)),
        std_errors=dict(zip(PARAMS, errs, strict=True)),
        points=len(points),
        values=len(residuals),
        median_ape_before=mb,
        worst_ape_before=wb,
        median_ape_after=ma,
        worst_ape_after=wa,
        sigma_log=residual_sigma_log(residuals, fitted_factors=sum(det)),
    )
    return _GroupResult(fit, residuals)


def group_measurements(
    measurements: Sequence[Measurement], by: Sequence[str]
) -> dict[GroupKey, list[Measurement]]:
    groups: dict[GroupKey, list[Measurement]] = {}
    for m in measurements:
        groups.setdefault(group_key(m, by), []).append(m)
    return dict(sorted(groups.items(), key=lambda kv: tuple(str(k) for k in kv[0])))


def fit_calibration(
    name: str,
    measurements: Sequence[Measurement],
    catalog: Catalog,
    *,
    per_engine: bool = False,
    description: str = "",
) -> Calibration:
    """Fit factors per (GPU, dtype) — and engine with ``per_engine`` — and return the
    named calibration with every fitted value's residuals before and after. Only
    :func:`fit_points` are fitted: points held out (``split: holdout``) or marked
    with a ``skip_reason`` are left out."""
    if not re.match(NAME_PATTERN, name) or len(name) > 64:
        raise PlanningError.for_field(
            "name", f"{name!r} is not a valid name (lowercase letters, digits, '.', '-', '_')"
        )
    measurements = fit_points(measurements)
    if not measurements:
        raise MeasurementError.for_field("files", "no measurements to fit")
    by = ("gpu", "dtype", "engine") if per_engine else ("gpu", "dtype")
    fits: list[GroupFit] = []
    residuals: list[Residual] = []
    for key, points in group_measurements(measurements, by).items():
        res = fit_group(points, catalog, key)
        fits.append(res.fit)
        residuals += res.residuals
    sources = sorted({m.source or (m.where or "").rsplit(":", 1)[0] for m in measurements} - {""})
    return Calibration(
        name=name,
        created_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
        description=description,
        factors=fits,
        residuals=residuals,
        sources=sources,
    )


def leave_one_out(
    points: Sequence[Measurement],
    catalog: Catalog,
    key: GroupKey,
    full: GroupFit,
    prior: Sequence[float] | None = None,
) -> list[float]:
    """APEs of every measured value predicted by a fit on all the other points (the
    factors ``full`` fitted, warm-started at its values; the others held)."""
    free = [full.determined[p] for p in PARAMS]
    out: list[float] = []
    prior = tuple(prior) if prior is not None else _prior(catalog, key[0], key[1])
    for i, m in enumerate(points):
        rest = [p for j, p in enumerate(points) if j != i]
        prob = _Problem(rest, catalog, prior)
        fitted = prob.solve(free, [full.factors])
        pred = predict(m, catalog, fitted)
        out += [a for n, v in m.quantities().items() if (a := ape(pred.get(n), v)) is not None]
    return out


# --------------------------------------------------------------------------- applying


def group_sigma_log(calibration: Calibration, fit: GroupFit) -> float:
    """The residual spread of one group of a calibration (ln units): the fit's
    ``sigma_log``; for calibrations stored before it was recorded,
    :func:`residual_sigma_log` of the group's stored residuals after the fit; with
    neither, the analogy prior :data:`catalog.schema.ANALOGY_SIGMA_LOG` (nothing
    says the fit is any tighter)."""
    if fit.sigma_log is not None:
        return fit.sigma_log
    mine = [
        r
        for r in calibration.residuals
        if r.gpu == fit.gpu
        and (fit.dtype is None or r.dtype == fit.dtype)
        and (fit.engine is None or r.engine == fit.engine)
    ]
    got = residual_sigma_log(mine, fitted_factors=sum(fit.determined.values()))
    return got if got is not None else ANALOGY_SIGMA_LOG


def apply_calibration(
    catalog: Catalog, calibration: Calibration, engine: str | None = None
) -> Catalog:
    """``catalog`` with the calibration's factors as each GPU's per-dtype efficiency
    (``Efficiency.by_dtype``; a group fitted over all dtypes sets the GPU's defaults),
    re-hashed. With several engines for one (GPU, dtype), ``engine`` picks one.
    Calibrated factors are ``provenance: fitted`` with the group's points and its
    residual spread (:func:`group_sigma_log`)."""
    chosen: dict[tuple[str, Dtype | None], GroupFit] = {}
    for f in calibration.factors:
        if engine is not None and f.engine not in (None, engine):
            continue
        k = (f.gpu, f.dtype)
        if k in chosen and chosen[k].engine != f.engine:
            raise PlanningError.for_field(
                "calibration",
                f"{calibration.name!r} has factors for several engines on {f.gpu} "
                f"{f.dtype or ''}: name the engine",
            )
        chosen[k] = f
    gpus = dict(catalog.gpus)
    reason = f"calibration {calibration.name!r} ({calibration.created_at})"
    for (gpu_id, dtype), f in chosen.items():
        gpu = gpus.get(gpu_id)
        if gpu is None:
            raise UnknownEntryError.for_field(
                "calibration", f"{calibration.name!r} calibrates unknown gpu {gpu_id!r}"
            )
        eff = gpu.efficiency
        spread: dict[str, Any] = {
            "provenance": Provenance.FITTED,
            "points": max(f.points, 1),
            "sigma_log": group_sigma_log(calibration, f),
        }
        if dtype is None:
            eff = eff.model_copy(
                update={
                    "prefill_mfu": f.prefill_mfu,
                    "decode_mbu": f.decode_mbu,
                    "step_overhead_ms": f.step_overhead_ms,
                    "reason": reason,
                    **spread,
                }
            )
        else:
            by = dict(eff.by_dtype)
            by[dtype] = DtypeEfficiency(
                prefill_mfu=f.prefill_mfu,
                decode_mbu=f.decode_mbu,
                step_overhead_ms=f.step_overhead_ms,
                reason=f"{reason}, fitted on {f.points} {dtype} measurements",
                **spread,
            )
            eff = eff.model_copy(update={"by_dtype": by})
        gpus[gpu_id] = gpu.model_copy(update={"efficiency": eff})
    return build_catalog(
        {
            "gpus": gpus,
            "models": catalog.models,
            "workloads": catalog.workloads,
            "links": catalog.links,
        }
    )


# --------------------------------------------------------------------------- YAML store


def calibration_dir(path: str | Path | None = None) -> Path:
    """Where named calibrations live: ``path``, else ``$FLEETPLAN_CALIBRATION_DIR``,
    else ``./calibrations``."""
    if path is not None:
        return Path(path)
    return Path(os.environ.get(CALIBRATION_DIR_ENV) or DEFAULT_CALIBRATION_DIR)


def check_name(name: str, field: str = "name") -> None:
    if not isinstance(name, str) or not re.match(NAME_PATTERN, name) or len(name) > 64:
        raise PlanningError.for_field(
            field,
            f"{name!r} is not a calibration name (lowercase letters, digits, '.', '-', '_')",
        )


def calibration_to_dict(cal: Calibration) -> dict[str, Any]:
    return cal.model_dump(mode="json")


def parse_calibration(data: Any, where: str) -> Calibration:
    try:
        return Calibration.model_validate(data)
    except ValidationError as err:
        raise PlanningError.for_field(
            "calibration", f"{where}: {_validation_reason(err)}"
        ) from None


def save_calibration(cal: Calibration, directory: str | Path | None = None) -> Path:
    """Write ``NAME.yaml`` under the calibration directory (replacing one of that name)."""
    d = calibration_dir(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{cal.name}.yaml"
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(
        yaml.safe_dump(calibration_to_dict(cal), sort_keys=False, allow_unicode=True),
        encoding="utf-8",
    )
    tmp.replace(path)
    return path


def load_calibration(name: str, directory: str | Path | None = None) -> Calibration:
    """The calibration ``name`` from the YAML store (UnknownEntryError if absent)."""
    check_name(name, "calibration")
    path = calibration_dir(directory) / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(list_calibration_names(directory)) or "none"
        raise UnknownEntryError.for_field(
            "calibration", f"no calibration {name!r} in {path.parent} (known: {known})"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise PlanningError.for_field("calibration", f"{path}: not valid YAML: {err}") from None
    return parse_calibration(data, str(path))


def list_calibration_names(directory: str | Path | None = None) -> list[str]:
    d = calibration_dir(directory)
    if not d.is_dir():
        return []
    return sorted(p.stem for p in d.glob("*.yaml") if re.match(NAME_PATTERN, p.stem))


# --------------------------------------------------------------------------- reference data

#: Public measurements shipped with the catalog (``scripts/import_reference_measurements.py``).
REFERENCE_PATH = DATA_DIR.parent / "measurements" / "reference.json"


def load_reference_measurements(
    catalog: Catalog, path: str | Path | None = None, *, include_skipped: bool = False
) -> list[Measurement]:
    """The public measurements shipped in ``catalog/measurements/reference.json``: the
    priceable ones (both splits), or every one with ``include_skipped``."""
    points = load_measurements([path or REFERENCE_PATH], catalog)
    return points if include_skipped else [m for m in points if m.usable]


__all__ = [
    "CSV_COLUMNS",
    "Calibration",
    "GroupFit",
    "Measurement",
    "MeasurementError",
    "MeasurementKind",
    "Prediction",
    "Residual",
    "Split",
    "apply_calibration",
    "assign_splits",
    "fit_calibration",
    "fit_group",
    "fit_points",
    "holdout_points",
    "kernel_layer_ms",
    "leave_one_out",
    "load_calibration",
    "load_measurements",
    "load_reference_measurements",
    "parse_csv",
    "parse_json",
    "predict",
    "save_calibration",
]
