"""Shared pieces of the red-team corpus: a judge per test module, the canary, the GAP marker, what runs in CI.

The red team's attacks are what only a human attacker would write (docs/judge.md, "Threat model"): every test
here runs under the `slow` marker, outside the default run (`python -m pytest -q -m slow` runs them). The default
run keeps one attack per shortcut family and one sandbox attack per module whose attacks could harm the judge,
the server or the machine, each followed by the canary: tests/test_shortcut_families.py, on one judge.

Every attack is a candidate (or a task reference) built here from small source fragments. After each
attack the same judge evaluates GOOD, which must pass with no warnings (the canary). A canary failure is
a `CanaryFailed`, not an AssertionError, so an `xfail(raises=AssertionError)` GAP marker can never hide it.

The judge's data dir and cache dir live under /var/tmp, not under pytest's /tmp: every runner has a
private /tmp, which would hide a home under /tmp twice and make "the data dir is hidden" prove nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adaexplore_mcp.config import Settings
from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Evaluation, Verdict
from tests.test_judge_cases import GOOD, cpu_settings, task

JUDGE_BUG = "a bug in the judge"
ERROR_VERDICTS = (Verdict.compile_error, Verdict.runtime_error, Verdict.crashed, Verdict.timeout)

# A no-op kernel, a kernel that copies one tensor into another, and one that sets a flag: the raw
# material of token-kernel attacks.
TOKEN_KERNELS = '''
@triton.jit
def noop_kernel(x_ptr):
    pass


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def flag_kernel(flag_ptr):
    tl.store(flag_ptr, 1)


def token(x):
    noop_kernel[(1,)](x)


def kernel_copy(y):
    out = torch.empty_like(y)
    copy_kernel[(triton.cdiv(y.numel(), 128),)](y, out, y.numel(), BLOCK=128)
    return out


def kernels_are_skipped():
    """True when the judge is running this candidate with its Triton launches skipped."""
    flag = torch.zeros(1, dtype=torch.int32)
    flag_kernel[(1,)](flag)
    return int(flag.item()) == 0
'''


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test of this folder is `slow`: outside the default run, run by `python -m pytest -q -m slow`."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.slow)


class CanaryFailed(Exception):
    """GOOD did not pass cleanly on a judge right after an attack (never an expected failure)."""


def forging(edit: str) -> str:
    """Candidate source: `_forge()` patches the candidate's own `WorkTrace.program` (its process is its own) so
    that every record it hands the replay is the real one, `p`, after `edit` (statements, 8 spaces in)."""
    return f"""

def _forge():
    from adaexplore_mcp.judge.replay import record as work_trace
    if getattr(work_trace, "_forged", False):
        return
    work_trace._forged = True
    original = work_trace.WorkTrace.program

    def program(self):
        p = original(self)
{edit}
        return p
    work_trace.WorkTrace.program = program
"""


def gap(reason: str) -> pytest.MarkDecorator:
    """A known hole in the judge: the test states what should hold, and fails until it does."""
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"GAP: {reason}")


def scratch_root() -> Path:
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="adaexplore-redteam-", dir=base))


def redteam_settings(root: Path, **limits: float) -> Settings:
    """cpu_settings with the data dir and the runners' writable cache dir under `root`."""
    return dataclasses.replace(cpu_settings(root / "home", **limits), cache_dir=root / "cache")


@pytest.fixture(scope="module")
def rt_root() -> Iterator[Path]:
    root = scratch_root()
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def judge(rt_root: Path) -> Iterator[Judge]:
    j = Judge(redteam_settings(rt_root))
    j.start(wait=True)
    yield j
    j.close()


@pytest.fixture
def fresh_judge() -> Iterator[Judge]:
    """A judge of its own, for attacks that may leave the judge they hit damaged."""
    root = scratch_root()
    j = Judge(redteam_settings(root))
    j.start(wait=True)
    yield j
    j.close()
    shutil.rmtree(root, ignore_errors=True)


def canary(judge: Judge) -> Evaluation:
    """GOOD on the same judge: passed, no warnings, no exception."""
    try:
        ev = judge.evaluate(task(), GOOD)
    except Exception as exc:  # noqa: BLE001
        raise CanaryFailed(f"the canary raised {type(exc).__name__}: {str(exc)[:1500]}") from exc
    if ev.verdict != Verdict.passed or ev.warnings:
        raise CanaryFailed(f"the canary did not pass cleanly: {summary(ev)}")
    return ev


def judged(judge: Judge, source: str, **kw: Any) -> Evaluation:
    """`evaluate`, then the canary on the same judge."""
    ev = evaluate(judge, source, **kw)
    canary(judge)
    return ev


def rejected_for_work(ev: Evaluation) -> bool:
    """Rejected because the candidate's own kernels do not do the work."""
    return ev.verdict == Verdict.rejected and ev.rejected is not None and \
        ev.rejected.check == "work_not_in_candidate_kernels"


def evaluate(judge: Judge, source: str, **kw: Any) -> Evaluation:
    """Judge.evaluate, where an exception out of it fails the test (as an AssertionError: a GAP)."""
    try:
        return judge.evaluate(kw.pop("task", None) or task(), source, **kw)
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"Judge.evaluate raised {type(exc).__name__}: {str(exc)[:1500]}") from exc


def as_json(obj: Any) -> str:
    """The JSON the server would store and send; failing to produce it is a failure of the judge."""
    try:
        return obj.model_dump_json()
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"the result cannot be serialized to JSON: {type(exc).__name__}: {exc}") from exc


def summary(ev: Evaluation) -> str:
    d = ev.model_dump(exclude_none=True)
    keep = {k: d[k] for k in ("verdict", "error", "mismatch", "rejected", "warnings", "kernels_launched") if d.get(k)}
    return json.dumps(keep, default=str, ensure_ascii=True)[:2000]


def assert_readable(ev: Evaluation) -> None:
    """A verdict a caller can act on: an error verdict carries a message; the judge never blames itself."""
    text = as_json(ev)
    assert JUDGE_BUG not in text, summary(ev)
    if ev.verdict in ERROR_VERDICTS:
        assert ev.error is not None and ev.error.message.strip(), summary(ev)
    if ev.verdict == Verdict.rejected:
        assert ev.rejected is not None and ev.rejected.message.strip(), summary(ev)


def assert_not_passed(ev: Evaluation) -> None:
    assert ev.verdict != Verdict.passed, f"the attack passed: {summary(ev)}"
    assert_readable(ev)
