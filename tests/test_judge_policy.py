"""The runners' sandbox policy (judge/referee.py: sandbox_policy) and what the referee does when a runner
cannot start under it: the host's private directories hidden, the kernel cache hidden, the seccomp filter
program, and the fallback to a weaker policy that is reported, never silent."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import pytest

from adaexplore_mcp.judge.sandbox import seccomp
from adaexplore_mcp.judge.referee import HOST_PRIVATE_DIRS, Referee, sandbox_policy
from tests.bpf_sim import run_bpf

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox needs Linux")


def test_the_policy_hides_the_data_dir_the_cache_and_the_hosts_private_dirs(tmp_path: Path) -> None:
    home, cache = tmp_path / "home", tmp_path / "cache"
    policy = sandbox_policy("auto", home, cache, "cpu")
    assert str(home) in policy.hidden_dirs and str(cache) in policy.hidden_dirs
    assert policy.writable_dirs == ()  # runners compile into their private tmpfs only
    present = [d for d in HOST_PRIVATE_DIRS if Path(d).is_dir() and not Path(d).is_symlink()]
    assert all(d in policy.hidden_dirs for d in present), (present, policy.hidden_dirs)
    assert str(Path.home().resolve()) in policy.hidden_dirs
    assert policy.deny_unix_sockets


def test_python_comes_back_read_only_wherever_a_cover_would_hide_it(tmp_path: Path) -> None:
    policy = sandbox_policy("auto", tmp_path / "home", tmp_path / "cache", "cpu")
    covers = [*policy.hidden_dirs, "/tmp"]
    base = str(Path(sys.base_prefix).resolve())
    if any(base == c or base.startswith(c.rstrip("/") + "/") for c in covers):
        assert base in policy.visible_dirs


def test_a_script_run_from_tmp_does_not_bring_tmp_back_over_the_private_scratch(tmp_path: Path, monkeypatch) -> None:
    """`python /tmp/x.py` puts /tmp on sys.path; bound back read-only it covered the runners' private
    /tmp, and every candidate failed to be written ('Read-only file system')."""
    monkeypatch.setattr(sys, "path", ["/tmp", *sys.path])
    policy = sandbox_policy("auto", tmp_path / "home", tmp_path / "cache", "cpu")
    assert policy.tmp_dir == "/tmp"
    assert not any(d == "/tmp" or "/tmp".startswith(d.rstrip("/") + "/") for d in policy.visible_dirs)


def test_the_seccomp_program_jumps_land_on_allow_or_deny() -> None:
    prog = seccomp.program(0xC000003E, 41, 0x40000000)
    allow, deny = len(prog) - 2, len(prog) - 1
    assert prog[allow] == (0x06, 0, 0, seccomp.SECCOMP_RET_ALLOW)
    assert prog[deny] == (0x06, 0, 0, seccomp.SECCOMP_RET_ERRNO | seccomp.EACCES)
    for i, (code, jt, jf, _) in enumerate(prog):
        if code in (0x15, 0x35):
            assert {i + 1 + jt, i + 1 + jf} <= set(range(i + 1, len(prog)))
    # socket(AF_UNIX) -> deny; socket(AF_INET) and other calls -> allow; another ABI -> deny
    def run(arch: int, nr: int, arg0: int) -> int:
        return run_bpf(prog, nr, arch, arg0)
    assert run(0xC000003E, 41, 1) == deny_value()
    assert run(0xC000003E, 41, 2) == seccomp.SECCOMP_RET_ALLOW
    assert run(0xC000003E, 0, 1) == seccomp.SECCOMP_RET_ALLOW
    assert run(0xC000003E, 0x40000000 | 41, 1) == deny_value()
    assert run(0x40000003, 102, 1) == deny_value()  # i386 socketcall


def deny_value() -> int:
    return seccomp.SECCOMP_RET_ERRNO | seccomp.EACCES


def test_a_runner_that_cannot_start_under_the_policy_relaxes_it_and_says_so(tmp_path: Path) -> None:
    referee = Referee("cpu", tmp_path / "home", tmp_path / "logs", tmp_path / "cache")
    try:
        assert referee.policy is not None
        referee.wait_spares(time.monotonic() + 120)
        if "namespaces" not in referee.spares[0].wait_ready(1).get("sandbox", ""):
            pytest.skip("no namespaces on this host: nothing to relax")
        # A host where the runner cannot start: this package hidden by a "host" dir, nothing brought back.
        package = str(Path(__file__).resolve().parents[1] / "adaexplore_mcp")
        referee.policy = dataclasses.replace(referee.policy, hidden_dirs=(*referee.policy.hidden_dirs, package),
                                             visible_dirs=())
        while referee.spares:
            referee.spares.popleft().kill()
        referee.top_up()
        note = referee.settle_policy(timeout_s=60)
        assert note is not None and "runner died" in note
        assert package not in referee.policy.hidden_dirs and not referee.policy.deny_unix_sockets
        assert set(referee.policy.hidden_dirs) == {str(tmp_path / "home"), str(tmp_path / "cache")}
        ready = referee.candidate_runner(time.monotonic() + 60).wait_ready(60)
        assert ready["ready"] and "seccomp" not in ready["sandbox"]
    finally:
        referee.close()


# slow: a referee of its own, 12 s on two busy cores (the replay's pipelining; the replay itself: test_judge_order.py)
@pytest.mark.slow
def test_requests_sent_ahead_to_a_runner_still_starting_are_answered_in_order(tmp_path: Path) -> None:
    """The replay's requests go to its spare before it is ready, and their answers are read later (runners.send
    and receive): a runner reads them once it is, and answers each in the order sent."""
    referee = Referee("cpu", tmp_path / "home", tmp_path / "logs", tmp_path / "cache")
    try:
        runner = referee.replay_runner()
        assert runner.ready is None and len(referee.spares) == 1  # not replaced until top_up
        deadline = time.monotonic() + 120
        runner.send({"op": "release", "only": "a"}, [], deadline)
        runner.send({"op": "replay", "sets": {"list": []}}, [], deadline)
        first, _ = runner.receive(deadline)
        second, _ = runner.receive(deadline)
        assert first == {"ok": True, "reserved": 0}
        assert second == {"replay_error": "replay_prepare did not succeed"}
        with pytest.raises(RuntimeError, match="without a request sent"):
            runner.receive(deadline)
        runner.kill()
        referee.top_up()
        assert len(referee.spares) == 2
    finally:
        referee.close()


def test_a_runner_that_dies_while_its_watchdog_dumps_its_stacks_timed_out(tmp_path: Path) -> None:
    """faulthandler's watchdog dump (runners.WATCHDOG_LEAD_S before the deadline) can crash a busy runner:
    dead after the dump began and near its deadline, it timed out; dead earlier, or without a dump, it crashed."""
    from multiprocessing import Pipe

    from adaexplore_mcp.judge.processes.runners import WATCHDOG_MARK, RunnerGone, RunnerHandle

    def died(log: str, seconds_left: float) -> str:
        handle = object.__new__(RunnerHandle)
        ours, theirs = Pipe()
        theirs.close()  # the runner is gone: EOF
        handle.conn, handle.log_path = ours, tmp_path / "runner.log"
        handle.log_path.write_text(log)
        handle._gone = lambda kind, message: RunnerGone(kind, message)  # type: ignore[method-assign]
        with pytest.raises(RunnerGone) as gone:
            handle._recv(time.monotonic() + seconds_left, 1 << 16)
        return gone.value.kind

    dump = f"{WATCHDOG_MARK}0:00:03.500000)!\nThread 0x1 (most recent call first):\n  File \"candidate.py\", line 9"
    assert died(dump + "\nFatal Python error: Segmentation fault", 0.4) == "timeout"
    assert died("Fatal Python error: Segmentation fault", 0.4) == "crashed"
    assert died(dump, 30.0) == "crashed"


def test_the_folder_the_server_was_started_in_stays_hidden(tmp_path: Path, monkeypatch) -> None:
    """`python -m adaexplore_mcp` from a project folder puts that folder first on sys.path; bound back read-only
    under the home's cover, a candidate read the project's `.env` (red team, round seven)."""
    project = (tmp_path / "home" / "project").resolve()  # under a cover: the data dir's
    project.mkdir(parents=True)
    (project / ".env").write_text("API_KEY=secret\n")
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "path", [str(project), *sys.path])
    monkeypatch.setattr(sys, "argv", [str(project / "serve.py")])
    policy = sandbox_policy("auto", tmp_path / "home", tmp_path / "cache", "cpu")
    assert str(project) not in policy.visible_dirs
    package = str(Path(__file__).resolve().parents[1] / "adaexplore_mcp")
    covers = [*policy.hidden_dirs, "/tmp"]
    if any(package.startswith(c.rstrip("/") + "/") for c in covers):
        assert package in policy.visible_dirs  # the package itself still comes back


# slow: a referee of its own, 8 s; memory lent through CUDA IPC is a GPU matter
@pytest.mark.slow
def test_a_runner_let_go_before_its_kill_drops_what_it_was_lent(tmp_path: Path) -> None:
    """A runner killed while it maps memory lent through CUDA IPC never gives it back: the referee's blocks stay
    allocated. Before a kill the referee asks an in-step runner to release, which drops the work trace too (it
    holds the recorded trial's inputs)."""
    import torch

    from adaexplore_mcp.judge import wire
    from tests.test_judge_cases import GOOD

    referee = Referee("cpu", tmp_path / "home", tmp_path / "logs", tmp_path / "cache")
    try:
        runner = referee.candidate_runner(time.monotonic() + 120)
        deadline = time.monotonic() + 120
        loaded, _ = runner.call({"op": "load", "role": "cand", "module": "cand_let_go", "source": GOOD,
                                 "kernel_files": []}, [], deadline)
        assert "ok" in loaded, loaded
        buffers: list = []
        built, _ = runner.call({"op": "build", "seed": 1, "init_inputs": wire.encode_value([], buffers)}, buffers,
                               deadline)
        assert "ok" in built, built
        buffers = []
        sets = wire.encode_value([[torch.randn(64)]], buffers, pack=False)
        ran, _ = runner.call({"op": "forward", "sets": sets, "record": True}, buffers, deadline)
        assert "results" in ran, ran
        runner.let_go()
        assert runner.alive
        program, _ = runner.call({"op": "program"}, [], deadline)
        assert program.get("unreplayable") == "no trial was recorded", program
        assert runner.retire() is not None or not runner.alive
    finally:
        referee.close()
