"""The one place where errors become HTTP responses.

Every error has the same body::

    {"error": code, "detail": text, "issues": [{"field": path, "message": text}]}

Domain errors (``PlanningError``, ``CatalogError``) carry a code and their issues,
never a status: they are request problems, so 422. A catalog id that appears in a
*path* (``GET /catalog/gpus/nope``) is a missing resource: routes raise
:class:`ApiError` via :func:`not_found` or wrap planner calls in
:func:`unknown_entry_is_404`; the same id inside a request *body* stays a 422.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.services.errors import Busy, Conflict, KeyReused, NotFound, ServiceError, error_reference
from catalog.loader import CatalogError
from planner.capacity_analysis import CapacityRequest
from planner.errors import PlanningError, UnknownEntryError
from planner.gpu_ranking import GpuRankingRequest
from planner.request import PlanRequest
from planner.validation import friendly_issues, friendly_message

log = logging.getLogger("api")

UNPROCESSABLE = 422

# Codes for HTTP statuses raised by the framework or by routes (HTTPException).
HTTP_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    429: "too_many_requests",
    500: "internal_error",
    503: "unavailable",
}

# Status for a PlanningError subclass, by code, when it is not a plain 422.
# (unknown_entry in a request body is 422; path lookups use unknown_entry_is_404.)
PLANNING_STATUS: dict[str, int] = {}


class ApiError(Exception):
    """An error a route raises on purpose, with its status, code and issues."""

    def __init__(
        self,
        status_code: int,
        code: str,
        detail: str,
        issues: Sequence[tuple[str, str]] = (),
        headers: dict[str, str] | None = None,
    ):
        super().__init__(detail)
        self.status_code = status_code
        self.code = code
        self.detail = detail
        self.issues = list(issues)
        self.headers = headers


def not_found(field: str, detail: str) -> ApiError:
    """A 404 naming the path parameter that did not match anything."""
    return ApiError(404, "not_found", detail, [(field, detail)])


@contextmanager
def unknown_entry_is_404(field: str = "id") -> Iterator[None]:
    """Within a path lookup, turn the planner's UnknownEntryError into a 404."""
    try:
        yield
    except UnknownEntryError as err:
        raise ApiError(404, "not_found", err.message, err.issues or [(field, err.message)]) from err


def error_body(code: str, detail: str, issues: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    return {
        "error": code,
        "detail": detail,
        "issues": [{"field": field, "message": message} for field, message in issues],
    }


def error_response(
    status_code: int,
    code: str,
    detail: str,
    issues: Iterable[tuple[str, str]] = (),
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(code, detail, issues), status_code=status_code, headers=headers)


def http_code(status_code: int) -> str:
    if status_code in HTTP_CODES:
        return HTTP_CODES[status_code]
    try:
        return HTTPStatus(status_code).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


def _loc_to_field(loc: Sequence[Any]) -> str:
    parts = list(loc)
    if parts and parts[0] == "body":
        parts = parts[1:]
    return ".".join(str(p) for p in parts) or "(body)"


def _issue(e: Mapping[str, Any], root: type | None = None) -> tuple[str, str]:
    if e.get("type") == "json_invalid":  # loc is ("body", character offset)
        loc = list(e.get("loc", ()))
        where = f" at character {loc[1]}" if len(loc) > 1 else ""
        reason = (e.get("ctx") or {}).get("error", "")
        return "(body)", f"invalid JSON{where}: {reason}" if reason else f"invalid JSON{where}"
    loc = list(e.get("loc", ()))
    strip = 1 if loc and loc[0] == "body" else 0
    if not loc[strip:]:
        return "(body)", friendly_message(e, root, ())
    return friendly_issues([e], root, strip)[0]


#: Request bodies whose errors can name the shape expected, by route path.
BODY_MODELS: dict[str, type] = {
    "/plans": PlanRequest,
    "/plans/validate": PlanRequest,
    "/analyses/capacity": CapacityRequest,
    "/analyses/gpu-ranking": GpuRankingRequest,
}


def validation_issues(err: RequestValidationError, path: str = "") -> list[tuple[str, str]]:
    """(field, message) per error: bracketed list indices, the shape expected, fraction
    hints and no pydantic internals (planner.validation)."""
    root = BODY_MODELS.get(path.rstrip("/"))
    return [_issue(e, root) for e in err.errors()]


def _summary(issues: Sequence[tuple[str, str]], fallback: str) -> str:
    if not issues:
        return fallback
    return "; ".join(f"{field}: {message}" for field, message in issues)


# --------------------------------------------------------------------------- handlers


async def _api_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status_code, exc.code, exc.detail, exc.issues, exc.headers)


async def _planning_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PlanningError)
    status = PLANNING_STATUS.get(exc.code, UNPROCESSABLE)
    return error_response(status, exc.code, exc.message, exc.issues)


async def _catalog_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CatalogError)
    return error_response(UNPROCESSABLE, exc.code, str(exc), exc.issues)


async def _request_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    issues = validation_issues(exc, request.url.path)
    return error_response(
        UNPROCESSABLE, "invalid_input", _summary(issues, "invalid request"), issues
    )


async def _http_exception(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    headers = dict(exc.headers) if exc.headers is not None else None
    return error_response(exc.status_code, http_code(exc.status_code), detail, headers=headers)


async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
    error_id = error_reference()
    log.error(
        "unhandled error %s on %s %s", error_id, request.method, request.url.path, exc_info=exc
    )
    return error_response(
        500,
        "internal_error",
        f"internal server error (reference {error_id}; the server log has the details)",
    )


#: HTTP status of each service error (anything else a service raises is a 500).
SERVICE_STATUS: dict[type[ServiceError], int] = {
    NotFound: 404,
    Conflict: 409,
    Busy: 429,
    KeyReused: UNPROCESSABLE,
}


async def _service_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    status = next((v for k, v in SERVICE_STATUS.items() if isinstance(exc, k)), 500)
    response = error_response(status, exc.code, exc.detail, exc.issues)
    if isinstance(exc, Busy):
        response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


def install_error_handlers(app: FastAPI) -> None:
    """Register every mapping above on ``app``."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(PlanningError, _planning_error)
    app.add_exception_handler(CatalogError, _catalog_error)
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(Exception, _unhandled)


# --------------------------------------------------------------------------- body size


class BodyTooLarge(StarletteHTTPException):
    """Raised from ``receive`` once a streamed body passes the limit. It is an
    HTTPException so FastAPI's body reader re-raises it unchanged (a plain exception
    would become a 400) and the HTTPException handler answers with 413."""

    def __init__(self, limit: int):
        super().__init__(413, f"request body exceeds {limit} bytes")


class BodySizeLimitMiddleware:
    """Refuse request bodies over ``max_body_bytes`` with 413 and the error body.

    A declared ``Content-Length`` over the limit is refused before the app runs; a
    body without one (chunked) is counted as it is read.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            response = error_response(413, "body_too_large", f"request body exceeds {limit} bytes")
            await response(scope, receive, send)
            return

        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge as exc:  # read outside a route (e.g. by other middleware)
            if started:
                raise
            await error_response(413, "body_too_large", str(exc.detail))(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
