"""Procurement reports: ``GET /plans/{id}/report`` and ``GET /comparisons/{id}/report``.

``format``: ``html`` (a stand-alone page with inline charts; the default), ``md``
(the same content as Markdown), ``csv`` (the bill of materials; a comparison's has
one per variant) or ``json`` (the record with its bill of materials). Rendering is
``planner.report``; this module only finds the records and sets the headers.

A plan report includes a sensitivity table (the cheapest fleet at traffic x1.5 and
x2 and at the largest class's share -20/+20 points, each re-planned). Re-planning
takes a few seconds for a small fleet and about 13 s for the 80/20 example, so it
is computed once, by the first report that needs it, and cached in the plan's
``report_extras``; later reports are immediate. ``sensitivity=false`` skips the
computation (a cached table is still shown). The CSV needs none.

A comparison that is still running has no report yet (409), nor does a failed one.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from api.deps import SessionDep, SettingsDep, run_heavy
from api.schemas import error_responses
from api.services import reports

router = APIRouter(tags=["reports"])


class ReportFormat(StrEnum):
    HTML = "html"
    MD = "md"
    CSV = "csv"
    JSON = "json"
    XLSX = "xlsx"


FormatQuery = Annotated[
    ReportFormat,
    Query(
        alias="format",
        description="`html` (stand-alone page), `md` (Markdown), `csv` (bill of materials), "
        "`json` (the record with its bill of materials), `xlsx` (an Excel workbook: a "
        "comparison's table and bills of materials; a plan's bill of materials, pools "
        "and TCO).",
    ),
]

REPORT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The report, in the format asked for.",
        "content": {
            "text/html": {"schema": {"type": "string"}},
            "text/markdown": {"schema": {"type": "string"}},
            "text/csv": {"schema": {"type": "string"}},
            "application/json": {"schema": {"type": "object"}},
            reports.XLSX_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}},
        },
    }
}

EXTENSIONS = {"html": "html", "md": "md", "csv": "csv", "json": "json", "xlsx": "xlsx"}


def report_response(report: reports.Report, fmt: ReportFormat) -> Response:
    """The report with its media type; CSV, Markdown and XLSX as attachments to save."""
    saved = (ReportFormat.CSV, ReportFormat.MD, ReportFormat.XLSX)
    disposition = "attachment" if fmt in saved else "inline"
    filename = f"{report.stem}.{EXTENSIONS[fmt.value]}"
    return Response(
        content=report.text,
        media_type=report.media_type,
        headers={"Content-Disposition": f'{disposition}; filename="{filename}"'},
    )


@router.get(
    "/plans/{plan_id}/report",
    response_class=Response,
    responses={**REPORT_RESPONSES, **error_responses(404, 422)},
    summary="A stored plan's procurement report",
)
async def plan_report(
    plan_id: str,
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    fmt: FormatQuery = ReportFormat.HTML,
    with_sensitivity: Annotated[
        bool,
        Query(
            alias="sensitivity",
            description="Compute the sensitivity table if not cached yet (the first time "
            "takes a few seconds to ~15 s: four re-plans). `false`: show it only if cached.",
        ),
    ] = True,
) -> Response:
    """The bill of materials, the fleet, the classes and their latencies, the
    verification, the alternatives and the sensitivity, in one document."""
    report = await run_heavy(
        request,
        reports.stored_plan_report,
        session,
        plan_id,
        fmt.value,
        request.app.state.catalog,
        settings,
        with_sensitivity=with_sensitivity,
    )
    return report_response(report, fmt)


@router.get(
    "/comparisons/{comparison_id}/report",
    response_class=Response,
    responses={**REPORT_RESPONSES, **error_responses(404, 409, 422)},
    summary="A comparison's report (409 while it runs)",
)
async def comparison_report(
    comparison_id: str, request: Request, session: SessionDep, fmt: FormatQuery = ReportFormat.HTML
) -> Response:
    """The variants against the base (cost, GPUs, modes, latencies), the sweeps as
    charts, and each variant's bill of materials."""
    report = await run_heavy(
        request,
        reports.stored_comparison_report,
        session,
        comparison_id,
        fmt.value,
        request.app.state.catalog,
    )
    return report_response(report, fmt)
