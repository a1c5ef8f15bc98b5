"""Plans: ``POST /plans`` plans a fleet and stores it; read, list and delete them.

``POST /plans`` runs the planner (CPU-bound, up to a few seconds) on the app's work
threads (``api.deps.run_heavy``): the event loop, and the threadpool that serves the
reads and ``/health``, keep answering meanwhile. The route owns the transaction: it
reads the custom catalog entries, ends that read (no connection is held while
solving), plans, then writes and commits the record. Any failure before the commit writes nothing.

Answers, decided here and documented in the README:

- a request that is valid but cannot be met (an SLO no GPU reaches, a budget too
  small) is *not* an error: it is a plan with status ``infeasible`` and the
  reasons, stored and returned with 201 like any other;
- bad input is 422 naming the field: schema violations, ids missing from the
  catalog (model, GPU, workload), NaN/Infinity or duplicate keys in the JSON;
- a body that is not JSON is 415, one over ``FLEETPLAN_MAX_BODY_BYTES`` 413.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from api.deps import IdempotencyKey, PostedJson, SessionDep, SettingsDep, WriteAccess, run_heavy
from api.errors import ApiError
from api.jsonbody import JsonBodyRoute
from api.schemas import (
    PlanAlternatives,
    PlanPage,
    PlanPublic,
    PlanRequest,
    PlanStatus,
    SimulationCreate,
    SimulationResult,
    error_responses,
)
from api.services import alternatives as alts
from api.services import plans

router = APIRouter(prefix="/plans", tags=["plans"], route_class=JsonBodyRoute)

MODEL_ID_PATTERN = r"^[a-z0-9][a-z0-9.\-]*$"  # catalog ids (catalog.schema.Id)
MAX_PAGE = 200


@router.post(
    "",
    status_code=201,
    response_model=PlanPublic,
    dependencies=[WriteAccess],
    responses=error_responses(401, 413, 415, 422),
    summary="Plan a fleet and store the plan",
)
async def create_plan(
    body: PlanRequest,
    posted: PostedJson,
    request: Request,
    response: Response,
    session: SessionDep,
    settings: SettingsDep,
    idempotency_key: IdempotencyKey = None,
    alternatives: Annotated[
        Literal["background", "on_request", "inline"] | None,
        Query(
            description="When to solve the plan's alternatives (next-cheapest fleets; "
            "about as long as the plan): `background` after answering, `on_request` on "
            "the first `GET /plans/{id}/alternatives`, `inline` before answering. "
            "Default: the server's `FLEETPLAN_ALTERNATIVES` (background). Until they "
            "are solved the plan says `alternatives_status: pending`."
        ),
    ] = None,
) -> PlanPublic:
    """Validate the request, plan the fleet (shipped + custom catalog entries) and
    store the plan, infeasible ones included (201 with ``status: infeasible`` and
    ``plan.infeasible_reasons``). The solver's time limit and gap are the request's
    ``solver`` options, capped by the server's settings. With an `Idempotency-Key`,
    a retry with the same key and body returns the plan stored the first time
    (header `Idempotent-Replayed: true`); the same key with another body is 422.
    The plan's alternatives come after it unless `?alternatives=inline`
    (`plan.alternatives_status`; `GET /plans/{id}/alternatives`)."""
    mode = alternatives or settings.alternatives
    raw = posted if isinstance(posted, dict) else body.model_dump()
    earlier = await run_heavy(request, plans.replayed_plan, session, raw, idempotency_key)
    if earlier is not None:
        response.headers["Location"] = f"/plans/{earlier.id}"
        response.headers["Idempotent-Replayed"] = "true"
        return plans.plan_public(earlier)
    created = await run_heavy(
        request,
        plans.create_plan,
        session,
        raw,
        body,
        request.app.state.catalog,
        settings,
        idempotency_key,
        mode,
    )
    response.headers["Location"] = f"/plans/{created.record.id}"
    if created.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    elif mode == "background":
        alts.start_background(session, created.record.id, created.plan)
    return created.public


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
    search: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=100,
            pattern=r"^[^\x00-\x1f\x7f]+$",
            description="A part of the plan's name (any case) or the start of its id.",
        ),
    ] = None,
    variants: Annotated[
        bool,
        Query(description="Include the plans of comparisons' variants (false: leave them out)."),
    ] = True,
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
    if cursor is not None and offset:
        raise ApiError(
            422,
            "invalid_input",
            "pass either cursor or offset, not both",
            [("offset", "must be 0 with a cursor")],
        )
    try:
        page = plans.list_plans(
            session,
            model=model,
            status=status,
            search=search,
            variants=variants,
            limit=limit,
            offset=offset,
            cursor=cursor,
        )
    except plans.BadCursor as err:
        raise ApiError(422, "invalid_input", str(err), [("cursor", str(err))]) from None
    return PlanPage(
        items=page.items,
        total=page.total,
        limit=limit,
        offset=None if cursor is not None else offset,
        next_cursor=page.next_cursor,
    )


@router.get(
    "/{plan_id}",
    response_model=PlanPublic,
    responses=error_responses(404),
    summary="Get one stored plan",
)
async def get_plan(plan_id: str, request: Request) -> Response:
    """The stored plan with its request, normalized request, solver options and plan."""
    # one hop to the read threadpool (its own session), the documents as stored
    body = await run_in_threadpool(plans.read_plan_json, request.app.state.sessionmaker, plan_id)
    return Response(body, media_type="application/json")


@router.get(
    "/{plan_id}/alternatives",
    response_model=PlanAlternatives,
    responses=error_responses(404),
    summary="Get a stored plan's alternatives (computed once, if pending)",
)
async def get_plan_alternatives(
    plan_id: str, request: Request, session: SessionDep, settings: SettingsDep
) -> PlanAlternatives:
    """The plan's alternatives: each mode alone, each class in its other mode, the
    fleet without each GPU type it uses, solved on the model the plan was solved on
    (its verification's corrections included), and why each class got its mode. If
    they are still pending they are solved first, once however many ask (a request
    arriving while they are solved in the background waits for that), and stored
    with the plan (`plan.alternatives`, `alternatives_status: ready`)."""
    out = await run_heavy(
        request,
        alts.plan_alternatives,
        session,
        plan_id,
        request.app.state.catalog,
        settings,
    )
    return PlanAlternatives(**out)


@router.delete(
    "/{plan_id}",
    status_code=204,
    dependencies=[WriteAccess],
    responses=error_responses(401, 404, 409),
    summary="Delete a stored plan",
)
def delete_plan(plan_id: str, session: SessionDep) -> Response:
    """204; 409 for a variant's plan (delete its comparison: ``DELETE /comparisons/{id}``)."""
    plans.delete_plan(session, plan_id)
    return Response(status_code=204)


@router.post(
    "/{plan_id}/simulations",
    response_model=SimulationResult,
    response_model_by_alias=True,
    dependencies=[WriteAccess],
    responses=error_responses(401, 404, 409, 415, 422),
    summary="Simulate a stored plan's fleet under load",
)
async def simulate_stored_plan(
    plan_id: str,
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    body: SimulationCreate | None = None,
) -> SimulationResult:
    """Run the plan's fleet in the discrete-event simulator (planner.simulate) at the
    rates it was planned for: per class TTFT/TPOT percentiles, SLO attainment and
    goodput, per pool utilization and queues. Seeded and reproducible; computed on
    demand, not stored. 409 when the plan has no fleet (infeasible) or is robust
    (its ``verification`` section simulates each scenario)."""
    opts = body or SimulationCreate()
    return await run_heavy(
        request,
        plans.simulate_stored_plan,
        session,
        plan_id,
        request.app.state.catalog,
        settings,
        opts.requests,
        opts.seed,
        opts.burst_cv,
    )
