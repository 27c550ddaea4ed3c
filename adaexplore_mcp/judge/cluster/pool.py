"""Judge workers as Ray actors, behind the local pool's interface (`start`, `wait_ready`, `lease`, `close`).

Chosen with `adaexplore-mcp --workers ray` or ADAEXPLORE_RAY_ADDRESS (`auto`, `ray://host:port`, or `local`
for a one-node cluster started in this process); the local pool (processes/pool.py) stays the default and this
module, the only one importing ray, is imported only then. Why Ray rather than a protocol of our own:
placement, node failure detection and killing a remote process are what it already does.

* One actor per GPU of the cluster (`num_gpus=1`: timing stays one-at-a-time per GPU), or
  `settings.workers` CPU-interpreter actors on a cluster without GPUs. Each actor is a referee
  (actor.py) forking its own zygote and sandboxed runners on its host: a candidate that crashes or
  hangs loses only its runner, as locally.
* ADAEXPLORE_REQUIRE_GPU (a substring of the GPU name) keeps only actors on matching GPUs, so a search's
  speedups are never measured on different GPU models without anyone noticing.
* Failures: an actor that misses its deadline is killed (`ray.kill`) and replaced; one that dies
  mid-evaluation gives `crashed` with the cause; one that is gone before the request reached it
  (the candidate cannot be at fault) is replaced and the request sent once more. A cluster that cannot
  be reached is a `WorkerStartError` naming the address.
* Slots are shared fairly between clients with the same `FairSlots` as the local pool.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from ...config import Settings
from ..fair import FairSlots
from ..processes import RECYCLE_AFTER, STARTUP_TIMEOUT_S, CallResult, WorkerConfig, WorkerStartError
from .actor import POLL_WAIT_S, JudgeActor
from ..result import RefereeResult

# Threads per actor: one evaluation, its progress polls, `ready` and `exit` (the pool sends one request at a time).
ACTOR_CONCURRENCY = 4
RPC_SLACK_S = 10.0
CONNECT_TIMEOUT_S = 5.0


def import_ray() -> Any:
    """ray, or a clear error saying how to get it."""
    try:
        import ray
    except ImportError:
        raise WorkerStartError("the Ray worker pool needs ray: pip install 'adaexplore-mcp[ray]' "
                               "(or unset ADAEXPLORE_RAY_ADDRESS for the local pool)") from None
    return ray


def _check_reachable(address: str) -> None:
    """A host:port that nothing answers on fails here in seconds: `ray.init` itself retries for minutes."""
    hostport = address.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local", or a form ray understands and we do not parse
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise WorkerStartError(f"cannot reach the Ray cluster at {address!r}: {exc}") from None


def connect(address: str) -> Any:
    """Join the cluster at `address` (no-op when this process is already connected, as in tests)."""
    ray = import_ray()
    _check_reachable(address)
    if ray.is_initialized():
        return ray
    try:
        # log_to_driver off: the actors' output must never reach this process's stdout (the MCP stream).
        ray.init(address=None if address == "local" else address, log_to_driver=False,
                 include_dashboard=False if address == "local" else None)
    except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, gRPC errors...: all mean "unreachable"
        raise WorkerStartError(f"cannot reach the Ray cluster at {address!r}: {type(exc).__name__}: {exc}") from exc
    return ray


class _Undelivered(Exception):
    """The actor was gone before it took the request: the candidate cannot be at fault."""


class RayWorker:
    """One slot: a judge actor, replaced in place (`respawn`) when it dies, hangs or is recycled."""

    def __init__(self, ray: Any, actor_cls: Any, config: WorkerConfig, require_gpu: str) -> None:
        self._ray = ray
        self._cls = actor_cls
        self.config = config
        self._require_gpu = require_gpu
        self._lock = threading.Lock()
        self.actor: Any = None
        self.info: dict[str, Any] | None = None
        self.evals = 0
        self.discard = False
        self.dead = False
        self._spawn(None)

    def _spawn(self, near_node: str | None) -> None:
        cfg = {"backend": self.config.backend, "home": self.config.home, "log_dir": self.config.log_dir,
               "cache_dir": self.config.cache_dir, "sandbox": self.config.sandbox}
        opts: dict[str, Any] = {"max_concurrency": ACTOR_CONCURRENCY, "max_restarts": 0}
        opts.update({"num_gpus": 1, "num_cpus": 0} if self.config.backend == "cuda" else {"num_cpus": 1})
        if near_node:  # a replacement prefers the same node (same GPU model); anywhere else if it is gone
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=near_node, soft=True)
        self.actor = self._cls.options(**opts).remote(cfg)
        self._ready_ref = self.actor.ready.remote()
        self.info, self.evals, self.discard, self.dead = None, 0, False, False

    @property
    def node(self) -> str | None:
        return None if self.info is None else self.info.get("node")

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> dict[str, Any]:
        """The actor's ready info (host, GPU); WorkerStartError if it cannot start or has the wrong GPU."""
        if self.info is None:
            from ray.exceptions import GetTimeoutError, RayError

            try:
                info = self._ray.get(self._ready_ref, timeout=timeout_s)
            except GetTimeoutError:
                raise WorkerStartError(f"judge actor {self.config.slot} did not start within {timeout_s:.0f}s "
                                       "(no free GPU/CPU in the cluster?)") from None
            except RayError as exc:
                self.dead = True
                raise WorkerStartError(f"judge actor {self.config.slot} died while starting: {exc}") from exc
            gpu = info.get("gpu") or ""
            if self._require_gpu and self._require_gpu.lower() not in gpu.lower():
                self.dead = True
                raise WorkerStartError(f"judge actor on {info.get('node')} has GPU {gpu or 'none'!r}, not one "
                                       f"matching ADAEXPLORE_REQUIRE_GPU={self._require_gpu!r}")
            self.info = info
        return self.info

    def call(self, request: dict[str, Any], timeout_s: float,
             on_progress: Callable[[float, str], None] | None) -> CallResult:
        """Run one request, as `pool.Worker.call` does; one retry on a fresh actor if it never got there."""
        deadline = time.monotonic() + timeout_s
        try:
            return self._call_once(request, deadline, on_progress)
        except _Undelivered as first:
            self.respawn()
            try:
                return self._call_once(request, deadline, on_progress)
            except _Undelivered as second:
                self.dead = True
                raise WorkerStartError(f"judge actor {self.config.slot} is gone and its replacement too "
                                       f"({first}; then {second})") from None

    def _call_once(self, request: dict[str, Any], deadline: float,
                   on_progress: Callable[[float, str], None] | None) -> CallResult:
        from ray.exceptions import GetTimeoutError, RayError

        try:
            self.wait_ready(max(1.0, deadline - time.monotonic()))
        except WorkerStartError as exc:
            if self.dead:
                raise _Undelivered(str(exc)) from None
            raise
        self.evals += 1
        try:
            job = self._ray.get(self.actor.start.remote(request), timeout=RPC_SLACK_S)
        except (RayError, GetTimeoutError) as exc:
            raise _Undelivered(f"{type(exc).__name__}: {str(exc)[:400]}") from None
        seen = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                return CallResult("timeout", log=f"the judge actor on {self.node} did not answer before the deadline "
                                  "and was killed (ray.kill)")
            wait = min(POLL_WAIT_S, remaining)
            try:
                reply = self._ray.get(self.actor.poll.remote(job, seen, wait), timeout=wait + RPC_SLACK_S)
            except GetTimeoutError:
                continue  # the actor is slow to answer; the deadline above decides
            except RayError as exc:
                self.dead = True
                return CallResult("crashed", log=f"the judge actor on {self.node} died mid-evaluation "
                                  f"({type(exc).__name__}): {str(exc)[:1500]}")
            for fraction, message in reply["progress"]:
                if on_progress is not None:
                    on_progress(fraction, message)
            seen += len(reply["progress"])
            if reply["result"] is not None:
                return CallResult("ok", result=RefereeResult.from_wire(reply["result"]))

    def alive(self) -> bool:
        return not self.dead

    def respawn(self) -> None:
        """Kill this slot's actor and start another, near the same node when it still exists."""
        with self._lock:
            near = self.info.get("node_id") if self.info else None
            self.kill()
            self._spawn(near)

    def kill(self) -> None:
        self.dead = True
        try:
            self._ray.kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def close(self, grace_s: float) -> None:
        """Let the referee close its zygote (scratch files go), then kill the actor either way."""
        try:
            self._ray.get(self.actor.exit.remote(), timeout=grace_s)
        except Exception:  # noqa: BLE001 - dead or slow: killed below
            pass
        self.kill()


class RayPool:
    """Judge actors on a Ray cluster; `lease()` blocks until one is free (fairly among clients)."""

    def __init__(self, settings: Settings, home: str, log_dir: str) -> None:
        self._ray = connect(settings.ray_address)
        gpus = int(self._ray.cluster_resources().get("GPU", 0))
        if settings.device == "cuda" and gpus == 0:
            raise WorkerStartError(f"ADAEXPLORE_DEVICE=cuda, but the Ray cluster at {settings.ray_address!r} "
                                   "has no GPU")
        use_cuda = gpus > 0 and settings.device != "cpu"
        if settings.require_gpu and not use_cuda:
            raise WorkerStartError(f"ADAEXPLORE_REQUIRE_GPU={settings.require_gpu!r}, but the Ray cluster at "
                                   f"{settings.ray_address!r} runs no GPU actors")
        self.backend = "cuda" if use_cuda else "cpu"
        count = gpus if use_cuda else max(1, settings.workers)
        self._configs = [WorkerConfig(slot=i, backend=self.backend, home=home, log_dir=log_dir,  # type: ignore[arg-type]
                                      cache_dir=str(settings.cache_dir), sandbox=settings.sandbox)
                         for i in range(count)]
        self._require_gpu = settings.require_gpu
        self._address = settings.ray_address
        self._workers: dict[int, RayWorker] = {}
        self._slots: FairSlots | None = None
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> None:
        """Create the actors (they warm up in the background). With ADAEXPLORE_REQUIRE_GPU this waits for
        them, to keep only those on matching GPUs; none matching is a WorkerStartError."""
        with self._lock:
            if self._workers or self._closed:
                return
            actor_cls = self._ray.remote(JudgeActor)
            workers = {c.slot: RayWorker(self._ray, actor_cls, c, self._require_gpu) for c in self._configs}
            keep = list(workers)
            if self._require_gpu:
                seen, keep = [], []
                for slot, worker in workers.items():
                    try:
                        worker.wait_ready()
                        keep.append(slot)
                    except WorkerStartError as exc:
                        seen.append(str(exc))
                        worker.kill()
                if not keep:
                    raise WorkerStartError(f"no GPU of the Ray cluster at {self._address!r} matches "
                                           f"ADAEXPLORE_REQUIRE_GPU={self._require_gpu!r}: {'; '.join(seen)}")
            self._workers = {slot: workers[slot] for slot in keep}
            self._slots = FairSlots(sorted(keep), strict=True)

    def wait_ready(self) -> list[dict[str, Any]]:
        self.start()
        return [w.wait_ready() for w in list(self._workers.values())]

    @property
    def closed(self) -> bool:
        """Whether `close` has begun (the local pool's `closed`)."""
        return self._closed

    @contextmanager
    def lease(self, client: str | None = None, key: Hashable = None) -> Iterator[tuple[Any, RayWorker]]:
        """A free actor (`key`: FairSlots' task affinity); on exit it goes back, or is replaced if dead,
        marked `discard`, or worn out.

        The yielded config reads like the slot's WorkerConfig, but its `physical_index` is the GPU the actor
        reported (the physical id on its own host), known only once a new actor has started."""
        if self._closed:
            raise WorkerStartError("the judge is closed")
        self.start()
        assert self._slots is not None
        slot = self._slots.acquire(client, key=key)
        worker = self._workers[slot]
        try:
            if worker.dead:
                worker.respawn()
                self._slots.forget(slot)
            yield _ConfigAfterCall(self._configs[slot], worker), worker
        finally:
            try:
                if not self._closed and (worker.discard or worker.evals >= RECYCLE_AFTER or worker.dead):
                    worker.respawn()
                    self._slots.forget(slot)
            finally:
                self._slots.release(slot)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            deadline = time.monotonic() + 3.0
            for worker in self._workers.values():
                worker.close(max(0.1, deadline - time.monotonic()))
            self._workers.clear()


class _ConfigAfterCall:
    """The slot's WorkerConfig, whose `physical_index` is read from the actor once it has reported it.

    The Judge reads `config.physical_index` after the call, and only then does a new actor know its GPU."""

    def __init__(self, config: WorkerConfig, worker: RayWorker) -> None:
        self._config, self._worker = config, worker

    def __getattr__(self, name: str) -> Any:
        if name == "physical_index" and self._worker.info is not None:
            return self._worker.info.get("physical_index")
        return getattr(self._config, name)
