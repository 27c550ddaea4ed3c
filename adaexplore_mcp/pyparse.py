"""`ast.parse` behind one lock.

CPython 3.11 and 3.12 can fail `ast.parse` run concurrently in several threads with
"SystemError: AST constructor recursion depth mismatch" (python/cpython#106905). The server parses
sources in the threads that run tool calls, so every parse in this package goes through here.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    with _LOCK:
        return ast.parse(source)
