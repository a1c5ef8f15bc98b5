"""Persistence: declarative base, tables, engine/session factory, repository, migrations."""

from api.db.base import Base
from api.db.models import CatalogEntryRecord, CatalogKind, PlanRecord, PlanStatus
from api.db.session import make_engine, make_sessionmaker, normalize_url

__all__ = [
    "Base",
    "CatalogEntryRecord",
    "CatalogKind",
    "PlanRecord",
    "PlanStatus",
    "make_engine",
    "make_sessionmaker",
    "normalize_url",
]
