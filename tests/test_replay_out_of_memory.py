"""A replay that runs out of device memory is the judge's shortage, not the candidate's fault: the outcome asks
for the evaluation once more on a fresh referee (found by the search campaign: all 6 `work_not_replayable`
rejections of one H100 run were CUDA out-of-memory errors in the replay's process, several referees' tasks
sharing the card)."""

from __future__ import annotations

from types import SimpleNamespace

from adaexplore_mcp.judge.device_memory import out_of_memory
from adaexplore_mcp.judge.outcome import Outcome
from adaexplore_mcp.judge.replay.referee_side import _replay_failed


def test_a_replay_out_of_device_memory_asks_for_a_retry_and_another_failure_does_not():
    said = RuntimeError("CUDA out of memory. Tried to allocate 1.12 GiB. GPU 0 has a total capacity of 79.18 GiB "
                        "of which 37.44 MiB is free.")
    assert out_of_memory(said) and not out_of_memory(RuntimeError("an operator the program may not name"))

    oom = SimpleNamespace(out=Outcome())
    _replay_failed(oom, f"replaying it on new inputs failed: OutOfMemoryError: {said}", out_of_memory(said))
    sent = oom.out.result()
    assert sent.fields["verdict"] == "rejected" and sent.control.oom_retry and sent.control.recycle

    other = SimpleNamespace(out=Outcome())
    _replay_failed(other, "replaying it on new inputs failed: RuntimeError: an operator the program may not name",
                   False)
    sent = other.out.result()
    assert sent.fields["verdict"] == "rejected" and not sent.control.oom_retry
