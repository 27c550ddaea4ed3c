"""Which MCP client a call comes from, for fair sharing of the judge's workers.

A context variable rather than a parameter threaded through every layer: the surface sets it for the
thread that runs a tool (anyio copies the context into worker threads), and the judge's pool reads it
when it hands out a worker. Calls without a client (tests, the demo, background jobs) share `None`.
"""

from __future__ import annotations

from contextvars import ContextVar

CURRENT_CLIENT: ContextVar[str | None] = ContextVar("adaexplore_client", default=None)


def client_key(ctx: object | None) -> str | None:
    """A stable key for the MCP session behind a tool call (one per connected assistant window)."""
    session = getattr(ctx, "session", None) if ctx is not None else None
    return None if session is None else f"session-{id(session):x}"
