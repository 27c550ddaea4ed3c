"""Test-session setup that must happen before any test module imports triton.

Without a GPU every in-process kernel runs under Triton's CPU interpreter, and triton decides at
import/decoration time, so the variable is set here, once, for the whole session (a test module that
imported triton first would otherwise leave later modules with compiled-mode kernels).
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The judge's kernel cache defaults to $XDG_CACHE_HOME/adaexplore-mcp: tests never share it with the user
# (or with an earlier test run, whose files a later run of the same candidate source would get back).
if "ADAEXPLORE_TEST_KEEP_CACHE" not in os.environ:
    import tempfile

    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="adaexplore-test-cache-")


import dataclasses  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def shared_judge():
    """One CPU judge for the modules that only evaluate candidates on it (verdicts, probes, fidelity, error roots,
    shortcut families): starting a judge costs about 10 s on two busy cores, closing it 3 s. Its data and cache
    dirs live under /var/tmp, not pytest's /tmp, which every runner's private /tmp would hide twice anyway."""
    from adaexplore_mcp.judge import Judge
    from tests.test_judge_cases import cpu_settings

    import tempfile

    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    root = Path(tempfile.mkdtemp(prefix="adaexplore-test-judge-", dir=base))
    judge = Judge(dataclasses.replace(cpu_settings(root / "home"), cache_dir=root / "cache"))
    judge.start(wait=True)
    yield judge
    judge.close()
    shutil.rmtree(root, ignore_errors=True)
