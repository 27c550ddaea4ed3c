"""Evaluation of candidate kernels: warm worker processes, correctness, integrity, timing, classification.

Only `Judge` is public. Importing this package does not import torch: workers set their device
environment before torch and triton load.
"""

from .api import Judge
from .processes import WorkerStartError

__all__ = ["Judge", "WorkerStartError"]
