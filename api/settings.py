"""Service settings, read from ``FLEETPLAN_*`` environment variables.

``FLEETPLAN_DATABASE_URL``       SQLAlchemy URL (``sqlite:///./fleetplan.db`` by default;
                                 ``postgresql://...`` is served through psycopg 3)
``FLEETPLAN_API_KEY``            when set, write requests need header ``X-API-Key``
``FLEETPLAN_SOLVER_TIME_LIMIT_S`` wall-clock limit of one MILP solve, seconds
``FLEETPLAN_SOLVER_GAP``         relative MIP gap at which the solver may stop
``FLEETPLAN_SCREENING_TIME_LIMIT_S`` wall-clock limit of a plan's screening, seconds (30):
                                 past it the plan is a 422 naming ``candidates``
``FLEETPLAN_MAX_BODY_BYTES``     largest request body accepted (413 beyond)
``FLEETPLAN_COMPARE_WORKERS``    processes solving a comparison's variants (default: one
                                 per core; 1 solves them in the server's own process)
``FLEETPLAN_WORKERS``            service processes behind the port (``fleetplan serve``, ``make
                                 run``; default 1)
``FLEETPLAN_WORK_THREADS``       threads per service process for CPU-heavy requests (planning,
                                 reports, simulations; default max(4, cores)): reads and
                                 ``/health`` never wait behind them
``FLEETPLAN_MAX_COMPARISONS``    comparisons queued or running per service process (default 4);
                                 ``POST /comparisons`` beyond it is 429 with Retry-After
``FLEETPLAN_COMPARISON_LEASE_S`` a running comparison's lease (default 30 s), renewed every
                                 third of it; one whose lease expired (its service died) is
                                 resumed by another, or failed after
``FLEETPLAN_COMPARISON_ATTEMPTS`` attempts (default 3)
``FLEETPLAN_CALIBRATION_DIR``    the YAML store of named calibrations (``./calibrations``)
``FLEETPLAN_VERIFY_DEFAULT``     ``off``: plans are not simulated unless their request
                                 sets ``verify.enabled``
``FLEETPLAN_ALTERNATIVES``       when ``POST /plans`` solves a plan's alternatives unless it
                                 says (``?alternatives=``): ``background`` (default: after
                                 answering), ``on_request`` (the first ``GET
                                 /plans/{id}/alternatives``) or ``inline`` (before answering)

They are read here, once per process (the service, or one CLI command), and passed
on: the planner reads no environment variable of its own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///./fleetplan.db"
DEFAULT_CALIBRATION_DIR = "calibrations"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FLEETPLAN_", extra="ignore", frozen=True)

    database_url: str = Field(default=DEFAULT_DATABASE_URL, min_length=1)
    api_key: SecretStr | None = Field(
        default=None, description="When set, write requests must send it as X-API-Key."
    )
    solver_time_limit_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    solver_gap: float = Field(default=0.001, ge=0, lt=1, allow_inf_nan=False)
    screening_time_limit_s: float = Field(default=30.0, gt=0, le=3600, allow_inf_nan=False)
    max_body_bytes: int = Field(default=1_000_000, gt=0)
    compare_workers: int | None = Field(
        default=None, ge=1, le=256, description="Processes per comparison (default: cores)."
    )
    ray_address: str | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        description="A Ray cluster's address ('local' starts one here): comparisons' "
        "variants run as Ray tasks there (pip install 'fleetplan[ray]'); unset: the "
        "local process pool.",
    )

    workers: int = Field(default=1, ge=1, le=64, description="Service processes (serve).")
    work_threads: int | None = Field(
        default=None, ge=1, le=256, description="Threads for CPU-heavy requests per process."
    )
    max_comparisons: int = Field(
        default=4, ge=1, le=10_000, description="Comparisons queued or running per process."
    )
    comparison_lease_s: float = Field(default=30.0, gt=0, le=3600, allow_inf_nan=False)
    comparison_attempts: int = Field(default=3, ge=1, le=100)

    calibration_dir: str = Field(default=DEFAULT_CALIBRATION_DIR, min_length=1)
    verify_default: bool = Field(
        default=True, description="Verify plans by simulation unless their request says."
    )
    alternatives: Literal["background", "on_request", "inline"] = Field(
        default="background",
        description="When POST /plans computes a plan's alternatives unless the request "
        "says (?alternatives=): after answering, in the background; on the first GET "
        "/plans/{id}/alternatives; or inline, before answering.",
    )

    @field_validator("calibration_dir", mode="before")
    @classmethod
    def _empty_dir_is_default(cls, value: object) -> object:
        """``FLEETPLAN_CALIBRATION_DIR=`` (empty) means the default, as it always has."""
        if isinstance(value, str) and not value.strip():
            return DEFAULT_CALIBRATION_DIR
        return value

    @field_validator("verify_default", mode="before")
    @classmethod
    def _verify_switch(cls, value: object) -> object:
        """Only ``0``, ``off``, ``false`` and ``no`` turn it off; anything else is on."""
        if isinstance(value, str):
            return value.strip().lower() not in ("0", "off", "false", "no")
        return value

    @field_validator("api_key", mode="before")
    @classmethod
    def _empty_key_is_none(cls, value: object) -> object:
        """``FLEETPLAN_API_KEY=`` (empty) means no key, not an empty key. A key of
        whitespace only (or with whitespace around it) is refused: it is a mistake
        (a quoted blank, a stray newline from a file), and reading it as "no key" would
        silently turn authentication off."""
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if isinstance(value, str):
            if value == "":
                return None
            if not value.strip():
                raise ValueError(
                    "FLEETPLAN_API_KEY is whitespace only; set a real key, or leave it "
                    "empty or unset to run without one"
                )
            if value != value.strip():
                raise ValueError(
                    "FLEETPLAN_API_KEY has whitespace around it (a stray newline?); "
                    "clients would have to send it too: remove it"
                )
        return value
