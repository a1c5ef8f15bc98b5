"""Analyses served over HTTP: ``POST /analyses/capacity`` and ``POST /analyses/gpu-ranking``.

The same computation as ``fleetplan analyze capacity`` (planner.capacity_analysis):
one replica's predicted steady state under continuous batching with chunked
prefill. Nothing is stored, so it needs no API key. The catalog is the shipped one
plus the database's custom entries; ``calibration`` names a stored calibration
(database first, then the YAML store).
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.deps import SessionDep, SettingsDep, run_heavy
from api.jsonbody import JsonBodyRoute
from api.schemas import error_responses
from api.schemas.analyses import CapacityAnalysis, CapacityRequest, GpuRanking, GpuRankingRequest
from api.services import analyses

router = APIRouter(prefix="/analyses", tags=["analyses"], route_class=JsonBodyRoute)


@router.post(
    "/capacity",
    response_model=CapacityAnalysis,
    responses=error_responses(413, 415, 422),
    summary="One replica's throughput, batch, TTFT and TPOT",
)
async def replica_capacity(
    body: CapacityRequest, request: Request, session: SessionDep, settings: SettingsDep
) -> CapacityAnalysis:
    """Output tokens/s (replica and per GPU), requests/s, decode batch, mean TTFT and
    TPOT, and what bounds them (compute, memory_bandwidth, kv_capacity, max_batch or
    slo). Without SLOs, concurrency or rate: the maximum throughput; with
    ``concurrency``: a closed loop of that many users; with ``request_rate_rps``: an
    open loop; with ``ttft_ms``/``tpot_ms``: the highest throughput meeting them."""
    return await run_heavy(
        request, analyses.replica_capacity, session, body, request.app.state.catalog, settings
    )


@router.post(
    "/gpu-ranking",
    response_model=GpuRanking,
    responses=error_responses(413, 415, 422),
    summary="Every catalog GPU on one workload, relative to a reference GPU",
)
async def gpu_ranking(body: GpuRankingRequest, request: Request, session: SessionDep) -> GpuRanking:
    """Each GPU of the catalog (custom entries included) at its best tensor parallelism and
    weight format on ``model`` at ``prompt_tokens`` / ``output_tokens`` (every prompt
    queued): predicted output tokens/s per GPU, the ratio to ``reference`` (H100 SXM by
    default), what its factors rest on (provenance, ``sigma_log``) and, for a GPU measured
    on MoE LLMs only, the GPU its dense level is borrowed from. ``cannot_run`` lists the
    GPUs no tried configuration holds the model on."""
    return await run_heavy(request, analyses.gpu_ranking, session, body, request.app.state.catalog)
