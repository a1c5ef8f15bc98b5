"""The settings' planner values as the defaults of direct planner calls.

The service reads ``FLEETPLAN_*`` once (``api.settings.Settings``) and passes the
verification default and the calibration directory to the planner as arguments; the
planner reads no environment variable. Tests that call the planner directly (without
those arguments) route the settings the same way: through this one function.
"""

from __future__ import annotations

import pytest

from api.settings import Settings
from planner.calibration import store
from planner.simulate import verify


def planner_defaults(mp: pytest.MonkeyPatch, settings: Settings) -> None:
    """Make ``settings.verify_default`` and ``settings.calibration_dir`` what the
    planner uses when a caller does not pass them (undone with ``mp``)."""
    mp.setattr(verify, "DEFAULT_ENABLED", settings.verify_default)
    mp.setattr(store, "DEFAULT_CALIBRATION_DIR", settings.calibration_dir)
