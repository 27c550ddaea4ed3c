"""When a proposal repeats a kernel the search already has: the normalized source and its key.

Normalization is deliberately simple, so that a model can predict it: every line loses its trailing
whitespace and blank lines are dropped, except inside a string that spans lines (its blank lines and
trailing spaces are part of its value: a red team made two kernels differing only there share one verdict).
Nothing else changes: indentation, names, string contents and comments all count. A source Python cannot
tokenize is kept as it is. Comment-only lines are kept on purpose: a judge may read them (the test judge,
search/fake_judge.py, takes its verdict from a `# fake:` comment, and the existing tests send kernels that
differ only there), so dropping them would answer a different kernel with another's verdict. To also match
kernels that differ only in comments, drop comment-only lines in `normalized` (`_is_comment`) once no judge
reads comments.
"""

from __future__ import annotations

import hashlib
import io
import tokenize

DROP_COMMENT_LINES = False  # see the module docstring


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def _string_rows(source: str) -> set[int] | None:
    """Line numbers (1-based) a token spanning several lines covers (a triple-quoted string, an f-string's
    middle): None when the source does not tokenize."""
    rows: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.end[0] > tok.start[0] and tok.type not in (tokenize.NEWLINE, tokenize.NL):
                rows.update(range(tok.start[0], tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return rows


def normalized(source: str) -> str:
    """The source without trailing whitespace or blank lines outside multi-line strings (nor comment-only
    lines, if DROP_COMMENT_LINES)."""
    protected = _string_rows(source)
    if protected is None:
        return source
    kept = []
    for row, line in enumerate(source.splitlines(), start=1):
        if row in protected:
            kept.append(line)
            continue
        line = line.rstrip()
        if line and not (DROP_COMMENT_LINES and _is_comment(line)):
            kept.append(line)
    return "\n".join(kept)


def source_key(source: str) -> str:
    """The key a node's normalized source is stored and matched under (sha256, hex)."""
    return hashlib.sha256(normalized(source).encode("utf-8", "surrogatepass")).hexdigest()


__all__ = ["normalized", "source_key"]
