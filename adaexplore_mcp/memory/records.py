"""Failure records: one row per failed evaluation, keyed by the error's signature."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

from ..models import ErrorDetail, Evaluation, Verdict
from ..store import Store, new_id
from .signature import (CoreError, core_from_root, core_from_text, error_line_of, normalize_message, offending_line,
                        signature_of)

# Verdicts whose errors are distilled into rules. Mismatch / rejected rows are stored (they help the
# report) but never form rule clusters: a wrong answer has no error text to generalize from.
RULE_CATEGORIES = ("compile_error", "runtime_error", "timeout", "crashed")
STORED_CATEGORIES = RULE_CATEGORIES + ("mismatch", "rejected")
MAX_LINE = 300


@dataclass(frozen=True)
class FailureRecord:
    eval_id: str
    task_id: str
    category: str
    signature: str
    exception: str
    error_line: str
    source_line: str
    backend: str
    triton_version: str


@lru_cache(maxsize=1)
def installed_triton_version() -> str:
    """Read from package metadata: importing triton here would be slow and could fix its mode."""
    try:
        from importlib.metadata import version

        return version("triton")
    except Exception:  # noqa: BLE001 - no triton installed is a valid state for the server
        return ""


def _clip(text: str | None) -> str:
    text = (text or "").strip()
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 3] + "..."


def legacy_error_core(err: ErrorDetail) -> tuple[CoreError, str]:
    """(core, offending source line) of an ErrorDetail stored before the judge recorded root_*: both are
    read back from the excerpt's text, the only place the memory parses one. Details with root_* never
    come here, so the excerpt's wording is free to change."""
    text = err.excerpt or ""
    return core_from_text(err.exception, err.message, text), err.source_line or offending_line(text)


def error_core(err: ErrorDetail) -> tuple[CoreError, str]:
    """(core, offending source line) of an ErrorDetail: from its root_* fields, as the judge read them."""
    if err.root_exception is None:
        return legacy_error_core(err)
    message = err.message if err.root_message is None else err.root_message
    return core_from_root(err.root_exception, message, err.root_in_kernel), err.source_line or ""


def failure_record(evaluation: Evaluation, kernel_source: str = "", triton_version: str | None = None) -> FailureRecord | None:
    """The record a failed evaluation leaves (None for a pass). Pure: no database."""
    verdict = Verdict(evaluation.verdict)
    if verdict == Verdict.passed:
        return None
    category = verdict.value
    err = evaluation.error
    if err is not None:
        core, src = error_core(err)
        sig, exc, line = signature_of(core), core.exception or err.root_exception or err.exception, error_line_of(core)
        if not src and err.source_lineno and kernel_source:
            lines = kernel_source.splitlines()
            if 0 < err.source_lineno <= len(lines):
                src = lines[err.source_lineno - 1]
    elif verdict == Verdict.mismatch and evaluation.mismatch is not None:
        sig, exc, line, src = f"mismatch: {evaluation.mismatch.reason}", "", evaluation.mismatch.reason, ""
    elif verdict == Verdict.rejected and evaluation.rejected is not None:
        rej = evaluation.rejected
        sig, exc, line, src = f"rejected: {rej.check}", "", rej.message, ""
    else:
        sig, exc, line, src = f"{category}: no error detail", "", category, ""
    return FailureRecord(
        eval_id=evaluation.eval_id or new_id("eval"),
        task_id=evaluation.task_id,
        category=category,
        signature=sig,
        exception=_clip(exc),
        error_line=_clip(line),
        source_line=_clip(src),
        backend=evaluation.backend,
        triton_version=installed_triton_version() if triton_version is None else triton_version,
    )


def insert(store: Store, rec: FailureRecord) -> int:
    """One short transaction; returns the new failure_id."""
    with store.write() as tx:
        cur = tx.execute(
            "INSERT INTO failures (eval_id, task_id, category, signature, exception, error_line, source_line,"
            " backend, triton_version, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (rec.eval_id, rec.task_id, rec.category, rec.signature, rec.exception, rec.error_line,
             rec.source_line, rec.backend, rec.triton_version, time.time()),
        )
        return int(cur.lastrowid)


__all__ = ["FailureRecord", "RULE_CATEGORIES", "STORED_CATEGORIES", "error_core", "failure_record", "insert",
           "legacy_error_core", "normalize_message"]
