"""The referee's side of runner processes: start the zygote, fork runners, call them with deadlines, kill.

A `RunnerHandle` is one sandboxed process serving one role. Every call has a deadline; a runner that
misses it, dies, or breaks the protocol is killed (its whole PID namespace goes with it) and the
caller gets a `RunnerGone` saying which, with the tail of the runner's log (faulthandler stacks).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .. import wire
from .idle_watch import children
from ..sandbox import EXIT_NO_PID_NS, EXIT_ORPHANED

LOG_TAIL_BYTES = 6000
# "1": every result carries `ops_ms`: per runner op, its calls, round-trip ms and ms spent inside the runner;
# "profile": also each op's top functions under cProfile ("prof role.op function": [calls, cumulative ms, own ms])
OP_TRACE_ENV = "ADAEXPLORE_TRACE_OPS"
READY_TIMEOUT_S = 120.0
# A runner dumps its stacks this long before a request's deadline (faulthandler's watchdog: the referee's
# SIGUSR1 reaches only the sandbox's relay process), so a timeout says where the candidate was stuck. The dump
# reads the main thread's frames while it runs, and on the CI VM it killed a runner in an endless loop with
# SIGSEGV in 2 of 30 runs: a death after the dump began is a timeout (`WATCHDOG_MARK` in its log).
WATCHDOG_LEAD_S = 0.5
WATCHDOG_MARK = "Timeout ("  # faulthandler's header for a dump_traceback_later dump
LET_GO_S = 2.0  # how long a runner about to be killed gets to drop what it was lent (let_go)
# Environment a runner may see: everything else (tokens, server settings, user secrets) is dropped.
ENV_KEEP = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "LANG", "LC_ALL", "TZ",
            "VIRTUAL_ENV", "PYTHONHASHSEED", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
ENV_KEEP_PREFIX = ("TRITON_", "NVIDIA_", "CUDA_", "TORCH_", "PYTORCH_", "LC_")
ENV_DROP_PREFIX = ("ADAEXPLORE_",)
# A name holding one of these is a credential, never passed whatever its prefix (NVIDIA_API_KEY, TORCH_HUB_TOKEN):
# anywhere in a name (NVIDIA_APIKEY2, CUDA_PASS, TRITON_REMOTE_CACHE_URL: a URL may carry a password); "PAT" only
# as a word of its own (PATH is needed). What the judge sets or relies on (CUDA_VISIBLE_DEVICES, TRITON_CACHE_DIR,
# TRITON_PTXAS_PATH, TORCH_CUDA_ARCH_LIST...) does not match: tests/test_judge_sandbox.py lists them.
ENV_SECRET_TEXT = re.compile(r"KEY|TOKEN|SECRET|PASS|PWD|CRED|AUTH|COOKIE|SESSION|CERT|JWT|BEARER|PRIVATE|ACCESS|URL|URI",
                             re.IGNORECASE)
ENV_SECRET_WORD = re.compile(r"(^|[^A-Z])PATS?([^A-Z]|$)", re.IGNORECASE)


class RunnerGone(Exception):
    """The runner timed out, died or broke the protocol; it has been killed."""

    def __init__(self, kind: str, message: str, log: str = "", status: int | None = None,
                 limits: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.kind = kind  # "timeout" | "crashed" | "protocol"
        self.log = log
        self.status = status
        self.limits = limits  # the sandbox limits its group hit: "memory", "processes" (sandbox_cgroup)

    def as_record(self) -> dict[str, Any]:
        """What the evaluation's result carries of it (api.Judge turns it into the verdict's error)."""
        return {"kind": self.kind, "log": self.log, "status": self.status, "message": str(self),
                "limits": list(self.limits)}


def runner_env(extra: dict[str, str]) -> dict[str, str]:
    """The zygote's environment, which every runner inherits: what CUDA, torch and Triton read, no secret."""
    env = {k: v for k, v in os.environ.items() if env_passed(k)}
    env.update(extra)
    return env


def env_passed(name: str) -> bool:
    """Whether a runner may see the variable `name`: kept by name or prefix, and not a credential."""
    kept = name in ENV_KEEP or name.startswith(ENV_KEEP_PREFIX)
    return kept and not name.startswith(ENV_DROP_PREFIX) and not looks_like_a_credential(name)


def looks_like_a_credential(name: str) -> bool:
    return bool(ENV_SECRET_TEXT.search(name) or ENV_SECRET_WORD.search(name)) or not name.isascii()


def _zygote_env(env: dict[str, str]) -> dict[str, str]:
    """The zygote runs from "/" (a cwd inherited from the server reaches its data dir, or ~, under the
    runners' covers): where this package is not installed, its directory goes on PYTHONPATH instead."""
    root = str(Path(__file__).resolve().parents[2])
    if Path(sys.prefix).resolve() in Path(root).parents or root in env.get("PYTHONPATH", "").split(os.pathsep):
        return env
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)}


class Zygote:
    """The forking process; one per referee."""

    def __init__(self, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair()
        self.proc = subprocess.Popen([sys.executable, "-m", "adaexplore_mcp.judge.processes.zygote", str(theirs.fileno())],
                                     pass_fds=[theirs.fileno()], env=_zygote_env(env), cwd="/",
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True)
        theirs.close()
        self.sock = ours
        self.reader = ours.makefile("rb")
        line = self.reader.readline()
        if not line:
            raise RuntimeError(f"the runner zygote failed to start (exit code {self.proc.wait(5)})")

    def fork(self, request: dict[str, Any]) -> tuple[int, Connection]:
        self.sock.sendall(json.dumps({"op": "fork", **request}).encode() + b"\n")
        msg, fds, _, _ = socket.recv_fds(self.sock, 4096, 1)
        if not fds:
            try:
                why = str(json.loads(msg).get("error"))[:200]
            except (ValueError, AttributeError):
                raise RuntimeError("the runner zygote did not hand over a connection") from None
            raise RunnerGone("crashed", f"the judge could not start a process for this evaluation ({why}): the host "
                             "is out of processes or memory for now; evaluate again")
        return int(json.loads(msg)["pid"]), Connection(fds[0])

    def reap(self, pid: int, wait_s: float = 5.0) -> tuple[int | None, tuple[str, ...]]:
        """How runner `pid` ended (None: still running after `wait_s`), and the limits of its group it hit."""
        self.sock.sendall(json.dumps({"op": "reap", "pid": pid, "wait_s": wait_s}).encode() + b"\n")
        line = self.reader.readline()
        reply = json.loads(line) if line else {}
        return reply.get("status"), tuple(str(x) for x in reply.get("limits_hit") or ())

    def close(self) -> None:
        try:
            self.sock.close()  # end of input: the zygote removes its runners' scratch directories and exits
            self.proc.wait(2)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(10)


class RunnerHandle:
    def __init__(self, zygote: Zygote, role: str, device: str, log_dir: Path, policy: Any) -> None:
        self.zygote, self.role, self.device = zygote, role, device
        # absolute: the zygote, which opens it, runs from "/"
        self.log_path = log_dir.absolute() / f"runner-{role}-{os.getpid()}-{time.time_ns()}.log"
        pol = asdict(policy) if policy is not None else None
        self.pid, self.conn = zygote.fork({"device": device, "log": str(self.log_path), "policy": pol,
                                           "role": role})
        self.ready: dict[str, Any] | None = None
        self.alive = True
        self.trace: dict[str, list[float]] | None = None  # op -> [calls, ms, runner ms] when tracing (OP_TRACE_ENV)
        self.bytes = 0  # device memory this runner holds (references: for the cache's budget)
        self.limits_hit: tuple[str, ...] = ()  # once reaped: the limits of its sandbox's group it hit
        self.pending: deque[tuple[str, float]] = deque()  # requests sent, not yet answered: (op, when sent)
        self.deferred: dict[str, Any] | None = None  # a release that rides on the next request (defer_release)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any]:
        if self.ready is None:
            self.ready, _ = self._recv(time.monotonic() + timeout_s, 1 << 16)
        return self.ready

    def call(self, header: dict[str, Any], buffers: list[Any], deadline: float,
             max_reply: int = 1 << 30) -> tuple[dict[str, Any], list[bytes]]:
        self.wait_ready(max(1.0, deadline - time.monotonic()))
        self.send(header, buffers, deadline)
        return self.receive(deadline, max_reply)

    def send(self, header: dict[str, Any], buffers: list[Any], deadline: float) -> None:
        """The first half of a call, for a request whose answer the referee reads later (`receive`), going on
        meanwhile: the replay runs in its own process while the candidate's last trials run in theirs. A
        runner still starting reads it once it is ready. Answers come back in the order requests were sent."""
        if self.trace is not None:
            header = {**header, "trace": "profile" if os.environ.get(OP_TRACE_ENV) == "profile" else True}
        if self.deferred is not None:
            header = with_release(header, self.deferred)
            self.deferred = None
        remaining = max(0.0, deadline - time.monotonic())
        started = time.perf_counter()
        try:
            wire.send(self.conn, {**header, "deadline_s": remaining}, buffers)
        except (OSError, ValueError):
            raise self._gone("crashed", "the runner process died") from None
        self.pending.append((str(header.get("op")), started))

    def defer_release(self, header: dict[str, Any]) -> None:
        """A release whose answer nobody reads: sent with the runner's next request (`release_first`, done before
        that request's own work) instead of on its own, one round trip fewer. A runner killed first needs none."""
        self.deferred = header if self.deferred is None else merged_release(self.deferred, header)

    def receive(self, deadline: float, max_reply: int = 1 << 30) -> tuple[dict[str, Any], list[bytes]]:
        """The answer to the oldest request sent and not yet answered."""
        if not self.pending:
            raise RuntimeError("receive() without a request sent")  # the referee's own bug, never a runner's
        self.wait_ready(max(1.0, deadline - time.monotonic()))
        op, started = self.pending.popleft()
        reply: dict[str, Any] = {}
        try:
            reply, bufs = self._recv(deadline, max_reply)
            return reply, bufs
        finally:
            if self.trace is not None:
                self._trace(op, started, reply)

    def _trace(self, op: str, started: float, reply: dict[str, Any]) -> None:
        trace = self.trace
        assert trace is not None
        entry = trace.setdefault(f"{self.role}.{op}", [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] = round(entry[1] + (time.perf_counter() - started) * 1e3, 2)
        inside = wire.finite_number(reply.get("op_ms"))  # the runner's numbers: finite floats or nothing
        if inside is not None:
            entry[2] = round(entry[2] + inside, 2)
        imports = reply.get("op_imports")
        if isinstance(imports, list) and imports:  # "imports role.op first,names": [how many]
            trace[f"imports {self.role}.{op} {','.join(str(m)[:60] for m in imports[1:])[:300]}"] = \
                [wire.finite_number(imports[0]) or 0.0]
        for row in reply.get("op_prof") or []:
            # "prof role.op function": [calls of the op that spent time there, cumulative ms, own ms]
            ms = [wire.finite_number(v) for v in row[1:]] if isinstance(row, list) and len(row) == 3 else [None]
            if None not in ms:
                prof = trace.setdefault(f"prof {self.role}.{op} {str(row[0])[:120]}", [0, 0.0, 0.0])
                prof[0] += 1
                prof[1], prof[2] = round(prof[1] + ms[0], 2), round(prof[2] + ms[1], 2)

    def _recv(self, deadline: float, max_reply: int) -> tuple[dict[str, Any], list[bytes]]:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._dump_stacks()
                raise self._gone("timeout", "the runner did not answer in time")
            try:
                if self.conn.poll(min(remaining, 0.5)):
                    return wire.recv(self.conn, max_reply, deadline)
            except wire.WireTimeout:
                self._dump_stacks()
                raise self._gone("timeout", "the runner did not finish its answer in time") from None
            except (EOFError, OSError):
                if remaining <= WATCHDOG_LEAD_S + 0.5 and WATCHDOG_MARK in self.log_tail():
                    raise self._gone("timeout", "the runner did not answer in time (it died dumping its stacks)") \
                        from None
                raise self._gone("crashed", "the runner process died") from None
            except wire.WireError as exc:
                raise self._gone("protocol", f"the runner broke the protocol: {exc}") from None

    def _dump_stacks(self) -> None:
        try:
            os.kill(self.pid, signal.SIGUSR1)
            time.sleep(0.3)
        except OSError:
            pass

    def _gone(self, kind: str, message: str) -> RunnerGone:
        log = self.log_tail()
        status = None
        if kind == "crashed" and self.alive:  # it ended on its own: learn how before anything else
            try:
                status, self.limits_hit = self.zygote.reap(self.pid, wait_s=1.0)
            except (OSError, ValueError):
                pass
        if status is not None:
            self.alive = False
            self._cleanup()
        else:
            status = self.kill()
        return RunnerGone(kind, message, log, status, self.limits_hit)

    def log_tail(self) -> str:
        """The end of the runner's log. Opened without blocking: the runner owns the file and may hold a lease
        on it, and a plain open() then waits out the kernel's lease-break time (45 s)."""
        try:
            with open(os.open(self.log_path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - LOG_TAIL_BYTES))
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def retire(self) -> int | None:
        """`let_go` (on a GPU: memory lent over CUDA IPC), then `kill`: the end of a runner that was lent memory.
        On the CPU nothing is mapped from the referee, and the kill frees what the runner holds."""
        if self.device == "cuda":
            self.let_go()
        return self.kill()

    def let_go(self, timeout_s: float = LET_GO_S) -> None:
        """Before a kill: ask a runner that is in step to drop what it was lent. A process killed while it maps
        memory lent through CUDA IPC never tells the lender, whose blocks then stay allocated for good; an honest
        candidate's work trace keeps its last trial's inputs, and on an H100 (2026-12-06-f) the referees crossed
        LEFT_BEHIND_BYTES every few evaluations and were replaced, whose new CUDA contexts disturbed the other
        worker's timing. A runner that does not answer in time is killed as before."""
        if not self.alive or self.pending:
            return
        try:
            self.call({"op": "release", "last": True}, [], time.monotonic() + timeout_s)
        except RunnerGone:  # call() reports a broken protocol as RunnerGone too
            pass

    def kill(self) -> int | None:
        """Kill the runner and everything in its sandbox; returns its wait status when known."""
        if not self.alive:
            return None
        self.alive = False
        # pid 1 of the runner's namespace first, by its host pid: killing the relay alone reaches it only through its
        # death signal, which a candidate without the seccomp filter can disarm. Read while the
        # relay lives: an unreaped child's pid cannot be reused.
        for pid in (*children(self.pid), self.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            status, self.limits_hit = self.zygote.reap(self.pid)
        except (OSError, ValueError):
            status = None
        self._cleanup()
        return status

    def _cleanup(self) -> None:
        for close in (self.conn.close, self.log_path.unlink):
            try:
                close()
            except OSError:
                pass

    def close(self) -> None:
        """Ask politely, then kill: used for runners whose process has done nothing wrong."""
        if self.alive:
            try:
                wire.send(self.conn, {"op": "exit"})
            except (OSError, ValueError):
                pass
            self.kill()


def merged_release(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two releases as one: everything when either lets go of everything (no `only`, or two different keys),
    the allocator's cache kept only when both keep it, `last` when either is."""
    out: dict[str, Any] = {"op": "release", "keep_cache": bool(a.get("keep_cache") and b.get("keep_cache"))}
    if a.get("only") and a.get("only") == b.get("only"):
        out["only"] = a["only"]
    if a.get("last") or b.get("last"):
        out["last"] = True
    return out


def with_release(header: dict[str, Any], deferred: dict[str, Any]) -> dict[str, Any]:
    """`header` carrying a deferred release: merged into it when it is a release itself, else as `release_first`."""
    if header.get("op") == "release":
        rest = {k: v for k, v in header.items() if k not in ("only", "keep_cache", "last")}
        return {**rest, **merged_release(deferred, header)}
    return {**header, "release_first": {k: v for k, v in deferred.items() if k != "op"}}


def describe_status(status: int | None, limits: Sequence[str] = ()) -> str:
    """How a runner ended, in words; `limits`: what its sandbox's group refused it (sandbox_cgroup.limits_hit)."""
    return with_limits(_describe_status(status), limits)


def with_limits(how: str, limits: Sequence[str]) -> str:
    """How a runner ended (`how`), said again with the limits its sandbox's group refused it."""
    if "memory" in limits:
        return "went over its sandbox's limit on host memory and was killed by the kernel"
    return how + ", after its sandbox refused it more processes" if "processes" in limits else how


def _describe_status(status: int | None) -> str:
    if status is None:
        return "ended"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return f"was killed by {signal.Signals(sig).name}"
        except ValueError:
            return f"was killed by signal {sig}"
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        return {EXIT_NO_PID_NS: f"exited with code {code}: it could not fork into its sandbox, the host is out of "
                                "processes for now (evaluate again)",
                EXIT_ORPHANED: f"exited with code {code}: the process that started it was gone"}.get(
            code, f"exited with code {code}")
    return "ended"
