"""The zygote: a process with torch and triton imported (but no CUDA context) that forks runners.

Why: every candidate gets a process of its own (nothing it patches can outlive it), and starting
Python with torch and triton costs seconds; a fork of this warm process costs milliseconds. CUDA
cannot survive a fork, so the zygote never touches the GPU: each child creates its own context
after entering the sandbox.

The zygote is started by the referee with a scrubbed environment (no tokens, no server settings)
and talks to it over one Unix socket: JSON requests, and for each fork the parent end of a fresh
socket pair passed back as a file descriptor (SCM_RIGHTS). It also reaps its children and reports
how they ended, so a crash verdict can name the signal.

Run as `python -m adaexplore_mcp.judge.processes.zygote <control-fd>`.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..sandbox import cgroup as sandbox_cgroup

REAP_WAIT_S = 5.0


def _set_pdeathsig() -> None:
    """Die with the parent (the referee): a zygote must never outlive the judge that started it."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child(conn_fd: int, req: dict[str, Any]) -> None:
    """In the fresh child: private stdio, sandbox, CUDA, then serve the referee until told to stop."""
    from multiprocessing.connection import Connection

    from .. import sandbox, wire

    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    conn = Connection(conn_fd)
    raw = req.get("policy")
    policy = sandbox.SandboxPolicy(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}) \
        if raw is not None else None
    device = req["device"]
    # On a GPU the filter comes after the CUDA context (below): with it, the H100 host's driver failed to start
    # ("Error 304: OS call failed", bench/results/2026-12-06-d) and the runners ran without it.
    report = sandbox.enter(policy, defer_filter=device == "cuda") if policy is not None else None
    if report is not None and "private-tmp" in report.mechanisms:
        tmp = Path(policy.tmp_dir)
    else:  # no private tmpfs: a directory of its own, or runners of the same task overwrite each other's files
        tmp = _runner_tmp(os.getpid())
        shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(tmp)
    os.environ["HOME"] = str(tmp)
    # Compiled kernels stay in this runner's scratch space: nothing it writes is seen by another candidate
    # (the referee hands back only what earlier runs of the same source compiled: kernel_cache.py).
    os.environ["TRITON_CACHE_DIR"] = str(tmp / "triton-cache")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp / "inductor-cache")
    import faulthandler

    faulthandler.enable(file=sys.stderr)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    import torch

    from ..runner import serve as serve_runner

    if device == "cuda":
        torch.zeros(1, device="cuda").sum().item()
        if report is not None:  # before anything untrusted is imported
            report = sandbox.install_filter(policy, report)
    summary = report.summary if report is not None else "none"
    details = {"mechanisms": list(report.mechanisms), "missing": list(report.missing)} if report else {}
    wire.send(conn, {"ready": True, "sandbox": summary, "sandbox_detail": details, "pid": os.getpid()})
    serve_runner(conn, device, tmp)


Ended = tuple[int, list[str]]  # a reaped runner's wait status, and the limits its group hit (sandbox_cgroup)


def serve(ctrl: socket.socket) -> None:
    children: dict[int, Ended | None] = {}  # pid -> how it ended, once reaped
    reader = ctrl.makefile("rb")
    while True:
        line = reader.readline()
        if not line:  # the referee is gone: its runners die now, by their groups where they have them (else with
            for pid in list(children):  # this process, PDEATHSIG), and their files and groups go
                if children[pid] is None:
                    sandbox_cgroup.end(pid, wait_s=1.0)
                _forget(pid, children)
            return
        req = json.loads(line)
        if req["op"] == "fork":
            try:
                parent_end, child_end, pid = _fork_with_retry()
            except OSError as exc:  # out of processes or memory (a candidate elsewhere may have taken them): said
                ctrl.sendall(json.dumps({"error": f"fork failed: {exc.strerror or exc}"}).encode() + b"\n")
                continue
            if pid == 0:
                try:
                    conn_fd = os.dup(child_end.fileno())
                    _close_all_but({0, 1, 2, conn_fd})  # above all the control socket: no forged fork/reap answers
                    _child(conn_fd, req)
                except BaseException:  # noqa: BLE001 - report, then die: the referee sees EOF
                    import traceback

                    traceback.print_exc()
                finally:
                    os._exit(70)
            child_end.close()
            children[pid] = None
            socket.send_fds(ctrl, [json.dumps({"pid": pid}).encode() + b"\n"], [parent_end.fileno()])
            parent_end.close()
        elif req["op"] == "reap":
            pid = int(req["pid"])
            status, limits = _reap(pid, children, float(req.get("wait_s", REAP_WAIT_S))) or (None, [])
            ctrl.sendall(json.dumps({"pid": pid, "status": status, "limits_hit": limits}).encode() + b"\n")
        _reap_all(children)
        _remove_leftover_groups()


def _fork_with_retry(tries: int = 5) -> tuple[socket.socket, socket.socket, int]:
    """A socket pair and a fork; EAGAIN (no process or memory to spare for now) is tried again for about 3 s.
    A failure used to kill the zygote, and the honest candidate waiting for a runner got "a bug in the judge"."""
    for attempt in range(tries):
        parent_end, child_end = socket.socketpair()
        try:
            return parent_end, child_end, os.fork()
        except OSError as exc:
            parent_end.close()
            child_end.close()
            if exc.errno != errno.EAGAIN or attempt == tries - 1:
                raise
            time.sleep(0.2 * 2 ** attempt)
    raise AssertionError("unreachable")


def _runner_tmp(pid: int) -> Path:
    """The scratch directory of a runner without a private tmpfs; the zygote removes it once it reaps the pid."""
    return Path(tempfile.gettempdir()) / f"{RUNNER_TMP_PREFIX}{pid}"


RUNNER_TMP_PREFIX = "adaexplore-runner-"
STALE_TMP_S = 60.0  # a runner makes its directory within a second of its fork: an older one of a dead pid is left over


def sweep_runner_tmps(stale_s: float = STALE_TMP_S) -> int:
    """Remove the scratch directories of runners that are gone (a zygote killed before it reaped them leaves
    them: 128 in /tmp after a day of test runs). A live pid's directory stays, whoever's runner it is; so does a
    recent one. Returns how many went."""
    removed, now = 0, time.time()
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return 0
    for entry in entries:
        pid = entry.name[len(RUNNER_TMP_PREFIX):]
        if not entry.name.startswith(RUNNER_TMP_PREFIX) or not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if entry.is_dir(follow_symlinks=False) and info.st_uid == os.getuid() and now - info.st_mtime > stale_s:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += not os.path.exists(entry.path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # someone else's process, or no pid at all (a name with 20 digits): leave it
        return True
    return True


_leftover_groups: set[int] = set()  # runners whose groups could not be removed yet: tried again after each request


def _ended(pid: int, status: int) -> Ended:
    """A reaped runner: what its group saw, then whatever of it is still alive is killed (the verdict is not
    given while a candidate's processes still run) and its group and scratch directory go."""
    limits = sandbox_cgroup.limits_hit(pid)
    if not sandbox_cgroup.end(pid):
        _leftover_groups.add(pid)
    shutil.rmtree(_runner_tmp(pid), ignore_errors=True)
    return status, limits


def _remove_leftover_groups() -> None:
    for pid in list(_leftover_groups):
        if sandbox_cgroup.remove(pid, wait_s=0.0):
            _leftover_groups.discard(pid)


def _forget(pid: int, children: dict[int, Ended | None]) -> Ended | None:
    shutil.rmtree(_runner_tmp(pid), ignore_errors=True)
    return children.pop(pid, None)


def _close_all_but(keep: set[int]) -> None:
    """Close every inherited descriptor but `keep`: a runner must hold nothing of the zygote's (its control
    socket, the reader over it, other runners' ends), whatever Python objects still think they own them."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _reap(pid: int, children: dict[int, Ended | None], wait_s: float) -> Ended | None:
    deadline = time.monotonic() + wait_s
    while children.get(pid) is None and time.monotonic() < deadline:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            break
        if done:
            children[pid] = _ended(pid, status)
            break
        time.sleep(0.005)
    return _forget(pid, children) if children.get(pid) is not None else None


def _reap_all(children: dict[int, Ended | None]) -> None:
    for pid, ended in list(children.items()):
        if ended is None:
            try:
                done, st = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                _forget(pid, children)
                continue
            if done:
                children[pid] = _ended(pid, st)
    if len(children) > 256:  # statuses nobody asked for
        for pid in [p for p, s in children.items() if s is not None][:128]:
            children.pop(pid, None)


def _hash_triton_installation() -> None:
    """Before a process's first kernel launch, Triton hashes its own installation (its sources and the
    500 MB libtriton): 0.3 s in every fresh runner, inside the first trial. The hash depends on the
    installed files alone and is cached per process, so computed here once it comes with every fork."""
    import importlib

    for module in ("triton.runtime.cache", "triton.compiler.compiler"):  # where triton 3.9 and 3.6 keep it
        key = getattr(importlib.import_module(module), "triton_key", None)
        if callable(key):
            try:
                key()
            except OSError:  # an installation without its library file: each runner finds out for itself
                pass
            return


def _ask_the_host_once() -> None:
    """What Triton asks the host in a process's first launch, cached per process, asked here once: ptxas's
    version (a subprocess), ldconfig's list of libraries (libcuda's directory) and libdevice's hash. On the
    H200 a runner's first forward call spent 4 ms forking a subprocess and 18-23 ms reading a pipe, in the
    candidate's runner and again in the replay's (bench/results/2026-12-04-l, profiled; the ptxas query is
    the likely one). Any of them may be missing or named otherwise in another Triton: each runner then asks
    for itself."""
    try:
        from triton.backends.nvidia import compiler, driver
    except Exception:  # noqa: BLE001 - not an NVIDIA build of Triton
        return
    asks = [getattr(driver, "libcuda_dirs", None), lambda: compiler.CUDAOptions().hash()]
    version = getattr(compiler, "get_ptxas_version", None)
    if callable(version):
        asks += [lambda arch=arch: version(arch) for arch in (80, 90, 100)]  # cached per arch (ptxas differs from 90)
    for ask in asks:
        try:
            ask()  # type: ignore[misc]
        except Exception:  # noqa: BLE001 - an older signature, a missing tool: the runner finds out itself
            pass


# Modules Triton imports lazily, in a runner's first forward call (measured with ADAEXPLORE_TRACE_OPS=1, which
# lists each request's new imports): triton 3.9 imports 50 there, the code generator and Gluon among them.
FIRST_LAUNCH_MODULES = ("triton.compiler.code_generator", "triton.experimental.gluon", "triton.testing")


def _import_first_launch_modules() -> None:
    """Imported once here instead of in every runner (the candidate's and its replay's, each evaluation)."""
    import importlib

    for name in FIRST_LAUNCH_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a Triton without it (or where it fails): each runner finds out itself
            pass


def main() -> None:
    _set_pdeathsig()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    # Import everything a runner needs now, once, before any fork: children start warm.
    import torch  # noqa: F401
    import triton  # noqa: F401

    from .. import classify, launches, precision, runner, timing, wire
    from .. import replay, sandbox  # noqa: F401
    from ...tasks import format  # noqa: F401

    if os.environ.get("TRITON_INTERPRET") == "1":
        from .. import frontend

        frontend.install()  # snapshot the clean triton.language before any child runs a kernel
        from .. import interpreter_bench

        interpreter_bench.install()  # autotuned kernels need a benchmarker, and there is no GPU driver
    else:  # the interpreter and the front-end check never compute Triton's cache key: only GPU runners need it
        _hash_triton_installation()
        _ask_the_host_once()
    with replay.WorkTrace([]):  # a process's first dispatch mode costs 1.3 s (0.2 ms after): paid once, here
        torch.zeros(1) + 1
    _import_first_launch_modules()

    sandbox_cgroup.hierarchies()  # read once here: every runner inherits it
    sandbox_cgroup.sweep()  # groups a zygote that died left behind
    sweep_runner_tmps()  # and its runners' scratch directories
    ctrl.sendall(b'{"ready": true}\n')
    serve(ctrl)


if __name__ == "__main__":
    main()
