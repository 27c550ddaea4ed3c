"""A replay's runner: one candidate's recorded call, run from the kernels rebuilt out of its source (replay/run.py),
never importing the candidate. Forked as a spare like a candidate's, killed after the evaluation."""

from __future__ import annotations

from .replay import ReplayOps
from .runner import Runner


class ReplayRunner(ReplayOps, Runner):
    """Role replay: `replay_prepare` (the kernels rebuilt, the program kept), then `replay` (the runs)."""

    REQUESTS = {**Runner.REQUESTS, "replay_prepare": ReplayOps.op_replay_prepare, "replay": ReplayOps.op_replay}
