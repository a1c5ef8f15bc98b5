"""Reports of stored plans and comparisons, and the text renderings the CLI prints:
shared by the REST routes and the CLI.

A plan report includes a sensitivity table (the cheapest fleet at traffic x1.5
and x2 and at the largest class's share -20/+20 points, each re-planned:
``planner.report.sensitivity``). Re-planning takes a few seconds for a small
fleet and about 13 s for the 80/20 example, so it is computed once, by the first
report that asks for it, and cached in the plan's ``report_extras`` with the hash of
the catalog it was computed on. Concurrent requests compute it once
(:func:`shared_sensitivity`): in a process the first computes and the others wait;
across the service's processes a job lease in the database says who computes.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from api.db.base import utcnow
from api.db.jobs import claim_job, release_job, renew_job
from api.db.models import ComparisonRecord, ComparisonStatus, PlanRecord
from api.db.repository import get_plan
from api.services.alternatives import ensure_alternatives
from api.services.beat import beating
from api.services.calibrations import resolve_calibration
from api.services.catalog import merged_catalog
from api.services.comparisons import comparison_report_input, find_comparison
from api.services.database import sessions_like
from api.services.errors import Conflict, NotFound
from api.services.plans import find_plan, solver_caps
from api.settings import Settings
from catalog.schema import Catalog
from planner.errors import PlanningError
from planner.report.comparison_text import render_comparison_text
from planner.report.render import FORMATS as REPORT_FORMATS
from planner.report.render import MEDIA_TYPES, render_comparison_report, render_plan_report
from planner.report.text import render_plan_text, render_table, usd
from planner.sensitivity import objective_cost_usd_per_hour, sensitivity
from planner.service import SolverLimits
from planner.simulate.report import render_simulation_text
from solver.problem import has_solution

__all__ = [
    "render_comparison_text",
    "render_plan_text",
    "render_simulation_text",
    "render_table",
    "usd",
]

FORMATS = REPORT_FORMATS
#: The media type of an XLSX report (what the API's OpenAPI document announces).
XLSX_MEDIA_TYPE = MEDIA_TYPES["xlsx"]
log = logging.getLogger("api.reports")


def has_fleet(record: PlanRecord) -> bool:
    return has_solution((record.plan or {}).get("status"))


def cached_sensitivity(
    record: PlanRecord, catalog_hash: str | None = None
) -> dict[str, Any] | None:
    """The plan's stored sensitivity; None when there is none, or (with
    ``catalog_hash``) when it was computed on another catalog than this one."""
    extras = record.report_extras or {}
    made_with = extras.get("sensitivity_catalog_hash")
    if catalog_hash is not None and made_with is not None and made_with != catalog_hash:
        return None
    return extras.get("sensitivity")


def compute_sensitivity(
    session: Session,
    record: PlanRecord,
    catalog: Catalog,
    caps: SolverLimits,
    workers: int | None = None,
    calibration_dir: str | None = None,
    verify_default: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any] | None:
    """Compute the plan's sensitivity and cache it on ``record`` (the caller
    commits); None when the plan has no fleet to vary. Ends the session's read
    while re-planning, so no connection is held meanwhile; ``progress(done, total)``
    as re-plans finish."""
    if not has_fleet(record):
        return None
    request_doc = dict(record.request or record.normalized_request or {})
    base_plan = dict(record.plan or {})  # its learned corrections carry over to every case
    # the cost the rows are priced as: GPUs + operations (planner.sensitivity)
    base_cost = objective_cost_usd_per_hour(base_plan) or record.cost_usd_per_hour
    calibrations = {}
    name = request_doc.get("calibration")
    if isinstance(name, str):
        try:
            calibrations[name] = resolve_calibration(name, session, calibration_dir)
        except PlanningError as err:  # deleted since: say so, cache nothing
            return {"rows": [], "note": f"Sensitivity not computed: {err.message}"}
    session.rollback()  # no connection held while re-planning
    sens = sensitivity(
        request_doc,
        catalog,
        caps,
        base_cost_usd_per_hour=base_cost,
        base_plan=base_plan,
        workers=workers,
        calibrations=calibrations or None,
        verify_default=verify_default,
        progress=progress,
    )
    record.report_extras = {
        **(record.report_extras or {}),
        "sensitivity": sens,
        "sensitivity_catalog_hash": catalog.content_hash,
    }
    return sens


# --------------------------------------------------------------------------- computed once

#: One computation per (plan, catalog) in this process: the first request computes,
#: the others wait for its result (finding 6: five concurrent reports each re-planned).
_flights: dict[tuple[str, str], Future[dict[str, Any] | None]] = {}
_flights_lock = threading.Lock()
#: Across processes, a job lease (``api.db.jobs``): the holder renews it every third
#: of this while it computes; the others poll the plan for the stored result.
SENSITIVITY_LEASE_S = 30.0
SENSITIVITY_POLL_S = 0.5


def _claim(sessions: sessionmaker[Session], key: str, owner: str) -> bool:
    with sessions() as s:
        now = utcnow()
        won = claim_job(s, key, owner, now, now + timedelta(seconds=SENSITIVITY_LEASE_S))
        s.commit()
        return won


@contextmanager
def _holding(sessions: sessionmaker[Session], key: str, owner: str) -> Iterator[None]:
    """Renew the lease on ``key`` meanwhile, release it after."""

    def renew() -> None:
        try:
            with sessions() as s:
                renew_job(s, key, owner, utcnow() + timedelta(seconds=SENSITIVITY_LEASE_S))
                s.commit()
        except SQLAlchemyError:
            log.warning("could not renew the lease on %s", key, exc_info=True)

    try:
        with beating(SENSITIVITY_LEASE_S / 3, renew, "fleetplan-report-lease"):
            yield
    finally:
        try:
            with sessions() as s:
                release_job(s, key, owner)
                s.commit()
        except SQLAlchemyError:  # it expires on its own
            log.warning("could not release the lease on %s", key, exc_info=True)


def _stored(sessions: sessionmaker[Session], plan_id: str, catalog_hash: str) -> Any:
    with sessions() as s:
        fresh = get_plan(s, plan_id)
        if fresh is None:
            raise NotFound("id", f"plan {plan_id} was deleted meanwhile")
        return cached_sensitivity(fresh, catalog_hash)


def _sensitivity_across_processes(
    session: Session,
    record: PlanRecord,
    catalog: Catalog,
    settings: Settings,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any] | None:
    """Compute (and store) the sensitivity unless another process of the service
    is at it, in which case wait for its stored result (or its lease to lapse)."""
    sessions = sessions_like(session)
    key = f"sensitivity:{record.id}:{catalog.content_hash}"[:200]
    owner = f"{socket.gethostname()[:60]}:{os.getpid()}:{threading.get_ident()}"
    while not _claim(sessions, key, owner):
        time.sleep(SENSITIVITY_POLL_S)
        done = _stored(sessions, record.id, catalog.content_hash)
        if done is not None:
            return done
    with _holding(sessions, key, owner):
        done = _stored(sessions, record.id, catalog.content_hash)
        if done is not None:  # finished between our look and our claim
            return done
        sens = compute_sensitivity(
            session,
            record,
            catalog,
            solver_caps(settings),
            settings.compare_workers,
            settings.calibration_dir,
            settings.verify_default,
            progress,
        )
        session.commit()
        return sens


def shared_sensitivity(
    session: Session,
    record: PlanRecord,
    catalog: Catalog,
    settings: Settings,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any] | None:
    """The plan's sensitivity, computed once however many ask at the same time, in
    this process (the others wait for the first) and across the service's processes
    (a job lease in the database), and stored with the plan for every later report."""
    flight = (record.id, catalog.content_hash)
    with _flights_lock:
        future = _flights.get(flight)
        leader = future is None
        if future is None:
            future = _flights[flight] = Future()
    if not leader:
        return future.result()
    try:
        sens = _sensitivity_across_processes(session, record, catalog, settings, progress)
        future.set_result(sens)
        return sens
    except BaseException as err:
        future.set_exception(err)
        raise
    finally:
        with _flights_lock:
            _flights.pop(flight, None)


#: Background sensitivity computations of this process: (plan id, catalog hash) -> when it
#: started (UTC) and its re-plans done / total (what a report read meanwhile says).
_background: dict[tuple[str, str], dict[str, Any]] = {}


def start_background_sensitivity(
    session: Session, record: PlanRecord, catalog: Catalog, settings: Settings
) -> str:
    """Start computing the plan's sensitivity on a daemon thread (once per plan and
    catalog in this process; :func:`shared_sensitivity` keeps it to one computation
    across the service's processes) and return how far it is (:func:`background_status`:
    when it started, then ``k of n re-plans done``). The result is stored with the plan,
    so the next report shows it."""
    flight = (record.id, catalog.content_hash)
    with _flights_lock:
        state = _background.get(flight)
        if state is not None:
            return background_status(state)
        state = _background[flight] = {
            "started": utcnow().strftime("%H:%M:%S UTC"),
            "done": 0,
            "total": None,
        }
    sessions = sessions_like(session)
    plan_id = record.id

    def run() -> None:
        try:
            with sessions() as s:
                fresh = get_plan(s, plan_id)
                if fresh is not None and cached_sensitivity(fresh, catalog.content_hash) is None:
                    shared_sensitivity(s, fresh, catalog, settings, step)
        except Exception:  # logged; the next report starts it again
            log.exception("plan %s: computing the sensitivity in the background failed", plan_id)
        finally:
            with _flights_lock:
                _background.pop(flight, None)

    def step(done: int, total: int) -> None:
        with _flights_lock:
            state.update(done=done, total=total)

    threading.Thread(target=run, name=f"sensitivity-{plan_id[:8]}", daemon=True).start()
    return background_status(state)


def background_status(state: dict[str, Any]) -> str:
    """What a report says of a background computation: ``HH:MM:SS UTC`` it started,
    with ``; k of n re-plans done`` once they run."""
    if state.get("total"):
        return f"{state['started']}; {state['done']} of {state['total']} re-plans done"
    return str(state["started"])


def plan_report_input(
    record: PlanRecord, sens: dict[str, Any] | None, pending: str | None = None
) -> dict[str, Any]:
    """What ``planner.report.render_plan_report`` takes; ``pending``: when a background
    computation of the sensitivity started (the report says it is on its way)."""
    out: dict[str, Any] = {
        "id": record.id,
        "created_at": record.created_at.strftime("%Y-%m-%d %H:%M UTC"),
        "request": record.request,
        "plan": record.plan,
    }
    if sens is not None:
        out["sensitivity"] = sens
    elif pending is not None:
        out["sensitivity_pending"] = pending
    return out


# --------------------------------------------------------------------------- documents


@dataclass
class Report:
    text: str | bytes  # bytes for xlsx
    media_type: str
    stem: str  # the file name without its extension: plan-<id>, comparison-<id>


def plan_report(
    session: Session,
    record: PlanRecord,
    fmt: str,
    shipped: Catalog,
    settings: Settings,
    *,
    with_sensitivity: bool | str = True,
    while_computing: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> Report:
    """A stored plan's report; its sensitivity (four re-plans) is computed and cached on
    the plan the first time one asks for it. ``with_sensitivity``: True (or ``wait``)
    computes it before answering (``while_computing`` wraps that: the CLI shows
    progress); ``auto`` does so for JSON only, while an HTML or Markdown report (read by
    a person) answers at once, starts it in the background
    (:func:`start_background_sensitivity`) and says so; False shows it only if cached.
    CSV and XLSX never need it. Alternatives still pending (``POST /plans`` answers before
    solving them) are solved and stored first (``api.services.alternatives``)."""
    if has_fleet(record):  # alternatives still pending are solved (once) and stored first
        ensure_alternatives(session, record, shipped, settings)
    catalog = merged_catalog(session, shipped)
    sens = cached_sensitivity(record, catalog.content_hash)
    if isinstance(with_sensitivity, bool):
        mode = "wait" if with_sensitivity else "cached"
    else:
        mode = with_sensitivity
    if mode == "auto":
        mode = "wait" if fmt == "json" else "background"
    pending = None
    if sens is None and fmt in ("html", "md", "json") and has_fleet(record):
        if mode == "wait":
            with while_computing():
                sens = shared_sensitivity(session, record, catalog, settings)
        elif mode == "background":
            pending = start_background_sensitivity(session, record, catalog, settings)
    text, media_type = render_plan_report(plan_report_input(record, sens, pending), fmt, catalog)
    return Report(text, media_type, f"plan-{record.id}")


def stored_plan_report(
    session: Session,
    plan_id: str,
    fmt: str,
    shipped: Catalog,
    settings: Settings,
    *,
    with_sensitivity: bool | str = True,
) -> Report:
    """The report of the stored plan ``plan_id`` (:class:`NotFound`)."""
    record = find_plan(session, plan_id)
    return plan_report(session, record, fmt, shipped, settings, with_sensitivity=with_sensitivity)


def stored_comparison_report(
    session: Session, comparison_id: str, fmt: str, shipped: Catalog
) -> Report:
    """The report of the stored comparison ``comparison_id`` (:class:`NotFound`,
    :class:`ComparisonNotDone`)."""
    return comparison_report(session, find_comparison(session, comparison_id), fmt, shipped)


class ComparisonNotDone(Conflict):
    """The comparison has no report yet (running) or never will (failed)."""

    def __init__(self, record: ComparisonRecord, detail: str):
        super().__init__("id", detail)
        self.status = record.status
        self.done = record.done
        self.total = record.total
        self.error = record.error


def comparison_report(
    session: Session, record: ComparisonRecord, fmt: str, shipped: Catalog
) -> Report:
    """A finished comparison's report; :class:`ComparisonNotDone` otherwise."""
    if record.status != ComparisonStatus.DONE:
        why = (
            f"the comparison is still running ({record.done} of {record.total} variants "
            "done); ask again when its status is done"
            if record.status == ComparisonStatus.RUNNING
            else f"the comparison failed, so it has no report: {record.error}"
        )
        raise ComparisonNotDone(record, why)
    catalog = merged_catalog(session, shipped)
    doc = comparison_report_input(session, record)
    text, media_type = render_comparison_report(doc, fmt, catalog)
    return Report(text, media_type, f"comparison-{record.id}")


def stored_report(
    session: Session,
    ident: str,
    fmt: str,
    shipped: Catalog,
    settings: Settings,
    *,
    with_sensitivity: bool = True,
    while_computing: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> Report:
    """The report of the plan or comparison with id ``ident`` (:class:`NotFound`)."""
    try:
        plan = find_plan(session, ident)
    except NotFound:
        plan = None
    if plan is not None:
        return plan_report(
            session,
            plan,
            fmt,
            shipped,
            settings,
            with_sensitivity=with_sensitivity,
            while_computing=while_computing,
        )
    try:
        comparison = find_comparison(session, ident)
    except NotFound:
        raise NotFound("id", f"no plan or comparison with id {ident[:80]!r}") from None
    return comparison_report(session, comparison, fmt, shipped)
