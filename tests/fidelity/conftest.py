"""One CPU-interpreter Judge per test module (the parent tests/conftest.py sets TRITON_INTERPRET)."""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from tests.test_judge_cases import cpu_settings


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory):
    j = Judge(cpu_settings(tmp_path_factory.mktemp("fidelity-judge")))
    yield j
    j.close()
