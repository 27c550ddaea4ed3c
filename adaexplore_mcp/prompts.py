"""The `optimize_module` prompt: teaches an assistant the whole loop with this server's tools.

Plain text, no MCP import: server.py registers it (e.g. `mcp.prompt()(optimize_module)`).
`checked_arguments` validates what a client sends (prompt arguments arrive as strings) and raises
`UserError` with a readable message; the surface turns it into an invalid-params error.
"""

from __future__ import annotations

import re

from adaexplore_mcp.config import DEFAULT_MAX_SOURCE_BYTES
from adaexplore_mcp.errors import UserError, quote

MAX_BUDGET = 500
_INTEGER = re.compile(r"\s*[+-]?\d{1,18}\s*")

_LOOP = """You are optimizing a PyTorch module by writing Triton kernels. The adaexplore-mcp server is the judge and the \
search: it checks and times every kernel you write, keeps a tree of candidates, decides which one to grow next and how, \
and shows you the validity rules learned from earlier failures. You write kernels; the server decides.

1. Task. Put the user's module in KernelBench format: a top-level `class Model(nn.Module)`, `get_inputs()` returning \
the forward inputs and `get_init_inputs()` returning the constructor arguments, with sizes as top-level integer \
constants (`batch_size = 128`). Call `create_task(name, reference_source)`; add `small_shapes` (e.g. \
{{"batch_size": 8}}) to override those constants when there is no GPU and kernels run under the CPU interpreter. \
Keep the task_id. If the result says `degenerate`, fix the inputs: a constant output would pass it.

2. Search. Call `start_search(task_id, budget={budget}, seed=0, strategy="adaexplore")`. Then loop:
- `next_step(search_id)` returns a brief: the step kind, the parent kernel, the few `rules` most relevant to this \
step (`rules_more` others at adaexplore://rules), the task with the shapes the judge really runs \
(`evaluated_shapes`), the `device` and `steps_left`. The first brief carries the reference source \
(`reference_source`); later, `get_task(task_id)` returns it.
- Small step: make a focused change to the parent kernel (fix its error, or one optimization). Read `working_memory`, \
the recent refinement chain with each kernel's verdict, error and speedup (older kernels as diffs against the next \
one): do not repeat what already failed. Answer with `edits`, a list of {{"old", "new"}} exact replacements in the \
parent kernel; each `old` must occur exactly once.
- Large step: write a complete new ModelNew, meant to beat every kernel in the brief's `pool` (the best kernels of \
other branches). Try a different idea (tiling, fusion, data layout), not a copy.
- Every kernel must respect every rule in `rules`.
- Submit with `expand_node(search_id, step_id, kernel_source=... or edits=[...], note="what you tried, one line")`. \
The result holds the verdict, the speedup, whether it is a new best, and `steps_left`.
- Stop when `done` is true or `steps_left` is 0. Failures are normal; they stay in the tree, and a small step from a \
failed node is a repair. Do not stop early because one kernel failed.

3. Result. `best_kernel(search_id)` gives the best correct kernel (highest speedup over the whole tree). \
`export_kernel(search_id)` gives it as a standalone KernelBench file; `search_report(search_id)` gives a report with \
the speedup curve and the tree. Show the user the speedup, the GPU and the exported file."""

_CONTRACT = """The ModelNew contract (the judge enforces it):
- `class ModelNew(nn.Module)` with the same constructor and forward signature as Model, and the same parameter and \
buffer names, so Model's weights copy into it. Keep the same output shapes and dtypes.
- The work is done in your `@triton.jit` kernels, launched from forward. Calling the PyTorch op you replace (or \
returning the reference's output) is rejected; allocation, reshapes and views in Python are fine.
- Compute in float32 unless the task says otherwise. The reference is timed in strict fp32, so in `tl.dot` pass \
`input_precision="ieee"`: TF32 is faster but less exact, and may fail the check or win an unfair speedup.
- Inputs must stay unchanged; write only to tensors you allocated. Use masks on loads and stores for ragged edges.
- Without a GPU the kernel runs under Triton's CPU interpreter: correctness only, no speedups (null); all \
passing kernels rank equal, so there the "best" kernel is just the first correct one."""

_ONE_OFF = """One-off check, no search: `create_task(...)`, then `evaluate_kernel(task_id, kernel_source)` judges a \
single ModelNew. Read the verdict (passed, compile_error, runtime_error, mismatch, timeout, crashed, rejected), the \
error line or where outputs differ, and the `rules` the failure falls under; fix and evaluate again."""


def checked_arguments(module_source: object = "", budget: object = 20,
                      max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES) -> tuple[str, int]:
    """The prompt's arguments as a client sends them (strings), validated: (module_source, budget).

    `budget`: a whole number of kernels from 1 to MAX_BUDGET (an int or its decimal string).
    `module_source`: text of at most `max_source_bytes` UTF-8 bytes. Anything else is a `UserError`.
    """
    if module_source is None:
        module_source = ""
    if not isinstance(module_source, str):
        raise UserError(f"module_source must be text (Python source of the module), got {quote(module_source)}")
    try:
        size = len(module_source.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise UserError(f"module_source contains a lone surrogate at character {exc.start}, which is not valid "
                        "Unicode text; send UTF-8 encodable text") from None
    if size > max_source_bytes:
        raise UserError(f"module_source is {size} bytes; the limit is {max_source_bytes} bytes: send the module "
                        "itself (its class and its input sizes), not a whole file of dependencies")
    if isinstance(budget, str) and _INTEGER.fullmatch(budget):
        number: object = int(budget)
    else:
        number = budget
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_BUDGET:
        raise UserError(f"budget must be a whole number of kernels to write, from 1 to {MAX_BUDGET} "
                        f"(e.g. \"20\"), got {quote(budget)}")
    return module_source, number


def optimize_module(module_source: str = "", budget: int = 20) -> str:
    """Optimize a PyTorch module with Triton kernels: the full create_task -> search -> export loop."""
    try:
        budget = max(1, min(int(budget), MAX_BUDGET))
    except (TypeError, ValueError, OverflowError):
        raise UserError(f"budget must be a whole number of kernels from 1 to {MAX_BUDGET}, "
                        f"got {quote(budget)}") from None
    parts = [_LOOP.format(budget=budget), _CONTRACT, _ONE_OFF]
    if module_source.strip():
        parts.append(
            "The module to optimize (convert it to KernelBench format first if it is not):\n\n"
            f"```python\n{module_source.strip()}\n```"
        )
    else:
        parts.append("Ask the user for the PyTorch module to optimize if it is not already in the conversation.")
    return "\n\n".join(parts)


# The name the brief asks for; the prompt is a function of its arguments.
OPTIMIZE_MODULE_PROMPT = optimize_module

__all__ = ["MAX_BUDGET", "OPTIMIZE_MODULE_PROMPT", "checked_arguments", "optimize_module"]
