"""fleetplan's HTTP API, CLI and persistence (the only place for HTTP and SQL)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fleetplan")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
