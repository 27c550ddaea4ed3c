"""A runner's control group (judge/sandbox/cgroup.py): where it is made on v1, v2 and hybrid hosts, that its
limits bind (the pids one binds root, for whom RLIMIT_NPROC does not), that the runner can neither raise them
nor leave, and that the group goes with the runner. A host without a writable cgroup file system skips the
tests that need one, naming the reason the sandbox recorded."""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from adaexplore_mcp.judge.sandbox import cgroup as sandbox_cgroup
from adaexplore_mcp.judge.sandbox.core import SandboxPolicy
from adaexplore_mcp.judge.sandbox.cgroup import GROUP, Hierarchy, parse_hierarchies
from tests import test_judge_sandbox
from tests.test_judge_sandbox import Runner, errno_name

_no_runner_left_behind = test_judge_sandbox._no_runner_left_behind  # autouse: no runner outlives a test

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="control groups are Linux's"),
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]


def mountinfo(*mounts: tuple[str, str, str, str]) -> str:
    """mountinfo lines for (root, mount point, fstype, super options)."""
    return "\n".join(f"{30 + i} 23 0:{28 + i} {root} {point} rw,relatime - {fstype} {fstype} {opts}"
                     for i, (root, point, fstype, opts) in enumerate(mounts))


# -- where the groups are made -------------------------------------------------------------------------

def test_cgroup_v1_gives_one_hierarchy_per_controller_under_the_own_group() -> None:
    found = parse_hierarchies(
        "8:pids:/\n4:memory:/jobs/42\n0::/\n",
        mountinfo(("/", "/sys/fs/cgroup/memory", "cgroup", "rw,memory"), ("/", "/sys/fs/cgroup/pids", "cgroup", "rw,pids"),
                  ("/", "/sys/fs/cgroup/cpu", "cgroup", "rw,cpu")),
        lambda _: [])
    assert found == (Hierarchy(1, ("memory",), "/sys/fs/cgroup/memory/jobs/42"),
                     Hierarchy(1, ("pids",), "/sys/fs/cgroup/pids"))


def test_cgroup_v2_serves_the_controllers_its_group_offers() -> None:
    offered = {"/sys/fs/cgroup/user.slice/app": ["cpu", "memory", "pids"]}
    found = parse_hierarchies("0::/user.slice/app\n", mountinfo(("/", "/sys/fs/cgroup", "cgroup2", "rw")),
                              lambda d: offered.get(d, []))
    assert found == (Hierarchy(2, ("pids", "memory", "cpu"), "/sys/fs/cgroup/user.slice/app"),)


def test_a_hybrid_host_takes_each_controller_once_v1_first() -> None:
    found = parse_hierarchies(
        "8:pids:/\n0::/\n",
        mountinfo(("/", "/sys/fs/cgroup/pids", "cgroup", "rw,pids"), ("/", "/sys/fs/cgroup/unified", "cgroup2", "rw")),
        lambda _: ["pids", "memory"])
    assert found == (Hierarchy(1, ("pids",), "/sys/fs/cgroup/pids"), Hierarchy(2, ("memory",), "/sys/fs/cgroup/unified"))
    # v1's cpu,cpuacct hierarchy serves cpu
    both = parse_hierarchies("3:cpu,cpuacct:/a\n", mountinfo(("/", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct")),
                             lambda _: [])
    assert both == (Hierarchy(1, ("cpu",), "/sys/fs/cgroup/cpu,cpuacct/a"),)


def test_a_container_mount_root_is_taken_off_the_path_and_a_group_outside_it_is_not_used() -> None:
    inside = parse_hierarchies("4:memory:/docker/abc/inner\n", mountinfo(
        ("/docker/abc", "/sys/fs/cgroup/memory", "cgroup", "rw,memory")), lambda _: [])
    assert inside == (Hierarchy(1, ("memory",), "/sys/fs/cgroup/memory/inner"),)
    outside = parse_hierarchies("4:memory:/elsewhere\n", mountinfo(
        ("/docker/abc", "/sys/fs/cgroup/memory", "cgroup", "rw,memory")), lambda _: [])
    assert outside == ()


def test_no_cgroup_file_system_means_nothing_to_join() -> None:
    assert parse_hierarchies("", "", lambda _: []) == ()
    assert parse_hierarchies("0::/\n", mountinfo(("/", "/proc", "proc", "rw")), lambda _: ["pids"]) == ()


# -- the limits bind ------------------------------------------------------------------------------------

def forks_until_refused(limit: int) -> Any:
    """A body that forks sleeping children until a fork fails (or `limit` succeed), then reports the count."""
    def body(sock: socket.socket) -> dict[str, Any]:
        started, why = 0, "none refused"
        while started < limit:
            try:
                pid = os.fork()
            except OSError as exc:
                why = errno.errorcode.get(exc.errno or 0, str(exc))
                break
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            started += 1
        return {"started": started, "why": why}
    return body


def test_the_group_refuses_processes_beyond_its_limit_even_to_root() -> None:
    runner = Runner(SandboxPolicy(max_processes=24), forks_until_refused(200))
    runner.require("cgroup-pids")
    got = runner.read()
    assert got["why"] == "EAGAIN" and got["started"] < 24, got
    runner.wait()
    # what the group saw is readable until it is removed, then it is gone
    assert "processes" in sandbox_cgroup.limits_hit(runner.pid) or not any(
        os.path.isdir(p) for _, p in sandbox_cgroup.group_dirs(runner.pid))


def test_without_a_group_the_same_forks_succeed() -> None:
    """Positive control: as root, the rlimit alone stops nothing below the host's own limits."""
    if os.geteuid() != 0:
        pytest.skip("RLIMIT_NPROC binds a normal user: the control shows nothing there")
    runner = Runner(SandboxPolicy(max_processes=None), forks_until_refused(40))
    assert runner.read() == {"started": 40, "why": "none refused"}
    runner.wait()


def test_the_group_kills_a_runner_over_its_memory_limit_and_says_so() -> None:
    def body(sock: socket.socket) -> dict[str, Any]:
        hog = bytearray(256 << 20)  # touched: 256 MB resident, four times the limit
        for i in range(0, len(hog), 4096):
            hog[i] = 1
        return {"survived": len(hog)}

    runner = Runner(SandboxPolicy(max_memory_bytes=64 << 20, max_address_space=None), body)
    runner.require("cgroup-memory")
    runner.sock.settimeout(30)
    assert runner.sock.recv(1) == b"", "the runner answered: its memory was not limited"
    hit = sandbox_cgroup.limits_hit(runner.pid)  # as the zygote does: read the counters, then reap and remove
    status = runner.wait()
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
    assert hit == ["memory"], hit
    assert not any(os.path.isdir(p) for _, p in sandbox_cgroup.group_dirs(runner.pid))


def test_a_runner_can_neither_raise_its_limits_nor_leave_its_group() -> None:
    def body(sock: socket.socket) -> dict[str, Any]:
        mine = parse_hierarchies(Path("/proc/self/cgroup").read_text(), Path("/proc/self/mountinfo").read_text(),
                                 sandbox_cgroup._available)  # as it sees itself now: inside its group
        out: dict[str, Any] = {}
        for h in mine:
            for name in ("pids.max", "memory.limit_in_bytes", "memory.max"):
                if os.path.exists(os.path.join(h.own, name)):
                    out[name] = errno_name(lambda: Path(h.own, name).write_text("max"))
            parent = os.path.dirname(os.path.dirname(h.own))
            out[f"leave:{parent}"] = errno_name(lambda: Path(parent, "cgroup.procs").write_text("1"))
            out["in-group"] = os.path.basename(h.own).startswith("runner-")
        return out

    runner = Runner(SandboxPolicy(max_processes=64, max_memory_bytes=256 << 20), body)
    runner.require("cgroup-pids")
    got = runner.read()
    assert got.pop("in-group") is True, got
    assert got and all(v in ("EROFS", "EACCES", "EPERM") for v in got.values()), got


# -- the group goes with the runner ---------------------------------------------------------------------

def test_a_runners_group_is_removed_once_it_is_reaped() -> None:
    runner = Runner(SandboxPolicy(max_processes=64), lambda sock: {"ok": True})
    runner.require("cgroup-pids")
    assert runner.read() == {"ok": True}
    dirs = [p for h, p in sandbox_cgroup.group_dirs(runner.pid) if "pids" in h.controllers]
    assert dirs and all(os.path.isdir(p) for p in dirs)
    runner.wait()  # the test helper removes the group as the zygote does
    assert not any(os.path.isdir(p) for p in dirs)


def test_the_sweep_removes_old_empty_groups_and_nothing_alive() -> None:
    hs = [h for h in sandbox_cgroup.hierarchies() if "pids" in h.controllers]
    if not hs:
        pytest.skip("no cgroup hierarchy with the pids controller here")
    base = os.path.join(hs[0].own, GROUP)
    try:
        os.makedirs(os.path.join(base, "runner-999999999"), exist_ok=True)
    except OSError as exc:
        pytest.skip(f"the cgroup file system is not writable here: {exc.strerror}")
    stale, fresh = os.path.join(base, "runner-999999999"), os.path.join(base, "runner-999999998")
    os.makedirs(fresh, exist_ok=True)
    old = time.time() - 3600
    os.utime(stale, (old, old))
    runner = Runner(SandboxPolicy(max_processes=64), lambda sock: (time.sleep(30), {})[1])
    try:
        live = [p for h, p in sandbox_cgroup.group_dirs(runner.pid) if h == hs[0]]
        for p in live:
            os.utime(p, (old, old))
        assert sandbox_cgroup.sweep() >= 1
        assert not os.path.isdir(stale) and os.path.isdir(fresh)  # too young: a runner may be joining it
        assert all(os.path.isdir(p) for p in live)  # it holds processes
    finally:
        sandbox_cgroup._rmdir(fresh)


def test_a_runner_is_one_scheduling_entity_however_many_processes_it_starts() -> None:
    """Red team, round ten: 200 busy children, each in a session of its own (a scheduling group under the kernel's
    autogroup), took an honest evaluation in another worker past its timeout. The runner's cpu group holds them
    all, and a new session is refused (seccomp)."""
    def body(sock: socket.socket) -> dict[str, Any]:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        groups = {line.split(":")[1]: line.split(":")[2] for line in Path("/proc/self/cgroup").read_text().split()}
        cpu = next((path for ctrls, path in groups.items() if "cpu" in ctrls.split(",")), "")
        return {"cpu_group": os.path.basename(cpu), "setsid": errno_name(os.setsid)}

    runner = Runner(SandboxPolicy(max_processes=64), body)
    runner.require("cgroup-cpu", "seccomp-unix")
    got = runner.read()
    assert got == {"cpu_group": f"runner-{runner.pid}", "setsid": "EACCES"}, got


def test_ending_a_runner_kills_what_is_left_of_it_and_removes_its_groups() -> None:
    """Red team, round ten: killed by its relay, a runner's many processes took seconds to go on a loaded host;
    the verdict came back while they ran, and their group was never removed. Without a pid namespace (nothing
    else kills them here), the children outlive the runner, in its group: ending the group ends them."""
    def body(sock: socket.socket) -> dict[str, Any]:
        for _ in range(8):
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                time.sleep(60)
                os._exit(0)
        return {"started": 8}

    runner = Runner(SandboxPolicy(max_processes=64, pid_namespace=False), body)
    runner.require("cgroup-pids")
    assert runner.read() == {"started": 8}
    dirs = [p for h, p in sandbox_cgroup.group_dirs(runner.pid) if "pids" in h.controllers]
    os.kill(runner.pid, signal.SIGKILL)
    os.waitpid(runner.pid, 0)
    Runner.live.remove(runner.pid)
    left = sandbox_cgroup._procs(dirs[0])
    assert len(left) == 8, left  # the children, orphaned, still in the group
    assert sandbox_cgroup.end(runner.pid)
    assert not any(os.path.isdir(p) for p in dirs)
    assert not [p for p in left if os.path.exists(f"/proc/{p}") and "Z" not in _state(p)], "a child survived"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"
