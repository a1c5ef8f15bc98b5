"""Solving a stored comparison's variants, in the background (API) or in the
foreground (``fleetplan compare --save``).

:func:`run_comparison` plans every variant with ``planner.compare.run_variants``
(one process per core unless ``workers`` says otherwise), writes the number done
to the comparison's row as variants finish (each update in its own short
transaction, so ``GET /comparisons/{id}`` shows progress), then stores the plans
and the table in one transaction. Any failure marks the comparison ``failed``
with the reason; a comparison deleted meanwhile is abandoned at the next variant.

:class:`ComparisonRunner` is the service's queue: one background thread, so
comparisons run one after another, each using every core. When the service stops
it cancels: variants not yet started are dropped, the comparison is marked
``failed`` ("interrupted"), and queued ones too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from api.db import comparisons as repo
from api.db.models import ComparisonStatus
from api.services.comparisons import store_results
from api.services.errors import error_reference
from planner import compare as planner_compare
from planner.service import SolverLimits

if TYPE_CHECKING:
    from catalog.schema import Catalog

log = logging.getLogger("api.comparisons")

INTERRUPTED = "interrupted: the service stopped before the comparison finished"


class ComparisonInterrupted(Exception):
    """Raised from the progress callback to stop a run."""


class ComparisonDeleted(Exception):
    """The comparison's row is gone (deleted while running): stop quietly."""


def _set_done(sessions: sessionmaker[Session], comparison_id: str, done: int) -> bool:
    """Record progress; False when the comparison is gone (or no longer running).
    A failed update (a busy database) only costs the progress figure."""
    try:
        with sessions() as session:
            running = repo.set_done(session, comparison_id, done)
            session.commit()
            return running
    except SQLAlchemyError:
        log.warning("comparison %s: could not record progress", comparison_id, exc_info=True)
        return True


def _fail(sessions: sessionmaker[Session], comparison_id: str, reason: str) -> None:
    try:
        with sessions() as session:
            record = repo.get_comparison(session, comparison_id)
            if record is not None and record.status == ComparisonStatus.RUNNING:
                repo.mark_failed(session, record, reason)
                session.commit()
    except Exception:  # the database itself is failing: nothing more to do
        log.exception("could not mark comparison %s failed", comparison_id)


def run_comparison(
    sessions: sessionmaker[Session],
    comparison_id: str,
    variants: Sequence[Mapping[str, Any]],
    catalog: Catalog,
    caps: SolverLimits,
    *,
    workers: int | None = None,
    calibrations: Mapping[str, Any] | None = None,
    verify_default: bool | None = None,
    cancel: threading.Event | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ComparisonStatus | None:
    """Solve the variants of the stored comparison ``comparison_id`` and store the
    results. Returns the final status (None when the comparison was deleted).
    ``verify_default``: ``Settings.verify_default``, for variants whose request does
    not say whether to verify."""

    def progress(done: int, total: int) -> None:
        if cancel is not None and cancel.is_set():
            raise ComparisonInterrupted(INTERRUPTED)
        if not _set_done(sessions, comparison_id, done):
            raise ComparisonDeleted
        if on_progress is not None:
            on_progress(done, total)

    reason: str | None = None
    try:
        results = planner_compare.run_variants(
            [dict(v) for v in variants],
            catalog,
            caps,
            workers=workers,
            progress=progress,
            calibrations=calibrations,
            verify_default=verify_default,
        )
    except ComparisonDeleted:
        return None
    except ComparisonInterrupted as err:
        reason = str(err)
    except KeyboardInterrupt:
        _fail(sessions, comparison_id, "interrupted (Ctrl-C)")
        raise
    except Exception as err:
        log.exception("comparison %s failed while solving", comparison_id)
        reason = f"solving failed: {type(err).__name__}: {err}"
    if reason is None:
        try:
            with sessions() as session:
                record = repo.get_comparison(session, comparison_id)
                if record is None or record.status != ComparisonStatus.RUNNING:
                    return None if record is None else record.status
                store_results(session, record, results, caps)
                session.commit()
                return ComparisonStatus.DONE
        except Exception:  # never the SQL text or its parameters to the client
            ref = error_reference()
            log.exception(
                "comparison %s: storing the results failed (reference %s)", comparison_id, ref
            )
            reason = f"storing the results failed (reference {ref}; the server log has the details)"
    _fail(sessions, comparison_id, reason)
    return ComparisonStatus.FAILED


class ComparisonRunner:
    """Runs comparisons one at a time on a background thread (each uses every core)."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        workers: int | None = None,
        verify_default: bool | None = None,
    ) -> None:
        self.sessions = sessions
        self.workers = workers
        self.verify_default = verify_default
        self.cancel = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleetplan-compare")
        self._queued: dict[str, Future[ComparisonStatus | None]] = {}
        self._lock = threading.Lock()

    def submit(
        self,
        comparison_id: str,
        variants: Sequence[Mapping[str, Any]],
        catalog: Catalog,
        caps: SolverLimits,
        calibrations: Mapping[str, Any] | None = None,
    ) -> Future[ComparisonStatus | None]:
        """Queue the stored comparison; the future's result is its final status."""

        def job() -> ComparisonStatus | None:
            try:
                return run_comparison(
                    self.sessions,
                    comparison_id,
                    variants,
                    catalog,
                    caps,
                    workers=self.workers,
                    calibrations=calibrations,
                    verify_default=self.verify_default,
                    cancel=self.cancel,
                )
            finally:
                with self._lock:
                    self._queued.pop(comparison_id, None)

        with self._lock:
            try:
                future = self._executor.submit(job)
            except RuntimeError:  # shut down meanwhile
                _fail(self.sessions, comparison_id, INTERRUPTED)
                raise
            self._queued[comparison_id] = future
        return future

    def shutdown(self) -> None:
        """Stop: the running comparison at its next variant, queued ones at once;
        every one of them is marked failed (interrupted)."""
        self.cancel.set()
        self._executor.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            left = list(self._queued)
            self._queued.clear()
        for comparison_id in left:  # cancelled before they started
            _fail(self.sessions, comparison_id, INTERRUPTED)
