"""Read and write stored calibrations (the ``calibrations`` table). The caller (a
route) owns the transaction and commits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from api.db.models import CalibrationRecord


def list_calibrations(session: Session) -> Sequence[CalibrationRecord]:
    """Every stored calibration, by name."""
    return session.scalars(select(CalibrationRecord).order_by(CalibrationRecord.name)).all()


def get_calibration(session: Session, name: str) -> CalibrationRecord | None:
    stmt = select(CalibrationRecord).where(CalibrationRecord.name == name)
    return session.scalars(stmt).one_or_none()


def add_calibration(session: Session, name: str, body: Mapping[str, Any]) -> CalibrationRecord:
    """Insert a calibration; the caller checks the name is free (unique in the table)."""
    record = CalibrationRecord(name=name, body=dict(body))
    session.add(record)
    session.flush()
    return record
