"""The tensor digest the exact-copy check remembers PyTorch's values by, and the replay digests lent inputs by
(judge/tensor_digest.py)."""

from __future__ import annotations

import torch

from adaexplore_mcp.judge.tensor_digest import tensor_digest


def test_equal_bytes_give_equal_digests_whatever_the_layout_or_dtype_view() -> None:
    x = torch.randn(300, 37)
    assert tensor_digest(x) == tensor_digest(x.clone()) == tensor_digest(x.t().contiguous().t())
    assert tensor_digest(x[:, 1:]) == tensor_digest(x[:, 1:].contiguous())
    assert tensor_digest(x) == tensor_digest(x.view(torch.int32))
    assert tensor_digest(torch.zeros(3)) != tensor_digest(torch.zeros(4))  # the byte count is part of it


def test_sign_flips_and_swapped_rows_change_the_digest() -> None:
    """Red team, round nine: a weighted sum of raw words modulo 2**64 ignored the sign bit of every float64 in odd
    rows and of pairs of them anywhere: `-h` and `abs(h)` digested as `h`, and honest kernels were rejected."""
    gen = torch.Generator().manual_seed(9)
    for _ in range(50):
        h = torch.randn(16, 16, dtype=torch.float64, generator=gen)
        assert len({tensor_digest(h), tensor_digest(-h), tensor_digest(h.abs())}) == 3
        f = torch.randn(64, generator=gen)
        g = f.clone()
        g[1], g[3] = -g[1], -g[3]
        assert tensor_digest(f) != tensor_digest(g)
    a = torch.randn(4096 * 4, generator=gen)
    assert tensor_digest(a) != tensor_digest(torch.cat([a[8192:], a[:8192]]))  # whole rows of words swapped

