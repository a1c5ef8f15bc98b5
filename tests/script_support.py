"""Load a script of ``scripts/`` as a module, for tests of its functions, and the
summaries scripts write."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
BENCH = SCRIPTS.parent / "bench"
AIC_KERNELS = SCRIPTS.parent / "catalog/measurements/sources/aiconfigurator-kernels.json"


def load_script(name: str, folder: Path = SCRIPTS) -> ModuleType:
    """``<folder>/<name>.py`` (``scripts/`` by default, or :data:`BENCH`) imported as the
    module ``name`` (not run as ``__main__``), registered so its dataclasses resolve."""
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def aiconfigurator_kernels() -> dict[str, Any]:
    """``catalog/measurements/sources/aiconfigurator-kernels.json`` (written by
    ``scripts/extract_aiconfigurator.py``), parsed."""
    data: dict[str, Any] = json.loads(AIC_KERNELS.read_text())
    return data
