"""The FastAPI application.

``create_app()`` builds it (also usable as a uvicorn factory:
``uvicorn --factory api.main:create_app``). Settings come from ``FLEETPLAN_*``
environment variables unless passed in; the catalog is the shipped one unless
passed in. The database engine is made here (lazily connecting) and disposed
when the app shuts down.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp

from api import __version__
from api.db.session import make_engine, make_sessionmaker
from api.errors import BodySizeLimitMiddleware, install_error_handlers
from api.headers import HttpHeadersMiddleware
from api.routes import analyses as analyses_routes
from api.routes import calibrations as calibrations_routes
from api.routes import catalog as catalog_routes
from api.routes import comparisons as comparisons_routes
from api.routes import deployments as deployments_routes
from api.routes import health as health_routes
from api.routes import plans as plans_routes
from api.routes import reports as reports_routes
from api.routes.docs import install_docs
from api.routes.web import install_web
from api.schemas import error_responses
from api.services.comparison_runner import ComparisonRunner
from api.services.plans import solver_caps
from api.settings import Settings
from catalog.loader import load_catalog
from catalog.schema import Catalog


class App(FastAPI):
    """FastAPI with :class:`api.headers.HttpHeadersMiddleware` outside everything, the
    error handlers too: a 500 carries the security headers like any answer."""

    def build_middleware_stack(self) -> ASGIApp:
        return HttpHeadersMiddleware(super().build_middleware_stack(), self.routes)


def create_app(settings: Settings | None = None, catalog: Catalog | None = None) -> FastAPI:
    settings = settings if settings is not None else Settings()
    catalog = catalog if catalog is not None else load_catalog()
    engine = make_engine(settings.database_url)

    sessions = make_sessionmaker(engine)
    comparisons = ComparisonRunner(sessions, catalog, settings, solver_caps(settings))
    # CPU-heavy requests (planning, reports, simulations) run here, not in the
    # threadpool that serves reads, nor on the event loop (api.deps.run_heavy).
    heavy = ThreadPoolExecutor(
        max_workers=settings.work_threads or max(4, os.cpu_count() or 1),
        thread_name_prefix="fleetplan-work",
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        comparisons.start()  # resumes comparisons whose service died
        try:
            yield
        finally:
            comparisons.shutdown()  # running/queued ones: leases released, resumed later
            heavy.shutdown(wait=False, cancel_futures=True)
            engine.dispose()

    app = App(
        title="fleetplan",
        version=__version__,
        summary="Capacity planning for LLM inference fleets.",
        lifespan=lifespan,
        # Every 422 carries the single error body (api.errors), whatever the route.
        responses=error_responses(422),
        # /docs from local assets (api.routes.docs): the defaults load from a CDN
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.catalog = catalog
    app.state.engine = engine
    app.state.sessionmaker = sessions
    app.state.comparisons = comparisons
    app.state.heavy = heavy

    install_error_handlers(app)
    app.add_middleware(BodySizeLimitMiddleware, max_body_bytes=settings.max_body_bytes)

    app.include_router(health_routes.router)
    app.include_router(catalog_routes.router)
    app.include_router(plans_routes.router)
    app.include_router(calibrations_routes.router)
    app.include_router(analyses_routes.router)
    app.include_router(comparisons_routes.router)
    app.include_router(reports_routes.router)
    app.include_router(deployments_routes.router)
    install_docs(app)
    install_web(app)
    return app


def create_worker_app() -> FastAPI:
    """The app of one of ``fleetplan serve --workers N``'s processes (a uvicorn
    factory): it stops when the supervising process dies, even killed outright."""
    import signal

    from planner.lifetime import die_with_parent

    die_with_parent(os.getppid(), signal.SIGTERM)
    return create_app()
