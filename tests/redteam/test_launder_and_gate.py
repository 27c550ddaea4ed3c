"""Kernels that launch, write, and still do none of the work: gates, laundered copies, state, shadowed defs.

Each candidate below launches a kernel of its own whose output the result depends on, so the plain "skip
the launches" check of the replay would not catch it:

- a gate: the kernel writes a constant (zero) that PyTorch adds to the result it computed; skipping the
  kernel leaves NaN there, so the output "depends" on it. The replay's substituted run (replay/run.py) gives
  every launch what it wrote for other inputs: a constant stays right, so the work is not the kernels';
- laundered copies: a PyTorch result moved into the output by a copy kernel in two hops, after a token launch
  marks it as "seen", before a launch that touches the output without writing it, between two ranges of one
  storage, or through a view of another dtype (copy_trace.py follows what each launch really wrote);
- state between the replay's runs: a buffer of the model updated in place decides whether the result is
  poisoned, so that the run with the launches skipped fails and the run as recorded passes (each run now
  gets fresh copies of the constants);
- a shadowed kernel: the trials launch a copy kernel through an alias, and a second top-level `def` of the
  same name computes honestly, for the replay to rebuild (a name bound twice is refused), and the same
  through a nested function, a class attribute or a `def` in an `if` block (bound twice anywhere);
- a second round against the substitution: a constant written into the input (and undone), writes that
  differ between the replay's runs only through random numbers (every run now draws the same ones), one
  constant beside PyTorch's result in the same storage (only the bytes a launch changed are put back), a
  kernel that only narrows a float64 result, a copy into a larger buffer.

Expected: never passed; the canary after each is judged right.
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import TOKEN_KERNELS, canary, evaluate, summary
from tests.test_judge_cases import HEADER, LINEAR_SMALL, LINEAR_TASK, candidate, task

ZERO_KERNEL = '''
@triton.jit
def zero_kernel(flag_ptr):
    tl.store(flag_ptr, 0.0)
'''

GATES = {
    "empty_flag": "        flag = torch.empty(1, dtype=x.dtype)\n        zero_kernel[(1,)](flag)\n"
                  "        return x * 2 + 1 + flag",
    "nan_flag": "        flag = torch.full((1,), float('nan'), dtype=x.dtype)\n        zero_kernel[(1,)](flag)\n"
                "        return x * 2 + 1 + flag",
    # the kernel also writes something that depends on the input, where nothing reads it
    "flag_beside_input": "        flag = torch.empty(2, dtype=x.dtype)\n        zero_kernel[(1,)](flag)\n"
                         "        flag[1:2].copy_(x[:1])\n        return x * 2 + 1 + flag[0]",
}

COPIES = {
    "two_hops": "        return kernel_copy(kernel_copy(x * 2 + 1))",
    "token_first": "        z = x * 2 + 1\n        token(z)\n        return kernel_copy(z)",
    "token_after": "        y = kernel_copy(x * 2 + 1)\n        token(y)\n        return y",
    "one_storage": "        n = x.numel()\n        buf = torch.empty(2 * n, dtype=x.dtype)\n        buf[:n] = x * 2 + 1\n"
                   "        copy_kernel[(triton.cdiv(n, 128),)](buf[:n], buf[n:], n, BLOCK=128)\n        return buf[n:]",
    "as_int32": "        z = x * 2 + 1\n        y = torch.empty_like(x)\n"
                "        copy_kernel[(triton.cdiv(x.numel(), 128),)](z.view(torch.int32), y.view(torch.int32), "
                "x.numel(), BLOCK=128)\n        return y",
}

STATE = '''
@triton.jit
def noop_kernel(x_ptr):
    pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = torch.zeros(1)

    def forward(self, x):
        noop_kernel[(1,)](x)
        self.s.numpy()[0] = 1.0  # unseen by the record: resets the state in every trial
        self.s.add_(1)  # recorded, and run again by each of the replay's runs
        gate = torch.where(torch.remainder(self.s, 2) == 0, 0.0, float("nan"))
        return x * 2 + 1 + gate
'''

SHADOWED = '''
@triton.jit
def work_kernel(x_ptr, z_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(z_ptr + offs, mask=mask), mask=mask)


_launched = work_kernel


def work_kernel(x_ptr, z_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 2 + 1, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        z = x * 2 + 1
        y = torch.empty_like(x)
        _launched[(triton.cdiv(x.numel(), 128),)](x, z, y, x.numel(), BLOCK=128)
        return y
'''

LINEAR_GATE = ZERO_KERNEL + '''

class ModelNew(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.linear = nn.Linear(fin, fout)

    def forward(self, x):
        flag = torch.empty(1, dtype=x.dtype, device=x.device)
        zero_kernel[(1,)](flag)
        return self.linear(x) + flag
'''


def rejected(judge: Judge, source: str, check: str, **kw: object) -> str:
    ev = evaluate(judge, source, **kw)
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected is not None and ev.rejected.check == check, summary(ev)
    return ev.rejected.message


@pytest.mark.parametrize("name", sorted(GATES))
def test_a_kernel_that_writes_a_constant_next_to_pytorch_is_rejected(judge: Judge, name: str) -> None:
    message = rejected(judge, candidate(GATES[name], extra=ZERO_KERNEL), "work_not_in_candidate_kernels")
    assert "library fallback" in message  # PyTorch computes beside the gate


def test_a_gate_next_to_a_library_matmul_is_rejected(judge: Judge) -> None:
    rejected(judge, HEADER + LINEAR_GATE, "work_not_in_candidate_kernels",
             task=task(LINEAR_TASK, LINEAR_SMALL, name="linear"))


@pytest.mark.parametrize("name", sorted(COPIES))
def test_a_pytorch_result_moved_by_kernels_is_rejected(judge: Judge, name: str) -> None:
    message = rejected(judge, candidate(COPIES[name], extra=TOKEN_KERNELS), "work_not_in_candidate_kernels")
    assert "aten::" in message  # the operator is named


def test_state_carried_between_the_replays_runs_does_not_help(judge: Judge) -> None:
    rejected(judge, HEADER + STATE, "work_not_replayable")


def test_a_kernel_name_bound_twice_is_refused(judge: Judge) -> None:
    message = rejected(judge, HEADER + SHADOWED, "work_not_replayable")
    assert "bound more than once" in message


def test_an_honest_kernel_with_a_residual_and_a_constant_kernel_beside_it_passes(judge: Judge) -> None:
    """The control: a kernel writing a constant is fine when another kernel of the candidate does the work (a
    residual added by PyTorch would be library fallback under the work policy)."""
    body = ("        flag = torch.empty(1, dtype=x.dtype)\n        zero_kernel[(1,)](flag)\n"
            "        return affine(x)")
    ev = evaluate(judge, candidate(body, extra=ZERO_KERNEL))
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)
    assert ev.work and ev.work["replay"]["check"] == "substituted", ev.work


# A second round against the substitution and the name check (each found by a red team).
ROUND_TWO = {
    # a constant written into the input, taken back out by PyTorch, the input restored
    "constant_into_the_input": (
        "@triton.jit\ndef zero_kernel(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)\n",
        "        save = x.clone()\n        y = save * 2 + 1\n"
        "        zero_kernel[(triton.cdiv(x.numel(), 128),)](x, x.numel(), BLOCK=128)\n"
        "        z = x.abs().sum()\n        x.copy_(save)\n        return y + z"),
    # writes that differ between the replay's runs only through random numbers
    "random_numbers_told_apart": (
        "@triton.jit\ndef scale_kernel(r_ptr, b_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n    mask = offs < n\n"
        "    tl.store(b_ptr + offs, tl.load(r_ptr + offs, mask=mask) * 3.0, mask=mask)\n",
        "        r = torch.randn(8)\n        b = torch.empty_like(r)\n        scale_kernel[(1,)](r, b, 8, BLOCK=8)\n"
        "        return x * 2 + 1 + (b - r * 3).abs().sum()"),
    # one constant written beside PyTorch's result, in the same storage
    "constant_beside_the_result": (
        "@triton.jit\ndef mark_kernel(buf_ptr, n):\n    tl.store(buf_ptr + n, 0.0)\n",
        "        n = x.numel()\n        buf = torch.empty(n + 1)\n        y = buf[:n]\n"
        "        torch.mul(x, 2, out=y)\n        y.add_(1)\n        mark_kernel[(1,)](buf, n)\n        return y"),
    # PyTorch computes in float64, the kernel only narrows
    "narrowing_only": (
        "@triton.jit\ndef cast_kernel(y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n"
        "    tl.store(out_ptr + offs, tl.load(y_ptr + offs, mask=mask).to(tl.float32), mask=mask)\n",
        "        y = x.double() * 2 + 1\n        out = torch.empty_like(x)\n"
        "        cast_kernel[(triton.cdiv(x.numel(), 128),)](y, out, x.numel(), BLOCK=128)\n        return out"),
    # a bit-for-bit copy into a buffer one element larger, returned as a view
    "copy_into_a_larger_buffer": (
        "@triton.jit\ndef pad_kernel(y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n"
        "    tl.store(out_ptr + offs, tl.load(y_ptr + offs, mask=mask), mask=mask)\n    tl.store(out_ptr + n, 7.0)\n",
        "        y = x * 2 + 1\n        buf = torch.empty(x.numel() + 1)\n"
        "        pad_kernel[(triton.cdiv(x.numel(), 128),)](y, buf, x.numel(), BLOCK=128)\n        return buf[:x.numel()]"),
}

_BODY = ("    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n"
         "    tl.store(out_ptr + offs, {value}, mask=mask)\n")
_DEF = "@triton.jit\ndef affine_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
HONEST_AFFINE = _DEF + _BODY.format(value="tl.load(x_ptr + offs, mask=mask) * 2 + 1")
COPYING_AFFINE = _DEF + _BODY.format(value="tl.load(y_ptr + offs, mask=mask)")


def _indent(text: str) -> str:
    return "".join("    " + line if line.strip() else line for line in text.splitlines(keepends=True))


def _launch(kernel: str) -> str:
    return ("\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
            "        y = (x * 2 + 1) * (1 + 2 ** -20)\n        out = torch.empty_like(x)\n"
            f"        {kernel}[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)\n        return out\n")


# Round four: the copying kernel renamed at run time to the honest def's name (warmed first on the CPU, where the
# interpreter looks its function up by name once); on a GPU Triton compiles the source it kept, the copy.
RENAMED = (HONEST_AFFINE + "\n\n" + COPYING_AFFINE.replace("def affine_kernel", "def cheat_kernel")
           + "\n\n_w = torch.zeros(128)\ncheat_kernel[(1,)](_w, _w, torch.empty(128), 128, BLOCK=128)\n"
           "cheat_kernel.fn.__name__ = 'affine_' + 'kernel'" + _launch("cheat_kernel"))

SHADOWS = {  # the trials launch the copying binding; the top-level def of that name computes honestly
    "nested_function": HONEST_AFFINE + "\n\ndef _make():\n" + _indent(COPYING_AFFINE) + "    return affine_kernel\n\n\n"
                       "cheat = _make()" + _launch("cheat"),
    "class_attribute": HONEST_AFFINE + "\n\nclass K:\n" + _indent(COPYING_AFFINE) + _launch("K.affine_kernel"),
    "if_block": HONEST_AFFINE + "\n\nif True:\n" + _indent(COPYING_AFFINE) + _launch("affine_kernel"),
}


@pytest.mark.parametrize("name", sorted(ROUND_TWO))
def test_second_round_attacks_on_the_substitution_are_rejected(judge: Judge, name: str) -> None:
    kernels, body = ROUND_TWO[name]
    rejected(judge, candidate(body, extra=kernels), "work_not_in_candidate_kernels")


@pytest.mark.parametrize("name", sorted(SHADOWS))
def test_a_launched_name_bound_again_anywhere_is_refused(judge: Judge, name: str) -> None:
    message = rejected(judge, HEADER + SHADOWS[name], "work_not_replayable")
    assert "bound more than once" in message


def test_a_kernel_renamed_at_run_time_is_refused(judge: Judge) -> None:
    message = rejected(judge, HEADER + RENAMED, "work_not_replayable")
    assert "renamed at run time" in message and "cheat_kernel" in message


OVERFLOW_GATE = ZERO_KERNEL + '''
@triton.jit
def poke_kernel(buf_ptr, at):
    tl.store(buf_ptr + at, 1.0)
'''


def test_a_gate_behind_tiny_writes_to_a_large_buffer_still_meets_the_substitution(judge: Judge) -> None:
    """Round four: the capture counted each launch's whole buffer, so seven one-float writes into a 320 MiB scratch
    overflowed its 4 GiB and the replay fell back to the skip check, which a gate passes. A capture now keeps each
    launch's changed span, and one that still outgrows its budget is refused (both in tests/test_work_replay.py,
    with a small budget); this is the attack's shape at a size CI can afford, end to end."""
    body = ("        scratch = torch.empty(1 << 24)\n        for i in range(4):\n"
            "            poke_kernel[(1,)](scratch, i * ((1 << 24) // 4 - 1))\n" + GATES["empty_flag"])
    message = rejected(judge, candidate(body, extra=OVERFLOW_GATE), "work_not_in_candidate_kernels")
    assert "library fallback" in message  # PyTorch computes beside the gate

