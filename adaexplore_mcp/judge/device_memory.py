"""Giving cached device memory back: one rule for the referee (after every request) and for runners
(after a `release`), so neither holds its peak between evaluations."""

from __future__ import annotations

import torch


KEEP_CACHED_BYTES = 2 << 30  # unused cache a process may keep between requests: small tasks reuse it, large ones flush


def give_back(keep_cached_bytes: int | None = 0) -> None:
    """Wait for the device, free blocks CUDA IPC held for a peer that has let go of them, and return the
    allocator's cached memory when more than `keep_cached_bytes` of it is unused (None: keep it all, for a
    process about to allocate the same sizes again). No-op without CUDA."""
    if not torch.cuda.is_initialized():
        return
    torch.cuda.synchronize()
    torch.cuda.ipc_collect()
    if keep_cached_bytes is not None and torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > keep_cached_bytes:
        torch.cuda.empty_cache()
