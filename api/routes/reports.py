"""Procurement reports: ``GET /plans/{id}/report`` and ``GET /comparisons/{id}/report``.

``format``: ``html`` (a stand-alone page with inline charts; the default), ``md``
(the same content as Markdown), ``csv`` (a plan's bill of materials; a comparison's
table, one row per variant), ``json`` (the record with its bill of materials) or ``xlsx`` (a
workbook). Rendering is ``planner.report``; this module only finds the records and
sets the headers.

A plan report includes a sensitivity table (the cheapest fleet at traffic x1.5 and
x2 and at the largest class's share -20/+20 points, each re-planned). Re-planning
takes a few seconds for a small fleet and about 13 s for the 80/20 example, so it
is computed once and cached in the plan's ``report_extras``; later reports are
immediate. By default (``sensitivity=auto``) the first HTML or Markdown report does
not wait for it: it answers at once, says the table is being computed in the
background, and the next report shows it; a JSON report waits. ``sensitivity=wait``
always waits, ``cached`` (or ``false``) skips the computation. CSV and XLSX need none.

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


class SensitivityMode(StrEnum):
    AUTO = "auto"
    WAIT = "wait"
    BACKGROUND = "background"
    CACHED = "cached"
    TRUE = "true"
    FALSE = "false"


#: What each mode asks of api.services.reports.plan_report.
SENSITIVITY_MODES: dict[SensitivityMode, bool | str] = {
    SensitivityMode.AUTO: "auto",
    SensitivityMode.WAIT: "wait",
    SensitivityMode.BACKGROUND: "background",
    SensitivityMode.CACHED: "cached",
    SensitivityMode.TRUE: "wait",
    SensitivityMode.FALSE: "cached",
}


FormatQuery = Annotated[
    ReportFormat,
    Query(
        alias="format",
        description="`html` (stand-alone page), `md` (Markdown), `csv` (a plan's bill of "
        "materials, a comparison's table), "
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
    sensitivity: Annotated[
        SensitivityMode,
        Query(
            description="The sensitivity table (four re-plans, 10-30 s the first time, "
            "then cached): `auto` (default) computes it before answering a JSON report, "
            "while an HTML or Markdown report answers at once and says it is being "
            "computed in the background (reload to see it); `wait` (or `true`) always "
            "computes it first; `background` never waits; `cached` (or `false`) shows it "
            "only if already computed.",
        ),
    ] = SensitivityMode.AUTO,
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
        with_sensitivity=SENSITIVITY_MODES[sensitivity],
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
