"""fleetplan's HTTP API, CLI and persistence (the only place for HTTP and SQL).

Two front ends, ``api.routes`` (FastAPI) and ``api.cli`` (``fleetplan``), call one
service layer, ``api.services``, which alone runs queries (``api.db``) and calls the
planner; request and response schemas are in ``api.schemas``, settings in
``api.settings``. See docs/design.md, "Map of the house".
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fleetplan")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
