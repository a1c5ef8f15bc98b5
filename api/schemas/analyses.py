"""Bodies and answers of ``/analyses`` (the planner's own models)."""

from __future__ import annotations

from planner.analyses.common import ReplicaSummary
from planner.capacity_analysis import CapacityAnalysis, CapacityRequest

__all__ = ["CapacityAnalysis", "CapacityRequest", "ReplicaSummary"]
