"""The checks of one evaluation, each answering a shortcut a candidate could take to a pass.

`pipeline.py` is the spine: every check in the order an evaluation runs it, over one typed context
(`context.py`). Construction and correctness answer a candidate that is not a drop-in or is wrong on the judge's
inputs; `work.py`, `timing.py` and `roofline.py` one whose kernels do not do the work, or whose timing is shaped.
The fidelity checks answer a candidate that is right on the judge's inputs and wrong on the user's: shapes written
into the source, parameters ignored because they sit at their initial constants, a branch `randn` never reaches,
a call that is right only when the judge looks, a cache keyed on a buffer's address, arithmetic below the task's
precision. Runner-side helpers (what a runner does to its own model or draws) live beside the check they serve,
and import nothing from the referee.
"""
