"""Tasks and the judge: create_task, list_tasks, evaluate_kernel, submit_evaluation, get_job."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from adaexplore_mcp.jobs import Job
from adaexplore_mcp.models import CreateTaskResult, Evaluation, TaskList
from adaexplore_mcp.surface.common import ADDITIVE, IDEMPOTENT, READ_ONLY, GetApp, run_blocking

EVALUATE_DOC = """Judge one candidate: Python source defining `class ModelNew(nn.Module)` (same constructor and
forward signature as the task's Model) whose work is done by @triton.jit kernels. In an isolated process it is
built, compared with the reference on 5 random input sets, checked for integrity and, on a GPU, timed against the
reference. About 1-3 s warm on a GPU; seconds to minutes under the CPU interpreter. Returns `verdict` (passed,
compile_error, runtime_error, mismatch, timeout, crashed, rejected) with its detail (`error`: the error line and
your offending line; `mismatch`: which output, max error and where, and the tolerance; `rejected`: which check),
`speedup` vs the strict fp32 reference (null without a GPU), `speedups` against every yardstick, `precision`,
the `rules` your failure falls under and `warnings`. The judge's internals (timing blocks, stages, replay,
sandbox) are left out: `detail=true` or the resource adaexplore://evaluations/{eval_id} has them."""


def register(mcp: MCPServer, get_app: GetApp) -> None:
    @mcp.tool(annotations=IDEMPOTENT)
    async def create_task(
        name: str,
        reference_source: str,
        small_shapes: dict[str, int | list[int]] | None = None,
        description: str = "",
        ctx: Context | None = None,
    ) -> CreateTaskResult:
        """Register a PyTorch reference to optimize, in KernelBench format: top-level `class Model(nn.Module)`,
        `get_inputs()` and `get_init_inputs()` (KernelBench problem files work unchanged). The server runs it on
        several seeds in a worker and flags a degenerate task (one a constant output would pass). `small_shapes`
        overrides top-level integer constants (e.g. {"batch_size": 8}) for the CPU interpreter; without a GPU, a
        task too large for it is registered at small_shapes the server checked, and `warnings` says so. Returns
        `task_id`, `degenerate`, `small_shapes` and `warnings`. The same name, source and small_shapes return the
        same task_id; another source or other small_shapes make a task of their own."""
        app = get_app()
        info, created = await run_blocking(
            ctx, lambda progress: app.create_task(name, reference_source, small_shapes, description)
        )
        return CreateTaskResult(
            task_id=info.task_id, created=created, degenerate=info.degenerate, warnings=info.warnings,
            inputs=info.inputs, outputs=info.outputs, reference_uri=f"adaexplore://tasks/{info.task_id}/reference",
            backend=app.judge.backend, small_shapes=info.small_shapes,
        )

    @mcp.tool(annotations=READ_ONLY)
    def list_tasks(origin: str | None = None) -> TaskList:
        """Known tasks: the built-in library, yours and synthesized ones (origin = 'builtin', 'user' or
        'synthesized' filters). get_task(task_id) returns one with its reference source. Cheap."""
        return TaskList(tasks=get_app().tasks.list(origin))

    async def evaluate_kernel(
        task_id: str, kernel_source: str, timeout_s: float | None = None, detail: bool = False,
        ctx: Context | None = None,
    ) -> Evaluation:  # `detail` is read by GuardedServer.call_tool: the whole result, not the lean one
        return await run_blocking(ctx, get_app().evaluate_kernel, task_id, kernel_source, timeout_s)

    mcp.tool(description=EVALUATE_DOC, annotations=ADDITIVE)(evaluate_kernel)

    @mcp.tool(annotations=ADDITIVE)
    def submit_evaluation(task_id: str, kernel_source: str, timeout_s: float | None = None) -> Job:
        """Same as evaluate_kernel, but returns at once with a `job_id`; poll get_job(job_id) until status is
        'done' (its `result` is the evaluation) or 'failed'. Use it when your client times out calls after
        ~60 s, e.g. under the CPU interpreter or with a long timeout_s."""
        app = get_app()
        app.tasks.spec(task_id)  # fail now, not in the background, on an unknown task
        return app.jobs.submit(
            "evaluate", lambda progress: app.evaluate_kernel(task_id, kernel_source, timeout_s, progress)
        )

    @mcp.tool(annotations=READ_ONLY)
    def get_job(job_id: str) -> Job:
        """Status of a submitted job: queued, running (with progress and message), done (with `result`),
        failed (with `error`) or lost (its server process stopped; submit again). Cheap; poll every few seconds."""
        return get_app().jobs.get(job_id)
