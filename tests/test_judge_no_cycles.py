"""An evaluation leaves nothing for Python's cycle collector in the referee.

Objects in a reference cycle are freed only when the collector next runs; a tensor among them holds its device
memory until then. One such cycle (a recursive closure in wire.pack, holding a Packer and its buffer of every
small tensor of a message) had the two referees of an H100 hold up to 64 GiB between evaluations of a 64 MiB task
(bench/results/2026-12-06-d). Here the referee runs in this process, on the CPU, and the collector is asked what
one evaluation left behind.
"""

from __future__ import annotations

import gc
import shutil
import tempfile
from pathlib import Path

from adaexplore_mcp.judge import evaluation
from adaexplore_mcp.judge.referee import Referee
from tests.test_judge_cases import referee_request


def test_an_evaluation_leaves_no_reference_cycle_in_the_referee(monkeypatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    home = Path(tempfile.mkdtemp(dir="/var/tmp"))  # not under /tmp: the runners' private /tmp would hide it
    referee = Referee("cpu", home, home / "logs", home / "cache")
    req = referee_request("cycles")
    try:
        assert evaluation.evaluate(referee, req, lambda fraction, message: None)["verdict"] == "passed"  # warm
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            assert evaluation.evaluate(referee, req, lambda fraction, message: None)["verdict"] == "passed"
            gc.collect()
            left = sorted({type(o).__name__ for o in gc.garbage})
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        assert left == [], f"one evaluation left reference cycles of: {left}"
    finally:
        referee.close()
        shutil.rmtree(home, ignore_errors=True)
