"""The referee: the trusted half of a judge worker. It runs no candidate or task code.

It owns the runners: one zygote that forks them, a few spare candidate runners kept warm (forked,
sandboxed, CUDA context ready, nothing loaded), and a cache of reference runners, one per task,
bounded by the device memory they hold (least recently used first out). Evicting a reference kills
its process, which is the one way to be sure every byte of its GPU memory comes back.

Evaluation and probing logic lives in `evaluation.py` and `probe.py`; this module only manages
processes and what is cached between evaluations.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import kernel_cache, notes, sandbox
from .kernel_cache import KernelCache
from .reference_timings import ReferenceTimings
from .processes import RunnerGone, RunnerHandle, Zygote, idle_watch, runner_env

SPARES = 2  # one for the next candidate, one for its replay (replay/referee_side.py)
CPU_REFERENCE_CACHE = 4
SETTLE_S = 30.0  # the evaluation's own deadline may have passed: the last release gets time of its own


class ReferenceFailure(Exception):
    """The task's reference failed; the message says where and how (it is not the candidate's fault)."""

    def __init__(self, message: str, oom: bool = False, died: bool = False) -> None:
        super().__init__(message)
        self.oom = oom
        self.died = died  # its process ended while loading, before any candidate code ran beside it

    def worth_a_fresh_referee(self, referee: "Referee") -> bool:
        """Out of memory while the device is short, or, on a GPU, its process died while loading (exit code 70
        beside 9 busy workers): the device's state, never the candidate's doing. One more try could pass."""
        return (self.oom and referee.memory_short(None)) or (self.died and referee.device == "cuda")


@dataclass
class Reference:
    key: tuple
    runner: RunnerHandle
    init_inputs: Any  # the wire form of get_init_inputs(), ready to forward to a candidate
    init_buffers: list[bytes]
    idle: idle_watch.IdleMark | None = None  # its CPU time when its last evaluation ended
    notes: list[str] = dataclasses.field(default_factory=list)  # for the evaluation's warnings


class Referee:
    def __init__(self, device: str, home: Path, log_dir: Path, cache_dir: Path, sandbox_mode: str = "auto",
                 gpu_sharers: int = 1) -> None:
        self.device = device
        self.home, self.log_dir = home, log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        cache_dir.mkdir(parents=True, exist_ok=True)
        env = runner_env({})  # the zygote points each runner's kernel caches into its own scratch space
        # torch.compile of a reference compiles in its own process: Inductor's pool of compile workers would keep
        # importing torch in children of the cached reference after its evaluation, which the idle watch
        # (processes/idle_watch.py) cannot tell from work a hostile reference leaves running
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        self.kernels = KernelCache(cache_dir / "kernels")
        self.trusted_kernels: list[tuple[str, bytes]] = []
        self.replay_launchers: dict[str, bytes] = {}  # kernel_files(native=False)
        if device == "cpu":
            env.update({"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""})
        else:
            env.pop("TRITON_INTERPRET", None)
        self.policy = sandbox_policy(sandbox_mode, home, cache_dir, device)
        self.base_hidden = tuple(d for d in (str(home), str(cache_dir)) if self.policy and d in self.policy.hidden_dirs)
        self.zygote = Zygote(env)
        self.refs: OrderedDict[tuple, Reference] = OrderedDict()
        self.spares: deque[RunnerHandle] = deque()
        self.budget = _default_budget(device, max(1, gpu_sharers))  # device memory its cached references may hold
        self.sandbox = "none"
        self.physical_index: int | None = None
        self.gpu_name: str | None = None
        self._ref_timings: dict[tuple, ReferenceTimings] = {}
        self.top_up()

    def ref_timings(self, key: tuple) -> ReferenceTimings:
        """A task's reference timings on this GPU: speedups divide by the median of their medians (the
        same candidate evaluated repeatedly gets the same speedup to well within 3%), and between fresh
        timings an evaluation may reuse the newest (reference_timings.py)."""
        return self._ref_timings.setdefault(key, ReferenceTimings())

    # -- candidate runners ---------------------------------------------------------------------------
    def _fork(self, role: str) -> RunnerHandle:
        return RunnerHandle(self.zygote, role, self.device, self.log_dir, self.policy)

    def top_up(self) -> None:
        """Fork spares up to SPARES (they get ready in the background). Where the host has no process to spare,
        fewer: the next evaluation forks its own, and says so if it cannot."""
        with contextlib.suppress(RunnerGone):
            while len(self.spares) < SPARES:
                self.spares.append(self._fork("cand"))

    def candidate_runner(self, deadline: float) -> RunnerHandle:
        """A fresh, warm runner for exactly one candidate (the next spare starts forking at once)."""
        runner = self._take_spare()
        self.top_up()
        ready = runner.wait_ready(max(1.0, deadline - time.monotonic()))
        self.sandbox = str(ready.get("sandbox", "none"))
        return runner

    def replay_runner(self) -> RunnerHandle:
        """A spare for a replay (replay/referee_side.py), taken without waiting for it to be ready: the replay's
        requests are sent at once and read when it is. Not replaced until `top_up` at the evaluation's end: a
        spare forked now would be creating its CUDA context while the candidate is timed."""
        return self._take_spare()

    def _take_spare(self) -> RunnerHandle:
        return self.spares.popleft() if self.spares else self._fork("cand")

    def settle_policy(self, timeout_s: float = 120.0) -> str | None:
        """Check that a runner starts under the full policy; if one dies before it is ready (a host whose
        CUDA driver needs a daemon's socket under /run, say), fall back to hiding only the data and cache
        directories, without the seccomp filter. Returns what was given up (None when nothing): it is
        logged, and every result's `sandbox` shows the weaker summary."""
        if self.policy is None or not self.spares:
            return None
        try:
            self.spares[0].wait_ready(timeout_s)
            return None
        except RunnerGone as exc:
            if exc.kind == "timeout":
                return None
            tail = (exc.log.strip().splitlines() or ["no output"])[-1][:200]
        relaxed = dataclasses.replace(self.policy, hidden_dirs=self.base_hidden, deny_unix_sockets=False)
        if relaxed == self.policy:
            return None
        self.policy = relaxed
        while self.spares:
            self.spares.popleft().kill()
        self.top_up()
        note = f"the host's private dirs stay visible and Unix sockets allowed: a runner died under them ({tail})"
        notes.note(f"sandbox relaxed: {note}")
        return note

    def wait_spares(self, deadline: float) -> None:
        for spare in list(self.spares):
            spare.wait_ready(max(1.0, deadline - time.monotonic()))

    def build_trusted_kernels(self) -> None:
        """Compile Triton's own helper modules (the CUDA driver utilities, built with the C compiler) here,
        in the trusted process, once: every runner gets them with its kernels instead of compiling them in
        its fresh private cache (seconds each) or taking them from another candidate (native code)."""
        import triton

        trusted = self.kernels.root.parent / "trusted"
        os.environ["TRITON_CACHE_DIR"] = str(trusted)
        try:
            triton.runtime.driver.active.utils  # noqa: B018 - the access builds and loads the module
        except Exception:  # noqa: BLE001 - then each runner builds its own, only slower
            return
        self.trusted_kernels = kernel_cache.read_tree(trusted)

    def kernel_files(self, key: str | None, native: bool = True) -> tuple[list[str], list[bytes]]:
        """Triton's helper modules and what earlier runs of this source compiled, as a load request's
        `kernel_files` and its buffers.

        `native=False` (for the replay, which must not run anything the candidate made on the host): of the
        source's files only device code and metadata (a launcher `.so` is host code the candidate's runner
        could have written itself), with the launchers earlier replays compiled (`keep_launchers`) instead."""
        own = self.kernels.files(key) if key else []
        if native:
            files = self.trusted_kernels + own
        else:
            trusted = {name for name, _ in self.trusted_kernels} | set(self.replay_launchers)
            files = self.trusted_kernels + list(self.replay_launchers.items()) + [
                (name, data) for name, data in own if name not in trusted and not kernel_cache.is_native(name)]
        return [name for name, _ in files], [data for _, data in files]

    def keep_launchers(self, replayer: RunnerHandle, deadline: float) -> None:
        """Keep the launchers (host code Triton compiles per kernel signature) a replay's runner built, for later
        replays: it ran no candidate code on the host (on a GPU a kernel's body is compiled, never run as Python,
        and its compile is kept inside Triton's language: compile_guard.py; what a program may name is limited:
        replay/kernels.py), so what it compiled can be trusted. Only shared libraries (what Triton compiles):
        a `.py` there is no launcher. A cache only loses speed: failures are ignored."""
        if self.device != "cuda":
            return
        for name, data in _compiled_files(replayer, deadline):
            if kernel_cache.safe_name(name) and str(name).endswith(".so") and len(self.replay_launchers) < 256:
                self.replay_launchers.setdefault(str(name), data)

    def keep_kernels(self, runner: RunnerHandle, key: str, deadline: float) -> None:
        """Keep what this runner compiled for later runs of the same source; a cache only loses speed, so
        any failure here is ignored (the runner's own verdict is decided elsewhere)."""
        files = _compiled_files(runner, deadline)
        if files:
            try:
                self.kernels.keep(key, files)
            except (OSError, ValueError, TypeError):
                pass

    # -- reference runners --------------------------------------------------------------------------
    def reference(self, task: dict, deadline: float) -> Reference:
        """The task's loaded reference runner (cached); raises ReferenceFailure."""
        key = _reference_key(task)
        ref = self.refs.get(key)
        busy = idle_watch.busy_while_idle(ref.runner.pid, ref.idle) if ref is not None and ref.runner.alive else None
        if ref is not None and ref.runner.alive and busy is None:
            self.refs.move_to_end(key)
            if ref.idle is not None:  # the first take since its last evaluation ended: a new evaluation starts
                ref.idle = None  # (the profile and the probe take it again mid-evaluation: it is busy then)
                ref.notes.clear()
            return ref
        if ref is not None and (busy is not None or not ref.runner.alive):
            self.drop_reference(ref, busy or "its process had ended")
        self.refs.pop(key, None)
        runner = self._fork("ref")
        try:
            runner.wait_ready(max(1.0, deadline - time.monotonic()))
            names, kernels = self.kernel_files(None)
            reply, bufs = runner.call({"op": "load", "role": "ref", "module": task["module"], "source": task["source"],
                                       "shapes": task["shapes"], "kernel_files": names}, kernels, deadline)
        except RunnerGone as exc:
            raise ReferenceFailure(_gone_text("loading the reference", exc), died=True) from None
        if "ref_error" in reply:
            runner.kill()
            raise ReferenceFailure(reply["ref_error"], bool(reply.get("oom")))
        ref = Reference(key, runner, reply.get("init_inputs", {"list": []}), bufs, notes=[busy] if busy else [])
        self.refs[key] = ref
        return ref

    def call_ref(self, ref: Reference, header: dict, deadline: float, what: str,
                 buffers: list[Any] = ()) -> tuple[dict, list[bytes]]:
        """A call to a reference runner; any failure of the reference is a ReferenceFailure."""
        return self._checked_ref(ref, what, lambda: ref.runner.call(header, list(buffers), deadline, max_reply=1 << 34))

    def _checked_ref(self, ref: Reference, what: str, exchange: Any) -> tuple[dict, list[bytes]]:
        try:
            reply, bufs = exchange()
        except RunnerGone as exc:
            self.refs.pop(ref.key, None)
            notes.note(f"reference process lost while {what}: {_gone_text(what, exc)[:300]}")
            raise ReferenceFailure(_gone_text(what, exc)) from None
        if "ref_error" in reply or "internal" in reply:
            oom = bool(reply.get("oom"))
            if oom:
                self.drop_reference(ref, f"out of device memory while {what}")
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
            evicted = self.refs[key].runner.bytes
            total -= evicted
            self.drop_reference(self.refs[key], f"evicted ({evicted >> 20} MiB; cached references held "
                                f"{(total + evicted) >> 20} MiB, budget {self.budget >> 20} MiB, {len(self.refs)} cached)")

    def settle(self, ref: Reference) -> None:
        """The end of an evaluation, however it ended: the reference lets go of everything it lent and of its
        allocator cache beyond KEEP_CACHED_BYTES, and its memory is accounted. A reference that fails here is
        dropped (call_ref does that), quietly: the evaluation's verdict is already decided."""
        if not ref.runner.alive:
            return
        if _unread(ref.runner):  # an answer nobody asked for: its channel is out of step
            self.drop_reference(ref, "it answered out of step")
            return
        try:
            reply, _ = self.call_ref(ref, {"op": "release"}, time.monotonic() + SETTLE_S, "releasing the reference")
            self.account(ref, int(reply.get("reserved", 0)))
            ref.idle = idle_watch.mark(ref.runner.pid)
        except ReferenceFailure:
            pass
        except (ValueError, TypeError, ArithmeticError):  # a malformed answer: its channel cannot be trusted any more
            self.drop_reference(ref, "a malformed answer to its last release")

    def forget(self, task: dict) -> None:
        """Kill the task's reference runner (after it answered out of step)."""
        ref = self.refs.get(_reference_key(task))
        if ref is not None:
            self.drop_reference(ref, "it answered out of step")

    def drop_reference(self, ref: Reference, why: str = "") -> None:
        """Kill a cached reference; `why` goes to the worker's log (a warm evaluation that meets a fresh
        reference runner pays its load and its torch.compile again: the log says what caused it)."""
        if why:
            notes.note(f"reference of {ref.key[0][:40]!r} dropped: {why}")
        self.refs.pop(ref.key, None)
        ref.runner.close()

    def memory_short(self, ref: Reference | None) -> bool:
        """Whether a retry on a fresh referee could help a runner that said it ran out of memory, read here (a
        runner's word is no evidence): the device is nearly full, or other tasks' references hold 1 GiB or more."""
        if self.device != "cuda":
            return False
        import torch

        try:
            free, total = torch.cuda.mem_get_info()
        except RuntimeError:
            return True
        others = sum(r.runner.bytes or 0 for r in self.refs.values() if r is not ref)
        return free < max(2 << 30, total // 10) or others >= 1 << 30

    def evict_all_but(self, keep: tuple | None) -> int:
        """Free device memory now (after an out-of-memory): every cached reference except `keep` goes."""
        dropped = 0
        for key in [k for k in self.refs if k != keep]:
            self.drop_reference(self.refs[key], "every cached reference released after an out-of-memory")
            dropped += 1
        return dropped

    def close(self) -> None:
        for ref in list(self.refs.values()):
            ref.runner.kill()
        self.refs.clear()
        while self.spares:
            self.spares.popleft().kill()
        self.zygote.close()


def _compiled_files(runner: RunnerHandle, deadline: float) -> list[tuple[Any, bytes]]:
    """What a runner compiled into its Triton cache, as (name, bytes); names are unchecked (kernel_cache checks
    them). Empty when the runner fails to answer or answers malformed."""
    try:
        reply, bufs = runner.call({"op": "kernel_files"}, [], min(deadline, time.monotonic() + 5.0),
                                  max_reply=kernel_cache.MAX_BYTES + (1 << 20))
    except (RunnerGone, OSError, ValueError, TypeError):
        return []
    names = reply.get("names")
    return list(zip(names, bufs)) if isinstance(names, list) and len(names) == len(bufs) else []


def _reference_key(task: dict) -> tuple:
    """The module and its shapes; a tuple constant's value comes as a list (JSON) and is keyed as a tuple."""
    return task["module"], tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in task["shapes"].items()))


def oom_summary(exc: BaseException) -> str:
    """Torch's out-of-memory text names the bytes asked for and free; keep that sentence."""
    text = str(exc)
    return text.split(". Including")[0][:300] if "Tried to allocate" in text else text[:300]


def _gone_text(what: str, exc: RunnerGone) -> str:
    from .processes import describe_status

    if exc.kind == "timeout":
        return f"{what} did not finish within the time limit"
    tail = exc.log.strip().splitlines()[-1:] if exc.log.strip() else []
    return f"{what}: the process {describe_status(exc.status, exc.limits)}" + (f" ({tail[0][:200]})" if tail else "")


def _default_budget(device: str, sharers: int = 1) -> int:
    """40% of the GPU over the referees sharing it (40% each overcommitted it: tests/test_judge_isolation.py)."""
    if device != "cuda":
        return 1 << 40
    import torch

    return int(0.4 * torch.cuda.get_device_properties(0).total_memory / sharers)


# Where a host keeps what is none of a candidate's business: homes (keys, tokens, other projects), daemons'
# sockets (/run: docker, dbus), other programs' state and scratch. Hidden behind empty read-only tmpfs; what
# Python needs from under them comes back read-only.
HOST_PRIVATE_DIRS = ("/home", "/root", "/run", "/var/run", "/var/tmp", "/var/lib", "/var/log", "/var/mail",
                     "/var/spool", "/var/backups", "/var/cache", "/mnt", "/media", "/srv")


def sandbox_policy(mode: str, home: Path, cache_dir: Path, device: str) -> sandbox.SandboxPolicy | None:
    """The sandbox every runner enters; `off` only for debugging the judge itself.

    Hidden: the data directory (the shared store), the kernel cache directory (the referee hands each
    runner its own source's kernels: kernel_cache.py), the host's private places (HOST_PRIVATE_DIRS and
    the user's home). The Python installation and this package come back read-only wherever they live;
    the data directory stays visible only if Python itself is installed inside it (said at start).
    Scratch space is a private tmpfs at /tmp."""
    if mode == "off":
        return None
    installed = [Path(sys.prefix).resolve(), Path(__file__).resolve().parents[1]]
    data = () if any(p == home.resolve() or home.resolve() in p.parents for p in installed) else (str(home),)
    host = {os.path.realpath(d) for d in (*HOST_PRIVATE_DIRS, str(Path.home())) if os.path.isdir(d)}
    hide = tuple(sorted({*data, str(cache_dir), *host} - {"/"}))
    needed = {str(p) for p in installed} | _library_paths() | {sys.base_prefix, sys.exec_prefix}
    covers = [*hide, "/tmp"]
    # Never /tmp itself or a folder above it (a script run from /tmp puts /tmp on sys.path): bound back
    # read-only, it would cover the runner's private scratch space and no candidate could be written.
    visible = tuple(sorted(p for p in {os.path.realpath(n) for n in needed}
                           if os.path.isdir(p) and any(_under(p, c) for c in covers) and not _under("/tmp", p)))
    return sandbox.SandboxPolicy(
        hidden_dirs=hide, writable_dirs=(), tmp_dir="/tmp", visible_dirs=visible,
        max_address_space=None if device == "cuda" else 16 << 30, max_memory_bytes=runner_memory_limit(),
        max_processes=_env_positive("ADAEXPLORE_RUNNER_PROCESSES") or sandbox.SandboxPolicy.max_processes,
        pid_namespace=mode != "no-pid", private_shm=device != "cuda",
        ipc_namespace=os.environ.get("ADAEXPLORE_SANDBOX_IPC_NS", "1") != "0",
    )


def runner_memory_limit() -> int | None:
    """Host memory one runner may use (its group's limit, sandbox/cgroup.py): ADAEXPLORE_RUNNER_MEMORY_MB, else
    half of the machine's. Enough for any task's inputs on the CPU side, and a runner that takes more is killed
    before the judge's processes suffer (the red team's 18 GB on a 24 GB machine)."""
    asked = _env_positive("ADAEXPLORE_RUNNER_MEMORY_MB")
    if asked is not None:
        return asked << 20
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return None


def _env_positive(name: str) -> int | None:
    """A positive integer setting from the environment, or None (unset, malformed or not positive: the default;
    the server's start line names the limits in force, cli.py)."""
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def _library_paths() -> set[str]:
    """sys.path's entries but the folder the server was started in or from (the current directory, its script's
    folder; Python puts it first, a script may push it down): that is a project's folder, with its `.env` and
    keys, and bound back under a cover a candidate read them. What runners import lives
    elsewhere, and this package comes back on its own."""
    here = os.getcwd()
    started = {os.path.realpath(here), os.path.realpath(os.path.dirname(os.path.abspath(sys.argv[0] or here)))}
    return {p for p in sys.path if p and os.path.realpath(p) not in started}


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _unread(runner: RunnerHandle) -> bool:
    """Whether a runner sent something that was never read (the evaluation stopped mid-exchange)."""
    try:
        return bool(runner.conn.poll(0))
    except (OSError, ValueError, EOFError):
        return True

