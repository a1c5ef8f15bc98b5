"""Plans: ``POST /plans`` plans a fleet and stores it; read, list and delete them.

``POST /plans`` is a plain ``def`` route, so FastAPI runs it in its threadpool: the
planner is CPU-bound (up to a few seconds) and the event loop keeps serving other
requests meanwhile. The route owns the transaction: it reads the custom catalog
entries, ends that read (no connection is held while solving), plans, then writes
and commits the record. Any failure before the commit writes nothing.

Answers, decided here and documented in the README:

- a request that is valid but cannot be met (an SLO no GPU reaches, a budget too
  small) is *not* an error: it is a plan with status ``infeasible`` and the
  reasons, stored and returned with 201 like any other;
- bad input is 422 naming the field: schema violations, ids missing from the
  catalog (model, GPU, workload), NaN/Infinity or duplicate keys in the JSON;
- a body that is not JSON is 415, one over ``FLEETPLAN_MAX_BODY_BYTES`` 413.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from api.custom_catalog import merged_catalog
from api.db import repository as repo
from api.db.models import PlanRecord, PlanStatus
from api.deps import SessionDep, SettingsDep, WriteAccess
from api.errors import ApiError, not_found
from api.jsonbody import JsonBodyRoute
from api.plan_records import (
    BadCursor,
    build_plan_record,
    decode_cursor,
    encode_cursor,
    plan_public,
    plan_summary,
    solver_caps,
)
from api.routes.calibrations import preload_calibration
from api.schemas import PlanPage, PlanPublic, SimulationCreate, error_responses
from planner.request import PlanRequest
from planner.service import make_plan
from planner.simulate.results import SimulationResult
from solver.problem import has_solution

router = APIRouter(prefix="/plans", tags=["plans"], route_class=JsonBodyRoute)

MODEL_ID_PATTERN = r"^[a-z0-9][a-z0-9.\-]*$"  # catalog ids (catalog.schema.Id)
MAX_PAGE = 200


async def posted_json(request: Request) -> Any:
    """The body as posted (parsed strictly, once, for the typed parameter too). None
    when there is no usable body: the typed parameter then reports the error."""
    if not await request.body():
        return None
    try:
        return await request.json()
    except ValueError:
        return None


PostedJson = Annotated[Any, Depends(posted_json)]


def _plan_or_404(session: SessionDep, plan_id: str) -> PlanRecord:
    """The plan, or a 404; only well-formed UUIDs are looked up in the database."""
    detail = f"no plan with id {plan_id[:80]!r}"
    try:
        uuid.UUID(plan_id)
    except ValueError:
        raise not_found("id", detail) from None
    record = repo.get_plan(session, plan_id)
    if record is None:
        raise not_found("id", detail)
    return record


@router.post(
    "",
    status_code=201,
    response_model=PlanPublic,
    dependencies=[WriteAccess],
    responses=error_responses(401, 413, 415, 422),
    summary="Plan a fleet and store the plan",
)
def create_plan(
    body: PlanRequest,
    posted: PostedJson,
    request: Request,
    response: Response,
    session: SessionDep,
    settings: SettingsDep,
) -> PlanPublic:
    """Validate the request, plan the fleet (shipped + custom catalog entries) and
    store the plan, infeasible ones included (201 with ``status: infeasible`` and
    ``plan.infeasible_reasons``). The solver's time limit and gap are the request's
    ``solver`` options, capped by the server's settings."""
    catalog = merged_catalog(session, request.app.state.catalog)
    calibrations = preload_calibration(session, body.calibration)
    session.rollback()  # end the read: no connection is held while solving
    caps = solver_caps(settings)
    plan = make_plan(body, catalog, caps, calibrations=calibrations)
    record = build_plan_record(posted, body, plan, caps)
    repo.add_plan(session, record)
    session.commit()
    response.headers["Location"] = f"/plans/{record.id}"
    return plan_public(record)


@router.get(
    "",
    response_model=PlanPage,
    responses=error_responses(422),
    summary="List stored plans, newest first",
)
def list_plans(
    session: SessionDep,
    model: Annotated[
        str | None, Query(max_length=64, pattern=MODEL_ID_PATTERN, description="Model id.")
    ] = None,
    status: Annotated[PlanStatus | None, Query(description="Plan status.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    cursor: Annotated[
        str | None,
        Query(
            max_length=200,
            pattern=r"^[A-Za-z0-9_\-]+$",
            description="`next_cursor` of the previous page (instead of `offset`).",
        ),
    ] = None,
) -> PlanPage:
    """Summaries of stored plans (no documents: ``GET /plans/{id}`` has them), with
    the total matching the filters. Page by ``offset`` or, stable under inserts, by
    ``cursor``."""
    after = None
    if cursor is not None:
        if offset:
            raise ApiError(
                422,
                "invalid_input",
                "pass either cursor or offset, not both",
                [("offset", "must be 0 with a cursor")],
            )
        try:
            after = decode_cursor(cursor)
        except BadCursor as err:
            raise ApiError(422, "invalid_input", str(err), [("cursor", str(err))]) from None
    records = repo.list_plans(
        session, model_id=model, status=status, limit=limit + 1, offset=offset, after=after
    )
    more = len(records) > limit
    records = records[:limit]
    total = repo.count_plans(session, model_id=model, status=status)
    return PlanPage(
        items=[plan_summary(r) for r in records],
        total=total,
        limit=limit,
        offset=None if cursor is not None else offset,
        next_cursor=encode_cursor(records[-1]) if more and records else None,
    )


@router.get(
    "/{plan_id}",
    response_model=PlanPublic,
    responses=error_responses(404),
    summary="Get one stored plan",
)
def get_plan(plan_id: str, session: SessionDep) -> PlanPublic:
    """The stored plan with its request, normalized request, solver options and plan."""
    return plan_public(_plan_or_404(session, plan_id))


@router.delete(
    "/{plan_id}",
    status_code=204,
    dependencies=[WriteAccess],
    responses=error_responses(401, 404, 409),
    summary="Delete a stored plan",
)
def delete_plan(plan_id: str, session: SessionDep) -> Response:
    """204; 409 for a variant's plan (delete its comparison: ``DELETE /comparisons/{id}``)."""
    record = _plan_or_404(session, plan_id)
    if record.comparison_id is not None:
        why = (
            f"the plan of variant {record.variant_name!r} of comparison {record.comparison_id}; "
            "delete the comparison instead"
        )
        raise ApiError(409, "conflict", why, [("id", why)])
    session.delete(record)
    session.commit()
    return Response(status_code=204)


@router.post(
    "/{plan_id}/simulations",
    response_model=SimulationResult,
    response_model_by_alias=True,
    dependencies=[WriteAccess],
    responses=error_responses(401, 404, 409, 415, 422),
    summary="Simulate a stored plan's fleet under load",
)
def simulate_stored_plan(
    plan_id: str,
    request: Request,
    session: SessionDep,
    body: SimulationCreate | None = None,
) -> SimulationResult:
    """Run the plan's fleet in the discrete-event simulator (planner.simulate) at the
    rates it was planned for: per class TTFT/TPOT percentiles, SLO attainment and
    goodput, per pool utilization and queues. Seeded and reproducible; computed on
    demand, not stored. 409 when the plan has no fleet (infeasible) or is robust
    (its ``verification`` section simulates each scenario)."""
    from api.cli_simulate import catalog_for_record, stored_request
    from planner.simulate import simulate_plan

    opts = body or SimulationCreate()
    record = _plan_or_404(session, plan_id)
    plan = record.plan or {}
    if not has_solution(plan.get("status")) or plan.get("scenarios"):
        why = (
            "a robust plan: its verification section simulates every scenario"
            if plan.get("scenarios")
            else f"the plan is {record.status.value}: there is no fleet to simulate"
        )
        raise ApiError(409, "conflict", why, [("id", why)])
    catalog = catalog_for_record(session, record, request.app.state.catalog)
    request_doc = stored_request(record)
    session.rollback()  # hold no connection while simulating
    return simulate_plan(plan, request_doc, catalog, opts.requests, opts.seed, opts.burst_cv)
