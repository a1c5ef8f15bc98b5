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
solved in parallel processes on a background thread (``api.comparison_runner``;
comparisons queue one behind another); ``done`` counts the solved ones. At the
end each variant's plan is stored as a plan linked to the comparison and the
table is stored: status ``done``. A failure marks it ``failed`` with the reason.

``?wait=true`` answers when the comparison has finished (201), or after
:data:`WAIT_LIMIT_S` seconds with its progress (202).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from api.comparison_records import (
    comparison_public,
    comparison_summary,
    delete_comparison,
    get_comparison,
    list_comparisons,
    new_comparison_record,
    prepare_comparison,
)
from api.comparison_schemas import ComparisonPage, ComparisonPublic
from api.custom_catalog import merged_catalog
from api.db.models import ComparisonRecord, ComparisonStatus
from api.deps import SessionDep, SettingsDep, WriteAccess
from api.errors import not_found
from api.jsonbody import JsonBodyRoute
from api.plan_records import solver_caps
from api.routes.calibrations import find_calibration
from api.routes.plans import PostedJson
from api.schemas import error_responses
from planner.compare import ComparisonSpec

router = APIRouter(prefix="/comparisons", tags=["comparisons"], route_class=JsonBodyRoute)

#: ``?wait=true`` waits at most this long, then answers 202 with the progress.
WAIT_LIMIT_S = 600.0
MAX_PAGE = 200


def comparison_or_404(session: SessionDep, comparison_id: str) -> ComparisonRecord:
    """The comparison, or a 404; only well-formed UUIDs are looked up."""
    detail = f"no comparison with id {comparison_id[:80]!r}"
    try:
        uuid.UUID(comparison_id)
    except ValueError:
        raise not_found("id", detail) from None
    record = get_comparison(session, comparison_id)
    if record is None:
        raise not_found("id", detail)
    return record


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
        **error_responses(401, 413, 415, 422),
    },
    summary="Compare a base request with variants and sweeps",
)
def create_comparison(
    body: ComparisonSpec,
    posted: PostedJson,
    request: Request,
    response: Response,
    session: SessionDep,
    settings: SettingsDep,
    wait: Annotated[
        bool,
        Query(description=f"Answer when finished (201), or after {WAIT_LIMIT_S:g} s (202)."),
    ] = False,
) -> ComparisonPublic:
    """Validate every variant, store the comparison and solve its variants in the
    background (202 with `id`, `status: running`, `done`, `total` and `location`);
    poll `GET /comparisons/{id}` for progress and, when `done`, the table."""
    catalog = merged_catalog(session, request.app.state.catalog)
    prepared = prepare_comparison(
        posted if isinstance(posted, dict) else body.model_dump(),
        body,
        catalog,
        lambda name: find_calibration(session, name),
    )
    record = new_comparison_record(prepared)
    session.add(record)
    session.commit()
    future = request.app.state.comparisons.submit(
        record.id, prepared.variants, catalog, solver_caps(settings), prepared.calibrations
    )
    response.headers["Location"] = f"/comparisons/{record.id}"
    if wait:
        with contextlib.suppress(cf.TimeoutError):  # still running: answer 202
            future.result(timeout=WAIT_LIMIT_S)
        session.expire_all()
        current = get_comparison(session, record.id)
        if current is None:  # deleted meanwhile
            raise not_found("id", f"comparison {record.id} was deleted while it ran")
        record = current
        if record.status != ComparisonStatus.RUNNING:
            response.status_code = 201
    return comparison_public(record)


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
    items, total = list_comparisons(session, status=status, limit=limit, offset=offset)
    return ComparisonPage(
        items=[comparison_summary(r) for r in items], total=total, limit=limit, offset=offset
    )


@router.get(
    "/{comparison_id}",
    response_model=ComparisonPublic,
    responses=error_responses(404),
    summary="Get one comparison: progress, variants, table",
)
def get_one(comparison_id: str, session: SessionDep) -> ComparisonPublic:
    """Progress (`done` of `total`) while running; when `done`, every variant's plan id
    and the table against the base; when `failed`, the reason in `error`."""
    return comparison_public(comparison_or_404(session, comparison_id))


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
    record = comparison_or_404(session, comparison_id)
    delete_comparison(session, record)
    session.commit()
    return Response(status_code=204)
