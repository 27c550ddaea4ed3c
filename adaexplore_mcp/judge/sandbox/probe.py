"""What the sandbox achieves on this host, found by entering it in a throwaway forked child.

The server says it at start, and a test skips what the host cannot do, without either of them
confining itself.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
import warnings

from . import cgroup as sandbox_cgroup
from .core import SandboxPolicy, SandboxReport, enter

_probed: dict[tuple[int, SandboxPolicy], SandboxReport] = {}


def capabilities(policy: SandboxPolicy, timeout_s: float = 10.0) -> SandboxReport:
    """What `enter(policy)` achieves here, found by entering in a throwaway forked child. Cached per
    process and policy; never raises."""
    key = (os.getpid(), policy)
    if key not in _probed:
        try:
            _probed[key] = _probe(policy, timeout_s)
        except Exception as e:  # noqa: BLE001 - a probe must never take the caller down
            _probed[key] = SandboxReport((), (f"probe: {type(e).__name__}: {e}",))
    return _probed[key]


def _probe(policy: SandboxPolicy, timeout_s: float) -> SandboxReport:
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded, fork() may deadlock": bounded below
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            rep = enter(policy)
            os.write(w, json.dumps([rep.mechanisms, rep.missing]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    data, deadline = b"", time.monotonic() + timeout_s
    try:
        while (left := deadline - time.monotonic()) > 0 and select.select([r], [], [], left)[0]:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(r)
        status = os.waitpid(pid, 0)[1]
        sandbox_cgroup.remove(pid)
    if not data:
        return SandboxReport((), (f"probe: no report within {timeout_s:g}s (wait status {status})",))
    mechanisms, missing = json.loads(data)
    return SandboxReport(tuple(mechanisms), tuple(missing))
