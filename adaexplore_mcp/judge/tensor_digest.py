"""A 64-bit digest of a tensor's bytes, computed where the tensor lives (no copy to the host).

The replay's exact-copy check (replay/flow.py) remembers every value PyTorch made in a call by its digest, so that an
output can be recognised as one of them without keeping the values themselves (a large task's would not fit twice);
the replay also digests what it lends each run (replay/inputs.py). Equal bytes always give equal digests. Each 8-byte
word is first mixed (splitmix64's finalizer: a change in any bit, the sign bit of a float above all, reaches the low
bits), then summed with random odd weights modulo 2**64, in two levels: the words of a row, then the rows (odd
factors). Without the mixing, flipping the signs of a float64 matrix gave the same digest. A collision could only
flag an honest output, never hide a copy, so the weights are fixed (reproducible verdicts) rather than secret.
"""

from __future__ import annotations

import torch

_ROW = 4096  # int64 words per row
_CHUNK_ROWS = 2048  # rows per pass: 64 MiB of bytes, so the products never take more than that
_K1, _K2 = 0x9E3779B97F4A7C15 - (1 << 64), 0xC2B2AE3D27D4EB4F - (1 << 64)  # odd, as signed int64
_M1, _M2 = 0xBF58476D1CE4E5B9 - (1 << 64), 0x94D049BB133111EB - (1 << 64)  # splitmix64's multipliers
_weights: dict[torch.device, torch.Tensor] = {}


def _row_weights(device: torch.device) -> torch.Tensor:
    if device not in _weights:
        gen = torch.Generator().manual_seed(0x5EED)
        w = torch.randint(-(1 << 62), 1 << 62, (_ROW,), dtype=torch.int64, generator=gen) * 2 + 1
        _weights[device] = w.to(device)
    return _weights[device]


def _shr(x: torch.Tensor, bits: int) -> torch.Tensor:
    """A logical shift right of int64 words (torch's is arithmetic: the sign bit would be copied in)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def _mix(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finalizer, a bijection of 64-bit words, wrapping as int64 does."""
    x = x ^ _shr(x, 30)
    x = x * _M1
    x = x ^ _shr(x, 27)
    x = x * _M2
    return x ^ _shr(x, 31)


def tensor_digest(t: torch.Tensor) -> tuple[int, int]:
    """(byte count, digest) of the tensor's elements in row-major order, whatever its dtype, strides or storage
    offset: a view and a contiguous copy of it digest the same, and so do two dtypes over the same bytes."""
    flat = t.detach().contiguous().reshape(-1)
    if flat.numel() == 0:
        return 0, 0
    step = _ROW * 8 * _CHUNK_ROWS
    data = flat.view(torch.uint8) if flat.dtype != torch.bool else flat.to(torch.uint8)
    if data.storage_offset() % 8:
        data = data.clone()  # an int64 view needs 8-byte alignment
    w, total = _row_weights(flat.device), 0
    for start in range(0, data.numel(), step):
        part = data[start:start + step]
        if part.numel() % (_ROW * 8):
            part = torch.cat([part, part.new_zeros((-part.numel()) % (_ROW * 8))])
        rows = (_mix(part.view(torch.int64)).view(-1, _ROW) * w).sum(1)
        index = torch.arange(rows.numel(), device=rows.device, dtype=torch.int64) + start // (_ROW * 8)
        total += int((_mix(rows) * (index * 2 * _K1 + _K2)).sum())  # every row's factor odd
    return data.numel(), total % (1 << 64)


__all__ = ["tensor_digest"]
