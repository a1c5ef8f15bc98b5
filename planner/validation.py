"""Validation errors a person can act on.

pydantic's messages name the rule that failed ("Input should be less than 1",
"Input should be a valid dictionary or instance of LengthSpec") and, printed
whole, carry its internals (``input_type=``, links to errors.pydantic.dev).
:func:`friendly_issues` turns each error into ``(field path, message)``:

* the path with list indices in brackets: ``traffic.classes[2].prompt_tokens``;
* a mapping given as something else says the shape expected
  (``expected {mean_tokens, p90_tokens}, got 8000``);
* a number above a fraction's upper bound of 1 that would fit as a
  percentage gets a hint (``a fraction from 0 to 1: did you mean 0.6?``);
* an unknown key lists the keys allowed;
* never pydantic's internals.

The CLI (``planner.service.parse_request``) and the service's 422 body
(``api.errors``) both use it.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

_INTERNALS = re.compile(r"\s*\[type=.*$|\s*For further information visit \S+", re.S)


def field_path(loc: Sequence[Any]) -> str:
    """``("traffic", "classes", 2, "prompt_tokens")`` -> ``traffic.classes[2].prompt_tokens``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(root)"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation may hold (through Optional, list, dict, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _models_in(arg)
    return out


def _is_sequence(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, Sequence):
        return True
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return any(_is_sequence(a) for a in typing.get_args(annotation))
    return False


def model_at(root: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel] | None:
    """The model a location points into (``loc`` relative to ``root``), or None when it
    is not (or not only) a model: a number, a string, a list."""
    current: Any = root
    for part in loc:
        if isinstance(part, int):
            continue  # list index: the element type is what the field's models are
        models: list[Any] = _models_in(current) if not isinstance(current, type) else [current]
        model = next((m for m in models if part in m.model_fields), None)
        if model is None:
            return None
        current = model.model_fields[part].annotation
    models = _models_in(current) if not (isinstance(current, type)) else [current]
    if not models or (not isinstance(current, type) and _is_sequence(current)):
        return None
    m = models[0]
    return m if isinstance(m, type) and issubclass(m, BaseModel) else None


def shape(model: type[BaseModel]) -> str:
    """``{mean_tokens, p90_tokens}``: the keys a mapping of ``model`` takes."""
    return "{" + ", ".join(model.model_fields) + "}"


def _got(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:60] + "..."


def friendly_message(e: Mapping[str, Any], root: type[BaseModel] | None, loc: Sequence) -> str:
    """One pydantic error as a sentence without pydantic's internals (see module doc)."""
    kind = str(e.get("type", ""))
    ctx = e.get("ctx") or {}
    value = e.get("input")
    msg = _INTERNALS.sub("", str(e.get("msg", ""))).removeprefix("Value error, ")
    model = model_at(root, loc) if root is not None else None
    if kind in ("model_type", "dict_type", "model_attributes_type") and model is not None:
        return f"expected {shape(model)}, got {_got(value)}"
    if kind == "missing":
        return f"required: expected {shape(model)}" if model is not None else "required"
    if kind == "extra_forbidden":
        parent = model_at(root, loc[:-1]) if root is not None else None
        allowed = f"; expected one of: {', '.join(parent.model_fields)}" if parent else ""
        return f"unknown field {str(loc[-1])!r}{allowed}"
    bound = ctx.get("lt", ctx.get("le"))
    if (
        kind in ("less_than", "less_than_equal")
        and isinstance(bound, int | float)
        and bound == 1
        and isinstance(value, int | float)
        and 1 < value <= 100
    ):
        return (
            f"is a fraction from 0 to 1, got {value:g}: did you mean {value / 100:g}?"
            " (percentages are written as fractions)"
        )
    if kind in ("float_parsing", "float_type", "int_parsing", "int_type", "int_from_float"):
        whole = "a whole number" if kind.startswith("int") else "a number"
        return f"expected {whole}, got {_got(value)}"
    if kind == "list_type":
        return f"expected a list, got {_got(value)}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return msg.replace("Input should be", "must be") + f", got {_got(value)}"
    if kind == "enum" and "expected" in ctx:
        return f"expected one of {ctx['expected']}, got {_got(value)}"
    return msg.replace("Input should be", "expected")


def friendly_issues(
    errors: Iterable[Mapping[str, Any]], root: type[BaseModel] | None, strip: int = 0
) -> list[tuple[str, str]]:
    """``(field path, message)`` per pydantic error; ``strip`` leading loc parts are
    dropped first (FastAPI prefixes ``body``)."""
    out = []
    for e in errors:
        loc = tuple(e.get("loc", ()))[strip:]
        out.append((field_path(loc), friendly_message(e, root, loc)))
    return out
