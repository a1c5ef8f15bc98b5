"""Liveness and readiness: is the database reachable, which catalog is loaded."""

from __future__ import annotations

import logging
from typing import Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from api.deps import CatalogDep
from api.services.health import database_reachable

router = APIRouter(tags=["health"])
log = logging.getLogger("api")


class HealthPublic(BaseModel):
    status: Literal["ok", "unavailable"]
    database: Literal["ok", "unreachable"]
    catalog_hash: str
    version: str


@router.get(
    "/health",
    response_model=HealthPublic,
    responses={503: {"model": HealthPublic, "description": "The database is unreachable"}},
)
def health(request: Request, response: Response, catalog: CatalogDep) -> HealthPublic:
    """200 when the database answers, 503 (same body) when it does not."""
    database: Literal["ok", "unreachable"] = "ok"
    if not database_reachable(request.app.state.engine):
        database = "unreachable"
        response.status_code = 503
    return HealthPublic(
        status="ok" if database == "ok" else "unavailable",
        database=database,
        catalog_hash=catalog.content_hash,
        version=request.app.version,
    )
