"""Procurement reports of stored plans and comparisons, in four formats.

The API and the CLI call these pure functions (no HTTP, no database):

* :func:`render_plan_report` (``record`` = ``{"id", "created_at", "request",
  "plan", "sensitivity"?}``) and :func:`render_comparison_report`
  (``planner.compare.compare(...).model_dump()`` plus ``"id"``/``"created_at"``)
  return ``(content, media type)`` for ``fmt`` in ``html | md | csv | json | xlsx``
  (text, bytes for ``xlsx``).
* :func:`sensitivity` re-plans a request at traffic x1.5 and x2 and at its mix
  shifted by 20 points; the API computes it once and stores it with the
  record, and the plan report shows it when present.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from catalog.schema import Catalog
from planner.errors import PlanningError
from planner.report import xlsx
from planner.report.bom import build_bom
from planner.report.comparison_document import comparison_document
from planner.report.csv_bom import render_bom_csv
from planner.report.html import render_html
from planner.report.markdown import render_markdown
from planner.report.plan_document import plan_document

FORMATS = ("html", "md", "csv", "json", "xlsx")
MEDIA_TYPES = {
    "html": "text/html; charset=utf-8",
    "md": "text/markdown; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
    "json": "application/json",
    "xlsx": xlsx.MEDIA_TYPE,
}


def check_format(fmt: str) -> str:
    """The format name, lower-cased; a :class:`PlanningError` on ``format`` otherwise."""
    f = (fmt or "").lower()
    if f == "markdown":
        f = "md"
    if f not in FORMATS:
        raise PlanningError.for_field(
            "format", f"unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}"
        )
    return f


def _catalog(catalog: Catalog | None) -> Catalog:
    if catalog is not None:
        return catalog
    from catalog.loader import load_catalog

    return load_catalog()


def _json(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"


def render_plan_report(
    record: Mapping[str, Any], fmt: str, catalog: Catalog | None = None
) -> tuple[str | bytes, str]:
    """A stored plan's procurement report as ``(content, media type)``.

    ``html``: one stand-alone page with inline SVG charts; ``md``: the same
    content as GitHub-flavoured Markdown; ``csv``: the bill of materials alone;
    ``json``: the record with its bill of materials (and sensitivity); ``xlsx``
    (bytes): bill of materials, pools and TCO sheets (:mod:`planner.report.xlsx`).
    """
    f = check_format(fmt)
    catalog = _catalog(catalog)
    plan = record.get("plan") or {}
    if f == "csv":
        return render_bom_csv(build_bom(plan, catalog)), MEDIA_TYPES[f]
    if f == "xlsx":
        return xlsx.render_plan_xlsx(plan, build_bom(plan, catalog)), MEDIA_TYPES[f]
    if f == "json":
        doc = {
            "kind": "plan_report",
            "id": record.get("id"),
            "created_at": record.get("created_at"),
            "request": record.get("request"),
            "plan": plan,
            "bom": build_bom(plan, catalog).to_json_dict(),
            "sensitivity": record.get("sensitivity"),
        }
        return _json(doc), MEDIA_TYPES[f]
    document = plan_document(record, catalog, with_charts=(f == "html"))
    text = render_html(document) if f == "html" else render_markdown(document)
    return text, MEDIA_TYPES[f]


def render_comparison_report(
    comparison: Mapping[str, Any], fmt: str, catalog: Catalog | None = None
) -> tuple[str | bytes, str]:
    """A stored comparison's report as ``(content, media type)``; ``csv`` is the
    comparison table (one row per variant: cost, change against the base, GPUs, power,
    per class its mode and latencies); ``xlsx`` (bytes) that table and every variant's
    bill of materials (the JSON has them too)."""
    f = check_format(fmt)
    catalog = _catalog(catalog)
    variants = comparison.get("variants") or []
    plans = comparison.get("plans") or []
    names = [str(v.get("name")) for v in variants]
    boms = {
        name: build_bom(plan, catalog) if plan else None
        for name, plan in zip(names, plans, strict=False)
    }
    if f == "csv":
        return xlsx.render_comparison_table_csv(comparison.get("table") or []), MEDIA_TYPES[f]
    if f == "xlsx":
        table = comparison.get("table") or []
        return xlsx.render_comparison_xlsx(table, boms), MEDIA_TYPES[f]
    if f == "json":
        doc = {
            "kind": "comparison_report",
            **{k: v for k, v in comparison.items()},
            "boms": {k: (b.to_json_dict() if b else None) for k, b in boms.items()},
        }
        return _json(doc), MEDIA_TYPES[f]
    document = comparison_document(comparison, catalog, with_charts=(f == "html"))
    text = render_html(document) if f == "html" else render_markdown(document)
    return text, MEDIA_TYPES[f]


# --------------------------------------------------------------------------- sensitivity
