"""Token kernels: a Triton launch for show, the result computed elsewhere.

The judge rejects a candidate whose own kernels launch nothing (`no_triton_kernel`), one whose output
still matches with its kernels skipped, and one whose kernel only copied a PyTorch result into the output
(`work_not_in_candidate_kernels`). Both checks run in the replay (replay/referee_side.py): another process, on
new inputs, where the candidate's Python never runs, so a candidate that tries to tell when its kernels
are skipped (a sentinel kernel, torch's global modes, the launch hook's state) finds nothing to see, and
one that forges what its process reports still has to compute the result with its own kernels there.
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import TOKEN_KERNELS, assert_not_passed, canary, evaluate, summary
from tests.test_judge_cases import candidate

NAN = "torch.full_like(x, float('nan'))"
DETECTORS = {
    # the old in-process check switched torch to deterministic mode (torch.empty filled with NaN) for that run
    "deterministic_mode": "torch.are_deterministic_algorithms_enabled()",
    # a kernel that sets a flag: if the flag stays 0, the launches are being skipped
    "sentinel_kernel": "kernels_are_skipped()",
    # the judge's launch hook lives in the candidate's own process, with its state
    "judge_launch_state": "getattr(__import__('adaexplore_mcp.judge.launches', fromlist=['_state'])._state, "
                          "'suppress', False)",
}


def assert_rejected(judge: Judge, source: str, check: str) -> None:
    ev = evaluate(judge, source)
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == check, summary(ev)


def test_a_noop_launch_next_to_pytorch_is_rejected(judge: Judge) -> None:
    ev = evaluate(judge, candidate("        token(x)\n        return x * 2 + 1", extra=TOKEN_KERNELS))
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_in_candidate_kernels", summary(ev)


def test_pytorch_alone_is_rejected_for_launching_no_kernel(judge: Judge) -> None:
    ev = evaluate(judge, candidate("        return torch.addcmul(torch.ones_like(x), x, torch.full_like(x, 2.0))"))
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "no_triton_kernel", summary(ev)


def test_a_launch_of_a_kernel_defined_elsewhere_does_not_count(judge: Judge) -> None:
    """A @triton.jit kernel defined by exec in another module is not the candidate's own."""
    extra = '''
import types
_other = types.ModuleType("someone_else")
exec(compile(__import__("textwrap").dedent(\'\'\'
    import triton
    import triton.language as tl

    @triton.jit
    def elsewhere_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2 + 1, mask=mask)
\'\'\'), "/tmp/someone_else.py", "exec"), _other.__dict__)
'''
    body = ("        y = torch.empty_like(x)\n        _other.elsewhere_kernel[(4,)](x, y, x.numel(), BLOCK=128)\n"
            "        return y")
    ev = evaluate(judge, candidate(body, extra=extra))
    canary(judge)
    assert_not_passed(ev)


def test_a_kernel_that_only_copies_a_pytorch_result(judge: Judge) -> None:
    """Skipped, the copy leaves NaN, so the output 'depends' on the kernel: the work policy names PyTorch's
    operator instead (library fallback)."""
    ev = evaluate(judge, candidate("        return kernel_copy(x * 2 + 1)", extra=TOKEN_KERNELS))
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_in_candidate_kernels", summary(ev)
    assert "library fallback" in ev.rejected.message and "aten::mul" in ev.rejected.message, summary(ev)


@pytest.mark.parametrize("detector", list(DETECTORS), ids=list(DETECTORS))
def test_a_candidate_that_detects_the_dependence_run(judge: Judge, detector: str) -> None:
    body = f"        token(x)\n        if {DETECTORS[detector]}:\n            return {NAN}\n        return x * 2 + 1"
    assert_rejected(judge, candidate(body, extra=TOKEN_KERNELS), "work_not_in_candidate_kernels")


def test_no_triton_at_all_with_a_forged_launch_list(judge: Judge) -> None:
    """The launch list is the candidate process's word; the replay is not."""
    body = ("        from adaexplore_mcp.judge import launches\n"
            "        skipped = getattr(launches._state, 'suppress', False)\n"
            "        launches.end = lambda: ['affine_kernel']\n"
            f"        return {NAN} if skipped else x * 2 + 1")
    assert_rejected(judge, candidate(body), "work_not_in_candidate_kernels")


def test_a_cached_answer_passed_as_a_constant_fails_on_new_inputs(judge: Judge) -> None:
    """PyTorch computes with the judge's view switched off; the kernel copies the result. The result enters the
    record as a constant, which the replay's new inputs make wrong."""
    body = ("        from torch.utils._python_dispatch import _disable_current_modes\n"
            "        with _disable_current_modes():\n"
            "            y = (x * 2 + 1).clone()\n"
            "        return kernel_copy(y)")
    assert_rejected(judge, candidate(body, extra=TOKEN_KERNELS), "work_not_replayable")
