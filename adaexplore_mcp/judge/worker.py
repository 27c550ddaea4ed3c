"""The worker process: warm torch/triton, one evaluation at a time, results on a Pipe.

Set-up order matters and is the point of this file:
1. ignore SIGINT (Ctrl-C in the server's terminal must not kill evaluations half-way);
2. point fd 0 and fd 1 at /dev/null and fd 2 at a per-worker log file BEFORE importing anything, so a
   candidate that prints megabytes cannot corrupt the server's MCP stdio stream (results never travel
   on stdout) and a crash or hang leaves a faulthandler stack dump we can map to a candidate line;
3. pin the device through the environment (CUDA_VISIBLE_DEVICES, or TRITON_INTERPRET=1 on CPU),
   then import torch and triton, install the launch hook, warm the CUDA context, and say "ready".
A worker whose CUDA context was poisoned reports, then exits; the pool replaces it.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any


def _isolate_stdio(log_path: str) -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    faulthandler.enable(file=sys.stderr, all_threads=False)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


def _truncate_log() -> None:
    try:
        os.ftruncate(2, 0)
        os.lseek(2, 0, os.SEEK_SET)
    except OSError:
        pass


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

    from pathlib import Path

    import torch
    import triton

    from . import launches, probe, protocol
    from .reference import TaskCache
    from .timing import Bench

    launches.install()
    device = "cuda" if config["backend"] == "cuda" else "cpu"
    ctx = protocol.WorkerContext(device=device, home=Path(config["home"]),
                                 physical_index=config.get("physical_index"), tasks=TaskCache(device))
    if device == "cuda":
        torch.zeros(1, device="cuda").sum().item()  # create the context now, not during the first evaluation
        ctx.bench = Bench()
        ctx.gpu_name = torch.cuda.get_device_name(0)
    conn.send({"type": "ready", "torch": torch.__version__, "triton": triton.__version__, "gpu": ctx.gpu_name})
    _serve(conn, ctx, probe, protocol)


def _serve(conn: Connection, ctx: Any, probe: Any, protocol: Any) -> None:
    while True:
        try:
            req = conn.recv()
        except (EOFError, OSError):
            return  # the server went away
        if req.get("op") == "exit":
            return
        _truncate_log()

        def progress(fraction: float, message: str) -> None:
            conn.send({"type": "progress", "fraction": fraction, "message": message})

        try:
            if req["op"] == "evaluate":
                result = protocol.evaluate(req, ctx, progress)
            else:
                result = probe.probe(req, ctx.tasks)
        except BaseException:  # noqa: BLE001 - a judge bug: report it, then start afresh
            result = {"internal_error": traceback.format_exc()[-3000:], "poisoned": True}
        conn.send({"type": "result", "result": result})
        if result.get("poisoned"):
            sys.stderr.flush()
            os._exit(0)
