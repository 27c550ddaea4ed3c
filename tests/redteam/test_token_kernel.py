"""Token kernels: a Triton launch for show, the result computed elsewhere.

The judge rejects a candidate whose own kernels launch nothing (`no_triton_kernel`), one whose output
still matches with its kernels skipped, and one whose kernel only copied a PyTorch result into the output
(`work_not_in_candidate_kernels`: the dependence check and the copy trace). Both run in the candidate's own
process, so a candidate that can tell it is being run with its kernels skipped and then returns garbage on
purpose defeats them. Those pass today and are marked as GAPs.
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import TOKEN_KERNELS, assert_not_passed, canary, evaluate, gap, summary
from tests.test_judge_cases import candidate

NAN = "torch.full_like(x, float('nan'))"
DETECTORS = {
    # the judge switches torch to deterministic mode (fills torch.empty with NaN) only for that run
    "deterministic_mode": "torch.are_deterministic_algorithms_enabled()",
    # a kernel that sets a flag: if the flag stays 0, the launches are being skipped
    "sentinel_kernel": "kernels_are_skipped()",
    # the judge's launch hook lives in the candidate's own process, with its state
    "judge_launch_state": "__import__('adaexplore_mcp.judge.launches', fromlist=['_state'])._state.suppress",
}
DETECTION_GAP = ("the dependence check skips the candidate's Triton launches in a run the candidate can recognise "
                 "(deterministic mode, a sentinel kernel that does not write, the launch hook's own state in its "
                 "process); a candidate that returns garbage in that run passes with the work done in PyTorch")


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
    """Skipped, the copy leaves NaN, so the output 'depends' on the kernel: the traced first trial sees the
    copy instead (copy_trace.py)."""
    ev = evaluate(judge, candidate("        return kernel_copy(x * 2 + 1)", extra=TOKEN_KERNELS))
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_in_candidate_kernels", summary(ev)
    assert "copy_kernel" in ev.rejected.message, summary(ev)


@gap(DETECTION_GAP)
@pytest.mark.parametrize("detector", list(DETECTORS), ids=list(DETECTORS))
def test_a_candidate_that_detects_the_dependence_run(judge: Judge, detector: str) -> None:
    body = f"        token(x)\n        if {DETECTORS[detector]}:\n            return {NAN}\n        return x * 2 + 1"
    ev = evaluate(judge, candidate(body, extra=TOKEN_KERNELS))
    canary(judge)
    assert_not_passed(ev)


@gap("the list of launched kernels is reported by the candidate's own process (launches.end can be patched): "
     "with the dependence run detected too, a candidate with no Triton launch at all passes")
def test_no_triton_at_all_with_a_forged_launch_list(judge: Judge) -> None:
    body = ("        from adaexplore_mcp.judge import launches\n"
            "        skipped = launches._state.suppress\n"
            "        launches.end = lambda: ['affine_kernel']\n"
            f"        return {NAN} if skipped else x * 2 + 1")
    ev = evaluate(judge, candidate(body))
    canary(judge)
    assert_not_passed(ev)
