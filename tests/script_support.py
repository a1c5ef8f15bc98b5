"""Load a script of ``scripts/`` as a module, for tests of its functions, and the
summaries scripts write."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
AIC_KERNELS = SCRIPTS.parent / "catalog/measurements/sources/aiconfigurator-kernels.json"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` imported as the module ``name`` (not run as ``__main__``)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def aiconfigurator_kernels() -> dict[str, Any]:
    """``catalog/measurements/sources/aiconfigurator-kernels.json`` (written by
    ``scripts/extract_aiconfigurator.py``), parsed."""
    data: dict[str, Any] = json.loads(AIC_KERNELS.read_text())
    return data
