"""Helpers shared by the tool modules: the guarded server, error translation and blocking calls with progress.

Errors: every tool is registered through `GuardedServer.add_tool`, which wraps it in `guard_tool`: its
arguments are checked once (`check_arguments`) and any exception becomes a tool error (`tool_errors`). A
caller's mistake keeps its own text; a bug says `internal error in <file>:<function> (line N): <Type>:
<message>`, never just "Error executing tool X". Resources and the prompt translate the same way.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.lowlevel import RunVar
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import (
    ResourceError, ResourceNotFoundError, ToolError, UnexpectedResourceError, UnexpectedToolError,
)
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from mcp.types import Tool as MCPTool
from pydantic import BaseModel, ValidationError

from adaexplore_mcp.app import App
from adaexplore_mcp.clients import CURRENT_CLIENT, client_key
from adaexplore_mcp.errors import (
    UserError, describe, int64_problem, internal_error_message, is_user_error, quote, safe_str, says_its_own_text,
    shorten_quotes, user_message,
)
from adaexplore_mcp.judge import WorkerStartError
from adaexplore_mcp.surface.arguments import argument_error
from adaexplore_mcp.surface.lean import lean_result
from adaexplore_mcp.surface.schemas import compact_input_schema, compact_output_schema

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
logger = logging.getLogger("adaexplore_mcp")

# Hints clients use to decide what needs the user's confirmation. Everything here is local (no open world);
# nothing deletes data (retiring a rule keeps it and its history).
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
GetApp = Callable[[], App]


def _strings(value: Any) -> Iterator[str]:
    """Every string in a tool's arguments (nested in lists, dicts and models too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, BaseModel) and not isinstance(value, Context):
        for name in type(value).model_fields:
            yield from _strings(getattr(value, name, None))


def check_arguments(arguments: dict[str, Any]) -> None:
    """Reject what no part could store or send: integers beyond SQLite's 64-bit range and text with lone
    surrogates (not encodable as UTF-8). Checked once here for every argument of every tool."""
    for name, value in arguments.items():
        if not isinstance(value, Context):
            _check(name, value)


def _check(path: str, value: Any) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if (problem := int64_problem(value)) is not None:
            raise UserError(f"{path} {problem}")
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UserError(f"{path} contains a lone surrogate (U+{ord(value[exc.start]):04X}) at character "
                            f"{exc.start}, which is not valid Unicode text; send UTF-8 encodable text") from None
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check(f"{path}[{i}]", item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check(f"{path} key", key)
            _check(f"{path}[{quote(key, 60)}]", item)
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            _check(f"{path}.{name}", getattr(value, name, None))


# What an SQLite error says when the data store itself is the trouble (a damaged file read
# "internal error in store.py", as if the server had a bug)
_STORE_TROUBLE = ("malformed", "not a database", "readonly", "disk i/o", "unable to open", "is full", "locked")


@contextmanager
def tool_errors(inputs: Iterable[Any] = ()) -> Iterator[None]:
    """Any exception becomes a tool error the model can read and act on.

    A caller's mistake (UserError, a plain ValueError) keeps its own text; anything else is a bug in this
    server, reported as `internal error in <file>:<function> (line N): <Type>: <message>` and logged with
    its traceback. Long arguments the message quotes whole are cut to their first 300 characters.
    """
    try:
        yield
    except (ToolError, ResourceError, MCPError):
        raise  # already a deliberate tool error (or a protocol error)
    except WorkerStartError as exc:  # the environment, not the caller: say so instead of a bare crash
        raise ToolError(f"the judge could not start a worker process: {safe_str(exc)}") from exc
    except Exception as exc:
        if isinstance(exc, sqlite3.DatabaseError) and any(w in safe_str(exc).lower() for w in _STORE_TROUBLE):
            logger.error("the data store failed: %s", describe(exc), exc_info=exc)
            raise ToolError(f"the data store could not be used ({safe_str(exc)[:200]}): it is adaexplore.sqlite3 in "
                            "the data directory (ADAEXPLORE_HOME); if it is damaged, restore it from a backup or move "
                            "it aside to start afresh; check the directory's permissions and free space") from exc
        if says_its_own_text(exc):  # a caller's mistake, or the environment's state (JudgeClosedError)
            message = user_message(exc)
        else:
            logger.error("internal error in a tool: %s", describe(exc), exc_info=exc)
            message = internal_error_message(exc)
        raise ToolError(shorten_quotes(message, _strings(list(inputs)))) from exc


def guard_tool(fn: F) -> F:
    """`fn` with its arguments checked (`check_arguments`) and every exception made a readable tool error.

    Same signature, name and docstring (the SDK reads them through `__wrapped__`), same sync/async kind.
    """
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def guarded_async(**kwargs: Any) -> Any:
            with tool_errors(kwargs.values()):
                check_arguments(kwargs)
                return await fn(**kwargs)

        return guarded_async  # type: ignore[return-value]

    @functools.wraps(fn)
    def guarded(**kwargs: Any) -> Any:
        with tool_errors(kwargs.values()):
            check_arguments(kwargs)
            return fn(**kwargs)

    return guarded  # type: ignore[return-value]


class GuardedServer(MCPServer):
    """The MCP server with every tool guarded: the one place tools are registered (`add_tool`, which the
    `@mcp.tool()` decorator calls) wraps them in `guard_tool`, so no tool ever answers only "Error executing
    tool X". `call_tool` covers what happens outside a tool's body (its result failing output conversion)."""

    def add_tool(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        super().add_tool(guard_tool(fn), *args, **kwargs)

    async def list_tools(self) -> list[MCPTool]:
        """The tools with lean schemas (surface/schemas.py): what a model reads before its first call."""
        return [tool.model_copy(update={
            "input_schema": compact_input_schema(tool.input_schema),
            "output_schema": compact_output_schema(tool.output_schema, tool.name) if tool.output_schema else None,
        }) for tool in await super().list_tools()]

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        # Which session calls: copied into worker threads and jobs, read by the judge's fair pool.
        CURRENT_CLIENT.set(client_key(context))
        tool = self._tool_manager.get_tool(name)
        if tool is not None:  # wrong types: which argument, what was expected, an example (surface/arguments.py)
            try:
                tool.fn_metadata.validate_arguments(arguments or {})
            except ValidationError as exc:
                raise ToolError(shorten_quotes(argument_error(exc, tool.parameters), _strings(arguments))) from None
        try:
            result = await super().call_tool(name, arguments, context)
            return result if (arguments or {}).get("detail") is True else lean_tool_result(result)
        except UnexpectedToolError as exc:
            cause: BaseException = exc
            while isinstance(cause, (UnexpectedToolError, UnexpectedResourceError)) and cause.__cause__:
                cause = cause.__cause__
            logger.error("internal error in tool %s: %s", safe_str(name), describe(cause), exc_info=cause)
            message = shorten_quotes(internal_error_message(cause), _strings(arguments))
            raise ToolError(f"Error executing tool {safe_str(name)}: {message}") from cause
        except ToolError as exc:  # the SDK's own argument validation: one error per bad item of a long list
            text = safe_str(exc)
            if len(text) <= MAX_ERROR_CHARS:
                raise
            raise ToolError(f"{text[:MAX_ERROR_CHARS]}... ({len(text)} characters in all; fix the first errors "
                            "and call again)") from exc


def lean_tool_result(result: Any) -> Any:
    """A result with its evaluations made lean (surface/lean.py) and its text the same JSON, compact: the
    text is what many clients show their model, and the SDK's indented copy of the full result doubled it."""
    if not isinstance(result, CallToolResult) or result.is_error or result.structured_content is None:
        return result
    lean = lean_result(result.structured_content)
    text = json.dumps(lean, ensure_ascii=False, separators=(",", ":"))
    return result.model_copy(update={"structured_content": lean, "content": [TextContent(type="text", text=text)]})


@contextmanager
def resource_errors(inputs: Iterable[Any] = ()) -> Iterator[None]:
    """A caller's mistake is 'not found' with its text; a bug is a resource error naming its type and place.

    `inputs` are the URI's parameters: a message that quotes one whole (a 5000-character task id) quotes only
    its first 300 characters, as a tool's error does (`tool_errors`)."""
    try:
        yield
    except (ResourceError, MCPError):
        raise
    except Exception as exc:
        if is_user_error(exc):
            raise ResourceNotFoundError(shorten_quotes(user_message(exc), _strings(list(inputs)))) from exc
        logger.error("internal error in a resource: %s", describe(exc), exc_info=exc)
        raise ResourceError(shorten_quotes(internal_error_message(exc), _strings(list(inputs)))) from exc


@contextmanager
def prompt_errors() -> Iterator[None]:
    """A bad prompt argument is an invalid-params error with its text (not "Internal server error")."""
    try:
        yield
    except MCPError:
        raise
    except Exception as exc:
        if is_user_error(exc):
            raise MCPError(code=INVALID_PARAMS, message=user_message(exc)) from exc
        logger.error("internal error in a prompt: %s", describe(exc), exc_info=exc)
        raise MCPError(code=INTERNAL_ERROR, message=internal_error_message(exc)) from exc


MAX_ERROR_CHARS = 2000
# Blocking calls (evaluations, task creation) wait in threads of their own pool, so that quick tools keep anyio's
# default one; one session may have at most MAX_BLOCKING_PER_CLIENT of them at once (one HTTP
# client's 44 queued evaluations took every default thread, and another client's list_tasks waited 57 s).
MAX_BLOCKING_PER_CLIENT = 16
BLOCKING_THREADS = 64
_BLOCKING: RunVar[tuple[anyio.CapacityLimiter, dict[str | None, int]]] = RunVar("adaexplore_blocking")


async def run_blocking(ctx: Context | None, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn(*args, progress=..., **kwargs)` in a thread, relaying progress to the client."""
    try:
        limiter, busy = _BLOCKING.get()
    except LookupError:
        limiter, busy = anyio.CapacityLimiter(BLOCKING_THREADS), {}
        _BLOCKING.set((limiter, busy))
    client = CURRENT_CLIENT.get()
    if busy.get(client, 0) >= MAX_BLOCKING_PER_CLIENT:
        raise UserError(f"this session already has {MAX_BLOCKING_PER_CLIENT} evaluations or task creations in "
                        "progress; wait for some to finish (submit_expand and get_job run one in the background)")
    busy[client] = busy.get(client, 0) + 1
    try:
        return await _in_thread(ctx, limiter, fn, *args, **kwargs)
    finally:
        busy[client] -= 1


async def _in_thread(ctx: Context | None, limiter: anyio.CapacityLimiter, fn: Callable[..., T], *args: Any,
                     **kwargs: Any) -> T:

    def progress(fraction: float, message: str) -> None:
        if ctx is None:
            return
        try:
            anyio.from_thread.run(ctx.report_progress, float(fraction), 1.0, message)
        except Exception:  # a client that went away must not fail the work
            pass

    return await anyio.to_thread.run_sync(functools.partial(fn, *args, progress=progress, **kwargs), limiter=limiter)
