"""Bodies and answers of ``/calibrations``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from planner import calibration as cb

Calibration = cb.Calibration

MAX_MEASUREMENTS = 2000


class CalibrationCreate(BaseModel):
    """A calibration to fit: its name and the measured points."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=cb.NAME_PATTERN, max_length=64)
    description: str = Field(default="", max_length=2000)
    per_engine: bool = Field(default=False, description="Fit separate factors per engine.")
    measurements: list[cb.Measurement] = Field(min_length=1, max_length=MAX_MEASUREMENTS)


class CalibrationGroup(BaseModel):
    gpu: str
    dtype: str | None
    engine: str | None
    points: int


class CalibrationSummary(BaseModel):
    name: str
    created_at: str
    groups: list[CalibrationGroup]
