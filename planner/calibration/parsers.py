"""Reading measurements: a plain CSV (:data:`CSV_COLUMNS`), fleetplan's own JSON, ``vllm
bench serve --save-result`` files and genai-perf / AIPerf profile exports. Every problem
is reported with its file, line and reason (:class:`MeasurementError`); a file with any
problem is refused whole.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from catalog.loader import DATA_DIR
from catalog.schema import Catalog
from planner import roofline as rl
from planner.calibration.measurements import Measurement, MeasurementError, MeasurementKind
from planner.calibration.predict import base_replica, prefill_replica
from planner.errors import PlanningError

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
    "memory_utilization",
    "checkpoint",
    "id",
    "source",
    "note",
)


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


def validation_reason(err: ValidationError) -> str:
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
        prefill = prefill_replica(m, catalog)
    except PlanningError as err:
        return err.message
    if prefill is not None and m.isl is not None and rl.max_resident_batch(prefill, m.isl) < 1:
        return f"one {m.isl:,}-token prompt does not fit a prefill worker's KV cache"
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
        issues.add(where, validation_reason(err))
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
