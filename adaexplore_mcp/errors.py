"""Errors a caller can fix, and the text of every error this server reports.

Why a base class: a bad argument (unknown id, malformed source, oversized payload) is the caller's
mistake and must come back as a readable tool error; anything else escaping a tool is a bug in this
server and is reported as an internal error that names its type, its message and where it happened
(the innermost frame in this package), never as an opaque "Error executing tool X". Parts raise
`UserError` subclasses (or plain `ValueError`, which is treated the same way) and never import `mcp`.

Every message built here survives hostile input: text that quotes the caller's input quotes at most
`QUOTE_CHARS` characters of it, lone surrogates are escaped (they cannot be encoded as UTF-8, so they
could not be stored, logged or sent), and an exception whose `__str__` raises still has a message.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

QUOTE_CHARS = 300  # how much of a caller's input one message may quote
MESSAGE_CHARS = 4000  # an internal error's whole text (a message may quote a traceback or a source)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # SQLite's INTEGER range

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_PACKAGE_NAME = os.path.basename(_PACKAGE_DIR)


class UserError(ValueError):
    """Bad input from the client; the message says what was wrong and how to fix it."""


class NotFound(UserError, LookupError):
    """An id (task, search, step, node, rule, cluster, job) that does not exist."""


# -- text that is always printable ---------------------------------------------------------------

def printable(text: str) -> str:
    """`text` with lone surrogates escaped (`\\ud800`), so it can be encoded as UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def safe_str(value: object) -> str:
    """`str(value)` that never raises (`<unprintable TypeName>`) and is always UTF-8 encodable."""
    try:
        text = str(value)
        if not isinstance(text, str):
            raise TypeError("__str__ returned a non-string")
    except Exception:
        return f"<unprintable {type_name(value)}>"
    return printable(text)


def type_name(value: object) -> str:
    try:
        return type(value).__name__
    except Exception:  # pragma: no cover - a metaclass would have to misbehave
        return "object"


def clip(text: str, limit: int = QUOTE_CHARS) -> str:
    """At most `limit` characters of `text`, ending in '...' when something was cut."""
    return text if len(text) <= limit else text[:limit] + "..."


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """A caller's value quoted for a message: its repr, at most `limit` characters of it.

    Long text is cut with '...' and its length is given, e.g. `'xxxx'... (1000000 characters)`.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return printable(repr(value))
        return f"{printable(repr(value[:limit]))}... ({len(value)} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of {value.bit_length()} bits>"  # str() of a huge int is slow or refused
    try:
        text = repr(value)
    except Exception:
        return f"<unprintable {type_name(value)}>"
    return clip(printable(text), limit)


def shorten_quotes(message: str, inputs: Iterable[object], limit: int = QUOTE_CHARS) -> str:
    """Replace every long string of `inputs` that `message` quotes whole by its first `limit` characters.

    A backstop for messages made by code that quotes an argument without `quote` (`f"{x!r}"`).
    """
    for value in inputs:
        if isinstance(value, str) and len(value) > limit:
            if (r := repr(value)) in message:
                message = message.replace(r, quote(value, limit))
            if value in message:
                message = message.replace(value, clip(value, limit))
    return message


# -- the text of an exception --------------------------------------------------------------------

def is_user_error(exc: BaseException) -> bool:
    """The caller's mistake: a `UserError`, a plain `ValueError`/`LookupError` (what parts raise for bad
    input), or a `ValueError` subclass of this package. A `KeyError`, an `IndexError`, a codec error or a
    pydantic `ValidationError` of our own data are bugs."""
    if isinstance(exc, UserError) or type(exc) in (ValueError, LookupError):
        return True
    return isinstance(exc, ValueError) and type(exc).__module__.split(".")[0] == _PACKAGE_NAME


def says_its_own_text(exc: BaseException) -> bool:
    """Whether the caller is told the exception's own text: a user error, or an exception marked `plain_message`
    (the environment's state, said for the caller: neither the caller's fault nor a bug)."""
    return is_user_error(exc) or bool(getattr(exc, "plain_message", False))


def user_message(exc: BaseException) -> str:
    """The exception's own text (a KeyError's str() would wrap it in quotes)."""
    args = getattr(exc, "args", ())
    if len(args) == 1 and isinstance(args[0], str):
        return printable(args[0])
    return safe_str(exc)


def describe(exc: BaseException) -> str:
    """'TypeName: message' (just the type when the message is empty)."""
    text = safe_str(exc)
    return f"{type_name(exc)}: {text}" if text else type_name(exc)


def location(exc: BaseException) -> str | None:
    """'adaexplore_mcp/search/service.py:expand_node (line 212)': the innermost frame of the traceback in
    this package; the innermost frame at all when none is ours; None without a traceback."""
    ours = last = None
    tb = exc.__traceback__
    while tb is not None:
        last = tb
        filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if filename.startswith(_PACKAGE_DIR + os.sep):
            ours = tb
        tb = tb.tb_next
    chosen = ours or last
    if chosen is None:
        return None
    filename = os.path.abspath(chosen.tb_frame.f_code.co_filename)
    if chosen is ours:
        shown = _PACKAGE_NAME + "/" + os.path.relpath(filename, _PACKAGE_DIR).replace(os.sep, "/")
    else:
        shown = "/".join(filename.replace(os.sep, "/").split("/")[-2:])
    return f"{printable(shown)}:{printable(chosen.tb_frame.f_code.co_name)} (line {chosen.tb_lineno})"


def internal_error_message(exc: BaseException) -> str:
    """'internal error in <where>: <Type>: <message>' for a bug (anything that is not a user error)."""
    where = location(exc)
    head = f"internal error in {where}" if where else "internal error"
    return clip(f"{head}: {describe(exc)}", MESSAGE_CHARS)


def error_message(exc: BaseException) -> str:
    """What to tell the caller: the exception's own text (`says_its_own_text`), or the internal error's type and
    location."""
    return user_message(exc) if says_its_own_text(exc) else internal_error_message(exc)


def int64_problem(value: int) -> str | None:
    """Why `value` cannot be stored as an SQLite INTEGER, or None when it can."""
    if isinstance(value, bool) or not isinstance(value, int) or INT64_MIN <= value <= INT64_MAX:
        return None
    return (f"is {quote(value)}, outside the signed 64-bit integer range "
            f"({INT64_MIN} to {INT64_MAX})")


__all__ = [
    "INT64_MAX", "INT64_MIN", "NotFound", "QUOTE_CHARS", "UserError", "clip", "describe", "error_message",
    "int64_problem", "internal_error_message", "is_user_error", "location", "printable", "quote", "safe_str",
    "says_its_own_text", "shorten_quotes", "user_message",
]
