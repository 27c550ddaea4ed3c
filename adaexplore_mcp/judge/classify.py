"""The one table that turns what went wrong into a verdict and a compact, actionable ErrorDetail.

Nothing else in the judge inspects exception types or error strings. It knows three dialects:
- Triton's compiler on a GPU (`CompilationError` and friends; 3.6 and 3.9 word them differently, but
  both carry the kernel's source and an AST node, which we map back to a line of the candidate file);
- Triton's CPU interpreter, which runs the kernel body as Python and wraps whatever it raises in
  `InterpreterError` at launch: on a GPU those would almost all be compile errors, so they are, except
  a failed device-side assertion, which is a run-time failure on a GPU too;
- CUDA run-time errors, some of which poison the CUDA context (the worker must then be thrown away).

It is also the one place that finds the root of an error (`root_cause`): below Triton's wrappers
(`TRITON_WRAPPERS`), read from the live exception objects rather than from their printed text, which
differs between Triton versions and is trimmed for people. The skill memory signs failures from it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from ..errors import safe_str
from ..models import TRITON_WRAPPERS, ErrorDetail, Verdict
from .user_signals import quiet

# Exception class names (any in the MRO of any exception in the chain) that mean "did not build".
COMPILE_ERROR_TYPES = frozenset(
    {
        "CompilationError",
        "CompileTimeAssertionFailure",
        "UnsupportedLanguageConstruct",
        "OutOfResources",
        "PTXASError",
        "AutotunerError",
    }
)
# Backend failures that surface as plain RuntimeErrors while compiling.
COMPILE_ERROR_TEXT = ("PassManager::run failed", "ptxas", "MLIR", "LLVM ERROR", "failed to legalize",
                      "Unsupported function referenced", "error encountered during parsing")
# CUDA errors after which the context is unusable: report, then discard the worker.
POISON_TEXT = (
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "device-side assert",
    "illegal instruction",
    "an illegal",
    "launch timed out",
    "uncorrectable ECC",
    "hardware stack error",
    "CUDA error: unknown error",
    "CUBLAS_STATUS_EXECUTION_FAILED",
    "cudaErrorLaunchFailure",
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
)
MAX_MESSAGE = 400
MAX_EXCERPT = 1500
# The root's first line is kept whole up to here: a signature keeps the first 160 characters of the line
# *after* long paths and names are folded, so cutting it at MAX_MESSAGE could change a signature.
MAX_ROOT_MESSAGE = 1000
MAX_ROOT_DEPTH = 10_000  # a recursive @triton.jit call nests one CompilationError per level, hundreds deep
CANDIDATE_NAME = "candidate.py"

# Stages of an evaluation, in order; errors while loading or building the candidate are compile errors.
STAGE_IMPORT = "import"
STAGE_BUILD = "build"
STAGE_RUN = "run"


@dataclass(frozen=True)
class Classified:
    verdict: Verdict
    error: ErrorDetail
    poisoned: bool = False  # the CUDA context is unusable; the worker must exit after reporting


@dataclass(frozen=True)
class Root:
    """The error that names the mistake: what `ErrorDetail.root_*` records."""

    exception: str   # its type name; a wrapper's own name when the wrapper carried only text
    message: str     # its first meaningful line
    in_kernel: bool  # found below a Triton wrapper: raised while compiling or interpreting kernel code


@dataclass(frozen=True)
class CandidateFile:
    """Where the candidate lives, so tracebacks can be mapped back to its lines."""

    path: str
    source: str

    def line(self, lineno: int | None) -> str | None:
        lines = self.source.splitlines()
        if lineno is None or not 1 <= lineno <= len(lines):
            return None
        return lines[lineno - 1].strip()


def chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes/contexts, outermost first."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen and len(seen) < 10:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def _type_names(exc: BaseException) -> set[str]:
    return {t.__name__ for t in type(exc).__mro__}


def is_poisoning(exc: BaseException) -> bool:
    text = " ".join(f"{type(e).__name__}: {safe_str(e)}" for e in chain(exc))
    return any(marker.lower() in text.lower() for marker in POISON_TEXT)


def _is_compile_like(exc: BaseException) -> bool:
    for e in chain(exc):
        names = _type_names(e)
        if names & COMPILE_ERROR_TYPES:
            return True
        if "InterpreterError" in names:
            # The interpreter wraps the kernel body's exception; a device_assert is a run-time failure.
            cause = e.__cause__
            return not isinstance(cause, AssertionError)
        if isinstance(e, RuntimeError) and any(t in safe_str(e) for t in COMPILE_ERROR_TEXT):
            return True
    return False


def _key_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip() and ln.strip() != "^"]
    return lines[-1] if lines else ""


def _trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _message(exc: BaseException) -> tuple[str, str]:
    """(exception type, key line) of the most informative exception in the chain."""
    for e in chain(exc):
        if "InterpreterError" in _type_names(e) and e.__cause__ is not None:
            inner = e.__cause__
            return type(inner).__name__, _key_line(safe_str(inner)) or type(inner).__name__
        if "CompilationError" in _type_names(e):
            inner_msg = safe_str(getattr(e, "error_message", None) or safe_str(e))
            return type(e).__name__, _key_line(inner_msg)
    return type(exc).__name__, _key_line(safe_str(exc)) or type(exc).__name__


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _own_text(wrapper: BaseException) -> str:
    """What a wrapper says itself: a CompilationError's `error_message` (its str() starts with the kernel
    source excerpt), an InterpreterError's `error_message` (repr of the kernel's exception), else str()."""
    try:
        own = getattr(wrapper, "error_message")
    except AttributeError:
        return safe_str(wrapper).strip()
    except Exception:  # noqa: BLE001 - a hostile class that only borrowed a wrapper's name
        return ""
    return safe_str(own).strip() if own is not None else ""


# `TypeError("...")`: how a wrapper quotes the exception it wrapped (`repr(e)`, one string argument).
_QUOTED_EXC = re.compile(r"""^([A-Z]\w*)\(('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\)$""", re.S)


def _unrepr(literal: str) -> str:
    """The string a Python string literal spells (the quoted part of `TypeError('...')`)."""
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return literal[1:-1]
    return value if isinstance(value, str) else literal[1:-1]


def _says(exc: BaseException) -> tuple[str, ...]:
    """The ways a wrapper quotes the exception it wraps (`repr(e)` or `str(e)`, depending on where)."""
    try:
        spelled = repr(exc)
    except Exception:  # noqa: BLE001 - a hostile __repr__
        spelled = ""
    return spelled.strip(), safe_str(exc).strip()


def root_cause(exc: BaseException) -> Root:
    """Descend through Triton's wrappers to the error they carry, once, on live objects.

    Only wrappers are descended: any other exception is the error the candidate's code (or torch) chose to
    raise, and its own causes are context. A wrapper leads to its __cause__/__context__ when it says
    nothing itself or only quotes that exception (`InterpreterError(repr(e)) from e`,
    `CompilationError(src, node, repr(e)) from None`); a wrapper with text of its own
    (`UnsupportedLanguageConstruct`, `static_assert`) is the root itself.
    """
    cur, in_kernel, seen = exc, False, set()
    while type(cur).__name__ in TRITON_WRAPPERS and id(cur) not in seen and len(seen) < MAX_ROOT_DEPTH:
        seen.add(id(cur))
        in_kernel = True
        own = _own_text(cur)
        inner = cur.__cause__ or cur.__context__
        if inner is not None and (not own or own in _says(inner)):
            cur = inner
            continue
        name, text = type(cur).__name__, own
        # A pickled wrapper (CompilationError.__reduce__) keeps repr(e) but not e itself.
        while inner is None and name in TRITON_WRAPPERS and (quoted := _QUOTED_EXC.match(text)):
            name, text = quoted.group(1), _unrepr(quoted.group(2))
        return Root(name, _first_line(text), True)
    return Root(type(cur).__name__, _first_line(safe_str(cur)), in_kernel)


def _candidate_frames(exc: BaseException, cand: CandidateFile | None) -> list[traceback.FrameSummary]:
    if cand is None:
        return []
    frames: list[traceback.FrameSummary] = []
    for e in chain(exc):  # outermost first: a cause was raised deeper in the stack, its frames go last
        tb: TracebackType | None = e.__traceback__
        frames.extend(f for f in traceback.extract_tb(tb) if f.filename == cand.path)
    return frames


def _compilation_lineno(exc: BaseException, cand: CandidateFile | None) -> int | None:
    """Map Triton's (kernel source, AST node) back to a line of the candidate file."""
    if cand is None:
        return None
    for e in chain(exc):
        src, node = getattr(e, "src", None), getattr(e, "node", None)
        if isinstance(src, str) and src and hasattr(node, "lineno"):
            offset = cand.source.find(src)
            if offset >= 0:
                return cand.source.count("\n", 0, offset) + int(node.lineno)
            wanted = src.splitlines()[int(node.lineno) - 1].strip() if node.lineno <= len(src.splitlines()) else ""
            for i, line in enumerate(cand.source.splitlines(), 1):
                if wanted and line.strip() == wanted:
                    return i
    return None


def _excerpt(exc: BaseException, frames: list[traceback.FrameSummary], cand: CandidateFile | None) -> str:
    parts = [f'  File "{CANDIDATE_NAME}", line {f.lineno}, in {f.name}\n    {(f.line or "").strip()}' for f in frames[-6:]]
    for e in reversed(chain(exc)[:3]):
        parts.append(f"{type(e).__name__}: {_trim(safe_str(e), 600)}")
    text = "\n".join(parts)
    if cand is not None:
        text = text.replace(cand.path, CANDIDATE_NAME)
    return text[-MAX_EXCERPT:]


def describe(exc: BaseException, cand: CandidateFile | None) -> ErrorDetail:
    """ErrorDetail for any exception: type, key line, offending candidate line, short excerpt."""
    etype, message = _message(exc)
    lineno: int | None = None
    if isinstance(exc, SyntaxError) and cand is not None and exc.filename in (cand.path, "<unknown>", None):
        lineno = exc.lineno
    frames = _candidate_frames(exc, cand)
    if lineno is None:
        lineno = _compilation_lineno(exc, cand)
    if lineno is None and frames:
        lineno = frames[-1].lineno
    root = root_cause(exc)
    root_message = root.message
    if cand is not None:
        message = message.replace(cand.path, CANDIDATE_NAME)
        root_message = root_message.replace(cand.path, CANDIDATE_NAME)
    return ErrorDetail(
        exception=etype,
        message=_trim(message, MAX_MESSAGE),
        source_line=cand.line(lineno) if cand else None,
        source_lineno=lineno if cand and cand.line(lineno) is not None else None,
        excerpt=_excerpt(exc, frames, cand),
        root_exception=root.exception,
        root_message=_trim(root_message, MAX_ROOT_MESSAGE),
        root_in_kernel=root.in_kernel,
    )


def reference_error(what: str, exc: BaseException, cand: CandidateFile | None) -> str:
    """What the task's own code raised (`what`: which of its calls), with its line: a ReferenceFailure's text."""
    d = describe(exc, cand)
    where = f" at line {d.source_lineno}: `{d.source_line}`" if d.source_lineno else ""
    return f"the reference's {what} raised {d.exception}: {d.message}{where}"


def interpreter_internal(exc: BaseException, cand: CandidateFile | None) -> str | None:
    """Where inside Triton's interpreter an InterpreterError arose, when not in the candidate's code or a
    language check (semantic.py): such failures can be interpreter bugs (Triton 3.6 with numpy >= 2.5
    fails on `range()` over a runtime int), so the verdict needs a GPU to confirm."""
    for e in chain(exc):
        if "InterpreterError" in _type_names(e) and e.__cause__ is not None:
            frames = traceback.extract_tb(e.__cause__.__traceback__)
            if not frames:
                return None
            last = frames[-1].filename
            if (cand is not None and last == cand.path) or last.endswith("semantic.py"):
                return None
            return "/".join(last.split("/")[-3:])
    return None


def classify(exc: BaseException, stage: str, cand: CandidateFile | None) -> Classified:
    """Verdict + detail for an exception raised by candidate code at `stage`."""
    detail = describe(exc, cand)
    if is_poisoning(exc):
        return Classified(Verdict.crashed, detail, poisoned=True)
    if stage in (STAGE_IMPORT, STAGE_BUILD) or _is_compile_like(exc):
        return Classified(Verdict.compile_error, detail)
    return Classified(Verdict.runtime_error, detail)


ESCAPED = ("the {who}'s code raised {name} while the judge's code was running, after its call returned: from a signal "
           "handler it left installed (signal.signal with an alarm or itimer armed?) or a method of an object it returned")


def escaped(exc: BaseException, role: str, cand: CandidateFile | None, handlers: dict[int, Any]) -> dict[str, Any]:
    """The runner's answer when SystemExit (or another BaseException) reaches the judge's own code in a runner.
    Only user code raises those there: the user's error, with its frames (never the judge's: they name host
    paths), not a crash of the runner. `internal` too, for a referee step that reads only that."""
    quiet(handlers)  # first: a timer still armed would interrupt this too
    what = ESCAPED.format(who="reference" if role == "ref" else "candidate", name=type(exc).__name__)
    if role == "ref":
        return {"ref_error": f"{what} ({_trim(safe_str(exc), 200)})"}
    detail = describe(exc, cand)
    detail.message = _trim(f"{what} ({detail.message})", MAX_MESSAGE)
    return {"verdict": Verdict.runtime_error.value, "error": detail.model_dump(), "internal": what}


def static_error(message: str, exception: str = "CompileError", lineno: int | None = None,
                 source: str | None = None) -> ErrorDetail:
    """An ErrorDetail for problems found without running anything (size, parse, missing ModelNew).

    No exception chain: the error is `exception` itself and `message` is its root message."""
    line = None
    if source is not None and lineno is not None:
        lines = source.splitlines()
        line = lines[lineno - 1].strip() if 1 <= lineno <= len(lines) else None
    return ErrorDetail(exception=exception, message=message, source_line=line, source_lineno=lineno if line else None,
                       root_exception=exception)


_FAULT_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<lineno>\d+) in (?P<name>\S+)')


def from_fault_dump(text: str, cand: CandidateFile | None, headline: str, exception: str) -> ErrorDetail:
    """Detail for a worker that died or hung, from its faulthandler dump (most recent call first).

    The root is the death itself (`exception`, with `message` as its text, which a caller may still reword):
    whatever the dump's tail happens to print is context for people, not the failure's signature."""
    lineno = None
    frames = []
    for m in _FAULT_FRAME.finditer(text):
        if cand is not None and Path(m.group("path")).name == Path(cand.path).name:
            frames.append((int(m.group("lineno")), m.group("name")))
    if frames:
        lineno = frames[0][0]
    tail = text[-MAX_EXCERPT:]
    if cand is not None:
        tail = re.sub(r'"[^"]*' + re.escape(Path(cand.path).name) + '"', f'"{CANDIDATE_NAME}"', tail)
    fatal = next((ln.strip() for ln in text.splitlines() if ln.startswith("Fatal Python error")), None)
    return ErrorDetail(
        exception=exception,
        message=_trim(f"{headline}" + (f" ({fatal})" if fatal else ""), MAX_MESSAGE),
        source_line=cand.line(lineno) if cand else None,
        source_lineno=lineno if cand and cand.line(lineno) is not None else None,
        excerpt=tail.strip(),
        root_exception=exception,
    )
