"""Red team, round ten: a candidate that takes the host's memory or processes, through the judge.

As root (the GPU hosts' judge), RLIMIT_NPROC binds nothing, and with CUDA no address-space limit can be set:
the runner's control group is what stops both (judge/sandbox/cgroup.py). The limits are lowered here through
the server's settings so that the attacks stay cheap; a host without a writable cgroup file system skips,
naming why the sandbox could not make the group.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.judge.sandbox.core import SandboxPolicy
from adaexplore_mcp.judge.sandbox.probe import capabilities
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import assert_readable, canary, evaluate, redteam_settings, scratch_root, summary
from tests.test_judge_cases import candidate

pytestmark = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")

MEMORY_MB, PROCESSES = 1024, 128


@pytest.fixture(scope="module")
def judge() -> Iterator[Judge]:
    """A judge whose runners may use MEMORY_MB of host memory and PROCESSES tasks; the settings stay in the
    environment for the module, since a worker replaced after a crash reads them again."""
    report = capabilities(SandboxPolicy(max_processes=PROCESSES, max_memory_bytes=MEMORY_MB << 20))
    lacking = [m for m in ("cgroup-pids", "cgroup-memory") if m not in report.mechanisms]
    if lacking:
        pytest.skip(f"no control group for a runner here: {'; '.join(report.missing) or lacking}")
    root = scratch_root()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ADAEXPLORE_RUNNER_MEMORY_MB", str(MEMORY_MB))
        env.setenv("ADAEXPLORE_RUNNER_PROCESSES", str(PROCESSES))
        j = Judge(redteam_settings(root))
        j.start(wait=True)
        yield j
        j.close()
    shutil.rmtree(root, ignore_errors=True)


def test_touching_more_host_memory_than_the_limit_is_a_crash_that_says_why(judge: Judge) -> None:
    """3 GB touched, three times the limit and far below the CPU runners' address-space limit (16 GiB): only the
    group stops it, as it does a CUDA runner, which has no address-space limit at all."""
    body = ("        hog = bytearray(3 << 30)\n"
            "        for i in range(0, len(hog), 4096):\n            hog[i] = 1\n        return affine(x)")
    ev = evaluate(judge, candidate(body), timeout_s=120)
    canary(judge)
    assert_readable(ev)
    assert ev.verdict == Verdict.crashed, summary(ev)
    assert "limit on host memory" in ev.error.message, summary(ev)


def test_a_fork_bomb_is_refused_by_the_group_even_as_root(judge: Judge) -> None:
    """Each child sleeps: without the group's pids.max, root's forks would go on until the host had no pid left
    (and every other evaluation's fork failed)."""
    body = ("        import os, time\n        started = 0\n"
            "        while started < 5000:\n"
            "            try:\n                pid = os.fork()\n"
            "            except OSError as exc:\n"
            "                raise RuntimeError(f'fork refused after {started} children: {exc.strerror}')\n"
            "            if pid == 0:\n                time.sleep(120)\n                os._exit(0)\n"
            "            started += 1\n"
            "        return affine(x)")
    before = _process_count()
    ev = evaluate(judge, candidate(body), timeout_s=120)
    canary(judge)
    assert_readable(ev)
    assert ev.verdict == Verdict.runtime_error, summary(ev)
    refused_after = int(ev.error.message.split("fork refused after ")[1].split()[0])
    assert refused_after < PROCESSES, summary(ev)
    assert _process_count() < before + 20, "the candidate's children outlived it"


def _process_count() -> int:
    return sum(name.isdigit() for name in os.listdir("/proc"))
