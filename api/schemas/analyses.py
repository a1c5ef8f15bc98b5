"""Bodies and answers of ``/analyses`` (the planner's own models)."""

from __future__ import annotations

from planner.analyses.common import ReplicaSummary
from planner.capacity_analysis import CapacityAnalysis, CapacityRequest
from planner.gpu_ranking import GpuRank, GpuRanking, GpuRankingRequest

__all__ = [
    "CapacityAnalysis",
    "CapacityRequest",
    "GpuRank",
    "GpuRanking",
    "GpuRankingRequest",
    "ReplicaSummary",
]
