"""Fidelity checks: does the candidate compute the task's function, or only pass the judge's test?

A shortcut of this kind is right on the judge's inputs and wrong on the user's: shapes written into the
source, parameters ignored because they sit at their initial constants, a branch `randn` never reaches, a
call that is right only when the judge looks, a cache keyed on a buffer's address, arithmetic below the
task's precision. Each answer is a small module here; `pipeline.py` is the spine that lists them in the
order an evaluation runs them. Runner-side helpers (what a runner does to its own model or draws) live
beside the check they serve, and import nothing from the referee.
"""
