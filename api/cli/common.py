"""What every ``fleetplan`` command shares: exit codes, the one-line error, settings,
reading a request file, JSON output, progress on stderr, a database session.

The command modules (:mod:`api.cli.plans`, ...) import this module, and
:mod:`api.cli` imports them for their registrars: nothing imports back up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from sqlalchemy.orm import Session

from api.services.database import open_session
from api.services.errors import ServiceError
from api.services.plans import parse_request
from api.settings import Settings
from planner.errors import PlanningError
from planner.request import PlanRequest

PROG = "fleetplan"
EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2

Subparsers = argparse._SubParsersAction  # the object add_subparsers() returns
Handler = Callable[[argparse.Namespace], int]


class CliError(Exception):
    """A user-facing error: ``field`` names what was wrong (an option, an id...)."""

    def __init__(self, field: str, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.exit_code = exit_code

    @classmethod
    def from_service(cls, err: ServiceError, exit_code: int = EXIT_USAGE) -> CliError:
        return cls(err.field, err.detail, exit_code)


def load_settings() -> Settings:
    """Settings from FLEETPLAN_* variables; a bad value is a one-line CLI error."""
    try:
        return Settings()
    except ValidationError as err:
        first = err.errors()[0]
        field = "FLEETPLAN_" + ".".join(str(p) for p in first["loc"]).upper()
        raise CliError(field, first["msg"]) from None


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def page_limit(text: str) -> int:
    """``--limit``: 1 to 200."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= 200:
        raise argparse.ArgumentTypeError(f"must be between 1 and 200, got {value}")
    return value


def number(option: str, kind: type[int] | type[float]) -> Callable[[str], Any]:
    """An argparse ``type`` that reports a malformed number as ``<option>: ...``."""
    what = "an integer" if kind is int else "a number"

    def convert(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise CliError(option, f"{text!r} is not {what}") from None

    return convert


def read_request(path: str) -> dict[str, Any]:
    """The request document in ``path`` (``-``: stdin), YAML or JSON, as a mapping."""
    where = "stdin" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError("FILE", f"{path}: no such file") from None
    except IsADirectoryError:
        raise CliError("FILE", f"{path}: is a directory") from None
    except UnicodeDecodeError:
        raise CliError("FILE", f"{where}: not UTF-8 text") from None
    except OSError as err:
        raise CliError("FILE", f"{path}: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)  # YAML 1.1 reads JSON documents too
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CliError("FILE", f"{where}: not valid YAML or JSON: {first}") from None
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise CliError("FILE", f"{where}: expected a mapping (the request), got {kind}")
    return data


def clean_message(message: str) -> str:
    """Drop pydantic's "Value error, " prefix."""
    return message.replace("Value error, ", "")


def without_value_error_prefix(err: PlanningError) -> PlanningError:
    """``err`` again, its messages without pydantic's "Value error, " prefixes."""
    issues = [(field, clean_message(message)) for field, message in err.issues]
    return type(err)(clean_message(err.message), issues)


def parse_request_cli(data: dict[str, Any]) -> PlanRequest:
    """``parse_request`` with pydantic's "Value error, " prefixes dropped."""
    try:
        return parse_request(data)
    except PlanningError as err:
        raise without_value_error_prefix(err) from None


@contextmanager
def quiet_stdout() -> Iterator[None]:
    """Point file descriptor 1 at the null device meanwhile: the HiGHS library prints
    its banner on stdout from C (once per process), which would break ``--json``."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:  # no usable descriptors (embedded use): leave them alone
        yield
        return
    try:
        os.dup2(null, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


@contextmanager
def progress(message: str) -> Iterator[None]:
    """A one-line status on stderr while long work runs (terminals only; erased after)."""
    shown = sys.stderr.isatty()
    if shown:
        sys.stderr.write(f"{message}\u2026")
        sys.stderr.flush()
    try:
        yield
    finally:
        if shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def jsonable(data: Any) -> Any:
    return json.loads(json.dumps(data, default=str))


@contextmanager
def database_session(settings: Settings) -> Iterator[Session]:
    """A session on a migrated database, or a one-line error (exit 1) saying what to do."""
    try:
        with open_session(settings.database_url) as session:
            yield session
    except ServiceError as err:
        if err.code != "database":
            raise
        raise CliError.from_service(err, EXIT_RUNTIME) from None
