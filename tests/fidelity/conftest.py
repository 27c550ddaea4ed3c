"""The judge of this corpus: the CPU interpreter in CI (the session's shared judge, tests/conftest.py, which also
sets TRITON_INTERPRET), one GPU judge per test module when `ADAEXPLORE_TEST_DEVICE=cuda` (how bench/gpu_run.sh
runs this corpus on a GPU host, at the tasks' full sizes)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from adaexplore_mcp.judge import Judge
from tests.test_judge_cases import cpu_settings


@pytest.fixture(scope="module")
def judge(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    if os.environ.get("ADAEXPLORE_TEST_DEVICE") != "cuda":
        yield request.getfixturevalue("shared_judge")
        return
    settings = dataclasses.replace(cpu_settings(tmp_path_factory.mktemp("fidelity-judge")), device="cuda")
    j = Judge(settings)
    yield j
    j.close()
