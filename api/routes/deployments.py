"""Deployment artifacts: ``GET /plans/{id}/deployment?target=dynamo|llm-d|compose``.

``dynamo``: an NVIDIA Dynamo DynamoGraphDeployment; ``llm-d``: a helmfile of llm-d
releases (an InferencePool with the inference scheduler per class, an
llm-d-modelservice per pool); ``compose``: a docker compose file, for a plan that fits
one host (otherwise 422 saying why). ``engine``: vllm (default) or sglang (dynamo and
compose). YAML, as an attachment. The artifacts are ``planner.deploy``'s.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from api.deps import SessionDep
from api.schemas import error_responses
from api.services import deployments

router = APIRouter(tags=["plans"])


class Target(StrEnum):
    DYNAMO = "dynamo"
    LLM_D = "llm-d"
    COMPOSE = "compose"


class Engine(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"


DEPLOYMENT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The artifact, YAML (its notes as comments on top).",
        "content": {"application/yaml": {"schema": {"type": "string"}}},
    }
}


@router.get(
    "/plans/{plan_id}/deployment",
    response_class=Response,
    responses={**DEPLOYMENT_RESPONSES, **error_responses(404, 409, 422)},
    summary="A stored plan as a deployment (Dynamo, llm-d or docker compose)",
)
def plan_deployment(
    plan_id: str,
    request: Request,
    session: SessionDep,
    target: Annotated[
        Target,
        Query(
            description="`dynamo` (DynamoGraphDeployment), `llm-d` (helmfile: InferencePool "
            "per class, llm-d-modelservice per pool) or `compose` (docker compose, one host)."
        ),
    ],
    engine: Annotated[
        Engine, Query(description="The inference engine: `vllm` or `sglang` (not for llm-d).")
    ] = Engine.VLLM,
) -> Response:
    """Every pool of the plan with its replicas, GPUs, multi-node span and engine
    arguments; prefill/decode workers and the P/D router; one model name per class;
    prefix-aware routing where the plan counts on prefix hits."""
    artifact = deployments.stored_deployment(
        session, plan_id, target.value, request.app.state.catalog, engine.value
    )
    return Response(
        content=artifact.text,
        media_type="application/yaml",
        headers={"Content-Disposition": f'attachment; filename="{artifact.filename}"'},
    )
