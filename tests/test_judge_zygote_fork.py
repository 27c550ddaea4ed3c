"""A fork the zygote cannot make (the host out of processes): said, never the zygote's death (red team, round 8).

A candidate on one worker can use up the host's pids (RLIMIT_NPROC does not bind root); the zygote of another
worker then failed its next fork, died, and the honest candidate waiting for a runner got "a bug in the judge".
"""

from __future__ import annotations

import errno
import os
import socket
import threading

import pytest

from adaexplore_mcp.judge.processes import zygote
from adaexplore_mcp.judge.processes.runners import RunnerGone, Zygote


def test_the_zygote_tries_a_refused_fork_again_then_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def refused() -> int:
        calls.append(1)
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refused)
    monkeypatch.setattr(zygote.time, "sleep", lambda s: None)
    with pytest.raises(OSError):
        zygote._fork_with_retry(tries=3)
    assert len(calls) == 3


def test_a_refused_fork_reaches_the_referee_as_a_runner_that_could_not_start(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(tries: int = 5) -> tuple:
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(zygote, "_fork_with_retry", refused)
    ours, theirs = socket.socketpair()
    serving = threading.Thread(target=zygote.serve, args=(theirs,))  # the zygote's loop, in this process
    serving.start()
    fake = Zygote.__new__(Zygote)
    fake.sock = ours
    try:
        for _ in range(2):  # and it is still serving after the first
            with pytest.raises(RunnerGone) as gone:
                fake.fork({"device": "cpu"})
            assert gone.value.kind == "crashed" and "out of processes" in str(gone.value)
            assert "Resource temporarily unavailable" in str(gone.value)
    finally:
        ours.shutdown(socket.SHUT_WR)  # the referee gone: serve returns
        serving.join(10)
        ours.close()
        theirs.close()
    assert not serving.is_alive()


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_the_zygote_sweeps_scratch_directories_of_runners_that_are_gone(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A zygote killed before it reaped its runners leaves their directories; the next one removes those of dead
    pids once they are a minute old, and nothing else."""
    monkeypatch.setattr(zygote.tempfile, "gettempdir", lambda: str(tmp_path))
    dead = _dead_pid()
    made = {}
    for name in (f"adaexplore-runner-{dead}", f"adaexplore-runner-{os.getpid()}", "adaexplore-runner-x1", "other",
                 "adaexplore-runner-" + "9" * 30):  # no pid fits: left, and no OverflowError stops the zygote
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "f.py").write_text("x = 1\n")
        made[name] = tmp_path / name
    for path in made.values():
        os.utime(path, (1, 1))
    recent = tmp_path / f"adaexplore-runner-{_dead_pid()}"
    recent.mkdir()
    assert zygote.sweep_runner_tmps() == 1
    assert not made[f"adaexplore-runner-{dead}"].exists()
    assert made[f"adaexplore-runner-{os.getpid()}"].exists()  # a live pid: whoever's, it stays
    assert made["adaexplore-runner-x1"].exists() and made["other"].exists() and recent.exists()
    assert made["adaexplore-runner-" + "9" * 30].exists()
