"""Errors a caller can fix. The MCP layer turns these into tool errors the model reads and acts on.

Why a base class: a bad argument (unknown id, malformed source, oversized payload) is the caller's
mistake and must come back as a readable tool error; anything else escaping a tool is a bug in this
server and is reported as a crash. Parts raise `UserError` subclasses (or plain `ValueError`, which
is treated the same way) and never import `mcp`.
"""

from __future__ import annotations


class UserError(ValueError):
    """Bad input from the client; the message says what was wrong and how to fix it."""


class NotFound(UserError, LookupError):
    """An id (task, search, step, node, rule, cluster, job) that does not exist."""
