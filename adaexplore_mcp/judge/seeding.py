"""Seeding the generators a task can draw from: the CPU's and, once CUDA is up, every GPU's.

`torch.manual_seed` does that too, and also queues a seed for devices that are not initialized (XPU,
on every host): the queueing captures a formatted stack, 0.37 ms per call 20 frames deep on this project's
CI VM. A runner seeds once per input set, up to a few hundred sets per evaluation (the timed blocks), so
the runners seed the two generators themselves. The states are the ones `torch.manual_seed` leaves: the
same seed gives the same inputs and the same parameters as KernelBench's own `torch.manual_seed(seed)`.
"""

from __future__ import annotations

import torch


def manual_seed(seed: int) -> None:
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)  # immediate once CUDA is initialized: no stack captured
    elif torch.cuda.is_available():  # not yet initialized: torch's own path queues it for CUDA's start
        torch.manual_seed(seed)


__all__ = ["manual_seed"]
