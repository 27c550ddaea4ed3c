"""The MCP server: an `App` for the server's lifespan plus the vocabulary in `surface/`. Thin by design.

Conventions (see surface/common.py): every tool has a description written for a model; results are
pydantic models; every tool is registered through `GuardedServer`, so a caller's mistake becomes a tool
error with its own text and a bug a tool error naming its type and where it happened (never an opaque
"Error executing tool X"); blocking work runs in a thread and reports progress; calls that can outlast a
client's timeout have a submit-and-poll twin.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from mcp.server import MCPServer

from adaexplore_mcp import __version__
from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.surface import judge_tools, memory_tools, profile_tools, resources, search_tools, task_tools
from adaexplore_mcp.surface.common import GuardedServer

INSTRUCTIONS = """adaexplore-mcp judges and searches Triton kernels for PyTorch modules on this machine.
Loop: create_task (KernelBench format) -> start_search -> next_step once, then expand_node(..., next=1) per step
(or expand_nodes(items, next=k) for k steps at once) until done -> best_kernel / export_kernel. evaluate_kernel
judges one candidate on its own. The prompt `optimize_module` explains the whole loop."""


class _AppHolder:
    """The App outlives no lifespan; in-process tests without a lifespan get one lazily."""

    def __init__(self, settings: Settings, app: App | None) -> None:
        self.settings = settings
        self.app = app
        self.owned = app is None
        self._lock = threading.Lock()

    def get(self) -> App:
        with self._lock:
            if self.app is None:
                self.app = App(self.settings)
            return self.app


def build_server(settings: Settings | None = None, app: App | None = None) -> MCPServer:
    """The server; pass `app` to share one App (tests), else one is made from `settings` at startup."""
    holder = _AppHolder(settings or Settings.from_env(), app)

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[_AppHolder]:
        started = await anyio.to_thread.run_sync(holder.get)
        warm_up = getattr(started.judge, "start", None)
        if callable(warm_up):  # start workers now so the first evaluation does not pay for it
            warm_up()
        try:
            yield holder
        finally:
            if holder.owned and holder.app is not None:
                await anyio.to_thread.run_sync(holder.app.close)

    mcp = GuardedServer(name="adaexplore-mcp", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan)
    for part in (judge_tools, task_tools, search_tools, memory_tools, resources, profile_tools):
        part.register(mcp, holder.get)
    return mcp


__all__ = ["build_server"]
