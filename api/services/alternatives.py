"""A stored plan's alternatives, computed after the plan and once.

``POST /plans`` answers with the plan as soon as it is solved and verified; its
alternatives (re-solves as long as the plan itself: planner.alternatives) come after,
as the request or ``FLEETPLAN_ALTERNATIVES`` asks:

* ``background`` (default): a daemon thread of this process solves them on the
  model the plan kept in memory (no screening again) and stores them in the plan
  document (``alternatives``, the classes' ``mode_reason``, ``alternatives_status:
  ready``);
* ``on_request``: stored ``pending``; the first ``GET /plans/{id}/alternatives`` (or
  report) computes them;
* ``inline``: solved with the plan (one answer, slower; what the CLI does).

:func:`plan_alternatives` (``GET /plans/{id}/alternatives``, the reports) returns them,
computing them once: while this process computes them (in the background or for an
earlier request) the others wait for that result; a plan whose model is not in memory
(another process, a restart, ``on_request``) is re-planned on its request with the
corrections its verification learned (the model it was solved on; no simulation) and
its alternatives taken from there. Two processes may both compute them; the results
are the same and the first stored wins.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from api.db.repository import get_plan
from api.services.catalog import merged_catalog
from api.services.database import sessions_like
from api.services.errors import NotFound
from api.services.plans import find_plan, parse_request, plan_request
from api.settings import Settings
from catalog.schema import Catalog
from planner import alternatives as alt
from planner.plan import Plan

log = logging.getLogger("api.alternatives")

MODES = ("background", "on_request", "inline")

#: One computation per plan in this process: the first computes, the others wait.
_flights: dict[str, Future[dict[str, Any]]] = {}
_lock = threading.Lock()


def status_of(doc: Mapping[str, Any] | None) -> str:
    """A plan document's ``alternatives_status``; documents stored before it existed
    had their alternatives computed with the plan (ready)."""
    return str((doc or {}).get("alternatives_status") or alt.READY)


def section(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """What ``GET /plans/{id}/alternatives`` answers, from a plan document."""
    doc = doc or {}
    return {
        "status": status_of(doc),
        "alternatives": list(doc.get("alternatives") or []),
        "mode_reasons": {
            str(c.get("name")): str(c.get("mode_reason") or "")
            for c in doc.get("classes") or []
            if isinstance(c, Mapping)
        },
    }


def _with_alternatives(doc: Mapping[str, Any], plan: Plan) -> dict[str, Any]:
    """``doc`` with ``plan``'s alternatives, classes' mode reasons and status."""
    solved = plan.to_json_dict()
    reasons = {c["name"]: c.get("mode_reason", "") for c in solved["classes"]}
    return {
        **doc,
        "alternatives": solved["alternatives"],
        "alternatives_status": solved["alternatives_status"],
        "classes": [
            {**c, "mode_reason": reasons.get(c.get("name"), c.get("mode_reason", ""))}
            if isinstance(c, Mapping)
            else c
            for c in doc.get("classes") or []
        ],
    }


def _store(sessions: sessionmaker[Session], plan_id: str, plan: Plan) -> dict[str, Any]:
    """Store ``plan``'s alternatives in the stored plan (unless another computation
    stored them first) and return its section."""
    with sessions() as s:
        record = get_plan(s, plan_id)
        if record is None:
            raise NotFound("id", f"plan {plan_id} was deleted meanwhile")
        if status_of(record.plan) != alt.PENDING:
            return section(record.plan)
        record.plan = _with_alternatives(record.plan or {}, plan)
        s.commit()
        return section(record.plan)


def _lead(plan_id: str) -> Future[dict[str, Any]] | None:
    """A new flight for ``plan_id`` (this caller computes), or None if one is on."""
    with _lock:
        if plan_id in _flights:
            return None
        future: Future[dict[str, Any]] = Future()
        _flights[plan_id] = future
        return future


def _fly(plan_id: str, future: Future[dict[str, Any]], compute: Any) -> dict[str, Any]:
    """Run the flight ``future`` of ``plan_id``: ``compute()``, its result to the waiters."""
    try:
        out = compute()
        future.set_result(out)
        return out
    except BaseException as err:
        future.set_exception(err)
        raise
    finally:
        with _lock:
            _flights.pop(plan_id, None)


def _single_flight(plan_id: str, compute: Any) -> dict[str, Any]:
    """``compute()``, unless this process already computes ``plan_id``'s alternatives:
    then its result (or, if that computation failed, ours)."""
    while True:
        future = _lead(plan_id)
        if future is not None:
            return _fly(plan_id, future, compute)
        with _lock:
            running = _flights.get(plan_id)
        if running is None:
            continue
        try:
            return running.result()
        except Exception:  # the other computation failed: compute here
            log.warning("plan %s: a computation of its alternatives failed", plan_id)
            future = _lead(plan_id)
            if future is not None:
                return _fly(plan_id, future, compute)


def start_background(session: Session, plan_id: str, plan: Plan) -> bool:
    """Solve the alternatives of ``plan`` (made with ``alternatives="deferred"``, its
    model kept) on a daemon thread and store them with the stored plan ``plan_id``.
    False when there is nothing to do (not pending, or no model kept)."""
    if plan.alternatives_status != alt.PENDING or plan.solved_model() is None:
        return False
    future = _lead(plan_id)  # registered now: a GET from here on waits for this one
    if future is None:
        return False
    sessions = sessions_like(session)

    def compute() -> dict[str, Any]:
        alt.complete_alternatives(plan)
        return _store(sessions, plan_id, plan)

    def run() -> None:
        try:
            _fly(plan_id, future, compute)
        except Exception:  # logged; GET /plans/{id}/alternatives computes them again
            log.exception("plan %s: computing its alternatives in the background failed", plan_id)

    threading.Thread(target=run, name=f"alternatives-{plan_id[:8]}", daemon=True).start()
    return True


def replan_alternatives(
    session: Session, doc: Mapping[str, Any], request_doc: Any, catalog: Catalog, settings: Settings
) -> Plan:
    """The alternatives of a stored plan whose model is not in memory: its request
    planned again on the corrections its verification learned (the model the plan
    was solved on), without simulating, alternatives solved inline."""
    request = parse_request(request_doc)
    corrections = ((doc.get("verification") or {}) if isinstance(doc, Mapping) else {}).get(
        "corrections"
    )
    return plan_request(
        request,
        catalog,
        settings,
        session=session,
        alternatives=True,
        verify=False,
        corrections=corrections or None,
    )


def plan_alternatives(
    session: Session, plan_id: str, shipped: Catalog, settings: Settings
) -> dict[str, Any]:
    """The stored plan's alternatives (``status``, ``alternatives``, ``mode_reasons``),
    computed and stored first if they are pending (once: see the module docstring).
    :class:`NotFound` for an unknown plan."""
    record = find_plan(session, plan_id)
    if status_of(record.plan) != alt.PENDING:
        return section(record.plan)
    sessions = sessions_like(session)
    catalog = merged_catalog(session, shipped)
    doc = dict(record.plan or {})
    request_doc = record.request or record.normalized_request or {}

    def compute() -> dict[str, Any]:
        with sessions() as s:
            fresh = get_plan(s, plan_id)
            if fresh is not None and status_of(fresh.plan) != alt.PENDING:
                return section(fresh.plan)
            plan = replan_alternatives(s, doc, request_doc, catalog, settings)
        return _store(sessions, plan_id, plan)

    session.rollback()  # no connection held while solving
    return _single_flight(plan_id, compute)


def ensure_alternatives(
    session: Session, record: Any, shipped: Catalog, settings: Settings
) -> None:
    """Compute a stored plan's pending alternatives before a report reads it (the
    record is refreshed with them)."""
    if status_of(record.plan) == alt.PENDING:
        plan_alternatives(session, record.id, shipped, settings)
        session.refresh(record)
