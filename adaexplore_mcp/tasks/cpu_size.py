"""The CPU path's size check: before the reference runs at full size under the CPU interpreter, is it too large?

Why: KernelBench problems pasted unchanged on a machine without a GPU ran the reference at full size for 17-99 s
and ended in a memory kill, with no suggested shapes (issue 41). `create_task` now reads the inputs' size from
the source alone (shape_advice: the task's code never runs in the server's process), and when it is too large
for the CPU it checks the suggested small_shapes with the probe and registers the task at them, saying so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from adaexplore_mcp.tasks.shape_advice import ShapeSuggestion, _count, interpreter_duration, suggest_small_shapes

# Above this many input elements (64 MB of float32) create_task does not run the reference at full size on the
# CPU at all: KernelBench level-2 problems at 100M+ elements ran 17-99 s and ended in a memory kill (issue 41).
CPU_FULL_SIZE_ELEMENTS = 1 << 24
# The reference's outputs, intermediates and the probe's copies, as a multiple of its inputs' bytes.
MEMORY_PER_INPUT_BYTE = 8


@dataclass(frozen=True)
class CpuSizeCheck:
    """A task too large to run at full size on the CPU: why, in numbers, and the small_shapes to run it at."""

    suggestion: ShapeSuggestion
    input_bytes: int
    memory_limit: int | None

    def estimate(self) -> str:
        """The full size's cost in words: input elements and bytes, memory, interpreter time."""
        text = (f"at full size its inputs are about {_count(self.suggestion.full_elements)} elements "
                f"({_megabytes(self.input_bytes)} as float32; the reference's outputs and intermediates take "
                f"several times that)")
        if self.memory_limit:
            text += f", against {_megabytes(self.memory_limit)} of host memory for one run"
        return text + (f", and one evaluation under the CPU interpreter would take "
                       f"{interpreter_duration(self.suggestion.full_elements)} or more")


def cpu_size_check(source: str, memory_limit: int | None) -> CpuSizeCheck | None:
    """For a task created under the CPU interpreter without small_shapes: a CpuSizeCheck when its inputs, read
    from the source alone, exceed CPU_FULL_SIZE_ELEMENTS or (times MEMORY_PER_INPUT_BYTE) the memory limit and
    small_shapes can shrink them; None when it is small enough, or its size cannot be read (then the probe at
    full size decides, as before)."""
    suggestion = suggest_small_shapes(source)
    if suggestion is None or not suggestion.exact or not suggestion.small_shapes:
        return None
    input_bytes = 4 * suggestion.full_elements
    over_memory = memory_limit is not None and input_bytes * MEMORY_PER_INPUT_BYTE > memory_limit
    if suggestion.full_elements <= CPU_FULL_SIZE_ELEMENTS and not over_memory:
        return None
    return CpuSizeCheck(suggestion=suggestion, input_bytes=input_bytes, memory_limit=memory_limit)


def registered_small_warning(check: CpuSizeCheck) -> str:
    """What create_task says when it registered a task at small_shapes of its own choosing."""
    return (f"registered at small_shapes={json.dumps(check.suggestion.small_shapes)}, checked: the reference runs "
            f"at them (about {_count(check.suggestion.small_elements)} input elements): {check.estimate()}. The "
            "CPU interpreter runs kernels at these sizes; a GPU server runs the full ones. To choose other sizes, "
            "call create_task again with your own small_shapes")


def _megabytes(n: int) -> str:
    return f"{n / (1 << 30):.1f} GB" if n >= 1 << 30 else f"{max(1, round(n / (1 << 20)))} MB"
