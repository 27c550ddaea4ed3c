"""Results sized for a model: what a tool returns by default, and what stays in the evaluation's resource.

Why: a passing evaluation was about 2.5k characters, most of it the judge's own bookkeeping (`stages_ms`,
`work.replay`, `determinism`, the sandbox, timing blocks), and every expand_node, best_kernel and get_job
result carries one; the model writing kernels pays for it on every step (issue 41). By default an evaluation
keeps what a model acts on: the verdict, speedup and speedups, precision, the failure detail (error,
mismatch and its tolerance, rejected check), the rules and warnings. Everything is still stored: the resource
adaexplore://evaluations/{eval_id} and evaluate_kernel(detail=true) return the whole evaluation.

Error excerpts are cut to the frames a model can act on: the candidate's own lines and Triton's frames (with
Triton's path shortened to `triton/...`); the server's frames (judge, worker, site-packages, the standard
library) say nothing about the kernel and name this machine's paths.
"""

from __future__ import annotations

import re
from typing import Any

# Judge internals a result leaves out unless detail is asked for (all in the stored evaluation).
INTERNAL_EVALUATION_FIELDS = (
    "speedup_tf32", "timing", "trials", "kernels_launched", "duration_s", "device_index", "node", "sandbox",
    "lineup", "determinism", "stages_ms", "ops_ms", "work", "fidelity",
)
_ALWAYS_KEPT = ("verdict", "speedup")
EVALUATION_RESOURCE = "adaexplore://evaluations/{eval_id}"

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]*)", line \d+')  # a traceback's frame, or a faulthandler dump's
_CUT_FRAME = re.compile(r'^(?P<tail>[^\s"]+)(?P<rest>", line \d+.*)$')  # a frame whose path the excerpt cut
_NOISE = ("Extension modules:",)
_ABS_PATH = re.compile(r"(?<![\w.])/(?:[\w.+-]+/)+(?P<name>[\w.+-]+\.py)\b")  # /.../file.py in a message  # faulthandler's list of loaded C extensions: nothing about the kernel
_TRITON_PATH = re.compile(r'File "[^"]*?/(?P<tail>triton/[^"]*)"')


def is_evaluation(value: Any) -> bool:
    """An evaluation as a dict (the judge's result shape): it alone has both a verdict and a backend."""
    return isinstance(value, dict) and "verdict" in value and "backend" in value and "eval_id" in value


def lean_evaluation(evaluation: dict[str, Any]) -> dict[str, Any]:
    """The evaluation a model reads: internals out, empty fields out, server frames out of the excerpt."""
    lean: dict[str, Any] = {}
    for key, value in evaluation.items():
        if key in INTERNAL_EVALUATION_FIELDS:
            continue
        if key == "tolerance" and evaluation.get("verdict") != "mismatch":
            continue  # the tolerance explains a mismatch; elsewhere it is the same four numbers every time
        if key not in _ALWAYS_KEPT and _empty(value):
            continue
        lean[key] = {k: v for k, v in value.items() if not _empty(v)} if isinstance(value, dict) else value
    if lean.get("verdict") == "timeout" and lean.get("backend") == "cpu-interpreter":
        lean["warnings"] = [*lean.get("warnings", []), cpu_timeout_note(lean.get("shapes"))]
    error = lean.get("error")
    if isinstance(error, dict):
        if isinstance(error.get("excerpt"), str):
            error["excerpt"] = scrub_excerpt(error["excerpt"])
        for key in ("message", "root_message"):
            if isinstance(error.get(key), str):
                error[key] = scrub_paths(error[key])
        if (error.get("root_exception"), error.get("root_message")) == (error.get("exception"), error.get("message")):
            error.pop("root_exception", None)  # the root is the error itself: said once
            error.pop("root_message", None)
    return lean


def cpu_timeout_note(shapes: Any) -> str:
    """Why a kernel may time out without a GPU, and what to do: the interpreter, and small_shapes."""
    where = ("this task runs at its full size: create_task again with small_shapes (e.g. {\"batch_size\": 8}; "
             "create_task proposes them for large tasks) makes every run smaller" if shapes == "full" else
             "this task already runs at its small_shapes: smaller ones, or fewer loop iterations, help")
    return ("timed out under Triton's CPU interpreter (TRITON_INTERPRET=1: no GPU here, every kernel program runs "
            f"as Python, thousands of times slower): an endless loop is one cause, the size another; {where}")


def _empty(value: Any) -> bool:
    """None, or an empty text, list or object: a field with nothing to say (false and 0 say something)."""
    return value is None or (isinstance(value, (str, list, dict)) and not value)


def lean_result(value: Any) -> Any:
    """`value` (a tool's structured result) with every evaluation in it made lean."""
    if is_evaluation(value):
        return lean_evaluation(value)
    if isinstance(value, dict):
        return {key: lean_result(item) for key, item in value.items()}
    if isinstance(value, list):
        return [lean_result(item) for item in value]
    return value


def scrub_excerpt(excerpt: str) -> str:
    """A traceback excerpt with only the candidate's and Triton's frames (server frames counted, not shown)."""
    out: list[str] = []
    dropped = 0
    skip_code = False
    for line in excerpt.splitlines():
        if line.startswith(_NOISE):
            continue
        cut = _CUT_FRAME.match(line)
        if cut and not out:  # the excerpt began inside a path: show that it was cut, not a bare fragment
            line = f'  File "...{cut.group("tail")}{cut.group("rest")}'
        frame = _FRAME.match(line)
        if frame:
            path = frame.group("path")
            if _is_server_path(path):
                dropped += 1
                skip_code = True
                continue
            skip_code = False
            out.append(_TRITON_PATH.sub(lambda m: f'File "{m.group("tail")}"', line))
            continue
        if skip_code and line.startswith("    "):
            continue  # the code line of a dropped frame
        skip_code = False
        out.append(scrub_paths(line))
    if dropped:
        out.insert(0, f"  ({dropped} frame{'s' if dropped > 1 else ''} of the judge left out)")
    return "\n".join(out).rstrip()


def scrub_paths(text: str) -> str:
    """Absolute paths to Python files in a message, shortened: Triton's to `triton/...`, others to their name."""
    def short(match: re.Match[str]) -> str:
        path = match.group(0)
        return path[path.rindex("/triton/") + 1:] if "/triton/" in path else match.group("name")

    return _ABS_PATH.sub(short, text)


def _is_server_path(path: str) -> bool:
    """A frame outside the candidate and Triton: the server's code, the standard library, other packages."""
    if path.startswith(("<frozen", "...")):
        return path.startswith("<frozen")  # Python's own start-up frames; a path the excerpt cut stays
    if not path.startswith("/") and "/" not in path:
        return False  # candidate.py, <string>, a kernel's own file name
    return "/triton/" not in path
