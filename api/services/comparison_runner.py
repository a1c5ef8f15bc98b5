"""Solving a stored comparison's variants, in the background (API) or in the
foreground (``fleetplan compare --save``): durable jobs with a lease.

A comparison's state lives in its row. The service (or CLI) running it is its
``owner`` and holds a lease (``lease_expires_at``), renewed by a heartbeat every
third of ``FLEETPLAN_COMPARISON_LEASE_S`` while it is queued or running. Each
variant's outcome is stored as it finishes, in one short transaction: a planned
variant as a plan row linked to the comparison, and ``results[i]`` naming it (or
the error), with ``done``. When all are in, the table is built from what is
stored and the comparison is ``done``. Every write is guarded by the owner, so a
service that lost its lease changes nothing.

A service killed outright stops renewing. Any service finds the comparisons whose
lease expired (when it starts, at every heartbeat, and when one is read) and
claims them, one statement so only one wins: it resumes the comparison (variants
already stored are not solved again) or, after ``FLEETPLAN_COMPARISON_ATTEMPTS``
attempts, marks it ``failed`` with the reason. Nothing stays ``running``.

:class:`ComparisonRunner` is the service's queue: one background thread runs
comparisons one after another (each uses every core), at most
``FLEETPLAN_MAX_COMPARISONS`` queued or running per process (:class:`Busy`
beyond). Stopping the service stops the running comparison at its next variant
and lets the leases of it and the queued ones expire at once: the next service
to look resumes them.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from api.db import comparisons as repo
from api.db.base import utcnow
from api.db.models import ComparisonStatus
from api.services.beat import beating
from api.services.comparisons import results_table, resume_inputs, store_variant
from api.services.errors import Busy, error_reference
from api.settings import Settings
from planner import compare as planner_compare
from planner.errors import PlanningError
from planner.service import SolverLimits

if TYPE_CHECKING:
    from catalog.schema import Catalog

log = logging.getLogger("api.comparisons")

INTERRUPTED = "interrupted: the service stopped before the comparison finished"
#: Seconds a client is told to wait when the queue is full.
RETRY_AFTER_S = 15


class ComparisonStopped(Exception):
    """Raised inside a run to stop it: the service is stopping (``interrupted``) or
    the comparison is no longer ours (deleted, failed, claimed by another)."""

    def __init__(self, interrupted: bool):
        super().__init__(INTERRUPTED if interrupted else "no longer running here")
        self.interrupted = interrupted


def new_owner_id() -> str:
    """Who holds a lease: host, pid and a random tag (unique per runner)."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _lease_until(lease_s: float) -> Any:
    return utcnow() + timedelta(seconds=lease_s)


def _fail(
    sessions: sessionmaker[Session], comparison_id: str, reason: str, owner: str | None
) -> None:
    try:
        with sessions() as session:
            repo.fail(session, comparison_id, reason, owner)
            session.commit()
    except Exception:  # the database itself is failing: the lease will expire
        log.exception("could not mark comparison %s failed", comparison_id)


def _release(sessions: sessionmaker[Session], ids: Sequence[str], owner: str) -> None:
    try:
        with sessions() as session:
            repo.release(session, ids, owner, utcnow())
            session.commit()
    except Exception:  # the leases expire on their own
        log.exception("could not release comparisons %s", list(ids))


def _renew(sessions: sessionmaker[Session], ids: Sequence[str], owner: str, lease_s: float) -> None:
    try:
        with sessions() as session:
            repo.renew(session, ids, owner, utcnow(), _lease_until(lease_s))
            session.commit()
    except SQLAlchemyError:  # a busy database: the next beat tries again
        log.warning("could not renew comparison leases", exc_info=True)


@contextmanager
def heartbeat(
    sessions: sessionmaker[Session], comparison_id: str, owner: str, lease_s: float
) -> Iterator[None]:
    """Renew ``owner``'s lease on the comparison every third of ``lease_s`` meanwhile."""
    with beating(
        lease_s / 3, lambda: _renew(sessions, [comparison_id], owner, lease_s), "fleetplan-lease"
    ):
        yield


def run_comparison(
    sessions: sessionmaker[Session],
    comparison_id: str,
    variants: Sequence[Mapping[str, Any]],
    catalog: Catalog,
    caps: SolverLimits,
    *,
    owner: str,
    lease_s: float,
    workers: int | None = None,
    calibrations: Mapping[str, Any] | None = None,
    verify_default: bool | None = None,
    cancel: threading.Event | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    ray_address: str | None = None,
) -> ComparisonStatus | None:
    """Solve the variants of the stored comparison ``comparison_id`` that have no
    stored outcome yet (``owner`` holds its lease), storing each as it finishes,
    then the table. Returns the final status; None when the comparison is no longer
    ours (deleted, or claimed by another service after our lease expired) or the
    run was interrupted (its lease released for another service to resume it).
    ``verify_default``: ``Settings.verify_default``, for variants whose request does
    not say whether to verify."""
    with sessions() as session:
        record = repo.get_comparison(session, comparison_id)
        if record is None or record.status != ComparisonStatus.RUNNING:
            return None if record is None else record.status
        if record.owner != owner:
            return None
        stored = list(record.results or [])
    total = len(variants)
    results: list[dict[str, Any] | None] = (stored + [None] * total)[:total]
    todo = [i for i, r in enumerate(results) if r is None]

    def on_result(k: int, result: dict[str, Any]) -> None:
        i = todo[k]
        with sessions() as session:
            try:
                outcome = store_variant(session, comparison_id, variants[i], result, caps)
            except IntegrityError:  # the comparison was deleted meanwhile
                session.rollback()
                raise ComparisonStopped(interrupted=False) from None
            results[i] = outcome
            if not repo.record_result(session, comparison_id, owner, results, utcnow()):
                session.rollback()
                raise ComparisonStopped(interrupted=False)
            session.commit()
        if on_progress is not None:
            on_progress(sum(r is not None for r in results), total)
        if cancel is not None and cancel.is_set():
            raise ComparisonStopped(interrupted=True)

    reason: str | None = None
    try:
        with heartbeat(sessions, comparison_id, owner, lease_s):
            if on_progress is not None:
                on_progress(total - len(todo), total)
            if todo:
                planner_compare.run_variants(
                    [dict(variants[i]) for i in todo],
                    catalog,
                    caps,
                    workers=workers,
                    calibrations=calibrations,
                    verify_default=verify_default,
                    on_result=on_result,
                    ray_address=ray_address,
                )
    except ComparisonStopped as err:
        if err.interrupted:
            _release(sessions, [comparison_id], owner)
        return None
    except KeyboardInterrupt:  # the user stopped it (fleetplan compare --save): not resumed
        _fail(sessions, comparison_id, "interrupted (Ctrl-C)", owner)
        raise
    except Exception as err:
        log.exception("comparison %s failed while solving", comparison_id)
        reason = f"solving failed: {type(err).__name__}: {err}"
    if reason is None:
        try:
            with sessions() as session:
                record = repo.get_comparison(session, comparison_id)
                if record is None:
                    return None
                table = results_table(session, record, [r or {} for r in results])
                if not repo.finish(session, comparison_id, owner, table, utcnow()):
                    session.rollback()
                    return None
                session.commit()
                return ComparisonStatus.DONE
        except Exception:  # never the SQL text or its parameters to the client
            ref = error_reference()
            log.exception(
                "comparison %s: storing the results failed (reference %s)", comparison_id, ref
            )
            reason = f"storing the results failed (reference {ref}; the server log has the details)"
    _fail(sessions, comparison_id, reason, owner)
    return ComparisonStatus.FAILED


class ComparisonRunner:
    """The service's comparison queue: one background thread runs them one after
    another (each uses every core); a heartbeat thread renews the leases of the
    queued and running ones and recovers comparisons whose lease expired."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        shipped: Catalog,
        settings: Settings,
        caps: SolverLimits,
        owner: str | None = None,
    ) -> None:
        self.sessions = sessions
        self.shipped = shipped
        self.settings = settings
        self.caps = caps
        self.owner = owner or new_owner_id()
        self.lease_s = settings.comparison_lease_s
        self.capacity = settings.max_comparisons
        self.cancel = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleetplan-compare")
        self._queued: dict[str, Future[ComparisonStatus | None]] = {}
        self._reserved = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # ------------------------------------------------------------------ the queue

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold a place in the queue while a comparison is validated and stored
        (:class:`Busy` when it is full); ``submit`` inside takes it over."""
        with self._lock:
            if len(self._queued) + self._reserved >= self.capacity:
                raise Busy(
                    "comparisons",
                    f"{self.capacity} comparisons are already queued or running here; "
                    f"retry in {RETRY_AFTER_S} s",
                    RETRY_AFTER_S,
                )
            self._reserved += 1
        try:
            yield
        finally:
            with self._lock:
                self._reserved -= 1

    def submit(
        self,
        comparison_id: str,
        variants: Sequence[Mapping[str, Any]],
        catalog: Catalog,
        calibrations: Mapping[str, Any] | None = None,
    ) -> Future[ComparisonStatus | None]:
        """Queue the stored comparison (this runner holds its lease); the future's
        result is its final status (None when it was interrupted or taken over)."""

        def job() -> ComparisonStatus | None:
            try:
                return run_comparison(
                    self.sessions,
                    comparison_id,
                    variants,
                    catalog,
                    self.caps,
                    owner=self.owner,
                    lease_s=self.lease_s,
                    workers=self.settings.compare_workers,
                    calibrations=calibrations,
                    verify_default=self.settings.verify_default,
                    cancel=self.cancel,
                    ray_address=self.settings.ray_address,
                )
            finally:
                with self._lock:
                    self._queued.pop(comparison_id, None)

        with self._lock:
            try:
                future = self._executor.submit(job)
            except RuntimeError:  # shut down meanwhile: another service resumes it
                _release(self.sessions, [comparison_id], self.owner)
                raise
            self._queued[comparison_id] = future
        return future

    def pending(self) -> int:
        """Comparisons queued or running here."""
        with self._lock:
            return len(self._queued)

    # ------------------------------------------------------------------ recovery

    def recover(self, comparison_id: str) -> Future[ComparisonStatus | None] | None:
        """Claim the comparison if its lease expired, then resume it (or fail it when
        it has had its attempts, or cannot run any more). None when it was not
        claimed: another service holds it, or this queue is full."""
        with self._lock:
            if comparison_id in self._queued:  # ours already (a late renewal)
                return self._queued[comparison_id]
            if len(self._queued) + self._reserved >= self.capacity:
                return None
            self._reserved += 1
        try:
            return self._recover(comparison_id)
        finally:
            with self._lock:
                self._reserved -= 1

    def _recover(self, comparison_id: str) -> Future[ComparisonStatus | None] | None:
        with self.sessions() as session:
            if not repo.claim(
                session, comparison_id, self.owner, utcnow(), _lease_until(self.lease_s)
            ):
                session.rollback()
                return None
            session.commit()
            record = repo.get_comparison(session, comparison_id)
            if record is None:
                return None
            session.refresh(record)
            if record.attempts > self.settings.comparison_attempts:
                why = (
                    f"abandoned: the service running it stopped {record.attempts - 1} times "
                    f"(its lease expired; the limit is {self.settings.comparison_attempts} "
                    "attempts)"
                )
                repo.fail(session, comparison_id, why, self.owner)
                session.commit()
                log.warning("comparison %s: %s", comparison_id, why)
                return None
            try:
                catalog, calibrations = resume_inputs(session, record, self.shipped, self.settings)
            except PlanningError as err:
                why = f"cannot resume: {err.message}"
                repo.fail(session, comparison_id, why, self.owner)
                session.commit()
                return None
            variants = list(record.variants or [])
            session.rollback()
        log.info("comparison %s: resuming (its lease had expired)", comparison_id)
        return self.submit(comparison_id, variants, catalog, calibrations)

    def sweep(self) -> list[str]:
        """Recover every comparison whose lease expired (as many as the queue takes)."""
        try:
            with self.sessions() as session:
                stale = repo.stale_comparisons(session, utcnow())
        except SQLAlchemyError:
            log.warning("could not look for abandoned comparisons", exc_info=True)
            return []
        out = []
        for comparison_id in stale:
            try:
                if self.recover(comparison_id) is not None:
                    out.append(comparison_id)
            except Exception:
                log.exception("could not recover comparison %s", comparison_id)
        return out

    # ------------------------------------------------------------------ life

    def start(self) -> None:
        """Recover abandoned comparisons now, then renew and recover at every beat."""
        self.sweep()

        def beat() -> None:
            while not self._stop.wait(self.lease_s / 3):
                with self._lock:
                    held = list(self._queued)
                if held:
                    _renew(self.sessions, held, self.owner, self.lease_s)
                self.sweep()

        self._beat = threading.Thread(target=beat, name="fleetplan-leases", daemon=True)
        self._beat.start()

    def shutdown(self) -> None:
        """Stop: the running comparison at its next variant, queued ones at once;
        their leases are released, so the next service resumes them."""
        self._stop.set()
        self.cancel.set()
        if self._beat is not None:
            self._beat.join(timeout=10)
        self._executor.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            left = list(self._queued)
            self._queued.clear()
        if left:  # cancelled before they started
            _release(self.sessions, left, self.owner)
