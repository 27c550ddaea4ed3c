"""Warm worker processes: spawn, lease, kill, replace. The only place that terminates workers.

A worker is a referee (worker.py): it never runs candidate code itself, its runners do, so a hostile
candidate costs only its own runner. One or more workers per GPU (pinned with CUDA_VISIBLE_DEVICES)
or `settings.workers` CPU-interpreter workers; slots are handed out fairly between clients
(fair.py), so one client's hanging evaluations cannot hold every other client's behind them.
A worker that missed its deadline, died, reported an internal error, or served RECYCLE_AFTER
evaluations is replaced at once: the new process starts in the background while the caller returns.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..fair import FairSlots
from ..notes import keep_notes
from ..result import RefereeResult
from .worker import main as worker_main

RECYCLE_AFTER = 200
STARTUP_TIMEOUT_S = 600.0
STACK_DUMP_WAIT_S = 0.5
LOG_TAIL_BYTES = 6000


class JudgeClosedError(RuntimeError):
    """The judge closed (the server is stopping) while a kernel was being evaluated: its worker was killed, so
    what came back says nothing about the kernel. No verdict is recorded; the kernel may be sent again."""

    plain_message = True  # errors.says_its_own_text: the caller gets this text, as it is neither its fault nor a bug


class WorkerStartError(RuntimeError):
    """A worker could not start (broken environment, not a candidate's doing)."""


@dataclass(frozen=True)
class WorkerConfig:
    slot: int
    backend: Literal["cuda", "cpu"]
    home: str
    log_dir: str
    cuda_visible: str = ""
    physical_index: int | None = None
    cache_dir: str = ""
    sandbox: str = "auto"
    gpu_sharers: int = 1  # workers on this worker's GPU: its cached references get their share of the memory


@dataclass
class CallResult:
    kind: Literal["ok", "timeout", "crashed"]
    result: RefereeResult = field(default_factory=RefereeResult)
    exitcode: int | None = None
    log: str = ""
    limits: tuple[str, ...] = ()  # a runner's sandbox limits it hit: "memory", "processes" (sandbox_cgroup)


class Worker:
    """One process and its pipe."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.evals = 0
        self.discard = False  # set by the caller when this worker must not serve again
        self.info: dict[str, Any] | None = None
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe(duplex=True)
        self.log_path = Path(config.log_dir) / f"worker{config.slot}-{os.getpid()}-{time.time_ns()}.log"
        cfg = {"backend": config.backend, "home": config.home, "log_path": str(self.log_path),
               "log_dir": config.log_dir, "cache_dir": config.cache_dir or str(Path(config.home) / "cache"),
               "sandbox": config.sandbox, "cuda_visible": config.cuda_visible,
               "physical_index": config.physical_index, "gpu_sharers": config.gpu_sharers}
        self.proc = ctx.Process(target=worker_main, args=(child, cfg), daemon=True,
                                name=f"adaexplore-judge-{config.slot}")
        self.proc.start()
        child.close()

    def wait_ready(self) -> dict[str, Any]:
        if self.info is None:
            if not self.conn.poll(STARTUP_TIMEOUT_S):
                raise WorkerStartError(f"judge worker did not start within {STARTUP_TIMEOUT_S:.0f}s")
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                self.proc.join(5)
                raise WorkerStartError(f"judge worker died while starting (exit code {self.proc.exitcode}): "
                                       f"{self.log_tail()}") from None
            self.info = msg
        return self.info

    def call(self, request: dict[str, Any], timeout_s: float,
             on_progress: Callable[[float, str], None] | None) -> CallResult:
        self.wait_ready()
        self.evals += 1
        self.conn.send(request)
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._dump_stacks()
                return CallResult("timeout", log=self.log_tail())
            try:
                if not self.conn.poll(min(remaining, 1.0)):
                    if not self.proc.is_alive():
                        return self._crashed()
                    continue
                msg = self.conn.recv()
            except (EOFError, OSError):
                return self._crashed()
            if msg.get("type") == "progress":
                if on_progress is not None:
                    on_progress(msg["fraction"], msg["message"])
            elif msg.get("type") == "result":
                return CallResult("ok", result=RefereeResult.from_wire(msg["result"]))

    def _crashed(self) -> CallResult:
        self.proc.join(5)
        return CallResult("crashed", exitcode=self.proc.exitcode, log=self.log_tail())

    def _dump_stacks(self) -> None:
        """Ask the hung worker's faulthandler where it is stuck (SIGUSR1), before it is killed."""
        if self.proc.pid is not None and self.proc.is_alive():
            try:
                os.kill(self.proc.pid, signal.SIGUSR1)
            except OSError:
                return
            time.sleep(STACK_DUMP_WAIT_S)

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - LOG_TAIL_BYTES))
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.is_alive()

    def ask_to_exit(self) -> None:
        """A worker that exits on its own closes its zygote, which removes its runners' scratch files."""
        try:
            self.conn.send({"op": "exit"})
        except (OSError, ValueError):
            pass

    def kill(self, grace_s: float = 0.0) -> None:
        if grace_s > 0:
            self.proc.join(grace_s)
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        self.conn.close()
        keep_notes(self.log_path)
        # Its runners' logs too (runners.RunnerHandle names them by the worker's pid): a worker killed mid-call
        # never deletes them, and a candidate that filled its log to the size limit left it on the data disk for
        # good.
        for path in [self.log_path, *self.log_path.parent.glob(f"runner-*-{self.proc.pid}-*.log")]:
            try:
                path.unlink()
            except OSError:
                pass


class Pool:
    """Slots of workers; `lease()` blocks until a slot is free."""

    def __init__(self, configs: list[WorkerConfig]) -> None:
        self._configs = {c.slot: c for c in configs}
        self._workers: dict[int, Worker] = {}
        # Strict: a client holds at most all but one slot, so another client always finds one free.
        self._slots = FairSlots(sorted(self._configs), strict=True)
        self._lock = threading.Lock()
        self._started = False
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether `close` has begun: a call that ends now ended because its worker was killed."""
        return self._closed

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            for slot, config in self._configs.items():
                Path(config.log_dir).mkdir(parents=True, exist_ok=True)
                self._workers[slot] = Worker(config)
            self._started = True

    def wait_ready(self) -> list[dict[str, Any]]:
        self.start()
        return [w.wait_ready() for w in list(self._workers.values())]

    @contextmanager
    def lease(self, client: str | None = None, key: Hashable = None) -> Iterator[tuple[WorkerConfig, Worker]]:
        """A free worker (fairly among clients; `key`, the task's reference, prefers a worker that has it
        warm: FairSlots' task affinity); on exit it goes back, or is replaced if marked `discard`.

        No `return` in the `finally`: that would swallow the caller's exception (a server stopping
        mid-evaluation then surfaced as an UnboundLocalError far away)."""
        if self._closed:
            raise WorkerStartError("the judge is closed")
        self.start()
        slot = self._slots.acquire(client, key=key)
        try:
            worker = self._workers[slot]
            if not worker.alive() and worker.info is not None:
                worker = self._replace(slot)
        except BaseException:
            self._slots.release(slot)
            raise
        try:
            yield self._configs[slot], worker
        finally:
            try:
                if not self._closed and (worker.discard or worker.evals >= RECYCLE_AFTER or not worker.alive()):
                    self._replace(slot)
            except WorkerStartError:
                pass  # closed meanwhile: nothing to replace
            finally:
                self._slots.release(slot)

    def _replace(self, slot: int) -> Worker:
        with self._lock:
            old = self._workers.get(slot)
            if old is not None:
                old.kill()
            if self._closed:
                raise WorkerStartError("the judge is closed")
            self._workers[slot] = Worker(self._configs[slot])
            self._slots.forget(slot)
            return self._workers[slot]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for worker in self._workers.values():
                worker.ask_to_exit()
            deadline = time.monotonic() + 3.0
            for worker in self._workers.values():
                worker.kill(grace_s=max(0.0, deadline - time.monotonic()))
            self._workers.clear()
