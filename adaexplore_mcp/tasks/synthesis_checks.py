"""Static checks of a synthesized task: its emitted source is a well-formed KernelBench task.

Nothing here runs the generated code. Whether a task is degenerate (a constant output would pass, the
output ignores its inputs) is decided where every task's reference runs: the judge worker's probe, in
`App.create_task`, which `App.synthesize_tasks` calls for each candidate, dropping degenerate ones.
The server process never executes task code; these checks only guard the emitter against writing a
source the format rejects (a bug here would otherwise surface as a probe error per task).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adaexplore_mcp.tasks.format import TaskFormatError, check_small_shapes, check_static, integer_constants

if TYPE_CHECKING:
    from adaexplore_mcp.tasks.synthesis import SynthesizedTask

MAX_SOURCE_BYTES = 1 << 20  # emitted sources are a few KiB; this only bounds a runaway emitter


def format_problem(task: SynthesizedTask) -> str | None:
    """Why `task` is not a well-formed KernelBench task (parse, required names, small_shapes), or None."""
    try:
        check_static(task.source, max_bytes=MAX_SOURCE_BYTES)
        check_small_shapes(task.source, task.small_shapes)
    except TaskFormatError as exc:
        return str(exc)
    return None


def probe_shapes(source: str) -> dict[str, int]:
    """Full feature sizes with a small batch (8; spatial size capped at 32 unless the source reduces
    over H, W, then batch 4): reductions and normalizations see their real extent, so degeneracy
    that only appears at full size shows."""
    consts = integer_constants(source)
    spatial_reduction = "dim=(2, 3)" in source or "dim=[2, 3]" in source
    probe: dict[str, int] = {}
    if "batch_size" in consts:
        probe["batch_size"] = min(consts["batch_size"], 4 if spatial_reduction else 8)
    if not spatial_reduction:  # a reduction over H, W must see its full extent
        for k in ("height", "width"):
            if k in consts:
                probe[k] = min(consts[k], 32)
    return probe
