"""The built-in task library: KernelBench-format references written for this project.

Each task is a reference source file under `builtin/` (loaded unchanged) plus `small_shapes`, the
overrides of its top-level integer constants that make it run quickly under the CPU interpreter.
The list lives in `builtin/manifest.json`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
MANIFEST = BUILTIN_DIR / "manifest.json"


@dataclass(frozen=True)
class BuiltinTask:
    name: str
    description: str
    source: str
    small_shapes: dict[str, int] = field(default_factory=dict)
    file: str = ""


@lru_cache(maxsize=1)
def _load() -> tuple[BuiltinTask, ...]:
    entries = json.loads(MANIFEST.read_text())
    tasks = []
    for entry in entries:
        source = (BUILTIN_DIR / entry["file"]).read_text()
        tasks.append(
            BuiltinTask(
                name=entry["name"],
                description=entry.get("description", ""),
                source=source,
                small_shapes=dict(entry.get("small_shapes", {})),
                file=entry["file"],
            )
        )
    return tuple(tasks)


def builtin_tasks() -> list[BuiltinTask]:
    """All built-in tasks, in manifest order."""
    return list(_load())


def builtin_task_names() -> list[str]:
    return [t.name for t in _load()]


def builtin_task(name: str) -> BuiltinTask:
    """The built-in task called `name`; KeyError listing the available names otherwise."""
    for task in _load():
        if task.name == name:
            return task
    raise KeyError(f"no built-in task named {name!r}; available: {', '.join(builtin_task_names())}")
