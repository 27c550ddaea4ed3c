"""The referee: the trusted half of a judge worker. It runs no candidate or task code.

It owns the runners: one zygote that forks them, a few spare candidate runners kept warm (forked,
sandboxed, CUDA context ready, nothing loaded), and a cache of reference runners, one per task,
bounded by the device memory they hold (least recently used first out). Evicting a reference kills
its process, which is the one way to be sure every byte of its GPU memory comes back.

Evaluation and probing logic lives in `evaluation.py` and `probe.py`; this module only manages
processes and what is cached between evaluations.
"""

from __future__ import annotations

import os
import sys
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import sandbox
from .runners import RunnerGone, RunnerHandle, Zygote, runner_env

SPARES = 1
CPU_REFERENCE_CACHE = 4


class ReferenceFailure(Exception):
    """The task's reference failed; the message says where and how (it is not the candidate's fault)."""

    def __init__(self, message: str, oom: bool = False) -> None:
        super().__init__(message)
        self.oom = oom


@dataclass
class Reference:
    key: tuple
    runner: RunnerHandle
    init_inputs: Any  # the wire form of get_init_inputs(), ready to forward to a candidate
    init_buffers: list[bytes]


class Referee:
    def __init__(self, device: str, home: Path, log_dir: Path, cache_dir: Path, sandbox_mode: str = "auto",
                 reference_budget_bytes: int | None = None) -> None:
        self.device = device
        self.home, self.log_dir = home, log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        cache_dir.mkdir(parents=True, exist_ok=True)
        env = runner_env({"TRITON_CACHE_DIR": str(cache_dir / "triton"), "TORCHINDUCTOR_CACHE_DIR":
                          str(cache_dir / "inductor")})
        if device == "cpu":
            env.update({"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""})
        else:
            env.pop("TRITON_INTERPRET", None)
        self.policy = sandbox_policy(sandbox_mode, home, cache_dir, device)
        self.zygote = Zygote(env)
        self.refs: OrderedDict[tuple, Reference] = OrderedDict()
        self.spares: deque[RunnerHandle] = deque()
        self.budget = reference_budget_bytes if reference_budget_bytes is not None else _default_budget(device)
        self.sandbox = "none"
        self.physical_index: int | None = None
        self.gpu_name: str | None = None
        self._ref_history: dict[tuple, deque] = {}
        self._top_up()

    def ref_history(self, key: tuple) -> deque:
        """The last reference medians of a task on this GPU: speedups divide by their median, so the
        same candidate evaluated repeatedly gets the same speedup to well within 3%."""
        return self._ref_history.setdefault(key, deque(maxlen=8))

    # -- candidate runners ---------------------------------------------------------------------------
    def _fork(self, role: str) -> RunnerHandle:
        return RunnerHandle(self.zygote, role, self.device, self.log_dir, self.policy)

    def _top_up(self) -> None:
        while len(self.spares) < SPARES:
            self.spares.append(self._fork("cand"))

    def candidate_runner(self, deadline: float) -> RunnerHandle:
        """A fresh, warm runner for exactly one candidate (the next spare starts forking at once)."""
        runner = self.spares.popleft() if self.spares else self._fork("cand")
        self._top_up()
        ready = runner.wait_ready(max(1.0, deadline - time.monotonic()))
        self.sandbox = str(ready.get("sandbox", "none"))
        return runner

    def wait_spares(self, deadline: float) -> None:
        for spare in list(self.spares):
            spare.wait_ready(max(1.0, deadline - time.monotonic()))

    # -- reference runners --------------------------------------------------------------------------
    def reference(self, task: dict, deadline: float) -> Reference:
        """The task's loaded reference runner (cached); raises ReferenceFailure."""
        key = _reference_key(task)
        ref = self.refs.get(key)
        if ref is not None and ref.runner.alive:
            self.refs.move_to_end(key)
            return ref
        self.refs.pop(key, None)
        runner = self._fork("ref")
        try:
            runner.wait_ready(max(1.0, deadline - time.monotonic()))
            reply, bufs = runner.call({"op": "load", "role": "ref", "module": task["module"], "source": task["source"],
                                       "shapes": task["shapes"]}, [], deadline)
        except RunnerGone as exc:
            raise ReferenceFailure(_gone_text("loading the reference", exc)) from None
        if "ref_error" in reply:
            runner.kill()
            raise ReferenceFailure(reply["ref_error"], bool(reply.get("oom")))
        ref = Reference(key, runner, reply.get("init_inputs", {"list": []}), bufs)
        self.refs[key] = ref
        return ref

    def call_ref(self, ref: Reference, header: dict, deadline: float, what: str,
                 buffers: list[Any] = ()) -> tuple[dict, list[bytes]]:
        """A call to a reference runner; any failure of the reference is a ReferenceFailure."""
        try:
            reply, bufs = ref.runner.call(header, list(buffers), deadline, max_reply=1 << 34)
        except RunnerGone as exc:
            self.refs.pop(ref.key, None)
            raise ReferenceFailure(_gone_text(what, exc)) from None
        if "ref_error" in reply or "internal" in reply:
            oom = bool(reply.get("oom"))
            if oom:
                self.drop_reference(ref)
            raise ReferenceFailure(str(reply.get("ref_error") or reply.get("internal")), oom)
        return reply, bufs

    def account(self, ref: Reference, reserved: int) -> None:
        """Record a reference's device memory after a release and evict others to stay in budget."""
        ref.runner.bytes = reserved
        total = sum(r.runner.bytes for r in self.refs.values())
        for key in list(self.refs):
            if total <= self.budget and len(self.refs) <= (CPU_REFERENCE_CACHE if self.device == "cpu" else 64):
                break
            if key == ref.key:
                continue
            total -= self.refs[key].runner.bytes
            self.drop_reference(self.refs[key])

    def forget(self, task: dict) -> None:
        """Kill the task's reference runner (after it answered out of step)."""
        ref = self.refs.get(_reference_key(task))
        if ref is not None:
            self.drop_reference(ref)

    def drop_reference(self, ref: Reference) -> None:
        self.refs.pop(ref.key, None)
        ref.runner.close()

    def evict_all_but(self, keep: tuple | None) -> int:
        """Free device memory now (after an out-of-memory): every cached reference except `keep` goes."""
        dropped = 0
        for key in [k for k in self.refs if k != keep]:
            self.drop_reference(self.refs[key])
            dropped += 1
        return dropped

    def close(self) -> None:
        for ref in list(self.refs.values()):
            ref.runner.kill()
        self.refs.clear()
        while self.spares:
            self.spares.popleft().kill()
        self.zygote.close()


def _reference_key(task: dict) -> tuple:
    return task["module"], tuple(sorted(task["shapes"].items()))


def oom_summary(exc: BaseException) -> str:
    """Torch's out-of-memory text names the bytes asked for and free; keep that sentence."""
    text = str(exc)
    return text.split(". Including")[0][:300] if "Tried to allocate" in text else text[:300]


def _gone_text(what: str, exc: RunnerGone) -> str:
    from .runners import describe_status

    if exc.kind == "timeout":
        return f"{what} did not finish within the time limit"
    tail = exc.log.strip().splitlines()[-1:] if exc.log.strip() else []
    return f"{what}: the process {describe_status(exc.status)}" + (f" ({tail[0][:200]})" if tail else "")


def _default_budget(device: str) -> int:
    """Device memory cached references may hold: 40% of the GPU (what is left serves the evaluation)."""
    if device != "cuda":
        return 1 << 40
    import torch

    return int(0.4 * torch.cuda.get_device_properties(0).total_memory)


def sandbox_policy(mode: str, home: Path, cache_dir: Path, device: str) -> sandbox.SandboxPolicy | None:
    """The sandbox every runner enters; `off` only for debugging the judge itself.

    The data directory is hidden, unless Python or this package is installed inside it (hiding it
    would break the runner; said at start). Scratch space is a private tmpfs at its own path, not over
    all of /tmp, where a virtual environment may live."""
    if mode == "off":
        return None
    installed = [Path(sys.prefix).resolve(), Path(__file__).resolve().parents[1]]
    hide = () if any(p == home.resolve() or home.resolve() in p.parents for p in installed) else (str(home),)
    # /tmp becomes private (other users' and other judges' files there, task references included, vanish);
    # what Python needs from it comes back read-only.
    needed = {str(p) for p in installed} | {p for p in sys.path if p} | {sys.base_prefix, sys.exec_prefix}
    visible = tuple(sorted(p for p in needed if p.startswith("/tmp/") and os.path.isdir(p)))
    return sandbox.SandboxPolicy(
        hidden_dirs=hide, writable_dirs=(str(cache_dir),), tmp_dir="/tmp", visible_dirs=visible,
        max_address_space=None if device == "cuda" else 16 << 30,
        pid_namespace=mode != "no-pid", private_shm=device != "cuda",
    )
