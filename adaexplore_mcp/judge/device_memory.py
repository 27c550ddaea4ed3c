"""Giving cached device memory back: one rule for the referee (after every request) and for runners
(after a `release`), so neither holds its peak between evaluations."""

from __future__ import annotations

import gc

import torch


KEEP_CACHED_BYTES = 2 << 30  # unused cache a process may keep between requests: small tasks reuse it, large ones flush


def give_back(keep_cached_bytes: int | None = 0, collect_garbage: bool = False) -> int:
    """Wait for the device, free blocks CUDA IPC held for a peer that has let go of them, and return the
    allocator's cached memory when more than `keep_cached_bytes` of it is unused (None: keep it all, for a
    process about to allocate the same sizes again). With `collect_garbage`, Python's cycle collector runs
    first: tensors an evaluation left in reference cycles are otherwise freed only when it next runs (on the H100
    of 2026-12-06 the two referees held 39-61 GiB between evaluations of a 64 MiB task). Returns the device
    memory still allocated; 0 without CUDA."""
    if not torch.cuda.is_initialized():
        return 0
    if collect_garbage:
        gc.collect()
    torch.cuda.synchronize()
    torch.cuda.ipc_collect()
    if keep_cached_bytes is not None and torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > keep_cached_bytes:
        torch.cuda.empty_cache()
    return torch.cuda.memory_allocated()
