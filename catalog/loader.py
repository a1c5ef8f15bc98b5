"""Load the catalog from YAML files (one entry per file) and check it.

``load_catalog()`` reads ``catalog/data/{gpus,models,workloads,links}/*.yaml``,
validates each file against its pydantic schema, checks cross references
(a GPU's links exist and are of the right kind; ids match file names) and
computes a content hash over the canonical JSON of every entry, so a plan can
record exactly which catalog it was made with.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from catalog.schema import Catalog, Gpu, Link, LinkKind, Model, Workload

DATA_DIR = Path(__file__).parent / "data"

KIND_SCHEMAS: dict[str, type[BaseModel]] = {
    "gpus": Gpu,
    "models": Model,
    "workloads": Workload,
    "links": Link,
}


class CatalogError(ValueError):
    """A catalog file or entry is invalid. ``issues`` lists (field, message) pairs."""

    code = "catalog_invalid"

    def __init__(self, message: str, issues: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.issues = issues or []


def _format_validation(err: ValidationError) -> list[tuple[str, str]]:
    return [(".".join(str(p) for p in e["loc"]) or "(root)", e["msg"]) for e in err.errors()]


def parse_entry(kind: str, data: Any, where: str) -> BaseModel:
    """Validate one raw entry (a mapping) as ``kind``; errors name ``where`` and the field."""
    schema = KIND_SCHEMAS.get(kind)
    if schema is None:
        raise CatalogError(f"unknown catalog kind {kind!r}", [("kind", "unknown")])
    if not isinstance(data, Mapping):
        raise CatalogError(f"{where}: expected a mapping, got {type(data).__name__}")
    try:
        return schema.model_validate(dict(data))
    except ValidationError as err:
        issues = _format_validation(err)
        text = "; ".join(f"{f}: {m}" for f, m in issues)
        raise CatalogError(f"{where}: {text}", issues) from None


def load_entries(data_dir: Path = DATA_DIR) -> dict[str, dict[str, BaseModel]]:
    """Read and validate every YAML file under ``data_dir``, by kind and id."""
    out: dict[str, dict[str, BaseModel]] = {}
    for kind in KIND_SCHEMAS:
        entries: dict[str, BaseModel] = {}
        for path in sorted((data_dir / kind).glob("*.yaml")):
            try:
                raw = yaml.safe_load(path.read_text(encoding="utf-8"))
            except yaml.YAMLError as err:
                raise CatalogError(f"{path}: not valid YAML: {err}") from None
            entry = parse_entry(kind, raw, str(path))
            if entry.id != path.stem:  # type: ignore[attr-defined]
                raise CatalogError(
                    f"{path}: id {entry.id!r} does not match the file name",  # type: ignore[attr-defined]
                    [("id", "must equal the file name without .yaml")],
                )
            entries[entry.id] = entry  # type: ignore[attr-defined]
        out[kind] = entries
    return out


def check_references(entries: Mapping[str, Mapping[str, BaseModel]]) -> None:
    """Every GPU's scale-up, PCIe and network link exists and has the right kind, its
    predecessor (if any) is another GPU of the same vendor, and every LLM its own-run
    checks name is a catalog model."""
    links: Mapping[str, Link] = entries["links"]  # type: ignore[assignment]
    problems: list[tuple[str, str]] = []
    for gpu in entries["gpus"].values():
        assert isinstance(gpu, Gpu)
        wanted = [
            ("scale_up_link", gpu.scale_up_link, LinkKind.SCALE_UP),
            ("pcie_link", gpu.pcie_link, LinkKind.PCIE),
            ("network_link", gpu.network_link, LinkKind.NETWORK),
        ]
        for field, link_id, kind in wanted:
            if link_id is None:
                continue
            link = links.get(link_id)
            if link is None:
                problems.append((f"gpus.{gpu.id}.{field}", f"unknown link {link_id!r}"))
            elif link.kind != kind:
                problems.append(
                    (f"gpus.{gpu.id}.{field}", f"link {link_id!r} is {link.kind}, not {kind}")
                )
        borrowed = gpu.efficiency.dense_level_from
        if borrowed not in (None, "self") and (
            borrowed == gpu.id or borrowed not in entries["gpus"]
        ):
            problems.append(
                (
                    f"gpus.{gpu.id}.efficiency.dense_level_from",
                    f"unknown GPU {borrowed!r} (another catalog GPU id, or 'self')",
                )
            )
        if gpu.predecessor is not None:
            before = entries["gpus"].get(gpu.predecessor)
            if gpu.predecessor == gpu.id:
                problems.append(
                    (f"gpus.{gpu.id}.predecessor", "a GPU cannot be its own predecessor")
                )
            elif before is None:
                problems.append(
                    (
                        f"gpus.{gpu.id}.predecessor",
                        f"unknown GPU {gpu.predecessor!r} (another catalog GPU id)",
                    )
                )
            elif before.vendor != gpu.vendor:  # type: ignore[attr-defined]
                problems.append(
                    (
                        f"gpus.{gpu.id}.predecessor",
                        f"{gpu.predecessor!r} is a {before.vendor} GPU, not {gpu.vendor}"  # type: ignore[attr-defined]
                        " (a predecessor is the same vendor's previous generation)",
                    )
                )
        if gpu.scale_up_link is None and gpu.scale_up_domain_size > 1:
            problems.append(
                (f"gpus.{gpu.id}.scale_up_domain_size", "a domain > 1 needs a scale_up_link")
            )
        for llm in gpu.efficiency.own_llm_ratio:
            if llm not in entries["models"]:
                problems.append(
                    (
                        f"gpus.{gpu.id}.efficiency.own_llm_ratio.{llm}",
                        f"unknown model {llm!r} (a catalog model id)",
                    )
                )
    if problems:
        raise CatalogError("; ".join(f"{f}: {m}" for f, m in problems), problems)


def content_hash(entries: Mapping[str, Mapping[str, BaseModel]]) -> str:
    """sha256 over the canonical JSON of every entry, sorted by kind and id."""
    canonical = {
        kind: {eid: e.model_dump(mode="json") for eid, e in sorted(by_id.items())}
        for kind, by_id in sorted(entries.items())
    }
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def build_catalog(entries: Mapping[str, Mapping[str, BaseModel]]) -> Catalog:
    """Check references and assemble a :class:`Catalog` with its content hash."""
    check_references(entries)
    return Catalog(
        gpus=dict(entries["gpus"]),  # type: ignore[arg-type]
        models=dict(entries["models"]),  # type: ignore[arg-type]
        workloads=dict(entries["workloads"]),  # type: ignore[arg-type]
        links=dict(entries["links"]),  # type: ignore[arg-type]
        content_hash=content_hash(entries),
    )


def load_catalog(data_dir: Path | str | None = None) -> Catalog:
    """Load, validate and hash the catalog under ``data_dir`` (default: shipped data)."""
    if data_dir is None:
        return _load_shipped()
    return build_catalog(load_entries(Path(data_dir)))


@lru_cache(maxsize=1)
def _load_shipped() -> Catalog:
    return build_catalog(load_entries(DATA_DIR))


def with_entries(base: Catalog, extra: Mapping[str, Mapping[str, BaseModel]]) -> Catalog:
    """A catalog with ``extra`` entries added (custom entries); ids must be new."""
    merged: dict[str, dict[str, BaseModel]] = {
        "gpus": dict(base.gpus),
        "models": dict(base.models),
        "workloads": dict(base.workloads),
        "links": dict(base.links),
    }
    for kind, by_id in extra.items():
        for eid, entry in by_id.items():
            if eid in merged[kind]:
                raise CatalogError(
                    f"{kind}.{eid}: already in the catalog", [(f"{kind}.{eid}", "duplicate id")]
                )
            merged[kind][eid] = entry
    return build_catalog(merged)
