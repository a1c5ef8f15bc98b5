"""Strict JSON request bodies for write routes.

Python's ``json`` module accepts ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON)
and silently keeps the last of duplicated keys. A body holding either is ambiguous
or cannot be stored (PostgreSQL's ``json`` refuses ``NaN``), so write routes use
:class:`JsonBodyRoute`: it answers a body that is not ``application/json`` with 415,
and parses JSON with :func:`strict_json_loads`, whose failures FastAPI turns into a
``json_invalid`` validation error (422, field ``(body)``; see ``api.errors``).

Use it as ``APIRouter(route_class=JsonBodyRoute)``.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from api.errors import error_response

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class _Rejected(json.JSONDecodeError):
    pass


def _reject_constant(doc: str) -> Callable[[str], Any]:
    def reject(name: str) -> Any:
        pos = max(doc.find(name), 0)
        raise _Rejected(f"{name} is not valid JSON (numbers must be finite)", doc, pos)

    return reject


def _reject_duplicates(doc: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                pos = max(doc.find(json.dumps(key)), 0)
                raise _Rejected(f"duplicate key {key!r}", doc, pos)
            out[key] = value
        return out

    return build


#: Integers longer than this are read as floats (infinite beyond ~309 digits), so the
#: field that holds one gets its own validation error ("must be a finite number", "must
#: be an integer") instead of the whole body failing: Python refuses to convert an
#: integer of more than 4,300 digits (``sys.get_int_max_str_digits``), which made a
#: 5,000-digit number a 400 without a field. No field accepts numbers this long.
MAX_INT_DIGITS = 100


def _parse_int(text: str) -> int | float:
    return int(text) if len(text) <= MAX_INT_DIGITS else float(text)


def strict_json_loads(body: bytes | str) -> Any:
    """``json.loads`` that refuses NaN/Infinity and duplicate keys (JSONDecodeError);
    integers over MAX_INT_DIGITS digits become floats."""
    doc = body.decode("utf-8") if isinstance(body, bytes) else body
    return json.loads(
        doc,
        parse_constant=_reject_constant(doc),
        object_pairs_hook=_reject_duplicates(doc),
        parse_int=_parse_int,
    )


def is_json_media_type(content_type: str | None) -> bool:
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


class StrictJsonRequest(Request):
    """A request whose ``json()`` is :func:`strict_json_loads` (cached)."""

    async def json(self) -> Any:
        if not hasattr(self, "_strict_json"):
            body = await self.body()
            try:
                self._strict_json = strict_json_loads(body)
            except UnicodeDecodeError as err:
                raise json.JSONDecodeError("the body is not UTF-8", "", err.start) from None
            except RecursionError:
                raise json.JSONDecodeError("nested too deeply", "", 0) from None
        return self._strict_json


class JsonBodyRoute(APIRoute):
    """Route class: 415 for a non-JSON body on POST/PUT/PATCH, strict JSON parsing."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        expects_body = self.body_field is not None

        async def route_handler(request: Request) -> Response:
            request = StrictJsonRequest(request.scope, request.receive)
            if expects_body and request.method in BODY_METHODS:
                content_type = request.headers.get("content-type")
                body = await request.body()  # cached on the request for the handler
                if body and not is_json_media_type(content_type):
                    shown = content_type or "none"
                    return error_response(
                        415,
                        "unsupported_media_type",
                        f"the body must be JSON (Content-Type: application/json), got {shown}",
                        [("Content-Type", f"expected application/json, got {shown}")],
                    )
            return await handler(request)

        return route_handler
