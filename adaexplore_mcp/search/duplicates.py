"""When a proposal repeats a kernel the search already has: the normalized source and its key.

Normalization is deliberately simple, so that a model can predict it: every line loses its trailing
whitespace and blank lines are dropped. Nothing else changes: indentation, names, string contents and
comments all count. Comment-only lines are kept on purpose: a judge may read them (the test judge,
search/fake_judge.py, takes its verdict from a `# fake:` comment, and the existing tests send kernels that
differ only there), so dropping them would answer a different kernel with another's verdict. To also match
kernels that differ only in comments, drop comment-only lines in `normalized` (`_is_comment`) once no judge
reads comments.
"""

from __future__ import annotations

import hashlib

DROP_COMMENT_LINES = False  # see the module docstring


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def normalized(source: str) -> str:
    """The source without trailing whitespace or blank lines (nor comment-only lines, if DROP_COMMENT_LINES)."""
    kept = []
    for line in source.splitlines():
        line = line.rstrip()
        if line and not (DROP_COMMENT_LINES and _is_comment(line)):
            kept.append(line)
    return "\n".join(kept)


def source_key(source: str) -> str:
    """The key a node's normalized source is stored and matched under (sha256, hex)."""
    return hashlib.sha256(normalized(source).encode("utf-8", "surrogatepass")).hexdigest()


__all__ = ["normalized", "source_key"]
