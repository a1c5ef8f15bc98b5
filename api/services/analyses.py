"""Analyses that answer one question from the cost model, without the optimizer."""

from __future__ import annotations

from sqlalchemy.orm import Session

from api.services.calibrations import preload_calibration
from api.services.catalog import merged_catalog
from api.settings import Settings
from catalog.schema import Catalog
from planner.capacity_analysis import CapacityAnalysis, CapacityRequest, capacity_analysis
from planner.gpu_ranking import GpuRanking, GpuRankingRequest, gpu_ranking_analysis


def replica_capacity(
    session: Session | None, body: CapacityRequest, shipped: Catalog, settings: Settings
) -> CapacityAnalysis:
    """One replica's steady state (``planner.capacity_analysis``) against the shipped
    catalog plus the database's custom entries (with a session), its calibration
    resolved database first, then the YAML store."""
    catalog = merged_catalog(session, shipped) if session is not None else shipped
    resolver = preload_calibration(session, body.calibration, settings.calibration_dir)
    if session is not None:
        session.rollback()
    return capacity_analysis(catalog, body, resolver)


def gpu_ranking(session: Session | None, body: GpuRankingRequest, shipped: Catalog) -> GpuRanking:
    """Every GPU of the shipped catalog plus the database's custom entries (with a
    session) priced on ``body``'s workload (``planner.gpu_ranking``)."""
    catalog = merged_catalog(session, shipped) if session is not None else shipped
    if session is not None:
        session.rollback()
    return gpu_ranking_analysis(catalog, body)
