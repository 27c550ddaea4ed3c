"""Red team, round fifteen: a kernel's values that PyTorch never reads still vouched for PyTorch's work.

Each attack computes the task (`x * 2 + 1`) in PyTorch beside kernel values it never uses, then copies the
answer with a kernel; expected `work_not_in_candidate_kernels`, a canary after each:

- a strided view read over its whole span (`buf[:, 0]` read the kernel's column beside it): reads now take the
  view's rows (`byte_values.view_ranges`, `OriginMap.read_many`);
- a concatenation along a later dimension, or a stack, then a slice leaving the kernel's part out; a part of a
  concatenation with one kernel element in it: each part's place now takes the part's origins, range by range
  where both are contiguous (`op_parts.py`);
- an in-place elementwise operator on a buffer a kernel wrote one element of (`buf.add_(1)`): in place too,
  each run of elements keeps its own origin;
- 8,192 alternating ranges: past 4,096 ranges the two at the end merged into "the more suspect", which ranked a
  kernel above PyTorch. Runs of neighbours now merge into the origin with the most bytes (a copy still wins).
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from tests.redteam.conftest import judged, rejected_for_work, summary
from tests.redteam.test_copies_round_fourteen import SCATTERED_TASK, attack
from tests.test_judge_cases import task

ATTACKS = {
    "kernel_values_in_the_gaps_of_a_strided_read": '''
buf = half_of(torch.cat([x, x])).view(n, 2)
buf[:, 0] = x
return kernel_copy(buf[:, 0] * 2 + 1)''',
    "one_kernel_element_beside_a_strided_read": '''
buf = torch.empty(n, 2)
buf[:, 0] = x
ends_kernel[(1,)](x, buf[:, 1], 1)
return kernel_copy(buf[:, 0] * 2 + 1)''',
    "concatenated_along_columns_then_a_column": '''
c = torch.cat([(x * 2).view(n, 1), half_of(x).view(n, 1)], dim=1)
return kernel_copy(c[:, 0] + 1)''',
    "stacked_then_a_column": '''
c = torch.stack([x * 2, half_of(x)], 1)
return kernel_copy(c[:, 0] + 1)''',
    "one_kernel_element_in_a_concatenated_part": '''
buf = torch.empty(n + 1)
buf[1:] = x * 2
ends_kernel[(1,)](x, buf, 1)
c = torch.cat([buf, x])
return kernel_copy(c[1:n + 1] + 1)''',
    "in_place_arithmetic_on_a_buffer_with_one_kernel_element": '''
buf = torch.empty(n + 1)
buf[1:] = x * 2
ends_kernel[(1,)](x, buf, 1)
buf.add_(1)
return kernel_copy(buf[1:])''',
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_kernel_values_pytorch_never_reads_vouch_for_nothing(judge: Judge, name: str) -> None:
    ev = judged(judge, attack(ATTACKS[name]))
    assert rejected_for_work(ev), summary(ev)


def test_more_ranges_than_the_bound_do_not_hand_pytorchs_bytes_to_a_kernel(judge: Judge) -> None:
    big = SCATTERED_TASK.replace("torch.randn(4352)", "torch.randn(16384)")
    ev = judged(judge, attack('''
out = half_of(x)
torch.add(x[0::2] * 2, 1, out=out[0::2])
torch.add(x[1::2] * 2, 1, out=out[1::2])
return kernel_copy(out)'''), task=task(big, name="alternating"))
    assert rejected_for_work(ev), summary(ev)
