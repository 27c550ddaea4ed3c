"""The `optimize_module` prompt: teaches an assistant the whole loop with this server's tools.

Plain text, no MCP import: server.py registers it (e.g. `mcp.prompt()(optimize_module)`).
`checked_arguments` validates what a client sends (prompt arguments arrive as strings) and raises
`UserError` with a readable message; the surface turns it into an invalid-params error.
"""

from __future__ import annotations

import re

from adaexplore_mcp.config import DEFAULT_MAX_SOURCE_BYTES
from adaexplore_mcp.errors import UserError, quote
from adaexplore_mcp.search.types import MAX_BUDGET  # defined once: start_search checks the same limit

_INTEGER = re.compile(r"\s*[+-]?\d{1,18}\s*")

_LOOP = """You are optimizing a PyTorch module with Triton kernels. The adaexplore-mcp server judges and times every \
kernel you write, keeps a tree of candidates, decides which to grow next and how, and shows the validity rules learned \
from earlier failures. You write kernels; the server decides.

1. Task. Put the user's module in KernelBench format: a top-level `class Model(nn.Module)`, `get_inputs()` returning \
the forward inputs and `get_init_inputs()` returning the constructor arguments, with sizes as top-level integer \
constants (`batch_size = 128`). Call `create_task(name, reference_source)` and keep the task_id. Without a GPU kernels \
run under Triton's CPU interpreter, which is slow: pass `small_shapes` (e.g. {{"batch_size": 8}}) to shrink those \
constants; a task too large for the CPU is registered at small_shapes the server checked, and `warnings` says so \
(or proposes small_shapes to pass). If the result says `degenerate`, fix the inputs: a constant output would pass \
the task.

2. Search: one call per step. Call `start_search(task_id, budget={budget})`, then `next_step(search_id)` once for the \
first brief. Then, for every step:
- Read the brief: `kind`, `parent_kernel`, the `rules` for this step, `evaluated_shapes`, `steps_left`. The first \
brief carries `reference_source` (later: `get_task(task_id)`).
- Small step: one focused change to the parent kernel (fix its error, or one optimization); read `working_memory` \
(the recent chain with each kernel's verdict, error and speedup) and do not repeat what failed. Answer with `edits`, \
a list of {{"old", "new"}} exact replacements (each `old` must occur exactly once in the parent kernel).
- Large step: a complete new ModelNew in `kernel_source`, meant to beat every kernel in the brief's `pool`: a \
different idea (tiling, fusion, data layout), not a copy.
- Submit with `expand_node(search_id, step_id, edits=[...] or kernel_source=..., note="one line", next=1)`. The \
result has the verdict, speedup, is_new_best, steps_left and, in `next_step`, the next brief: no separate next_step \
call.
- Several kernels at once: `next_step(search_id, count=k)` once (a brief plus `more_steps`), then each round \
`expand_nodes(search_id, items=[{{"step_id", "edits" or "kernel_source", "note"}}, ...], next=k)`: k results and \
the next k briefs; `same_parent_as` names the step whose parent fields a brief shares.

3. Each verdict. passed: see `speedup`/`speedups` (null on the CPU) and keep going. compile_error / runtime_error: `error` has the message and your offending line; fix that line and \
follow the `rules` it names. mismatch: `mismatch` names the output, the worst index and the error against \
`tolerance`; check indexing, masks, strides and accumulation in float32. timeout: an endless loop or far too much \
work (on the CPU, smaller small_shapes). crashed: usually an out-of-bounds access; mask loads and stores. rejected: \
the named check failed (do the work in your Triton kernels, leave inputs unchanged, return new tensors). A failure \
stays in the tree and a small step from it is a repair: never stop because one failed.

4. Stop when a result says `done` (or `steps_left` is 0), or when the user asks. Then `best_kernel(search_id)` \
gives the best correct kernel, `export_kernel(search_id)` a standalone KernelBench file and \
`search_report(search_id)` a report of the search. Show the user the speedup, the GPU and the exported file."""

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
single ModelNew; read its verdict as in step 3, fix and evaluate again."""


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
