"""Where each byte range of a storage came from, for the copy trace (copy_trace.py).

Why ranges: one origin per storage let a write to one part of a buffer decide for all of it. A PyTorch
`copy_` of an input beside a kernel's copy of PyTorch's result made the whole buffer "an input", a kernel's
pattern beside it made it "the kernels' work", and a kernel that copied PyTorch's result into the first n
elements of a larger buffer was never a copy at all (red team, rounds ten and eleven). Honest kernels suffered
the other way: a pad or a concatenation written by two launches, each moving an input into its part, was taken
for a copy of PyTorch's work.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_SEGMENTS = 4096  # per storage; beyond it, neighbouring ranges merge (_coarsened: a copy wins, else the most bytes)


@dataclass(frozen=True)
class Origin:
    """`kind`: known (before the call) | pytorch (PyTorch, from values no kernel computed) | kernel | derived
    (PyTorch, from a kernel's value) | moved (a kernel's copy of a value no kernel computed) | laundered
    (PyTorch, from a moved value) | cancelled (PyTorch turned a kernel's values into one constant)."""

    kind: str
    mover: str = ""  # moved, laundered: the kernel that moved the value
    input_only: bool = False  # moved: what was moved were inputs or parameters (a pad, a concatenation task)


PYTORCH, KNOWN = Origin("pytorch"), Origin("known")
_WORK = ("kernel", "derived")
_MOVED = ("moved", "laundered")


class OriginMap:
    """Byte ranges [lo, hi) of each storage (by its data pointer) and their origins; a range nobody set is
    PyTorch's (memory the call allocated)."""

    def __init__(self) -> None:
        self._segments: dict[int, list[tuple[int, int, Origin]]] = {}
        self._generations: dict[int, int] = {}

    def generation(self, key: int) -> int:
        """How many writes to this memory were seen: a value's identity between two of them. A tensor's `_version`
        is not: an alias made with `set_()` (the replay's `from_numpy`) or memory freed and allocated again starts
        a counter of its own at 0 over the same bytes (red team, round thirteen: PyTorch's answer, written
        through an alias, repeated the mark of the value before it and was never remembered)."""
        return self._generations.get(key, 0)

    def set(self, key: int, lo: int, hi: int, origin: Origin) -> None:
        self.set_many(key, [(lo, hi)], origin)

    def set_many(self, key: int, ranges: list[tuple[int, int]], origin: Origin) -> None:
        """One origin over several ranges of a storage (sorted, apart: the rows of a strided view), in one pass."""
        ranges = [(lo, hi) for lo, hi in ranges if hi > lo]
        if not ranges:
            return
        self._generations[key] = self._generations.get(key, 0) + 1
        kept, i = [], 0
        for a, b, o in self._segments.get(key, []):
            while i < len(ranges) and ranges[i][1] <= a:  # ranges wholly before this segment
                i += 1
            at, j = a, i
            while j < len(ranges) and ranges[j][0] < b:  # cut the segment around every range it meets
                if ranges[j][0] > at:
                    kept.append((at, ranges[j][0], o))
                at = max(at, ranges[j][1])
                j += 1
            if at < b:
                kept.append((at, b, o))
        kept.extend((lo, hi, origin) for lo, hi in ranges)
        kept.sort(key=lambda s: s[0])
        merged: list[tuple[int, int, Origin]] = []
        for a, b, o in kept:
            if merged and merged[-1][1] == a and merged[-1][2] == o:
                merged[-1] = (merged[-1][0], b, o)
            else:
                merged.append((a, b, o))
        self._segments[key] = merged if len(merged) <= MAX_SEGMENTS else _coarsened(merged)

    def parts(self, key: int, lo: int, hi: int) -> list[tuple[int, int, Origin]]:
        """The ranges that make up [lo, hi) of a storage, gaps as PyTorch's."""
        found, at = [], lo
        for a, b, o in self._segments.get(key, []):
            if b <= lo or a >= hi:
                continue
            if a > at:
                found.append((at, a, PYTORCH))
            found.append((max(a, lo), min(b, hi), o))
            at = max(at, b)
        if at < hi:
            found.append((at, hi, PYTORCH))
        return found

    def read(self, key: int, lo: int, hi: int) -> Origin:
        return self.read_many(key, [(lo, hi)])

    def read_many(self, key: int, ranges: list[tuple[int, int]]) -> Origin:
        """What a reader of these ranges takes in (a strided view reads its rows, not the gaps between them: red
        team, round fifteen): a kernel's work if any part is; else a moved value (laundered unless all of it is
        moved); else a cancellation; else PyTorch's; known only when all of it is."""
        origins = [o for lo, hi in ranges for _, _, o in self.parts(key, lo, hi)]
        kinds = {o.kind for o in origins}
        if kinds & set(_WORK):
            return Origin("kernel" if kinds == {"kernel"} else "derived")
        moved = [o for o in origins if o.kind in _MOVED]
        if moved:
            return moved[0] if kinds == {"moved"} and len(set(moved)) == 1 else Origin("laundered", moved[0].mover)
        if "cancelled" in kinds:
            return Origin("cancelled")
        return PYTORCH if "pytorch" in kinds else Origin("known")


PURE = ("known", "pytorch", "moved", "laundered", "cancelled")  # values no candidate kernel computed


def computed_from(origins: list[Origin]) -> Origin:
    """What PyTorch computes from values of these origins: its own work (`pytorch`) when no kernel computed any,
    `laundered` when one was moved by a kernel, `cancelled` when a kernel's values were cancelled in one, else
    `derived` (work split between a kernel and PyTorch)."""
    kinds = {o.kind for o in origins}
    if not kinds <= set(PURE):
        return Origin("derived")
    movers = [o.mover for o in origins if o.kind in _MOVED]
    if movers:
        return Origin("laundered", movers[0])
    return Origin("cancelled") if "cancelled" in kinds else PYTORCH


def _coarsened(segments: list[tuple[int, int, Origin]]) -> list[tuple[int, int, Origin]]:
    """At most MAX_SEGMENTS ranges: runs of neighbours become one, a copy's if there is one among them (a copy is
    never merged into an input's move, which the pad exemption lets through: round twelve), else the origin that
    covers most of their bytes (the more suspect on a tie). The two at the end merged into the more suspect, again
    and again, handed a kernel PyTorch's bytes beyond the bound (round fifteen: 8,192 alternating elements)."""
    group = -(-len(segments) // MAX_SEGMENTS)
    out: list[tuple[int, int, Origin]] = []
    for i in range(0, len(segments), group):
        run = segments[i:i + group]
        weight: dict[Origin, int] = {PYTORCH: (run[-1][1] - run[0][0]) - sum(b - a for a, b, _ in run)}  # gaps
        for a, b, o in run:
            weight[o] = weight.get(o, 0) + b - a
        copies = [o for o in weight if _rank(o) >= 4 and weight[o]]
        origin = max(copies, key=_rank) if copies else max(weight, key=lambda o: (weight[o], _rank(o)))
        if out and out[-1][2] == origin and out[-1][1] == run[0][0]:
            out[-1] = (out[-1][0], run[-1][1], origin)
        else:
            out.append((run[0][0], run[-1][1], origin))
    return out


def _rank(o: Origin) -> int:
    """How suspect a range is: a merge keeps the more suspect (an input's move is exempt as a pad's or a
    concatenation's part, so it ranks low: red team, round twelve, merged a copy into one)."""
    if o.kind == "moved" and o.input_only:
        return 1
    return {"moved": 5, "laundered": 5, "cancelled": 4, "pytorch": 3, "kernel": 2, "derived": 2}.get(o.kind, 0)
