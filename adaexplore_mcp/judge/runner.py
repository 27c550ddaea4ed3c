"""The runner: the only process where candidate or task code runs. Untrusted by design.

A runner is forked from the zygote, enters the sandbox, and then serves one role for its whole life, which
its first request names (`serve`): the task's reference (`load` with role `ref`: runner_reference.py), exactly
one candidate (`load` with role `cand`: runner_candidate.py, killed after it), or one candidate's replay
(`replay_prepare`: runner_replay.py, killed after it). Each role class answers only the requests in its
`REQUESTS` table; any other is answered as an error. It speaks `wire` with the referee and never sees the other
side's objects: the reference's model, inputs and outputs are not in a candidate's process, so there is
nothing to copy.

Everything a runner reports about itself (which kernels launched, flags flipped, its own event
timings) is evidence from an untrusted process: it catches honest mistakes; the referee decides the
verdict from what it can check itself (outputs it maps read-only, and its own wall clock).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, ClassVar

import torch

from ..errors import safe_str
from . import launches, precision, wire
from .classify import CandidateFile, classify, escaped
from .device_memory import KEEP_CACHED_BYTES, give_back, out_of_memory
from .kernel_cache import kernel_cache_dir, read_tree
from .op_trace import OpTrace
from .processes import WATCHDOG_LEAD_S
from .processes import StuckWatch
from .user_signals import own_handlers, quiet

MAX_FROM_REFEREE = 1 << 34  # the referee is trusted; the bound only stops a corrupt stream

Handler = Callable[[Any, dict, list[bytes], list], dict[str, Any]]


class Runner:
    """What every role shares: the connection, the device, the private scratch directory, what was kept for the
    referee (`kept`, until `release`), and the requests every role answers."""

    role: ClassVar[str] = ""  # "ref" or "cand" (how an escaped exception is described: classify.escaped)
    REQUESTS: ClassVar[dict[str, Handler]] = {}

    def __init__(self, conn: Connection, device: str, tmp: Path) -> None:
        self.conn, self.device, self.tmp = conn, device, tmp
        self.module: Any = None
        self.file: CandidateFile | None = None
        self.kept: dict[str, Any] = {}
        self.work_trace: Any = None  # a candidate's last recorded trial (replay/record.py), dropped by the last release
        precision.watch_switches()  # before anything untrusted is imported
        if device == "cpu":  # the interpreter's launch path hooked, a clean triton.language kept: before any user code
            from .frontend import install

            install()
        self.handlers = own_handlers()  # put back after each call into user code (`calm`)

    def answer(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """One request: a deferred release first (runners.RunnerHandle.defer_release), then the request's own
        handler from this role's table (an unknown request is answered as an error)."""
        if isinstance(req.get("release_first"), dict):
            self.op_release(req["release_first"], [], [])
        op = req.get("op")
        handler = type(self).REQUESTS.get(op) if isinstance(op, str) else None
        if handler is None:
            return {"internal": f"unknown request {str(op)[:40]!r} for a runner of role {self.role or 'none'!r}"}
        return handler(self, req, bufs, out)

    def _error(self, exc: BaseException, stage: str) -> dict[str, Any]:
        quiet(self.handlers)  # a timer of the user's would interrupt the classifying
        c = classify(exc, stage, self.file)
        return {"verdict": c.verdict.value, "error": c.error.model_dump(), "poisoned": c.poisoned,
                "oom": out_of_memory(exc)}

    def _sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def op_kernel_files(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """The compiled kernels of this run, for the referee to keep for later runs of the same source."""
        files = read_tree(kernel_cache_dir())
        out.extend(data for _, data in files)
        return {"names": [name for name, _ in files]}

    def op_release(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Drop what was kept for the referee (`only`: one key). With `keep_cache` (mid-evaluation) the allocator
        keeps its cache for the next step's allocations of the same sizes, and no memory figure is sent."""
        if req.get("only"):  # the key and what was kept with it (`key/packs`, `key/outputs`)
            only = str(req["only"])
            for key in [k for k in self.kept if k == only or k.startswith(only + "/")]:
                del self.kept[key]
        else:
            self.kept.clear()
        if req.get("last"):  # the runner is killed next (runners.let_go): the work trace holds lent inputs
            self.work_trace = None  # (no cycle may hold them: a collection here cost 150-240 ms, 2026-12-07-i)
        if self.device != "cuda":
            return {"ok": True, "reserved": 0}
        if req.get("keep_cache"):  # mid-evaluation: the next step allocates the same sizes again
            give_back(None)
            return {"ok": True}
        give_back(KEEP_CACHED_BYTES)  # a cached reference must hold only what it uses, not its peak
        return {"ok": True, "reserved": torch.cuda.memory_reserved()}

    REQUESTS = {"kernel_files": op_kernel_files, "release": op_release}


def role_for(req: dict) -> type[Runner] | None:
    """The role a request names: `load` by its `role`; any other request that exactly one role answers (`replay`,
    `forward`, `make`...) names that role. None for a request every role shares, or none answers."""
    from .runner_candidate import CandidateRunner
    from .runner_reference import ReferenceRunner
    from .runner_replay import ReplayRunner

    op = req.get("op")
    if op == "load":
        return {"ref": ReferenceRunner, "cand": CandidateRunner}.get(str(req.get("role")))
    owners = [role for role in (ReferenceRunner, CandidateRunner, ReplayRunner)
              if op in role.REQUESTS and op not in Runner.REQUESTS]
    return owners[0] if len(owners) == 1 else None


def serve(conn: Connection, device: str, tmp: Path) -> None:
    """Answer the referee until it says `exit` or goes away. The first request that names a role (`role_for`) makes
    the runner that role's (a spare is forked before anyone knows what it will serve); a request before that is
    answered by the requests every role shares."""
    launches.install()
    watch = StuckWatch(sys.stderr, WATCHDOG_LEAD_S)
    runner = Runner(conn, device, tmp)
    while True:
        try:
            req, bufs = wire.recv(conn, MAX_FROM_REFEREE)
        except (EOFError, OSError):
            return
        if req.get("op") == "exit":
            return
        role = role_for(req) if type(runner) is Runner else None
        if role is not None:
            runner = role(conn, device, tmp)
        watch.arm(req.get("deadline_s"))
        out: list[bytes | memoryview] = []
        trace = OpTrace(req.get("trace"))  # the referee traces where time goes (runners.OP_TRACE_ENV)
        try:
            reply = trace.run(runner.answer, req, bufs, out)
        except wire.WireError as exc:
            reply, out = {"internal": f"bad request: {exc}"}, []
        except Exception as exc:  # noqa: BLE001 - e.g. the profiler failing: an answer, not a dead runner
            reply, out = {"internal": f"{type(exc).__name__}: {safe_str(exc)[:300]}"}, []
        except BaseException as exc:  # noqa: BLE001 - only user code raises these (classify.escaped)
            reply, out = escaped(exc, runner.role, runner.file, runner.handlers), []
        finally:
            watch.disarm()
            quiet(runner.handlers)  # nothing user code armed goes off while the runner waits or answers
        trace.report(reply)
        wire.send(conn, reply, out)
        if reply.get("poisoned"):
            os._exit(3)
