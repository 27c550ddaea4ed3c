"""Giving cached device memory back: one rule for the referee (after every request) and for runners
(after a `release`), so neither holds its peak between evaluations."""

from __future__ import annotations

import gc

import torch


GARBAGE_CHECK_BYTES = 64 << 20  # allocated after a request beyond this: run the cycle collector
KEEP_CACHED_BYTES = 2 << 30  # unused cache a process may keep between requests: small tasks reuse it, large ones flush


def give_back(keep_cached_bytes: int | None = 0, collect_garbage: bool = False) -> int:
    """Wait for the device, free blocks CUDA IPC held for a peer that has let go of them, and return the
    allocator's cached memory when more than `keep_cached_bytes` of it is unused (None: keep it all, for a
    process about to allocate the same sizes again). With `collect_garbage`, Python's cycle collector runs when
    tensors are still allocated: any an evaluation left in a reference cycle are otherwise freed only when it
    next runs (one such cycle, in wire.pack, had the two referees of an H100 hold up to 64 GiB between evaluations
    of a 64 MiB task, 2026-12-06). Returns the device memory still allocated; 0 without CUDA."""
    if not torch.cuda.is_initialized():
        return 0
    if collect_garbage and torch.cuda.memory_allocated() > GARBAGE_CHECK_BYTES:
        gc.collect()  # about 0.1 s with torch loaded: only when something is left
    torch.cuda.synchronize()
    torch.cuda.ipc_collect()
    if keep_cached_bytes is not None and torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > keep_cached_bytes:
        torch.cuda.empty_cache()
    return torch.cuda.memory_allocated()
