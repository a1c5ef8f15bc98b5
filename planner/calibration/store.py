"""The YAML store of named calibrations: ``NAME.yaml`` files in a directory
(:func:`calibration_dir`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from planner.calibration.fit import NAME_PATTERN, Calibration
from planner.calibration.parsers import validation_reason
from planner.errors import PlanningError, UnknownEntryError

#: Where named calibrations live unless the caller says: the service passes its
#: setting (``Settings.calibration_dir``, ``FLEETPLAN_CALIBRATION_DIR``) explicitly;
#: the planner reads no environment variable.
DEFAULT_CALIBRATION_DIR = "calibrations"


def calibration_dir(path: str | Path | None = None) -> Path:
    """Where named calibrations live: ``path``, else :data:`DEFAULT_CALIBRATION_DIR`
    (``./calibrations``)."""
    return Path(path if path is not None else DEFAULT_CALIBRATION_DIR)


def check_name(name: str, field: str = "name") -> None:
    if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name) or len(name) > 64:
        raise PlanningError.for_field(
            field,
            f"{name!r} is not a calibration name (lowercase letters, digits, '.', '-', '_')",
        )


def calibration_to_dict(cal: Calibration) -> dict[str, Any]:
    return cal.model_dump(mode="json")


def parse_calibration(data: Any, where: str) -> Calibration:
    try:
        return Calibration.model_validate(data)
    except ValidationError as err:
        raise PlanningError.for_field("calibration", f"{where}: {validation_reason(err)}") from None


def save_calibration(cal: Calibration, directory: str | Path | None = None) -> Path:
    """Write ``NAME.yaml`` under the calibration directory (replacing one of that name)."""
    d = calibration_dir(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{cal.name}.yaml"
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(
        yaml.safe_dump(calibration_to_dict(cal), sort_keys=False, allow_unicode=True),
        encoding="utf-8",
    )
    tmp.replace(path)
    return path


def load_calibration(name: str, directory: str | Path | None = None) -> Calibration:
    """The calibration ``name`` from the YAML store (UnknownEntryError if absent)."""
    check_name(name, "calibration")
    path = calibration_dir(directory) / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(list_calibration_names(directory)) or "none"
        raise UnknownEntryError.for_field(
            "calibration", f"no calibration {name!r} in {path.parent} (known: {known})"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise PlanningError.for_field("calibration", f"{path}: not valid YAML: {err}") from None
    return parse_calibration(data, str(path))


def list_calibration_names(directory: str | Path | None = None) -> list[str]:
    d = calibration_dir(directory)
    if not d.is_dir():
        return []
    return sorted(p.stem for p in d.glob("*.yaml") if re.fullmatch(NAME_PATTERN, p.stem))
