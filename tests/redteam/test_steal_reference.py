"""Stealing the reference's answer instead of computing it.

The reference runs in another sandboxed process, the data dir is an empty tmpfs in the candidate's
sandbox and the candidate has a private /tmp: there is nothing to copy. Each attacker below makes a
token Triton launch and returns what it stole. A theft that worked would still be stopped by the replay
(its kernels do not compute the result: the positive control shows exactly that), so these tests are
about the first layer: the theft itself fails. Expected: never passed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import (
    TOKEN_KERNELS, assert_not_passed, canary, evaluate, redteam_settings, scratch_root, summary,
)
from tests.test_judge_cases import candidate

STEAL = TOKEN_KERNELS + '''
import gc
import glob
import inspect
import os
import sqlite3
import sys


def _same_shape(t, x):
    return isinstance(t, torch.Tensor) and t.shape == x.shape and t.dtype == x.dtype and t.data_ptr() != x.data_ptr()


def steal_from_frames(x):
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if _same_shape(value, x):
                return value
            if isinstance(value, (list, tuple)):
                for v in value:
                    if _same_shape(v, x):
                        return v
        frame = frame.f_back
    return None


def steal_from_inspect(x):
    for info in inspect.stack():
        for value in info.frame.f_locals.values():
            if _same_shape(value, x):
                return value
    return None


def steal_from_gc(x):
    for obj in gc.get_objects():
        if _same_shape(obj, x):
            return obj
    return None


def _run_reference(module, x):
    return module.Model(*module.get_init_inputs())(x)


def steal_from_sys_modules(x):
    for module in list(sys.modules.values()):
        if isinstance(getattr(module, "Model", None), type) and callable(getattr(module, "get_inputs", None)) \
                and module is not sys.modules[__name__]:
            return _run_reference(module, x)
    return None


def steal_from_disk(x, roots):
    import importlib.util
    for root in roots:
        for path in glob.glob(os.path.join(os.path.expandvars(root), "**", "ref_*.py"), recursive=True)[:20]:
            spec = importlib.util.spec_from_file_location("stolen_ref", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return _run_reference(module, x)
    return None


def steal_from_data_dir(x, home):
    """The task sources live in the store under the data dir: read them back and run the reference."""
    import types
    for path in glob.glob(os.path.join(home, "**", "*"), recursive=True):
        try:
            if path.endswith((".sqlite3", ".db")):
                con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
                rows = con.execute("SELECT source FROM tasks").fetchall()
                texts = [r[0] for r in rows]
            else:
                texts = [open(path).read()]
        except Exception:
            continue
        for text in texts:
            if "class Model" in text:
                module = types.ModuleType("stolen_ref")
                exec(text, module.__dict__)
                return _run_reference(module, x)
    return None


def best_effort(stolen, x):
    if kernels_are_skipped():
        return torch.full_like(x, float("nan"))
    if stolen is None:
        return torch.zeros_like(x)
    return stolen.detach().clone()
'''


def thief(steal_call: str) -> str:
    return candidate(f"        stolen = {steal_call}\n        return best_effort(stolen, x)", extra=STEAL)


@pytest.mark.parametrize("steal_call", [
    "steal_from_frames(x)",
    "steal_from_inspect(x)",
    "steal_from_gc(x)",
    "steal_from_sys_modules(x)",
], ids=["stack_frames", "inspect_stack", "gc_objects", "sys_modules"])
def test_the_reference_output_is_not_in_the_candidates_process(judge: Judge, steal_call: str) -> None:
    ev = evaluate(judge, thief(steal_call))
    canary(judge)
    assert_not_passed(ev)


def test_the_reference_module_cannot_be_reimported_from_where_the_judge_keeps_it(judge: Judge) -> None:
    """The reference's module file lives in its runner's private scratch tmpfs; the data dir is hidden."""
    roots = ["$TMPDIR", "/tmp/adaexplore-runner-*", "/dev/shm", str(judge.settings.home), str(judge.settings.cache_dir)]
    ev = evaluate(judge, thief(f"steal_from_disk(x, {roots!r})"))
    canary(judge)
    assert_not_passed(ev)


def test_a_reference_file_elsewhere_under_tmp_cannot_be_imported(judge: Judge) -> None:
    """Found by this corpus after d02e790 (fixed in 4fc3368): with the host's /tmp readable in the runner, a
    thief found another judge's ref_*.py under /tmp, imported it, and passed."""
    import shutil
    import tempfile

    from tests.test_judge_cases import AFFINE_TASK

    other_home = Path(tempfile.mkdtemp(prefix="another-judge-home-", dir="/tmp"))
    try:
        (other_home / "kernels").mkdir()
        (other_home / "kernels" / "ref_0123456789abcdef.py").write_text(AFFINE_TASK)
        ev = evaluate(judge, thief(f"steal_from_disk(x, {[str(other_home)]!r})"))
        canary(judge)
        assert_not_passed(ev)
    finally:
        shutil.rmtree(other_home, ignore_errors=True)


def _store_with_the_task(home: Path) -> None:
    import sqlite3

    from tests.test_judge_cases import AFFINE_TASK

    home.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(home / "adaexplore.sqlite3")  # a store holding the task's source, as the server's does
    con.execute("CREATE TABLE IF NOT EXISTS tasks (source TEXT)")
    con.execute("INSERT INTO tasks VALUES (?)", (AFFINE_TASK,))
    con.commit()
    con.close()
    (home / "kernels").mkdir(exist_ok=True)
    (home / "kernels" / "ref_copy.py").write_text(AFFINE_TASK)


def test_the_reference_source_cannot_be_read_from_the_data_dir(judge: Judge) -> None:
    home = judge.settings.home
    _store_with_the_task(home)
    ev = evaluate(judge, thief(f"steal_from_data_dir(x, {str(home)!r})"))
    canary(judge)
    assert_not_passed(ev)


def test_control_without_the_sandbox_the_data_dir_theft_works() -> None:
    """Positive control: the thief above is a working attack without the sandbox: its stolen outputs match the
    reference in every trial, and only the replay (the work is not its kernels') stops it then."""
    import dataclasses
    import shutil

    root = scratch_root()
    try:
        settings = dataclasses.replace(redteam_settings(root), sandbox="off")
        _store_with_the_task(settings.home)
        with Judge(settings) as unsandboxed:
            ev = evaluate(unsandboxed, thief(f"steal_from_data_dir(x, {str(settings.home)!r})"))
        assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_in_candidate_kernels", summary(ev)
    finally:
        shutil.rmtree(root, ignore_errors=True)
