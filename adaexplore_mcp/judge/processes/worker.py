"""The judge worker process: the referee, warm, one evaluation at a time, results on a Pipe.

It runs no candidate and no task code (runners do, see runner.py and zygote.py), so what it sends
back was decided where nothing hostile ran. Set-up order:
1. ignore SIGINT (Ctrl-C in the server's terminal must not kill evaluations half-way);
2. point fd 0 and fd 1 at /dev/null and fd 2 at a per-worker log, so nothing reaches the MCP stream;
3. pin the device (CUDA_VISIBLE_DEVICES, or the CPU interpreter), import torch, start the zygote
   and the first spare runner, and say "ready";
4. watch the server: if it goes away, kill every runner and exit (a worker never outlives it).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..result import RefereeResult

# Device memory a referee may still have allocated after a request; beyond it the referee is replaced (a runner
# that keeps a tensor it was lent holds the lender's block forever).
LEFT_BEHIND_BYTES = 1 << 30


def _isolate_stdio(log_path: str) -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    faulthandler.enable(file=sys.stderr, all_threads=False)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


def _watch_parent(on_orphan: Any) -> None:
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        on_orphan()
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(conn: Connection, config: dict[str, Any]) -> None:
    """Entry point of a worker (multiprocessing spawn target)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _isolate_stdio(config["log_path"])
    if config["backend"] == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = config["cuda_visible"]
        os.environ.pop("TRITON_INTERPRET", None)

    import torch
    import triton

    from .. import evaluation, probe
    from ..referee import Referee

    device = "cuda" if config["backend"] == "cuda" else "cpu"
    home = Path(config["home"])
    referee = Referee(device, home, Path(config["log_dir"]), Path(config["cache_dir"]),
                      sandbox_mode=config.get("sandbox", "auto"), gpu_sharers=int(config.get("gpu_sharers", 1)))
    referee.physical_index = config.get("physical_index")
    _watch_parent(referee.close)
    if device == "cuda":
        from ..device_memory import record_history

        record_history()  # ADAEXPLORE_MEMORY_HISTORY=1 only: who allocated what a request leaves behind
        torch.zeros(1, device="cuda").sum().item()
        referee.gpu_name = torch.cuda.get_device_name(0)
        referee.build_trusted_kernels()
    referee.settle_policy()
    conn.send({"type": "ready", "torch": torch.__version__, "triton": triton.__version__, "gpu": referee.gpu_name})
    try:
        _serve(conn, referee, evaluation, probe)
    finally:
        referee.close()


def _serve(conn: Connection, referee: Any, evaluation: Any, probe: Any) -> None:
    while True:
        try:
            req = conn.recv()
        except (EOFError, OSError):
            return  # the server went away
        if req.get("op") == "exit":
            return

        def progress(fraction: float, message: str) -> None:
            conn.send({"type": "progress", "fraction": fraction, "message": message})

        result = handle(referee, req, progress, evaluation, probe)
        conn.send({"type": "result", "result": result.to_wire()})
        if result.control.poisoned or result.control.recycle:  # the pool starts a fresh referee in its place
            sys.stderr.flush()
            return


def handle(referee: Any, req: dict[str, Any], progress: Any, evaluation: Any, probe: Any) -> RefereeResult:
    """One request, answered the same way here and in a Ray judge actor (cluster/actor.py): a judge bug
    becomes a result whose control says `internal_error` and `poisoned` (the caller then starts a fresh referee)."""
    try:
        if req["op"] == "evaluate":
            result = _profiled(evaluation.evaluate, referee, req, progress)
        elif req["op"] == "profile":  # profile_kernel: a digest of both sides under torch.profiler
            from ..referee_profile import profile

            result = RefereeResult(profile(referee, req, progress))
        else:
            result = probe.probe(referee, req)
    except BaseException:  # noqa: BLE001 - a judge bug: report it, then start afresh
        result = RefereeResult.failed(traceback.format_exc()[-3000:])
    # The referee's copies of one task's inputs (up to several GiB) otherwise stay reserved: over a series of large
    # tasks the referees held 50-70 GiB of an H200 and later tasks ran out of memory. A small task's few MiB stay
    # cached: returning them made the next evaluation pay cudaMalloc again.
    from ..device_memory import KEEP_CACHED_BYTES, give_back, held_summary
    from ..notes import note

    left = give_back(KEEP_CACHED_BYTES, collect_garbage=True)
    if left > LEFT_BEHIND_BYTES:  # what a runner never let go of: lent blocks wait for it forever (CUDA IPC)
        held = f" [{held_summary()}]" if os.environ.get("ADAEXPLORE_MEMORY_HISTORY") == "1" else ""
        note(f"referee replaced: {left >> 20} MiB of device memory stayed allocated after the request (a runner kept "
             f"tensors it was lent?){held}")
        result.control.recycle = True
    return result


def _profiled(fn: Any, *args: Any) -> Any:
    """`fn(*args)`, under cProfile when ADAEXPLORE_PROFILE_DIR names a directory (one .prof file per call):
    where a referee's latency goes (devtools/profile_summary.py prints the newest). Off by default."""
    directory = os.environ.get("ADAEXPLORE_PROFILE_DIR")
    if not directory:
        return fn(*args)
    import cProfile

    profiler = cProfile.Profile()
    try:
        return profiler.runcall(fn, *args)
    finally:
        profiler.dump_stats(str(Path(directory) / f"referee-{os.getpid()}-{time.time_ns()}.prof"))
