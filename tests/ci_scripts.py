"""The CI gates in .ci/ (not a package), loaded by path for their tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load(name: str) -> ModuleType:
    """`.ci/<name>.py` as a module."""
    spec = importlib.util.spec_from_file_location(name, REPO / ".ci" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module
