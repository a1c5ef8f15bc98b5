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
(``$FLEETPLAN_CALIBRATION_DIR``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from api.custom_catalog import merged_catalog
from api.db import calibrations as repo
from api.deps import SessionDep, WriteAccess
from api.errors import ApiError, not_found
from api.jsonbody import JsonBodyRoute
from api.schemas import error_responses
from planner import calibration as cb
from planner.errors import UnknownEntryError

router = APIRouter(prefix="/calibrations", tags=["calibrations"], route_class=JsonBodyRoute)

MAX_MEASUREMENTS = 2000


class CalibrationCreate(BaseModel):
    """A calibration to fit: its name and the measured points."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=cb.NAME_PATTERN, max_length=64)
    description: str = Field(default="", max_length=2000)
    per_engine: bool = Field(default=False, description="Fit separate factors per engine.")
    measurements: list[cb.Measurement] = Field(min_length=1, max_length=MAX_MEASUREMENTS)


class CalibrationGroup(BaseModel):
    gpu: str
    dtype: str | None
    engine: str | None
    points: int


class CalibrationSummary(BaseModel):
    name: str
    created_at: str
    groups: list[CalibrationGroup]


def stored_calibration(session: Session, name: str) -> cb.Calibration | None:
    record = repo.get_calibration(session, name)
    if record is None:
        return None
    return cb.parse_calibration(record.body, f"stored calibration {name!r}")


def find_calibration(session: Session, name: str) -> cb.Calibration:
    """The calibration ``name``: the database's, else the YAML store's
    (UnknownEntryError on field ``calibration`` when neither has it)."""
    cb.check_name(name, "calibration")
    cal = stored_calibration(session, name)
    if cal is not None:
        return cal
    try:
        return cb.load_calibration(name)
    except UnknownEntryError:
        known = [r.name for r in repo.list_calibrations(session)]
        known += cb.list_calibration_names()
        raise UnknownEntryError.for_field(
            "calibration",
            f"no calibration {name!r} (known: {', '.join(sorted(set(known))) or 'none'})",
        ) from None


def preload_calibration(
    session: Session, name: str | None
) -> Callable[[str], cb.Calibration] | None:
    """Read the named calibration now (before the session's read ends) and return a
    resolver for the planner, or None when no calibration is named."""
    if name is None:
        return None
    cal = find_calibration(session, name)
    return lambda _name: cal


@router.post(
    "",
    status_code=201,
    response_model=cb.Calibration,
    dependencies=[WriteAccess],
    responses=error_responses(401, 409, 413, 415, 422),
    summary="Fit a calibration to measurements and store it",
)
def create_calibration(
    body: CalibrationCreate, request: Request, response: Response, session: SessionDep
) -> cb.Calibration:
    """Fit per GPU and dtype (and engine with ``per_engine``), store, and return the
    calibration with each measured value's prediction before and after the fit."""
    if repo.get_calibration(session, body.name) is not None:
        detail = f"a calibration named {body.name!r} already exists"
        raise ApiError(409, "conflict", detail, [("name", detail)])
    catalog = merged_catalog(session, request.app.state.catalog)
    session.rollback()  # no connection held while fitting
    issues = []
    points = []
    for i, m in enumerate(body.measurements):
        where = f"measurements.{i}"
        resolved = cb.resolve_model(catalog, m.model) or m.model
        m = m.model_copy(update={"model": resolved, "where": where})
        why = cb.check_measurement(m, catalog)
        if why is None:
            points.append(m)
        else:
            issues.append((where, why))
    if issues:
        raise cb.measurement_error(issues)
    cal = cb.fit_calibration(
        body.name, points, catalog, per_engine=body.per_engine, description=body.description
    )
    repo.add_calibration(session, cal.name, cal.model_dump(mode="json"))
    session.commit()
    response.headers["Location"] = f"/calibrations/{cal.name}"
    return cal


@router.get(
    "",
    response_model=list[CalibrationSummary],
    summary="List stored calibrations",
)
def list_calibrations(session: SessionDep) -> list[CalibrationSummary]:
    """Name, creation time and the (GPU, dtype, engine) groups of each calibration."""
    out = []
    for record in repo.list_calibrations(session):
        cal = cb.parse_calibration(record.body, f"stored calibration {record.name!r}")
        out.append(CalibrationSummary.model_validate(cal.summary()))
    return out


@router.get(
    "/{name}",
    response_model=cb.Calibration,
    responses=error_responses(404),
    summary="Get one stored calibration",
)
def get_calibration(
    name: Annotated[str, Path(max_length=64)], session: SessionDep
) -> cb.Calibration:
    """The fitted factors per group, their errors and every point's residuals."""
    cal = stored_calibration(session, name)
    if cal is None:
        raise not_found("name", f"no calibration named {name[:80]!r}")
    return cal
