"""Headers every response carries, and what ``OPTIONS`` answers.

:class:`HttpHeadersMiddleware` (installed by ``api.main``):

- adds the security headers to every response: ``X-Content-Type-Options: nosniff``
  (no MIME sniffing of a JSON body or a CSV report into HTML), ``X-Frame-Options:
  DENY`` and CSP ``frame-ancestors 'none'`` (no framing: clickjacking),
  ``Referrer-Policy: no-referrer``, and a ``Content-Security-Policy``: by default
  :data:`DEFAULT_CSP` (no scripts at all; inline styles and ``data:`` images, which
  the HTML reports use); ``/docs`` sets its own (``api.routes.docs``: its one inline
  script by hash, the vendored Swagger UI from this service). A response that already
  has a CSP keeps it.
- answers ``OPTIONS`` on a known path with 204 and ``Allow`` listing every method the
  path has (the routes of one path are separate, so the framework named only one
  route's methods, or none), and gives every 405 the same full ``Allow``.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: No scripts, frames, plugins or forms; styles inline and images inline or from here.
DEFAULT_CSP = (
    "default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)

SECURITY_HEADERS: dict[str, str] = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


#: The methods asked about when working out a path's ``Allow``.
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(routes: Iterable[BaseRoute], scope: Scope) -> set[str]:
    """Every HTTP method some route fully matches at the scope's path (empty: no route
    has the path). Asks the routes themselves, so included routers and mounts count."""
    methods = {
        method
        for method in METHODS
        if any(
            route.matches({**scope, "method": method})[0] == Match.FULL
            and (method in ("GET", "HEAD") or not isinstance(route, Mount))  # static files
            for route in routes
        )
    }
    if methods:
        methods.add("OPTIONS")
    return methods


class HttpHeadersMiddleware:
    """See the module docstring. ``routes`` is read at each request (``app.routes``)."""

    def __init__(self, app: ASGIApp, routes: Iterable[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    def _allow(self, scope: Scope) -> str:
        return ", ".join(sorted(allowed_methods(self.routes, scope)))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if not (message["status"] == 405 and k.lower() == b"allow")
                ]
                names = {k.lower() for k, _ in headers}
                for name, value in SECURITY_HEADERS.items():
                    if name.lower().encode() not in names:
                        headers.append((name.lower().encode(), value.encode()))
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", DEFAULT_CSP.encode()))
                if message["status"] == 405:
                    headers.append((b"allow", self._allow(scope).encode()))
                message = {**message, "headers": headers}
            await send(message)

        if scope["method"] == "OPTIONS":
            allow = self._allow(scope)
            if allow:
                await send_with_headers(
                    {
                        "type": "http.response.start",
                        "status": 204,
                        "headers": [(b"allow", allow.encode())],
                    }
                )
                await send_with_headers({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send_with_headers)
