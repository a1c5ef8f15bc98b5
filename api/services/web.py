"""What the web page (``/``, ``api/static/app``) needs beyond the REST API: the shipped
example requests as parsed JSON, and the colour of each GPU type (the reports' own,
``planner.report.charts``, so a GPU has one colour in the page and in every report).

The examples are the YAML files of the repository's ``examples/`` folder. Each is
read with ``yaml.safe_load`` (no tags, no objects) when asked for; a file that does
not parse to a mapping is left out of the list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy.orm import Session

from api.services.catalog import merged_catalog
from api.services.errors import NotFound
from catalog.schema import Catalog
from planner.report.charts import EXTRA_COLORS, GPU_COLORS, gpu_colors
from planner.request import PlanRequest, resolve_request

#: The shipped example requests (``examples/*.yaml`` at the repository root).
EXAMPLES_DIR = Path(__file__).resolve().parent.parent.parent / "examples"
#: An example's name: its file name without ``.yaml`` (nothing else is served).
EXAMPLE_NAME = re.compile(r"^[a-z0-9][a-z0-9._\-]{0,99}$")


@dataclass(frozen=True)
class Example:
    """One shipped example: its name, kind, title and the comment that explains it."""

    name: str
    kind: str  # "plan" (a plan request) or "comparison" (a what-if document)
    title: str
    description: str


def _leading_comment(text: str) -> str:
    """The comment lines at the top of a YAML file, joined into one paragraph."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(x for x in lines if x)


def _kind(doc: dict[str, Any]) -> str:
    return "comparison" if "base" in doc else "plan"


def _read(path: Path) -> tuple[str, dict[str, Any]] | None:
    """The file's text and its document, or None when it is not a YAML mapping."""
    try:
        text = path.read_text(encoding="utf-8")
        doc = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return (text, doc) if isinstance(doc, dict) else None


def list_examples(directory: Path = EXAMPLES_DIR) -> list[Example]:
    """Every example in ``directory``, by name (empty when the folder is absent, as in
    an installed wheel without the repository)."""
    out = []
    for path in sorted(directory.glob("*.yaml")) if directory.is_dir() else []:
        if not EXAMPLE_NAME.match(path.stem):
            continue
        read = _read(path)
        if read is None:
            continue
        text, doc = read
        name = doc.get("name")
        title = name if isinstance(name, str) else path.stem
        out.append(Example(path.stem, _kind(doc), title, _leading_comment(text)))
    return out


def load_example(name: str, directory: Path = EXAMPLES_DIR) -> dict[str, Any]:
    """The example ``name`` as a JSON-able document, with its kind; :class:`NotFound`
    for a name that is not a shipped example (the name is never used as a path before
    it matched one of the listed files)."""
    known = {e.name: e for e in list_examples(directory)}
    if name not in known:
        raise NotFound("name", f"no example {name[:100]!r}")
    read = _read(directory / f"{name}.yaml")
    if read is None:  # removed or broken since it was listed
        raise NotFound("name", f"no example {name[:100]!r}")
    example = known[name]
    return {
        "name": example.name,
        "kind": example.kind,
        "title": example.title,
        "description": example.description,
        "document": read[1],
    }


def gpu_palette(gpu_ids: list[str]) -> dict[str, str]:
    """A colour per GPU id, as the reports draw it (shipped types their fixed colour,
    custom ones a stable colour of their own)."""
    return gpu_colors(gpu_ids)


def validate_plan_request(session: Session, request: PlanRequest, shipped: Catalog) -> list[str]:
    """Check a schema-valid plan request against the merged catalog (model, workloads,
    GPUs, calibration-free checks of ``resolve_request``) without planning it: the
    warnings the plan would carry; a ``PlanningError`` (422 naming the field) when an
    id is unknown or the request cannot be resolved."""
    catalog = merged_catalog(session, shipped)
    session.rollback()  # a read only
    return list(resolve_request(request, catalog).warnings)


__all__ = [
    "EXTRA_COLORS",
    "GPU_COLORS",
    "Example",
    "gpu_palette",
    "list_examples",
    "load_example",
    "validate_plan_request",
]
