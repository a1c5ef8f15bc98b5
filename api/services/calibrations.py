"""Named calibrations: the one resolver of a calibration name, and the stored ones.

A name is looked up in the database first (``POST /calibrations`` stores there),
then in the YAML store ``fleetplan calibrate`` writes (``Settings.calibration_dir``,
``$FLEETPLAN_CALIBRATION_DIR``). Every front end resolves names here: plan
requests (``POST /plans``, ``fleetplan plan``), re-simulating a stored plan,
comparisons, report sensitivities and capacity analyses. Without a database (the
CLI's ``plan`` or ``compare`` without ``--save``) only the YAML store is read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session

from api.db import calibrations as repo
from api.schemas.calibrations import CalibrationCreate, CalibrationSummary
from api.services.errors import Conflict, NotFound
from catalog.schema import Catalog
from planner import calibration as cb
from planner.errors import UnknownEntryError

Calibration = cb.Calibration
#: The residual spread (sigma of ln(measured / predicted)) of one fitted group.
group_sigma_log = cb.group_sigma_log
Resolver = Callable[[str], cb.Calibration]


def stored_calibration(session: Session, name: str) -> cb.Calibration | None:
    """The database's calibration ``name``, or None."""
    record = repo.get_calibration(session, name)
    if record is None:
        return None
    return cb.parse_calibration(record.body, f"stored calibration {name!r}")


def resolve_calibration(
    name: str, session: Session | None = None, directory: str | Path | None = None
) -> cb.Calibration:
    """The calibration ``name``: the database's (with a ``session``), else the YAML
    store's in ``directory`` (UnknownEntryError on field ``calibration`` when
    neither has it)."""
    cb.check_name(name, "calibration")
    if session is not None:
        cal = stored_calibration(session, name)
        if cal is not None:
            return cal
    try:
        return cb.load_calibration(name, directory)
    except UnknownEntryError:
        known = [r.name for r in repo.list_calibrations(session)] if session is not None else []
        known += cb.list_calibration_names(directory)
        raise UnknownEntryError.for_field(
            "calibration",
            f"no calibration {name!r} (known: {', '.join(sorted(set(known))) or 'none'})",
        ) from None


def resolver(session: Session | None = None, directory: str | Path | None = None) -> Resolver:
    """:func:`resolve_calibration` bound to a session and a directory."""
    return lambda name: resolve_calibration(name, session, directory)


def preload_calibration(
    session: Session | None, name: str | None, directory: str | Path | None = None
) -> Resolver | None:
    """Read the named calibration now (before the session's read ends) and return a
    resolver for the planner, or None when no calibration is named."""
    if name is None:
        return None
    cal = resolve_calibration(name, session, directory)
    return lambda _name: cal


def calibrated(
    catalog: Catalog,
    name: str | None,
    session: Session | None = None,
    directory: str | Path | None = None,
) -> Catalog:
    """``catalog`` with the named calibration's factors applied (itself without a name)."""
    if not name:
        return catalog
    return cb.apply_calibration(catalog, resolve_calibration(name, session, directory))


# --------------------------------------------------------------------------- stored ones


def create_calibration(
    session: Session, body: CalibrationCreate, catalog: Catalog
) -> cb.Calibration:
    """Fit ``body``'s measurements (against ``catalog``) and store the calibration;
    :class:`Conflict` when the name is taken, a ``PlanningError`` naming
    ``measurements.<i>`` for a bad point. The caller commits."""
    if repo.get_calibration(session, body.name) is not None:
        raise Conflict("name", f"a calibration named {body.name!r} already exists")
    session.rollback()  # no connection held while fitting
    issues = []
    points = []
    for i, m in enumerate(body.measurements):
        where = f"measurements.{i}"
        resolved = cb.resolve_model(catalog, m.model) or m.model
        m = m.model_copy(update={"model": resolved, "where": where})
        why = cb.check_measurement(m, catalog)
        if why is None:
            points.append(m)
        else:
            issues.append((where, why))
    if issues:
        raise cb.measurement_error(issues)
    cal = cb.fit_calibration(
        body.name, points, catalog, per_engine=body.per_engine, description=body.description
    )
    repo.add_calibration(session, cal.name, cal.model_dump(mode="json"))
    return cal


def list_calibrations(session: Session) -> list[CalibrationSummary]:
    """Name, creation time and the (GPU, dtype, engine) groups of each stored one."""
    out = []
    for record in repo.list_calibrations(session):
        cal = cb.parse_calibration(record.body, f"stored calibration {record.name!r}")
        out.append(CalibrationSummary.model_validate(cal.summary()))
    return out


def get_calibration(session: Session, name: str) -> cb.Calibration:
    cal = stored_calibration(session, name)
    if cal is None:
        raise NotFound("name", f"no calibration named {name[:80]!r}")
    return cal


# --------------------------------------------------------------------------- the YAML store

CSV_COLUMNS = cb.CSV_COLUMNS
MeasurementError = cb.MeasurementError
check_name = cb.check_name


def fit_measurement_files(
    files: list[str],
    name: str,
    catalog: Catalog,
    defaults: dict[str, object],
    *,
    per_engine: bool = False,
    description: str = "",
) -> cb.Calibration:
    """Read measurement files (vLLM, genai-perf, CSV, fleetplan JSON) and fit them."""
    measurements = cb.load_measurements(files, catalog, defaults)
    return cb.fit_calibration(
        name, measurements, catalog, per_engine=per_engine, description=description
    )


def save_to_store(cal: cb.Calibration, directory: str | Path) -> Path:
    return cb.save_calibration(cal, directory)


def store_names(directory: str | Path) -> list[str]:
    return cb.list_calibration_names(directory)


def load_from_store(name: str, directory: str | Path) -> cb.Calibration:
    return cb.load_calibration(name, directory)


def store_dir(directory: str | Path) -> Path:
    return cb.calibration_dir(directory)
