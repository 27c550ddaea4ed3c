"""The MCP surface: tools, resources and prompts over `App`. Thin: no logic lives here.

Conventions: every tool has a description written for a model (when to call it, what it costs,
what comes back); results are pydantic models; a caller's mistake (`UserError`, `ValueError`,
`LookupError`) becomes a tool error the model can read; blocking work runs in a thread and
reports progress.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.models import CreateTaskResult, Evaluation, TaskList

T = TypeVar("T")

INSTRUCTIONS = """adaexplore-mcp judges and searches Triton kernels for PyTorch modules.
Loop: create_task (KernelBench format) -> start_search -> repeat next_step / expand_node until done ->
best_kernel / export_kernel. evaluate_kernel judges one candidate on its own. The prompt
`optimize_module` explains the whole loop."""


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn a caller's mistake into a readable tool error; let real bugs surface as crashes."""
    try:
        yield
    except (ValueError, LookupError) as exc:
        raise ToolError(str(exc).strip("'\"")) from exc


async def run_blocking(ctx: Context | None, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn` in a worker thread, relaying its `progress(fraction, message)` calls to the client."""

    def progress(fraction: float, message: str) -> None:
        if ctx is None:
            return
        try:
            anyio.from_thread.run(ctx.report_progress, float(fraction), 1.0, message)
        except Exception:  # a client that went away must not fail the evaluation
            pass

    def call() -> T:
        with tool_errors():
            return fn(*args, progress=progress, **kwargs)

    return await anyio.to_thread.run_sync(call)


def build_server(settings: Settings | None = None, app: App | None = None) -> MCPServer:
    """Create the server; the App (store, judge workers) lives for the server's lifespan."""
    settings = settings or Settings.from_env()
    holder: dict[str, App] = {}

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, App]]:
        holder["app"] = app or App(settings)
        try:
            yield holder
        finally:
            if app is None:
                await anyio.to_thread.run_sync(holder["app"].close)

    def the_app() -> App:
        if "app" not in holder:  # used outside a lifespan (in-process tests): start lazily
            holder["app"] = app or App(settings)
        return holder["app"]

    mcp = MCPServer(name="adaexplore-mcp", instructions=INSTRUCTIONS, lifespan=lifespan)

    @mcp.tool()
    async def create_task(
        name: str,
        reference_source: str,
        small_shapes: dict[str, int] | None = None,
        description: str = "",
        ctx: Context | None = None,
    ) -> CreateTaskResult:
        """Register a PyTorch reference to optimize, in KernelBench format: top-level `class Model(nn.Module)`,
        `get_inputs()` and `get_init_inputs()` (a KernelBench problem file works unchanged). The server
        runs it on several random seeds in a worker (a few seconds) and flags a degenerate task (one a
        constant output would pass). `small_shapes` optionally overrides top-level integer constants
        (e.g. {"batch_size": 8}) for CPU-interpreter runs. Returns task_id (use it in evaluate_kernel
        and start_search), degenerate and warnings. Creating the same name and source again returns the
        same task_id."""
        info, created = await run_blocking(
            ctx, lambda progress: the_app().create_task(name, reference_source, small_shapes, description)
        )
        return CreateTaskResult(
            task_id=info.task_id, created=created, degenerate=info.degenerate, warnings=info.warnings,
            inputs=info.inputs, outputs=info.outputs, reference_uri=f"adaexplore://tasks/{info.task_id}/reference",
            backend=the_app().judge.backend,
        )

    @mcp.tool()
    def list_tasks() -> TaskList:
        """List the known tasks (built-in library, your own, synthesized): task_id, name, description,
        whether degenerate, input/output shapes when known. Cheap. The reference source of each is the
        resource adaexplore://tasks/{task_id}/reference."""
        return TaskList(tasks=the_app().tasks.list())

    @mcp.tool()
    async def evaluate_kernel(
        task_id: str, kernel_source: str, timeout_s: float | None = None, ctx: Context | None = None
    ) -> Evaluation:
        """Judge one candidate: Python source defining `class ModelNew(nn.Module)` (same constructor and
        forward signature and parameter names as the task's Model) whose work is done by @triton.jit
        kernels. Runs in an isolated worker: checks it builds, compares against the float32 reference on
        5 fresh random input sets, checks integrity (inputs unchanged, a Triton kernel of yours launched),
        and on a GPU times it against the reference. Typically 1-3 s warm on a GPU (first call more);
        minutes under the CPU interpreter. Returns verdict (passed, compile_error, runtime_error, mismatch,
        timeout, crashed, rejected) with an actionable detail (error line and your offending line, or
        where outputs differ), speedup (strict fp32 reference; null without GPU), speedup_tf32,
        precision flags, the validity rules your failure falls under, and warnings."""
        return await run_blocking(ctx, the_app().evaluate_kernel, task_id, kernel_source, timeout_s)

    return mcp


__all__ = ["build_server", "run_blocking", "tool_errors"]
