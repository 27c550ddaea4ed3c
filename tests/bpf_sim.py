"""A tiny interpreter of the classic BPF the seccomp filter is written in (judge/sandbox/seccomp.py), for its tests:
only the instructions the filter uses (load word, and, jump if equal / greater or equal, return)."""

from __future__ import annotations


def run_bpf(prog: list[tuple[int, int, int, int]], nr: int, arch: int, arg0: int = 0, arg1: int = 0) -> int:
    """What the filter returns for system call `nr` on `arch` with arguments `arg0`, `arg1`."""
    data, acc, pc = {0: nr, 4: arch, 16: arg0, 24: arg1}, 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:
            acc, pc = data[k], pc + 1
        elif code == 0x54:  # and with a constant
            acc, pc = acc & k, pc + 1
        elif code == 0x06:
            return k
        else:
            hit = acc == k if code == 0x15 else acc >= k
            pc = pc + 1 + (jt if hit else jf)
