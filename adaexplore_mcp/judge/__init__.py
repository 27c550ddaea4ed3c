"""Evaluation of candidate kernels: warm worker processes, correctness, integrity, timing, classification.

Only `Judge` is public. Importing this package imports torch (the wire format carries tensors), but never
initialises CUDA in the server: workers and runners are fresh processes (spawn, exec) that set their device
environment before their own torch and triton load.
"""

from .api import Judge
from .processes import JudgeClosedError, WorkerStartError

__all__ = ["Judge", "JudgeClosedError", "WorkerStartError"]
