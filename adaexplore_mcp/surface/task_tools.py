"""get_task: one task with its reference source, as a tool result.

Why a tool and not only the resource adaexplore://tasks/{task_id}/reference: many MCP clients never let the
model read a resource, and a model cannot write a drop-in `ModelNew` without the reference's code (its
constructor, parameters and forward). The result also says which shapes this server's judge runs the task at
(small ones under the CPU interpreter), which is what a kernel is checked against here.
"""

from __future__ import annotations

from mcp.server import MCPServer
from pydantic import Field

from adaexplore_mcp.models import TaskInfo
from adaexplore_mcp.search.brief import device_label, evaluated_shapes, reference_uri
from adaexplore_mcp.surface.common import READ_ONLY, GetApp


class TaskDetail(TaskInfo):
    """A task as list_tasks shows it, plus what writing a kernel for it needs."""

    reference_source: str = Field(description="the PyTorch reference (KernelBench format: Model, get_inputs, "
                                  "get_init_inputs)")
    reference_uri: str = Field(description="the same source as an MCP resource")
    evaluated_shapes: str = Field(description="the shapes this server's judge runs kernels at")
    device: str = Field(description="the GPU kernels are timed on, or 'CPU interpreter, no timing'")


def task_detail(app, task_id: str) -> TaskDetail:
    """The task's stored info and reference (NotFound for an unknown id); cheap: nothing is run or probed."""
    info = app.tasks.info(task_id)
    timed = app.judge.backend == "cuda"
    return TaskDetail(**info.model_dump(), reference_source=app.tasks.spec(task_id).source,
                      reference_uri=reference_uri(task_id), evaluated_shapes=evaluated_shapes(info, timed),
                      device=device_label(timed, None))


def register(mcp: MCPServer, get_app: GetApp) -> None:
    @mcp.tool(annotations=READ_ONLY)
    def get_task(task_id: str) -> TaskDetail:
        """One task with its PyTorch reference (`reference_source`), to read before writing a kernel (ModelNew
        must match its constructor, parameters and forward), its shapes (`inputs`/`outputs` at GPU size),
        `small_shapes` and `evaluated_shapes`: the shapes this server's judge actually runs. Cheap: nothing is run."""
        return task_detail(get_app(), task_id)
