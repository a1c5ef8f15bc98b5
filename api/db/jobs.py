"""Job leases (``job_leases``): which service process computes a shared result.

:func:`claim_job` takes the lease when nobody holds it or its holder's lease
expired; the insert or the conditional update is one statement, so of several
processes asking at once exactly one wins. The caller commits.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from api.db.models import JobLeaseRecord


def claim_job(session: Session, key: str, owner: str, now: datetime, until: datetime) -> bool:
    """Hold ``key`` until ``until``; False while another holder's lease runs (the
    session may then have been rolled back: use one of its own for claims)."""
    result = session.execute(
        update(JobLeaseRecord)
        .where(JobLeaseRecord.key == key, JobLeaseRecord.expires_at < now)
        .values(owner=owner, expires_at=until)
    )
    if result.rowcount:  # type: ignore[attr-defined]
        return True
    if session.get(JobLeaseRecord, key, populate_existing=True) is not None:
        return False
    try:
        session.add(JobLeaseRecord(key=key, owner=owner, expires_at=until))
        session.flush()
    except IntegrityError:  # another process inserted it meanwhile
        session.rollback()
        return False
    return True


def renew_job(session: Session, key: str, owner: str, until: datetime) -> bool:
    result = session.execute(
        update(JobLeaseRecord)
        .where(JobLeaseRecord.key == key, JobLeaseRecord.owner == owner)
        .values(expires_at=until)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def release_job(session: Session, key: str, owner: str) -> None:
    session.execute(
        delete(JobLeaseRecord).where(JobLeaseRecord.key == key, JobLeaseRecord.owner == owner)
    )
