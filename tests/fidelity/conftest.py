"""One Judge per test module: the CPU interpreter in CI (the parent tests/conftest.py sets TRITON_INTERPRET),
the GPU when `ADAEXPLORE_TEST_DEVICE=cuda` (how bench/gpu_run.sh runs this corpus on a GPU host, at the
tasks' full sizes)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from adaexplore_mcp.judge import Judge
from tests.test_judge_cases import cpu_settings


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory):
    settings = cpu_settings(tmp_path_factory.mktemp("fidelity-judge"))
    if os.environ.get("ADAEXPLORE_TEST_DEVICE") == "cuda":
        settings = dataclasses.replace(settings, device="cuda")
    j = Judge(settings)
    yield j
    j.close()
