"""Known-correct Triton candidates for the built-in tasks.

Each file `<task_name>/<variant>.py` defines `ModelNew` and starts with module-level tunable
constants declared as `NAME = <int>  # tunable: v1, v2, ...`; every listed value yields a correct
kernel, so a scripted proposer may rewrite that one line (an exact text edit) to any allowed value.
Variants of one task are structurally different templates (a proposer's "large step"); the first
variant listed (see `VARIANT_ORDER`) is the preferred (fastest measured) one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

SOLUTIONS_DIR = Path(__file__).resolve().parent

TUNABLE_RE = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*)\s*=\s*(?P<value>-?\d+)\s*#\s*tunable:\s*(?P<values>[-\d,\s]+?)\s*$",
                        re.MULTILINE)

# Preferred variant first (measured on an H200 where known); variants not listed follow by name.
VARIANT_ORDER: dict[str, list[str]] = {
    "scale_bias_gelu": ["rowtile", "flat"],
    "swish_scale_clamp": ["flat", "grid_stride"],
    "sum_reduce_dim1": ["tiled", "split_atomic"],
    "scaled_softmax": ["single_pass", "online"],
    "log_softmax": ["single_pass", "online"],
    "layernorm": ["single_pass", "looped"],
    "rmsnorm": ["single_pass", "multi_row"],
    "groupnorm": ["two_loop"],
    "linear_bias_relu": ["pretransposed", "fused", "split_epilogue"],
    "linear_gelu_scale": ["pretransposed", "fused"],
    "matmul_residual": ["fused"],
    "conv2d_relu_bias": ["implicit_gemm"],
    "maxpool2d": ["flat"],
    "avgpool2d": ["flat", "row_pairs"],
    "cross_entropy": ["single_pass", "online"],
    "cumsum": ["chunked_scan", "single_block"],
}


@dataclass(frozen=True)
class Solution:
    task_name: str
    variant: str
    source: str
    tunables: dict[str, list[int]] = field(default_factory=dict)
    defaults: dict[str, int] = field(default_factory=dict)


def parse_tunables(source: str) -> tuple[dict[str, list[int]], dict[str, int]]:
    """`NAME = v  # tunable: a, b, c` lines -> ({NAME: [a, b, c]}, {NAME: v})."""
    tunables: dict[str, list[int]] = {}
    defaults: dict[str, int] = {}
    for m in TUNABLE_RE.finditer(source):
        values = [int(v) for v in m.group("values").replace(" ", "").split(",") if v]
        tunables[m.group("name")] = values
        defaults[m.group("name")] = int(m.group("value"))
    return tunables, defaults


def set_tunable(source: str, name: str, value: int) -> str:
    """Rewrite one tunable line to `value` (must be an allowed value); an exact one-line edit."""
    pattern = re.compile(rf"^{re.escape(name)}\s*=\s*-?\d+(\s*#\s*tunable:\s*(?P<values>[-\d,\s]+?)\s*)$",
                         re.MULTILINE)
    m = pattern.search(source)
    if m is None:
        raise KeyError(f"no tunable named {name!r}")
    allowed = [int(v) for v in m.group("values").replace(" ", "").split(",") if v]
    if value not in allowed:
        raise ValueError(f"{name}={value} is not allowed; allowed values: {allowed}")
    return source[: m.start()] + f"{name} = {value}" + m.group(1) + source[m.end():]


def solution_task_names() -> list[str]:
    return sorted(p.name for p in SOLUTIONS_DIR.iterdir() if p.is_dir() and not p.name.startswith("_"))


@lru_cache(maxsize=None)
def _solutions(task_name: str) -> tuple[Solution, ...]:
    directory = SOLUTIONS_DIR / task_name
    if not directory.is_dir() or task_name.startswith("_"):
        return ()
    files = {p.stem: p for p in directory.glob("*.py") if not p.name.startswith("_")}
    order = [v for v in VARIANT_ORDER.get(task_name, []) if v in files]
    order += sorted(v for v in files if v not in order)
    out = []
    for variant in order:
        source = files[variant].read_text()
        tunables, defaults = parse_tunables(source)
        out.append(Solution(task_name, variant, source, tunables, defaults))
    return tuple(out)


def solutions(task_name: str) -> list[Solution]:
    """All known-correct variants for a built-in task, preferred first; [] for unknown tasks."""
    return list(_solutions(task_name))


def reference_solution(task_name: str) -> str:
    """Source of the preferred (first) variant; KeyError if the task has none."""
    sols = _solutions(task_name)
    if not sols:
        raise KeyError(f"no reference solution for task {task_name!r}")
    return sols[0].source
