"""A candidate that writes on its runner's own connection to the referee (red team, round seven).

The runner's socket is in the candidate's process; nothing stops it writing there before the runner does:

- a forged answer whose output description torch cannot build (a CUDA tensor on a judge without a GPU, a
  shape whose strides overflow) made the referee raise something other than a WireError: "a bug in the
  judge", and the worker was replaced. Now it is the candidate's bad output;
- four bytes of a frame's length and one byte of it, then sleep: the referee read the rest with no deadline
  and held its worker until the pool killed it (64 s for a 4 s evaluation). Every frame is now read under
  the evaluation's deadline;
- a write lease on its own log (stderr, a file the runner owns) and then a frame too long: the referee,
  reading the log's tail to explain the broken protocol, waited out the kernel's lease-break time (45 s).
  The log is opened without blocking.

Expected: a verdict within the deadline (a few seconds of slack), never an exception; a canary after each.
"""

from __future__ import annotations

import time

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import canary, evaluate, summary
from tests.test_judge_cases import candidate

OWN_CONNECTION = '''
import gc
import os
import struct
import time


def connection_fd():
    from adaexplore_mcp.judge.runner import Runner
    return [o for o in gc.get_objects() if isinstance(o, Runner)][0].conn.fileno()


def forge(desc, buffers):
    from multiprocessing.connection import Connection
    from adaexplore_mcp.judge import wire
    wire.send(Connection(os.dup(connection_fd())), {"results": [{"launched": ["affine_kernel"], "flags": [],
              "outputs": {"tensor": desc}}]}, [b""] * buffers)
'''

FORGED = {
    "cuda_tensor_on_a_cpu_judge": "{'empty': True, 'dtype': 'float32', 'shape': [0], 'stride': [1], 'offset': 0}, 0",
    "strides_that_overflow": "{'buf': 0, 'dtype': 'float32', 'shape': [0, 2**62, 2**62]}, 1",
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_output_description_is_a_bad_output(judge: Judge, name: str) -> None:
    ev = evaluate(judge, candidate(f"        forge({FORGED[name]})\n        return affine(x)", extra=OWN_CONNECTION))
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected is not None, summary(ev)
    assert ev.rejected.check == "bad_output" and "torch cannot build" in ev.rejected.message, summary(ev)


def test_half_a_frame_then_silence_ends_at_the_deadline(judge: Judge) -> None:
    body = ("        os.write(connection_fd(), struct.pack('!i', 1000) + b'{')\n"
            "        time.sleep(100000)\n        return affine(x)")
    started = time.monotonic()
    ev = evaluate(judge, candidate(body, extra=OWN_CONNECTION), timeout_s=4)
    took = time.monotonic() - started
    canary(judge)
    assert ev.verdict == Verdict.timeout, summary(ev)
    assert took < 20, f"the evaluation took {took:.1f} s for a 4 s deadline"


def test_a_lease_on_its_own_log_does_not_hold_the_referee(judge: Judge) -> None:
    body = ("        import fcntl\n        fcntl.fcntl(2, 1024, fcntl.F_WRLCK)  # F_SETLEASE on stderr, its log\n"
            "        os.write(connection_fd(), struct.pack('!i', 0x7fffffff))\n"
            "        time.sleep(100000)\n        return affine(x)")
    started = time.monotonic()
    ev = evaluate(judge, candidate(body, extra=OWN_CONNECTION), timeout_s=4)
    took = time.monotonic() - started
    canary(judge)
    assert ev.verdict != Verdict.passed, summary(ev)
    assert took < 20, f"the evaluation took {took:.1f} s for a 4 s deadline"
