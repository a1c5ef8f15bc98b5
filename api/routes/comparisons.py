"""What-if comparisons: ``POST /comparisons`` stores one and solves its variants in
the background; read, list and delete them.

The body is a comparison document (``planner.compare.ComparisonSpec``): a base
plan request, named variants (partial overrides deep-merged into the base, a mix,
class overrides, a rate scale) and sweeps (one variant per value). Everything is
validated before anything is written: a bad variant is a 422 naming
``variants[<name>].<field>`` (or ``base.<field>``, or ``variants.<i>.<field>`` for
the document's own schema) and stores nothing.

Then the comparison is stored with status ``running`` and the answer is 202 with
its id, ``done: 0`` and ``total`` (the base counts as a variant). The variants are
solved in parallel processes on a background thread (``api.services.comparison_runner``;
comparisons queue one behind another); ``done`` counts the solved ones. At the
end each variant's plan is stored as a plan linked to the comparison and the
table is stored: status ``done``. A failure marks it ``failed`` with the reason.

``?wait=true`` answers when the comparison has finished (201), or after
:data:`WAIT_LIMIT_S` seconds with its progress (202).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from api.deps import (
    IdempotencyKey,
    PostedJson,
    SessionDep,
    SettingsDep,
    WriteAccess,
    run_heavy,
)
from api.jsonbody import JsonBodyRoute
from api.schemas import error_responses
from api.schemas.comparisons import (
    ComparisonPage,
    ComparisonPublic,
    ComparisonSpec,
    ComparisonStatus,
)
from api.services import comparisons

router = APIRouter(prefix="/comparisons", tags=["comparisons"], route_class=JsonBodyRoute)

#: ``?wait=true`` waits at most this long, then answers 202 with the progress.
WAIT_LIMIT_S = 600.0
MAX_PAGE = 200


@router.post(
    "",
    status_code=202,
    response_model=ComparisonPublic,
    dependencies=[WriteAccess],
    responses={
        201: {
            "model": ComparisonPublic,
            "description": "With `wait=true`: the comparison finished (done or failed).",
        },
        **error_responses(401, 413, 415, 422, 429),
    },
    summary="Compare a base request with variants and sweeps",
)
async def create_comparison(
    body: ComparisonSpec,
    posted: PostedJson,
    request: Request,
    response: Response,
    session: SessionDep,
    settings: SettingsDep,
    idempotency_key: IdempotencyKey = None,
    wait: Annotated[
        bool,
        Query(description=f"Answer when finished (201), or after {WAIT_LIMIT_S:g} s (202)."),
    ] = False,
) -> ComparisonPublic:
    """Validate every variant, store the comparison and solve its variants in the
    background (202 with `id`, `status: running`, `done`, `total` and `location`);
    poll `GET /comparisons/{id}` for progress and, when `done`, the table. With an
    `Idempotency-Key`, a retry with the same key and body answers with the comparison
    the first request stored (header `Idempotent-Replayed: true`), another body 422.
    429 with `Retry-After` when this process has `FLEETPLAN_MAX_COMPARISONS` queued."""
    raw = posted if isinstance(posted, dict) else body.model_dump()
    runner = request.app.state.comparisons
    earlier = await run_heavy(
        request, comparisons.replayed_comparison, session, raw, idempotency_key
    )
    if earlier is not None:  # a retry: what the first request stored, as it is now
        response.headers["Location"] = f"/comparisons/{earlier.id}"
        response.headers["Idempotent-Replayed"] = "true"
        return comparisons.comparison_public(earlier)
    future = None
    with runner.slot():  # 429 with Retry-After when the queue is full
        started = await run_heavy(
            request,
            comparisons.start_comparison,
            session,
            raw,
            body,
            request.app.state.catalog,
            settings,
            runner.owner,
            idempotency_key,
        )
        if started.replayed:
            response.headers["Idempotent-Replayed"] = "true"
        else:
            future = runner.submit(
                started.id,
                started.prepared.variants,
                started.catalog,
                started.prepared.calibrations,
            )
    response.headers["Location"] = f"/comparisons/{started.id}"
    if wait and future is not None:  # waits on the event loop: no thread held meanwhile
        await asyncio.wait({asyncio.wrap_future(future)}, timeout=WAIT_LIMIT_S)
    record = await run_heavy(request, comparisons.reread_comparison, session, started.id)
    if wait and record.status != ComparisonStatus.RUNNING:
        response.status_code = 201
    return comparisons.comparison_public(record)


@router.get(
    "",
    response_model=ComparisonPage,
    responses=error_responses(422),
    summary="List stored comparisons, newest first",
)
def list_all(
    session: SessionDep,
    status: Annotated[ComparisonStatus | None, Query(description="Only this status.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> ComparisonPage:
    """Summaries (status, progress, times; no table), with the total matching."""
    return comparisons.list_comparisons(session, status=status, limit=limit, offset=offset)


@router.get(
    "/{comparison_id}",
    response_model=ComparisonPublic,
    responses=error_responses(404),
    summary="Get one comparison: progress, variants, table",
)
def get_one(comparison_id: str, request: Request, session: SessionDep) -> ComparisonPublic:
    """Progress (`done` of `total`) while running; when `done`, every variant's plan id
    and the table against the base; when `failed`, the reason in `error`. A running
    comparison whose service died (its lease expired) is resumed here, or failed."""
    return comparisons.get_comparison(
        session, comparison_id, on_stale=request.app.state.comparisons.recover
    )


@router.delete(
    "/{comparison_id}",
    status_code=204,
    dependencies=[WriteAccess],
    responses=error_responses(401, 404),
    summary="Delete a comparison and its variants' plans",
)
def delete_one(comparison_id: str, session: SessionDep) -> Response:
    """Deletes the comparison and the plans of its variants. A running comparison
    stops at its next variant."""
    comparisons.delete_comparison(session, comparison_id)
    return Response(status_code=204)
