"""The CPU front end: kernels that ran under Triton's CPU interpreter, compiled through Triton's real compiler
front end (AST -> TTIR) so that code the GPU compiler rejects fails on the CPU too.

One face: the runner's `Frontend` (record the launches of a forward call, then check them), and `install` (the
zygote snapshots a clean `triton.language` once, before any runner forks). Inside: record.py (step 1, what a
candidate launches), compile.py (step 2, a compile session per launch), check.py (the two steps as one check).
"""

from .check import Frontend
from .record import install

__all__ = ["Frontend", "install"]
