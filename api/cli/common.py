"""What every ``fleetplan`` command shares: exit codes, the one-line error, settings,
reading a request file, JSON output, progress on stderr, a database session.

The command modules (:mod:`api.cli.plans`, ...) import this module, and
:mod:`api.cli` imports them for their registrars: nothing imports back up.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from sqlalchemy.orm import Session

from api.services.database import open_session
from api.services.errors import ServiceError
from api.services.plans import parse_request
from api.services.reports import render_table
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


def print_model(as_json: bool, model: BaseModel, render: Callable[[Any], str]) -> int:
    """Print a result: the model as JSON with ``--json``, else ``render(model)``."""
    if as_json:
        print_json(model.model_dump(mode="json"))
    else:
        print(render(model))
    return EXIT_OK


def record_cells(item: Any) -> list[str]:
    """The first cells of a stored record's row: id, creation time (UTC), status."""
    return [item.id, item.created_at.strftime("%Y-%m-%d %H:%M:%S"), item.status.value]


def print_page(
    as_json: bool,
    items: Sequence[BaseModel],
    total: int,
    headers: list[str],
    row: Callable[[Any], list[str]],
    noun: str,
) -> int:
    """A page of a stored list: ``{"items", "total"}`` as JSON with ``--json``, else a
    table of ``row(item)`` and ``N of TOTAL noun(s)``."""
    if as_json:
        print_json({"items": [i.model_dump(mode="json") for i in items], "total": total})
        return EXIT_OK
    print(render_table(headers, [row(i) for i in items]))
    print(f"{len(items)} of {total} {noun}(s)")
    return EXIT_OK


def show_stored(
    as_json: bool, get: Callable[[Session], BaseModel], render: Callable[[Any], str]
) -> int:
    """``fleetplan X show ID``: the stored record ``get`` reads (in a session of its
    own), as JSON with ``--json``, else ``render(record)`` as it is (its own newlines)."""
    with database_session(load_settings()) as session:
        public = get(session)
    if as_json:
        print_json(public.model_dump(mode="json"))
    else:
        print(render(public), end="")
    return EXIT_OK


def command_group(sub: Subparsers, name: str, help: str, commands: str = "{list,show}") -> Any:
    """``fleetplan NAME {list,show}``: the group's parser for its subcommands (one is
    required)."""
    group = sub.add_parser(name, help=help).add_subparsers(dest=f"{name}_command", metavar=commands)
    group.required = True
    return group


def add_paging(parser: argparse.ArgumentParser) -> None:
    """``--limit`` and ``--json`` of a ``list`` command (after its filters)."""
    parser.add_argument(
        "--limit", type=page_limit, default=20, help="at most this many (1-200, 20)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON (items and total)")


def add_show(group: Any, help: str, id_help: str, json_help: str, func: Handler) -> None:
    """A group's ``show ID [--json]`` command."""
    show = group.add_parser("show", help=help)
    show.add_argument("id", help=id_help)
    show.add_argument("--json", action="store_true", help=json_help)
    show.set_defaults(func=func)


#: Replica parameters (a PlanningError's field) -> their command-line options, shared by
#: the analyses and ``analyze capacity``.
REPLICA_OPTIONS = {
    "model": "--model",
    "gpu": "--gpu",
    "tp": "--tp",
    # single-replica analyses take no pipeline stages: a model too big for a node is
    # a --gpu question there (the message says how many stages would fit)
    "pp": "--gpu",
    "dtype": "--dtype",
    "kv_dtype": "--kv-dtype",
    "mfu": "--mfu",
    "mbu": "--mbu",
}


RequestT = TypeVar("RequestT", bound=BaseModel)


def validated_request(
    model: type[RequestT], fields: Mapping[str, Any], options: Mapping[str, str]
) -> RequestT:
    """``model`` validated from the options given (``fields`` without the None ones); a
    ValidationError becomes a CliError naming the option of its first field."""
    try:
        return model.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "options"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise CliError(options.get(field, field), message) from None


def planning_error(err: PlanningError, options: Mapping[str, str]) -> CliError:
    """A PlanningError as a CliError naming the option of its first issue's field."""
    if not err.issues:
        return CliError(err.code, err.message)
    field, message = err.issues[0]
    return CliError(options.get(field, field), message)


def int_range(
    low: int, high: int | None = None, *, thousands: bool = False
) -> Callable[[str], int]:
    """An argparse ``type``: an integer from ``low`` to ``high`` (no upper bound when
    None); ``thousands`` accepts ``1_000`` and ``1,000`` and prints bounds that way."""

    def convert(text: str) -> int:
        try:
            value = int(text.replace("_", "").replace(",", "") if thousands else text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if high is None:
            if value < low:
                raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        elif not low <= value <= high:
            top = f"{high:,}" if thousands else str(high)
            raise argparse.ArgumentTypeError(f"must be between {low} and {top}, got {value}")
        return value

    return convert


def float_range(low: float, high: float) -> Callable[[str], float]:
    """An argparse ``type``: a number in [``low``, ``high``]."""

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low:g}, {high:g}], got {value:g}")
        return value

    return convert


#: ``--limit``: 1 to 200.
page_limit = int_range(1, 200)


def number(option: str, kind: type[int] | type[float]) -> Callable[[str], Any]:
    """An argparse ``type`` that reports a malformed number as ``<option>: ...``."""
    what = "an integer" if kind is int else "a number"

    def convert(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise CliError(option, f"{text!r} is not {what}") from None

    return convert


def add_number(
    parser: argparse.ArgumentParser, option: str, kind: type[int] | type[float], **kwargs: Any
) -> None:
    """``parser.add_argument(option, type=number(option, kind), **kwargs)``: a numeric
    option whose malformed value is reported as ``<option>: ...``."""
    parser.add_argument(option, type=number(option, kind), **kwargs)


class _Loader(yaml.SafeLoader):
    """YAML 1.1 (PyYAML) with YAML 1.2's and JSON's floats: ``1e3`` and ``2E-5`` are
    numbers, not strings (requests take strict numbers, so a string is refused)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


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
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader; YAML reads JSON too
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
