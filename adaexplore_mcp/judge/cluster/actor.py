"""A judge worker as a Ray actor: the same referee as processes/worker.py, on whichever host Ray places it.

Thin on purpose: the actor builds a `Referee` (which forks its own zygote and sandboxed runners on the
actor's host) and answers each request with `worker.handle`, exactly as a local worker process does.
Only the request dict goes in and only the result dict comes out, so the server, its store and its
search stay on the host the assistant talks to.

Why `start` + `poll` instead of one blocking `evaluate` method:
* `start` returns as soon as the request is in the actor: if it fails, the request was never delivered,
  so the pool may retry on another actor without blaming the candidate (pool.py);
* `poll` long-polls (returns at once when progress or the result arrives), so progress is forwarded
  while the evaluation runs and the result costs one round trip, not a polling interval.
The actor is threaded (`max_concurrency` in pool.py) so `poll` answers while an evaluation runs;
the pool gives an actor one request at a time, as it does a worker process.

Nothing here imports ray or torch at module import: ray only where the class is registered (pool.py),
torch only inside the actor, after the device environment is pinned.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

POLL_WAIT_S = 1.0


class JudgeActor:
    """One referee on one GPU (Ray's `num_gpus=1` sets its CUDA_VISIBLE_DEVICES) or the CPU interpreter."""

    def __init__(self, config: dict[str, Any]) -> None:
        if config["backend"] == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        else:
            os.environ.pop("TRITON_INTERPRET", None)
        import ray
        import torch
        import triton

        from ..referee import Referee

        device = "cuda" if config["backend"] == "cuda" else "cpu"
        home = Path(config["home"])
        self.referee = Referee(device, home, Path(config["log_dir"]), Path(config["cache_dir"]),
                               sandbox_mode=config.get("sandbox", "auto"))
        physical: int | None = None
        if device == "cuda":
            ids = [str(i) for i in ray.get_gpu_ids()]
            physical = int(ids[0]) if ids and ids[0].isdigit() else 0
            torch.zeros(1, device="cuda").sum().item()
            self.referee.gpu_name = torch.cuda.get_device_name(0)
            self.referee.build_trusted_kernels()
        # Timing is serialized per physical GPU with a lock file under `home` on this host (timing.gpu_lock).
        self.referee.physical_index = physical
        self.referee.settle_policy()
        context = ray.get_runtime_context()
        self._info = {"type": "ready", "torch": torch.__version__, "triton": triton.__version__,
                      "gpu": self.referee.gpu_name, "physical_index": physical, "pid": os.getpid(),
                      "node": f"{socket.gethostname()}/{context.get_node_id()[:12]}",
                      "node_id": context.get_node_id()}
        self._cond = threading.Condition()
        self._job = 0
        self._messages: list[tuple[float, str]] = []
        self._result: dict[str, Any] | None = None
        self._closed = False

    def ready(self) -> dict[str, Any]:
        """Where this actor runs (host, node id, GPU name and index) and its library versions."""
        return self._info

    def start(self, request: dict[str, Any]) -> int:
        """Take one request and return its job number at once; the evaluation runs in a thread."""
        with self._cond:
            if self._closed:
                raise RuntimeError("this judge actor is closing")
            self._job += 1
            job = self._job
            self._messages, self._result = [], None
        threading.Thread(target=self._run, args=(job, request), name=f"judge-job-{job}", daemon=True).start()
        return job

    def _run(self, job: int, request: dict[str, Any]) -> None:
        from .. import evaluation, probe
        from ..processes import handle

        def progress(fraction: float, message: str) -> None:
            with self._cond:
                if job == self._job:
                    self._messages.append((fraction, message))
                    self._cond.notify_all()

        result = handle(self.referee, request, progress, evaluation, probe)
        with self._cond:
            if job == self._job:
                self._result = result.to_wire()
                self._cond.notify_all()

    def poll(self, job: int, seen: int, wait_s: float = POLL_WAIT_S) -> dict[str, Any]:
        """Progress messages after the first `seen`, and the result once there is one (long poll)."""
        with self._cond:
            if job != self._job:
                raise RuntimeError(f"job {job} is not this actor's current job ({self._job})")
            self._cond.wait_for(lambda: self._result is not None or len(self._messages) > seen, timeout=wait_s)
            return {"progress": self._messages[seen:], "result": self._result}

    def exit(self) -> None:
        """Close the referee (its zygote removes the runners' scratch files) before Ray ends the process."""
        with self._cond:
            self._closed = True
        self.referee.close()
