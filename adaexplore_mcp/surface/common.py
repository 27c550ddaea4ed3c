"""Helpers shared by the tool modules: error translation and blocking calls with progress."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import ToolAnnotations
from pydantic import ValidationError

from adaexplore_mcp.app import App
from adaexplore_mcp.judge import WorkerStartError

T = TypeVar("T")

# Hints clients use to decide what needs the user's confirmation. Everything here is local (no open world);
# nothing deletes data (retiring a rule keeps it and its history).
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
GetApp = Callable[[], App]


@contextmanager
def tool_errors() -> Iterator[None]:
    """A caller's mistake (UserError, ValueError, LookupError) becomes a tool error the model reads."""
    try:
        yield
    except ValidationError:
        raise  # our own models rejecting our own data is a bug, not the caller's mistake
    except WorkerStartError as exc:  # the environment, not the caller: say so instead of a bare crash
        raise ToolError(f"the judge could not start a worker process: {exc}") from exc
    except (ValueError, LookupError) as exc:
        raise ToolError(_message(exc)) from exc


def _message(exc: BaseException) -> str:
    """The exception's own text (a KeyError's str() would wrap it in quotes)."""
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)


@contextmanager
def resource_errors() -> Iterator[None]:
    try:
        yield
    except (ValueError, LookupError) as exc:
        raise ResourceNotFoundError(_message(exc)) from exc


async def run_blocking(ctx: Context | None, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn(*args, progress=..., **kwargs)` in a thread, relaying progress to the client."""

    def progress(fraction: float, message: str) -> None:
        if ctx is None:
            return
        try:
            anyio.from_thread.run(ctx.report_progress, float(fraction), 1.0, message)
        except Exception:  # a client that went away must not fail the work
            pass

    def call() -> T:
        with tool_errors():
            return fn(*args, progress=progress, **kwargs)

    return await anyio.to_thread.run_sync(call)
