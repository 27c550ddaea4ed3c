"""The compiler front-end check (judge/frontend/check.py): what the CPU interpreter accepts but a GPU compile rejects.

Candidates run under Triton's interpreter (TRITON_INTERPRET=1, set by tests/conftest.py before triton is
imported when there is no GPU); their launches are recorded and replayed through Triton's real front end
(AST -> TTIR) for a fake sm_90 target. On a machine whose triton was imported in compiled mode (the GPU
host) the whole file re-runs itself in a subprocess with TRITON_INTERPRET=1.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import signal
import subprocess
import sys
import traceback
from importlib.metadata import version
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

from adaexplore_mcp.judge.frontend import check as frontend
from adaexplore_mcp.judge.classify import STAGE_RUN, CandidateFile, classify, describe
from adaexplore_mcp.memory.seed import read_seed_rules
from adaexplore_mcp.memory.signature import signature
from devtools.triggers import clip_traceback

TRITON = ".".join(version("triton").split(".")[:2])
# triton.language itself was imported under the interpreter (its own @jit functions are interpreted).
INTERPRETED = isinstance(tl.zeros, InterpretedFunction)
needs_interpreter = pytest.mark.skipif(
    not INTERPRETED, reason="triton was imported in compiled mode: test_the_file_under_the_interpreter runs it")
_names = itertools.count()


@pytest.fixture(scope="module", autouse=True)
def _hooks():
    if INTERPRETED:
        frontend.install()
    yield


def _load(tmp_path: Path, source: str) -> tuple[object, CandidateFile]:
    name = f"_frontend_cand_{next(_names)}"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, CandidateFile(str(path), source)


def _record(module: object, entry: str, *args: object) -> tuple[list[frontend.Launch], BaseException | None, object]:
    """Run `module.entry(*args)` under the interpreter, recording launches (as the judge's forward call)."""
    frontend.begin(module.__name__)
    raised, result = None, None
    try:
        result = getattr(module, entry)(*args)
    except Exception as exc:  # noqa: BLE001
        raised = exc
    finally:
        launches = frontend.end()
    return launches, raised, result


HEADER = """import torch
import triton
import triton.language as tl
"""

VALID = HEADER + '''
LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def _scale(x, s):
    return x * s


@triton.jit
def softmax_kernel(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr, CHUNKS: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=m, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for c in tl.static_range(CHUNKS):
        acc += tl.exp2(x * LOG2E) / CHUNKS
    tl.store(y_ptr + row * stride + cols, _scale(acc, 1.0 / acc.sum(axis=0)), mask=m)


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, K_TILES: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K_TILES):
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b)
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16), mask=c_mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=4)], key=["n"])
@triton.jit
def tuned_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
@triton.jit
def heur_kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        v = tl.load(x_ptr + offs)
    else:
        v = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, v + 1, mask=offs < n)


@triton.jit
def misc_kernel(x_ptr, flag, scale, maybe_none, pair, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    v = tl.load(x_ptr + offs)
    if flag:
        v = v * scale
    if maybe_none is not None:
        v = v + 1
    v = v + pair[0] + pair[1]
    tl.store(y_ptr + offs, tl.cumsum(v, axis=0) + tl.argmax(v, axis=0).to(tl.float32) * 0)


def vector_add():
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(1000, 128),)](x, y, out, 1000, BLOCK=128)
    return out, x + y


def softmax():
    x = torch.randn(4, 100)
    y = torch.empty_like(x)
    softmax_kernel[(4,)](x, y, x.stride(0), 100, BLOCK=128, CHUNKS=2, num_warps=4)
    return y, torch.softmax(x, dim=1)


def everything_else():
    a, b = torch.randn(32, 48, dtype=torch.float16), torch.randn(48, 16, dtype=torch.float16)
    c = torch.empty(32, 16, dtype=torch.float16)
    mm_kernel[(2, 1)](a, b, c, 32, 16, 48, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                      c.stride(1), BM=16, BN=16, BK=16, K_TILES=3)
    t = torch.randn(100)
    tuned_kernel[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](t, 100)
    heur_kernel[(4,)](t, 100, BLOCK=32)
    xs, ys = torch.randn(17), torch.empty(16)
    misc_kernel[(1,)](xs, 1, 0.5, None, (1, 2.0), ys, N=16)
    misc_kernel[(1,)](xs[1:], 0, 2, 3, (1, 2.0), ys, N=8)  # an unaligned pointer, other specializations
'''


@needs_interpreter
def test_valid_kernels_pass_the_check_fast(tmp_path):
    module, _ = _load(tmp_path, VALID)
    for entry in ("vector_add", "softmax", "everything_else"):
        launches, raised, result = _record(module, entry)
        assert raised is None, raised
        assert launches
        report = frontend.check_launches(launches)
        assert report.result is None, report.result
        assert all(seconds < 0.5 for _, seconds in report.checked), report.checked
        if result is not None:
            got, want = result
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)  # the interpreter ran them as usual


@needs_interpreter
def test_a_launch_is_recorded_with_what_specialization_needs_and_no_tensor(tmp_path):
    module, _ = _load(tmp_path, VALID)
    launches, _, _ = _record(module, "softmax")
    (launch,) = launches
    assert launch.name == "softmax_kernel" and isinstance(launch.kernel, InterpretedFunction)
    assert launch.bound == {"x_ptr": frontend.TensorArg(torch.float32), "y_ptr": frontend.TensorArg(torch.float32),
                            "stride": 100, "n_cols": 100, "BLOCK": 128, "CHUNKS": 2}
    assert launch.meta == {"num_warps": 4}
    assert not any(isinstance(v, torch.Tensor) for v in (*launch.args, *launch.kwargs.values()))
    launches, _, _ = _record(module, "everything_else")
    misc = [la for la in launches if la.name == "misc_kernel"]
    assert [la.args[0].aligned for la in misc] == [True, False]  # xs[1:] is 4 bytes past a 16-byte boundary
    assert {la.name for la in launches} == {"mm_kernel", "tuned_kernel", "heur_kernel", "misc_kernel"}
    assert next(la for la in launches if la.name == "heur_kernel").kwargs["EVEN"] is False  # what heuristics added
    # the same launch twice is kept once; kernels of another module are not recorded
    frontend.begin(module.__name__)
    module.vector_add()
    module.vector_add()
    assert len(frontend.end()) == 1
    frontend.begin("some.other.module")
    module.vector_add()
    assert frontend.end() == []


GLOBAL_FLOAT = HEADER + """
SCALE = 2.5


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * SCALE, mask=m)


def run():
    x = torch.randn(100)
    scale_kernel[(1,)](x, 100, BLOCK=128)
    return x
"""


@needs_interpreter
def test_a_module_level_float_read_in_a_kernel_is_a_compile_error_at_its_line(tmp_path):
    module, cand = _load(tmp_path, GLOBAL_FLOAT)
    launches, raised, _ = _record(module, "run")
    assert raised is None  # the interpreter accepts it
    err = frontend.frontend_check(launches)
    assert isinstance(err, triton.compiler.errors.CompilationError), err
    c = classify(err, STAGE_RUN, cand)
    assert c.verdict.value == "compile_error"
    assert c.error.source_line == "tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * SCALE, mask=m)"
    assert c.error.source_lineno == 1 + next(i for i, line in enumerate(GLOBAL_FLOAT.splitlines()) if "* SCALE" in line)
    assert "Cannot access global variable SCALE" in c.error.message


STATIC_RANGE = HEADER + """

@triton.jit
def loop_kernel(x_ptr, n_iters, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in tl.static_range(n_iters):
        acc += tl.load(x_ptr + i * BLOCK + offs)
    tl.store(x_ptr + offs, acc)


def run():
    x = torch.randn(4 * 32)
    loop_kernel[(1,)](x, 4, BLOCK=32)
"""


@needs_interpreter
def test_static_range_over_a_runtime_bound_is_a_compile_error_at_the_loop(tmp_path):
    module, cand = _load(tmp_path, STATIC_RANGE)
    launches, _, _ = _record(module, "run")  # (some Triton/numpy interpreters fail here on their own)
    err = frontend.frontend_check(launches)
    assert isinstance(err, triton.compiler.errors.CompilationError), err
    c = classify(err, STAGE_RUN, cand)
    assert c.verdict.value == "compile_error"
    assert c.error.source_line == "for i in tl.static_range(n_iters):"
    assert "tl.static_range" in c.error.message and "not a constexpr" in c.error.message


HOST_ERRORS = HEADER + """

@triton.jit
def add_kernel(x_ptr, BLOCK: tl.constexpr = 64):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)


def unknown_keyword():
    x = torch.randn(64)
    add_kernel[(1,)](x, BLOCK=64, num_warp=4)


def direct_call():
    x = torch.randn(64)
    add_kernel(x, BLOCK=64)
"""


@needs_interpreter
def test_an_unknown_launch_keyword_the_interpreter_ignores_is_the_gpu_launch_error_at_the_launch(tmp_path):
    module, cand = _load(tmp_path, HOST_ERRORS)
    launches, raised, _ = _record(module, "unknown_keyword")
    assert raised is None
    err = frontend.frontend_check(launches)
    assert isinstance(err, KeyError) and "num_warp" in str(err)
    assert describe(err, cand).source_line == "add_kernel[(1,)](x, BLOCK=64, num_warp=4)"


@needs_interpreter
def test_a_jit_function_called_from_host_code_is_the_gpu_runtime_error_at_the_call(tmp_path):
    module, cand = _load(tmp_path, HOST_ERRORS)
    launches, _, _ = _record(module, "direct_call")
    err = frontend.frontend_check(launches)
    assert isinstance(err, RuntimeError) and "outside of the scope of a kernel" in str(err)
    assert describe(err, cand).source_line == "add_kernel(x, BLOCK=64)"


TUNED = HEADER + """

@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 64)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))
"""


@needs_interpreter
def test_a_config_the_autotuner_would_skip_is_an_error_only_when_no_config_compiles(tmp_path):
    module, _ = _load(tmp_path, TUNED)
    ptr = (frontend.TensorArg(torch.float32),)
    small = frontend.record_launch_args(module.k, ptr, {"BLOCK": 32}, via_autotuner=True)
    big = frontend.record_launch_args(module.k, ptr, {"BLOCK": 128}, via_autotuner=True)
    assert frontend.frontend_check([big, small]) is None
    err = frontend.frontend_check([big])
    assert "CompileTimeAssertionFailure" in {t.__name__ for t in type(err).__mro__}
    plain = frontend.record_launch_args(module.k, ptr, {"BLOCK": 128})
    assert frontend.frontend_check([plain, small]) is not None  # outside the autotuner nothing is skipped


@needs_interpreter
def test_the_runner_adapter_records_through_the_launch_hook_and_compiles_a_passed_launch_once(tmp_path):
    from adaexplore_mcp.judge import launches

    launches.install()
    fe = frontend.Frontend()
    valid, _ = _load(tmp_path, VALID)
    bad, cand = _load(tmp_path, GLOBAL_FLOAT)
    # (the second call of a launch that passed compiles nothing; one that failed is compiled again)
    for module, entry, compiled in ((valid, "softmax", 1), (valid, "softmax", 0), (bad, "run", 1), (bad, "run", 1)):
        recorder = fe.recorder()
        launches.begin(module.__name__, recorder=recorder)
        getattr(module, entry)()
        assert launches.end()
        problem = fe.check(recorder)
        assert len(fe.last.checked) == compiled
        if module is valid:
            assert problem is None and fe.unavailable is None
        else:
            assert classify(problem, STAGE_RUN, cand).error.source_line.endswith("* SCALE, mask=m)")
    # a jit function called from host code reaches the adapter too (launches.py sees launches only)
    host, cand = _load(tmp_path, HOST_ERRORS)
    recorder = fe.recorder()
    launches.begin(host.__name__, recorder=recorder)
    try:
        host.direct_call()
    except Exception:  # noqa: BLE001 - what the interpreter makes of it
        pass
    launches.end()
    problem = fe.check(recorder)
    assert isinstance(problem, RuntimeError) and describe(problem, cand).source_line == "add_kernel(x, BLOCK=64)"


# ------------------------------------------------------------------- seed rules only a GPU compile reports

SEEDS = read_seed_rules()
# GPU-only errors no front-end compile can report.
NOT_FRONT_END = {
    "unmasked-out-of-bounds": "an illegal memory access is a run-time fault only the GPU driver reports "
                              "(and on the CPU the trigger launches nothing)",
    "dot-small-k": "tl.dot's K >= 16 is asserted where the NVIDIA backend lowers the dot, not by the front end "
                   "(triton 3.9's front end and interpreter accept K = 8)",
}

# What a GPU compile raises where the rule file's SIGNATURES (recorded by devtools/triggers.py's "frontend" mode,
# which skips the cache key) do not have it yet. Seen natively on an H200, triton 3.6.0, 2026-12-02: the
# cache key's DependenciesFinder rejects a plain Python function called in a kernel before code generation.
GPU_TEXTS = {
    ("global-access", "trigger_helper"): "RuntimeError: Unsupported function referenced: <function gelu at <addr>>",
}


def _alarm(signum, frame):
    raise TimeoutError("trigger ran past its time limit")


def _run_trigger(module: object, entry: str) -> tuple[list[frontend.Launch], BaseException | None]:
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)
    try:
        launches, raised, _ = _record(module, entry, "cpu")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return launches, raised


def _root(exc: BaseException) -> BaseException:
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen[-1]


@needs_interpreter
@pytest.mark.parametrize("rule", SEEDS, ids=[s.key for s in SEEDS])
def test_every_gpu_only_seed_error_is_caught_by_the_front_end_check(rule):
    if rule.key in NOT_FRONT_END:
        pytest.xfail(NOT_FRONT_END[rule.key])
    spec = importlib.util.spec_from_file_location(f"_frontend_seed_{next(_names)}", rule.path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cand = CandidateFile(str(rule.path), rule.path.read_text())
    gpu_only = []
    for entry in rule.triggers:
        launches, raised = _run_trigger(module, entry)
        if raised is None:  # the interpreter accepts it: only a GPU compile would report it
            gpu_only.append((entry, launches))
    if not gpu_only:
        pytest.skip(f"the interpreter of triton {triton.__version__} raises it: not GPU-only")
    # the text is known for this Triton: it must be the rule's
    known = {f"triton-{TRITON}-frontend", f"triton-{TRITON}-cuda"} & set(rule.seen)
    for entry, launches in gpu_only:
        err = frontend.frontend_check(launches)
        assert isinstance(err, BaseException), (entry, err)
        if not known:
            continue
        if rule.key == "recursion":  # a chain of CompilationErrors hundreds deep: its root names the mistake
            assert isinstance(_root(err), RecursionError), (entry, _root(err))
            continue
        text = clip_traceback("".join(traceback.format_exception(err)))
        lines = str(err).strip().splitlines()
        raw = signature(type(err).__name__, lines[-1].strip() if lines else "", text)
        d = describe(err, cand)
        judged = signature(d.exception, d.message, d.excerpt)
        assert raw in rule.signatures or judged in rule.signatures or raw == GPU_TEXTS.get((rule.key, entry)), \
            (entry, raw, judged)


# ------------------------------------------------------------------- nothing left changed

def _state() -> dict:
    from triton.runtime.driver import driver
    import triton.runtime.jit as jit_mod

    owners = [tl, tl.core, tl.standard, tl.math, tl.core.tensor]
    return {
        "active driver": driver.__dict__.get("_active"),
        "compile": (triton.compiler.compile, triton.compiler.compiler.compile),
        "hooks": (InterpretedFunction.run, InterpretedFunction.__call__, triton.runtime.jit.JITFunction.run),
        "registry": dict(getattr(jit_mod, "_triton_jit_function_registry", {})),
        **{f"{getattr(o, '__name__', o)} {k}": v for o in owners for k, v in vars(o).items()},
    }


def _changed(before: dict, after: dict) -> list[str]:
    diff = [k for k in before.keys() | after.keys() if k not in before or k not in after]
    for k in before.keys() & after.keys():
        b, a = before[k], after[k]
        same = (b.keys() == a.keys() and all(a[n] is v for n, v in b.items())) if isinstance(b, dict) else (
            all(x is y for x, y in zip(b, a)) if isinstance(b, tuple) else a is b)
        if not same:
            diff.append(k)
    return diff


@needs_interpreter
def test_a_failing_or_unavailable_check_leaves_the_interpreter_and_triton_as_they_were(tmp_path, monkeypatch):
    valid, _ = _load(tmp_path, VALID)
    bad, _ = _load(tmp_path, GLOBAL_FLOAT)
    good_launches, _, _ = _record(valid, "softmax")
    bad_launches, _, _ = _record(bad, "run")
    before = _state()
    assert isinstance(frontend.frontend_check(bad_launches), Exception)
    assert _changed(before, _state()) == []
    # the machinery failing (a Triton API that moved) is a reason, not the candidate's error
    monkeypatch.setattr(frontend, "TARGET", ("no-such-backend", 0, 0))
    monkeypatch.setattr(frontend, "_SELFTEST", {})
    out = frontend.frontend_check(good_launches)
    assert isinstance(out, frontend.FrontendUnavailable) and "unavailable" in out.reason
    assert _changed(before, _state()) == []
    monkeypatch.undo()
    # the interpreter still runs kernels (the interpreted tl.zeros and tl.max included), and the check still works
    for entry in ("softmax", "vector_add"):
        launches, raised, (got, want) = _record(valid, entry)
        assert raised is None
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        assert frontend.frontend_check(launches) is None
    assert isinstance(tl.zeros, InterpretedFunction)


# ------------------------------------------------------------------- the GPU host

@pytest.mark.skipif(INTERPRETED, reason="runs the file in-process")
def test_the_file_under_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
                          cwd=str(Path(__file__).resolve().parents[1]), env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
