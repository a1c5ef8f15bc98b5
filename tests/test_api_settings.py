"""Settings come from FLEETPLAN_* variables, with safe defaults."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from api.settings import Settings


def test_defaults():
    s = Settings()
    assert s.database_url == "sqlite:///./fleetplan.db"
    assert s.api_key is None
    assert s.solver_time_limit_s == 10
    assert s.solver_gap == 0.001
    assert s.max_body_bytes == 1_000_000


def test_environment_overrides(monkeypatch):
    monkeypatch.setenv("FLEETPLAN_DATABASE_URL", "postgresql://u@h/db")
    monkeypatch.setenv("FLEETPLAN_API_KEY", "s3cret-key")
    monkeypatch.setenv("FLEETPLAN_SOLVER_TIME_LIMIT_S", "2.5")
    monkeypatch.setenv("FLEETPLAN_MAX_BODY_BYTES", "10")
    s = Settings()
    assert s.database_url == "postgresql://u@h/db"
    assert s.api_key is not None and s.api_key.get_secret_value() == "s3cret-key"
    assert "s3cret-key" not in repr(s)  # the key is never printed
    assert s.solver_time_limit_s == 2.5
    assert s.max_body_bytes == 10


def test_empty_api_key_means_none(monkeypatch):
    monkeypatch.setenv("FLEETPLAN_API_KEY", "")
    assert Settings().api_key is None


@pytest.mark.parametrize("value", ["  ", "\t", "\n", " \r\n "])
def test_a_whitespace_only_api_key_is_refused_at_startup(monkeypatch, value):
    """It used to be read as "no key": authentication silently off (issue 14)."""
    monkeypatch.setenv("FLEETPLAN_API_KEY", value)
    with pytest.raises(ValidationError, match="whitespace only"):
        Settings()
    with pytest.raises(ValidationError, match="whitespace only"):
        Settings(api_key=value)


def test_an_api_key_with_whitespace_around_it_is_refused(monkeypatch):
    monkeypatch.setenv("FLEETPLAN_API_KEY", "s3cret\n")
    with pytest.raises(ValidationError, match="whitespace around it"):
        Settings()


@pytest.mark.parametrize(
    ("name", "value"),
    [("FLEETPLAN_SOLVER_GAP", "1.5"), ("FLEETPLAN_SOLVER_TIME_LIMIT_S", "0")],
)
def test_bad_values_are_refused(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()
