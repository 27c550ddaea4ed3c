"""The replay: does the candidate's own Triton code do the work? Its forward call is recorded as a straight-line
program, then run again in a fresh runner where no candidate Python runs, and its data flow is checked against
the work policy.

One face: the candidate's runner records with `WorkTrace` (`ProgramOps` answer the referee); the replay runner
runs the program with `ReplayOps`; the referee's work check starts and finishes a replay (`start_replay`,
`finish_replay`, `PendingReplay`). Inside: record.py (recording), run.py, inputs.py and kernels.py (the
replay's run, its inputs and its rebuilt kernels), flow.py (the run's data flow), referee_side.py.
"""

from .record import ProgramOps, WorkTrace
from .referee_side import LAUNCHED_NAMES_KEPT, LAUNCHED_NAMES_SEEN, PendingReplay, finish_replay, start_replay
from .run import ReplayOps

__all__ = ["LAUNCHED_NAMES_KEPT", "LAUNCHED_NAMES_SEEN", "PendingReplay", "ProgramOps", "ReplayOps", "WorkTrace",
           "finish_replay", "start_replay"]
