"""Origins per byte range (judge/origin_map.py): writes replace only their range, reads combine, and a storage
split into too many ranges merges runs of neighbours (a copy first, else the most bytes)."""

from __future__ import annotations

from adaexplore_mcp.judge import origin_map
from adaexplore_mcp.judge.origin_map import MAX_SEGMENTS, Origin, OriginMap

KNOWN, KERNEL = Origin("known"), Origin("kernel")
COPY, INPUT_MOVE = Origin("moved", "copy_kernel"), Origin("moved", "copy_kernel", input_only=True)


def test_a_write_replaces_only_its_range_and_gaps_are_pytorchs() -> None:
    m = OriginMap()
    m.set(1, 0, 100, KNOWN)
    m.set(1, 40, 60, COPY)
    assert m.parts(1, 0, 100) == [(0, 40, KNOWN), (40, 60, COPY), (60, 100, KNOWN)]
    assert m.parts(2, 0, 8) == [(0, 8, origin_map.PYTORCH)]
    assert m.parts(1, 90, 120) == [(90, 100, KNOWN), (100, 120, origin_map.PYTORCH)]


def test_reading_a_range_takes_in_the_work_the_copies_or_else_pytorchs() -> None:
    m = OriginMap()
    m.set(1, 0, 50, COPY)
    m.set(1, 50, 100, KERNEL)
    assert m.read(1, 0, 50) == COPY
    assert m.read(1, 0, 100).kind == "derived"  # a kernel's work among it
    m.set(2, 0, 50, COPY)
    m.set(2, 50, 100, KNOWN)
    assert m.read(2, 0, 100) == Origin("laundered", "copy_kernel")
    assert m.read(2, 50, 100) == KNOWN


def test_too_many_ranges_merge_into_the_more_suspect_never_into_an_inputs_move(monkeypatch) -> None:  # noqa: ANN001
    """Red team, round twelve: 4096 PyTorch ranges, then an input's move and a copy of PyTorch's result beside it:
    the merge kept the input's move, which the pad exemption lets through."""
    monkeypatch.setattr(origin_map, "MAX_SEGMENTS", 3)
    m = OriginMap()
    m.set(1, 0, 10, KERNEL)
    m.set(1, 10, 20, Origin("pytorch"))
    m.set(1, 20, 30, INPUT_MOVE)
    m.set(1, 30, 40, COPY)
    assert m.parts(1, 0, 40)[-1] == (20, 40, COPY)


def test_beyond_the_bound_neighbours_merge_into_the_origin_with_the_most_bytes() -> None:
    """Round fifteen: merging the two at the end into "the more suspect" handed a kernel PyTorch's bytes."""
    kernel, pytorch = Origin("kernel"), Origin("pytorch")
    wide = OriginMap()  # a kernel's 90 bytes, PyTorch's 10, 5,000 times: the kernel's runs stay the kernel's
    wide.set_many(1, [(i * 100, i * 100 + 90) for i in range(5000)], kernel)
    wide.set_many(1, [(i * 100 + 90, i * 100 + 100) for i in range(5000)], pytorch)
    parts = wide.parts(1, 0, 500_000)
    assert len(parts) <= MAX_SEGMENTS
    share = sum(b - a for a, b, o in parts if o == kernel) / 500_000
    assert share >= 0.9, share
    even = OriginMap()  # alternating bytes, half each: the kernel keeps about half, not all
    even.set_many(1, [(i * 2, i * 2 + 1) for i in range(10_000)], kernel)
    even.set_many(1, [(i * 2 + 1, i * 2 + 2) for i in range(10_000)], pytorch)
    kept = sum(b - a for a, b, o in even.parts(1, 0, 20_000) if o == kernel) / 20_000
    assert 0.4 <= kept <= 0.6, kept
    copied = OriginMap()  # a copy among them still wins its run
    copied.set_many(1, [(i * 2, i * 2 + 1) for i in range(10_000)], Origin("moved", "copy_kernel"))
    copied.set_many(1, [(i * 2 + 1, i * 2 + 2) for i in range(10_000)], Origin("moved", "pad", True))
    assert {o.kind for _, _, o in copied.parts(1, 0, 20_000)} == {"moved"}
    assert all(not o.input_only for _, _, o in copied.parts(1, 0, 20_000))
