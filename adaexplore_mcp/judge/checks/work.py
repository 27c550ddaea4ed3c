"""The work is the candidate's own kernels': its recorded call replayed in a fresh runner (a thin check over
`referee_replay.start_replay` and `finish_replay`, where the replay is decided).

Answers a candidate whose kernels launch but do not do the work: PyTorch computes the output and a kernel
copies it, writes a constant beside it, or does nothing (`work_not_in_candidate_kernels`), and a call that is
right only when the judge looks or keeps state between calls (`work_not_replayable`). A candidate rejected
here is not timed.
"""

from __future__ import annotations

from ..replay import finish_replay, start_replay
from .context import Judging


def begin_replay(ev: Judging) -> None:
    """Send the replayed trial's record to its own runner (an earlier line-up's replay is dropped); when sets
    are large on a GPU, judge it here, before any other trial allocates beside it."""
    if ev.replay is not None:
        ev.replay.cancel()
    ev.mark("trials")
    # Compiled by now (the trials ran them): kept for later runs of this source, and lent to the replay's
    # runner, which would otherwise compile every kernel again on a GPU (a search's candidates are all new).
    ev.referee.keep_kernels(ev.cand, ev.module, ev.deadline)
    ev.mark("kernel_cache")
    ev.replay = start_replay(ev)
    ev.mark("replay_start")
    ev.work_checked = False
    if ev.replay is not None and not ev.keep_cache and ev.device == "cuda":
        judge_replay(ev)


def judge_replay(ev: Judging) -> None:
    """Read the replay's answer and judge it (a rejection goes in `ev.out`)."""
    replay, ev.replay = ev.replay, None
    ev.work_checked = replay is not None and finish_replay(ev, replay)


def check_work(ev: Judging) -> None:
    """After the trials: the replay that ran beside the last of them judged; a passing candidate whose work was
    never checked is rejected (every passing run of the trials replays one of them: a bug in the judge)."""
    if ev.replay is not None:  # it ran beside the last trials (large sets were judged at once)
        ev.progress(0.7, "checking the work is done by the candidate's kernels (a replay in another process)")
        judge_replay(ev)  # marks replay_wait and replay_check
    if not ev.work_checked and not ev.out.done:
        ev.out.reject("work_not_replayable", "no trial of the candidate was replayed (a bug in the judge)")
