"""Calibrations: fit efficiency factors to measurements and store them by name.

``POST /calibrations`` takes a name and a list of measurements (the fields of
``planner.calibration.Measurement``: the CSV's columns, plus ``request_rate_rps``,
``engine``...), fits prefill MFU, decode MBU and per-step overhead per GPU and
dtype (scipy least squares; a few seconds for a hundred points, so the route runs
in the threadpool), stores the calibration in the ``calibrations`` table and
returns it with every point's residuals. Any bad measurement (unknown model or
GPU, missing or negative values) is a 422 naming ``measurements.<i>`` and the
reason, and nothing is stored; an existing name is a 409.

``GET /calibrations`` lists them, ``GET /calibrations/{name}`` returns one. A plan
request (``calibration: NAME``) and ``POST /analyses/capacity`` use them; the
name is looked up in the database first, then in the YAML store the CLI writes
(``$FLEETPLAN_CALIBRATION_DIR``): ``api.services.calibrations.resolve_calibration``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from api.deps import SessionDep, WriteAccess, run_heavy
from api.jsonbody import JsonBodyRoute
from api.schemas import error_responses
from api.schemas.calibrations import Calibration, CalibrationCreate, CalibrationSummary
from api.services import calibrations
from api.services.catalog import merged_catalog

router = APIRouter(prefix="/calibrations", tags=["calibrations"], route_class=JsonBodyRoute)


@router.post(
    "",
    status_code=201,
    response_model=Calibration,
    dependencies=[WriteAccess],
    responses=error_responses(401, 409, 413, 415, 422),
    summary="Fit a calibration to measurements and store it",
)
async def create_calibration(
    body: CalibrationCreate, request: Request, response: Response, session: SessionDep
) -> Calibration:
    """Fit per GPU and dtype (and engine with ``per_engine``), store, and return the
    calibration with each measured value's prediction before and after the fit."""

    def fit_and_store() -> Calibration:  # CPU-heavy: on the work threads
        catalog = merged_catalog(session, request.app.state.catalog)
        cal = calibrations.create_calibration(session, body, catalog)
        session.commit()
        return cal

    cal = await run_heavy(request, fit_and_store)
    response.headers["Location"] = f"/calibrations/{cal.name}"
    return cal


@router.get(
    "",
    response_model=list[CalibrationSummary],
    summary="List stored calibrations",
)
def list_calibrations(session: SessionDep) -> list[CalibrationSummary]:
    """Name, creation time and the (GPU, dtype, engine) groups of each calibration."""
    return calibrations.list_calibrations(session)


@router.get(
    "/{name}",
    response_model=Calibration,
    responses=error_responses(404),
    summary="Get one stored calibration",
)
def get_calibration(name: Annotated[str, Path(max_length=64)], session: SessionDep) -> Calibration:
    """The fitted factors per group, their errors and every point's residuals."""
    return calibrations.get_calibration(session, name)
