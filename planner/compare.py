"""What-if comparisons: a base request against named variants and sweeps.

A comparison document::

    name: what-if 80/20
    base: {...a plan request...}
    variants:
      - {name: "50/50 mix", mix: {chat: 0.5, agent: 0.5}}
      - {name: "agent prefix 0%", class_overrides: {agent: {prefix_hit_rate: 0.0}}}
      - {name: "aggregated only", override: {candidates: {modes: [aggregated]}}}
      - {name: "traffic x2", rate_scale: 2.0}
    sweeps:
      - {name: "agent share", share_of: agent, values: [0.0, 0.1, ..., 1.0]}
      - {name: "p90 TTFT", path: slo.ttft_ms, values: [500, 1000, 2000]}

Each variant is the base with its changes applied (``planner.variants``):
``override`` deep-merges, ``mix`` sets shares by class name,
``class_overrides`` merges into the named classes, ``rate_scale`` multiplies
the rate. A sweep expands into one variant per value: ``share_of`` sets that
class's share and scales the others to fill the rest in their base
proportions; ``path`` sets a dotted field. Variants are solved in parallel
(one process per core) and tabulated against the base.
"""

from __future__ import annotations

import concurrent.futures as cf
import copy
import os
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from catalog.schema import Catalog
from planner.errors import PlanningError
from planner.lifetime import die_with_parent, process_context
from planner.plan import Plan
from planner.request import MAX_CLASSES, CatalogRef, Label, PlanName
from planner.variants import apply_mix, check_shape, deep_merge, scale_rate, traffic_of

MAX_VARIANTS = 64

Document = Annotated[dict[str, Any], AfterValidator(check_shape)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VariantSpec(Strict):
    name: Label
    override: Document | None = None
    mix: (
        dict[CatalogRef, Annotated[float, Field(strict=True, ge=0, le=1, allow_inf_nan=False)]]
        | None
    ) = Field(default=None, max_length=MAX_CLASSES)
    class_overrides: dict[CatalogRef, Document] | None = Field(default=None, max_length=MAX_CLASSES)
    rate_scale: Annotated[float, Field(strict=True, gt=0, le=1000, allow_inf_nan=False)] | None = (
        None
    )


class SweepSpec(Strict):
    name: Label
    share_of: Label | None = None
    path: PlanName | None = None
    values: Annotated[list[Any], AfterValidator(check_shape)] = Field(
        min_length=1, max_length=MAX_VARIANTS
    )

    @model_validator(mode="after")
    def _one_axis(self) -> SweepSpec:
        if (self.share_of is None) == (self.path is None):
            raise ValueError("give exactly one of share_of or path")
        if self.share_of is not None:
            for v in self.values:
                if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
                    raise ValueError(f"share values must be numbers in [0, 1], got {v!r}")
        return self


class ComparisonSpec(Strict):
    name: PlanName | None = None
    base: Document
    variants: list[VariantSpec] = Field(default_factory=list, max_length=MAX_VARIANTS)
    sweeps: list[SweepSpec] = Field(default_factory=list, max_length=4)

    @model_validator(mode="after")
    def _something_to_compare(self) -> ComparisonSpec:
        n = len(self.variants) + sum(len(s.values) for s in self.sweeps)
        if n > MAX_VARIANTS:
            raise ValueError(f"{n} variants exceed the limit of {MAX_VARIANTS}")
        names = [v.name for v in self.variants]
        dup = {x for x in names if names.count(x) > 1}
        if dup:
            raise ValueError(f"duplicate variant names {sorted(dup)}")
        return self


def parse_comparison(data: Mapping[str, Any]) -> ComparisonSpec:
    try:
        return ComparisonSpec.model_validate(data)
    except ValidationError as err:
        issues = [(".".join(str(p) for p in e["loc"]) or "(root)", e["msg"]) for e in err.errors()]
        raise PlanningError("; ".join(f"{f}: {m}" for f, m in issues), issues) from None


def set_path(doc: dict[str, Any], path: str, value: Any, field: str) -> dict[str, Any]:
    """A copy of ``doc`` with the dotted ``path`` set to ``value`` (mappings created)."""
    out = copy.deepcopy(doc)
    node = out
    keys = path.split(".")
    for key in keys[:-1]:
        if isinstance(node, list):
            try:
                node = node[int(key)]
                continue
            except (ValueError, IndexError):
                raise PlanningError.for_field(field, f"no index {key!r} in {path!r}") from None
        node = node.setdefault(key, {})
        if not isinstance(node, dict | list):
            raise PlanningError.for_field(field, f"{key!r} in {path!r} is not a mapping")
    if isinstance(node, list):
        try:
            node[int(keys[-1])] = value
        except (ValueError, IndexError):
            raise PlanningError.for_field(field, f"no index {keys[-1]!r} in {path!r}") from None
    else:
        node[keys[-1]] = value
    return out


def share_of(doc: dict[str, Any], name: str, share: float, field: str) -> dict[str, Any]:
    """Set class ``name``'s share; the others fill 1 - share in their base proportions
    (``doc``: a validated request document)."""
    _, by_name = traffic_of(doc, "base")
    classes, names = list(by_name.values()), list(by_name)
    if name not in names:
        raise PlanningError.for_field(field, f"unknown class {name!r}; classes are {names}")
    others = sum(c["share"] for c, n in zip(classes, names, strict=True) if n != name)
    mix = {}
    for c, n in zip(classes, names, strict=True):
        if n == name:
            mix[n] = share
        elif others > 0:
            mix[n] = (1.0 - share) * c["share"] / others
        else:
            mix[n] = (1.0 - share) / max(1, len(names) - 1)
    return apply_mix(doc, mix, field)


def apply_variant(base: dict[str, Any], v: VariantSpec, field: str) -> dict[str, Any]:
    """``base`` (a validated request document) with the variant's changes applied; the
    override may leave any shape, so the class overrides, mix and rate scale check the
    parts they work on (``planner.variants.traffic_of``) and ``check_variants`` validates
    the result."""
    doc = deep_merge(base, v.override or {})
    if v.class_overrides:
        _, by_name = traffic_of(doc, f"{field}.override")
        for name, changes in v.class_overrides.items():
            if name not in by_name:
                raise PlanningError.for_field(
                    f"{field}.class_overrides.{name}",
                    f"unknown class; classes are {sorted(by_name)}",
                )
            by_name[name].update(copy.deepcopy(changes))
    if v.mix is not None:
        doc = apply_mix(doc, v.mix, f"{field}.mix", f"{field}.override")
    if v.rate_scale is not None:
        doc = scale_rate(doc, v.rate_scale, f"{field}.override")
    return doc


def expand(spec: ComparisonSpec) -> list[dict[str, Any]]:
    """[{name, request, axis, value}] for the base, every variant and every sweep value.
    The base is validated first (errors name ``base.<field>``): every variant is made
    from it."""
    check_request(spec.base, "base")
    out: list[dict[str, Any]] = [
        {"name": "base", "request": copy.deepcopy(spec.base), "axis": None, "value": None}
    ]
    for i, v in enumerate(spec.variants):
        out.append(
            {
                "name": v.name,
                "request": apply_variant(spec.base, v, f"variants.{i}"),
                "axis": None,
                "value": None,
            }
        )
    for i, s in enumerate(spec.sweeps):
        for value in s.values:
            if s.share_of is not None:
                doc = share_of(spec.base, s.share_of, float(value), f"sweeps.{i}.share_of")
            else:
                doc = set_path(spec.base, s.path or "", value, f"sweeps.{i}.path")
            out.append(
                {"name": f"{s.name}={value}", "request": doc, "axis": s.name, "value": value}
            )
    names: list[str] = [o["name"] for o in out]
    dup = {x for x in names if names.count(x) > 1}
    if dup:
        raise PlanningError.for_field("variants", f"duplicate variant names {sorted(dup)}")
    return out


def check_variants(variants: list[dict[str, Any]], catalog: Catalog | None = None) -> None:
    """Validate every variant's request up front (the schema, and with ``catalog``
    the model, workload and GPU ids): a bad variant fails the whole comparison
    with its field path (``base.<field>`` or ``variants[<name>].<field>``),
    before any solving."""
    for i, v in enumerate(variants):
        check_request(v["request"], "base" if i == 0 else f"variants[{v['name']}]", catalog)


def check_request(doc: Any, prefix: str, catalog: Catalog | None = None) -> None:
    """Validate one request document (the schema, and with ``catalog`` its ids);
    PlanningError with every field prefixed by ``prefix``."""
    from planner.problem_build import parse_request
    from planner.request import resolve_request

    try:
        if not isinstance(doc, Mapping):
            raise PlanningError.for_field("(document)", "must be a mapping (a plan request)")
        request = parse_request(doc)
        if catalog is not None and not request.scenarios:
            resolve_request(request, catalog)
    except PlanningError as err:
        issues = [(f"{prefix}.{f}", m.removeprefix("Value error, ")) for f, m in err.issues]
        message = "; ".join(f"{f}: {m}" for f, m in issues) or f"{prefix}: {err.message}"
        raise type(err)(message, issues) from None


# --------------------------------------------------------------------------- running


def _plan_one(args: tuple) -> dict[str, Any]:
    request, catalog, caps, calibrations, corrections, verify_default = args
    from planner.service import make_plan

    resolve = None
    if calibrations:

        def resolve(name: str) -> Any:
            if name in calibrations:
                return calibrations[name]
            from planner.calibration import load_calibration

            return load_calibration(name)

    try:
        plan = make_plan(
            request,
            catalog,
            caps,
            alternatives=False,
            verify_default=verify_default,
            calibrations=resolve,
            corrections=corrections,
        )
        return {"ok": True, "plan": plan.to_json_dict()}
    except PlanningError as err:
        return {"ok": False, "error": err.code, "detail": err.message, "issues": err.issues}


def run_variants(
    variants: list[dict[str, Any]],
    catalog: Catalog | None = None,
    caps: Any = None,
    *,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    calibrations: Mapping[str, Any] | None = None,
    verify_default: bool | None = None,
    on_result: Callable[[int, dict[str, Any]], None] | None = None,
    ray_address: str | None = None,
) -> list[dict[str, Any]]:
    """Plan every variant, in parallel processes (one per core by default), or as Ray
    tasks on the cluster at ``ray_address`` (:func:`planner.distributed.run_on_ray`; the
    same function on the same inputs, so the same results).

    Returns, in order, ``{"ok": True, "plan": plan_json}`` or ``{"ok": False,
    "error", "detail", "issues"}`` per variant; ``progress(done, total)`` is
    called as variants finish. An exception raised by ``progress`` stops the
    run (variants not yet started are cancelled) and propagates: that is how a
    caller cancels. A variant's ``corrections`` (a plan's ``verification.corrections``)
    are inherited by its plan (``make_plan(..., corrections=)``). ``calibrations`` maps
    names to ``planner.calibration.Calibration`` objects the requests may name (others
    come from the YAML store). ``verify_default``: whether a variant whose request does
    not say is verified (the caller's setting; ``make_plan(..., verify_default=)``).
    ``on_result(index, result)`` is called with each variant's result as it finishes,
    before ``progress`` (a caller stores it there; an exception stops the run too).

    The pool's processes die with this one (:func:`planner.lifetime.die_with_parent`):
    a caller killed outright leaves no solver process behind.
    """
    from catalog.loader import load_catalog

    catalog = catalog or load_catalog()
    workers = workers or os.cpu_count() or 1
    total = len(variants)
    results: list[dict[str, Any] | None] = [None] * total
    cals = dict(calibrations) if calibrations else None
    args = [
        (v["request"], catalog, caps, cals, v.get("corrections"), verify_default) for v in variants
    ]
    if progress:
        progress(0, total)
    if ray_address and total > 1:
        from planner.distributed import run_on_ray

        finished = 0

        def take(index: int, result: dict[str, Any]) -> None:
            nonlocal finished
            results[index] = result
            finished += 1
            if on_result:
                on_result(index, result)
            if progress:
                progress(finished, total)

        run_on_ray(ray_address, _plan_one, args, take)
        return results  # type: ignore[return-value]
    if workers <= 1 or total <= 1:
        for i, a in enumerate(args):
            results[i] = _plan_one(a)
            if on_result:
                on_result(i, results[i])  # type: ignore[arg-type]
            if progress:
                progress(i + 1, total)
        return results  # type: ignore[return-value]
    ctx = process_context()
    with cf.ProcessPoolExecutor(
        max_workers=min(workers, total),
        mp_context=ctx,
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
        futures = {pool.submit(_plan_one, a): i for i, a in enumerate(args)}
        try:
            for done, fut in enumerate(cf.as_completed(futures), start=1):
                index = futures[fut]
                results[index] = fut.result()
                if on_result:
                    on_result(index, results[index])  # type: ignore[arg-type]
                if progress:
                    progress(done, total)
        except BaseException:  # cancelled (or Ctrl-C): wait only for the running ones
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return results  # type: ignore[return-value]


# --------------------------------------------------------------------------- the table


def summarize(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The comparison row of one plan (units in the keys)."""
    classes = plan.get("classes") or []
    return {
        "status": plan["status"],
        "cost_usd_per_hour": plan.get("cost_usd_per_hour"),
        "cost_usd_per_million_tokens": plan.get("cost_usd_per_million_tokens"),
        "gpus_total": plan.get("gpus_total"),
        "gpus_by_type": plan.get("gpus_by_type") or {},
        "pool_ratio_prefill_to_decode": plan.get("pool_ratio_prefill_to_decode"),
        "power_kw": plan.get("power_kw"),
        "modes": {c["name"]: c.get("mode") for c in classes},
        "ttft_ms": {c["name"]: c.get("ttft_ms") for c in classes},
        "tpot_ms": {c["name"]: c.get("tpot_ms") for c in classes},
        "meets_slo": {c["name"]: c.get("meets_slo") for c in classes},
        "infeasible_reasons": plan.get("infeasible_reasons") or [],
    }


def comparison_table(
    variants: list[dict[str, Any]], results: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Rows variant by variant, with the difference from the base's cost."""
    rows = []
    base_cost = None
    for v, r in zip(variants, results, strict=True):
        row: dict[str, Any] = {"variant": v["name"], "axis": v["axis"], "value": v["value"]}
        if r.get("ok"):
            row.update(summarize(r["plan"]))
        else:
            row.update({"status": "error", "error": r.get("detail"), "cost_usd_per_hour": None})
        if v["name"] == "base":
            base_cost = row.get("cost_usd_per_hour")
        rows.append(row)
    for row in rows:
        cost = row.get("cost_usd_per_hour")
        if cost is not None and base_cost:
            row["delta_usd_per_hour"] = cost - base_cost
            row["delta_pct"] = 100.0 * (cost - base_cost) / base_cost
        else:
            row["delta_usd_per_hour"] = None
            row["delta_pct"] = None
    return rows


class ComparisonResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None
    base: dict[str, Any]
    variants: list[dict[str, Any]]  # name, axis, value, request
    table: list[dict[str, Any]]
    plans: list[dict[str, Any] | None]  # plan JSON per variant (None on error)


def compare(
    data: Mapping[str, Any] | ComparisonSpec,
    catalog: Catalog | None = None,
    caps: Any = None,
    *,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    calibrations: Mapping[str, Any] | None = None,
    verify_default: bool | None = None,
    ray_address: str | None = None,
) -> ComparisonResult:
    """Validate, expand, plan every variant (in parallel: local processes, or Ray tasks
    at ``ray_address``) and tabulate."""
    spec = data if isinstance(data, ComparisonSpec) else parse_comparison(data)
    variants = expand(spec)
    if catalog is None:
        from catalog.loader import load_catalog

        catalog = load_catalog()
    check_variants(variants, catalog)
    results = run_variants(
        variants,
        catalog,
        caps,
        workers=workers,
        progress=progress,
        calibrations=calibrations,
        verify_default=verify_default,
        ray_address=ray_address,
    )
    return ComparisonResult(
        name=spec.name,
        base=spec.base,
        variants=[{k: v[k] for k in ("name", "axis", "value", "request")} for v in variants],
        table=comparison_table(variants, results),
        plans=[r["plan"] if r.get("ok") else None for r in results],
    )


def plan_from_json(data: Mapping[str, Any]) -> Plan:
    """Re-validate a stored plan JSON (for reports)."""
    return Plan.model_validate(data)
