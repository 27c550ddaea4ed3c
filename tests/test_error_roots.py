"""One interpretation of an error: the judge reads the root of a live exception once (ErrorDetail.root_*),
the memory signs failures from those fields alone; details stored before the fields existed still sign
from their excerpt (the legacy path)."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pytest
from triton.compiler.errors import CompilationError, UnsupportedLanguageConstruct
from triton.runtime.errors import InterpreterError

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.judge.classify import (STAGE_RUN, CandidateFile, Root, classify, from_fault_dump, root_cause,
                                           static_error)
from adaexplore_mcp.judge.evaluation import Outcome
from adaexplore_mcp.memory.records import error_core, failure_record
from adaexplore_mcp.models import ErrorDetail, Evaluation, Verdict
from tests.test_judge_cases import GOOD, task

SRC = """import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.float32(offs)
    tl.store(x_ptr + offs, y)
"""
CAND = CandidateFile("/tmp/kernels/cand_abc.py", SRC)
NOT_CALLABLE = "'dtype' object is not callable"
ERRORS = json.loads((Path(__file__).parent / "fixtures" / "errors" / "errors.json").read_text())["errors"]


def _raised(make):
    """The exception `make()` raises, with the __cause__/__context__ Python gives it."""
    try:
        make()
    except BaseException as exc:  # noqa: BLE001
        return exc
    raise AssertionError("nothing raised")


def _node():
    src = SRC[SRC.index("@triton.jit"):]
    call = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.float32")
    return src, call


def _signed(detail: ErrorDetail) -> str:
    rec = failure_record(Evaluation(task_id="t", verdict=Verdict.compile_error, backend="cuda", error=detail),
                         triton_version="x")
    assert rec is not None
    return rec.signature


def _interpreted(inner: BaseException) -> InterpreterError:
    def launch():
        try:
            raise inner
        except Exception as e:
            raise InterpreterError(repr(e)) from e
    return _raised(launch)


def _compiled(inner: BaseException) -> CompilationError:
    src, node = _node()

    def visit():
        try:
            raise inner
        except Exception as e:
            raise CompilationError(src, node, repr(e)) from None  # the code generator's own wording
    return _raised(visit)


def test_the_interpreters_wrapper_and_the_compilers_lead_to_the_same_root_in_kernel_code():
    expected = Root("TypeError", NOT_CALLABLE, in_kernel=True)
    assert root_cause(_interpreted(TypeError(NOT_CALLABLE))) == expected
    assert root_cause(_compiled(TypeError(NOT_CALLABLE))) == expected  # `from None`: found as __context__
    nested = _interpreted(_interpreted(TypeError(NOT_CALLABLE)))  # a @triton.jit helper called by the kernel
    assert root_cause(nested) == expected


def test_a_call_chain_hundreds_of_compilation_errors_deep_still_reaches_its_root():
    src, node = _node()
    exc: BaseException = _compiled(RecursionError("maximum recursion depth exceeded"))
    for _ in range(600):
        outer = CompilationError(src, node, None)
        outer.__cause__ = exc
        exc = outer
    detail = classify(exc, STAGE_RUN, CAND).error
    assert (detail.root_exception, detail.root_message, detail.root_in_kernel) == \
        ("RecursionError", "maximum recursion depth exceeded", True)
    assert _signed(detail) == "CompilationError: maximum recursion depth exceeded"


def test_a_wrapper_with_text_of_its_own_is_the_root_and_a_pickled_one_is_read_from_its_quote():
    src, node = _node()
    own = UnsupportedLanguageConstruct(src, node, "unsupported AST node type: Break")
    assert root_cause(own) == Root("UnsupportedLanguageConstruct", "unsupported AST node type: Break", True)
    assert _signed(classify(own, STAGE_RUN, CAND).error) == "CompilationError: unsupported AST node type: Break"
    shipped = pickle.loads(pickle.dumps(_compiled(ValueError("arange's range must be a power of 2"))))
    assert shipped.__context__ is None
    assert root_cause(shipped) == Root("ValueError", "arange's range must be a power of 2", True)


def test_host_side_errors_are_their_own_root_even_when_they_wrap_a_kernel_error():
    wrapped = _raised(lambda: _raise_from(RuntimeError("autotuner failed"), _compiled(TypeError(NOT_CALLABLE))))
    assert root_cause(wrapped) == Root("RuntimeError", "autotuner failed", in_kernel=False)
    detail = classify(IndexError(f"index 519 is out of bounds ({CAND.path})"), STAGE_RUN, CAND).error
    assert detail.root_message == "index 519 is out of bounds (candidate.py)"  # no private paths kept
    assert _signed(detail) == "IndexError: index <n> is out of bounds (<file>.py)"


def _raise_from(outer: BaseException, cause: BaseException) -> None:
    raise outer from cause


def test_a_class_that_only_borrows_a_wrappers_name_cannot_break_the_classifier():
    class CompilationError(Exception):  # noqa: N818 - named like Triton's on purpose
        def __getattr__(self, name):
            raise RuntimeError("hostile")

    assert root_cause(CompilationError("x")) == Root("CompilationError", "", in_kernel=True)


def test_details_made_without_an_exception_sign_from_their_message_even_when_it_is_reworded():
    static = static_error("line 3: invalid syntax", exception="SyntaxError", lineno=3, source=SRC)
    assert static.root_exception == "SyntaxError" and _signed(static) == "SyntaxError: line <n>: invalid syntax"
    dump = ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n"
            f'  File "{CAND.path}", line 7 in k\nRuntimeError: printed by some thread before the crash\n')
    dead = from_fault_dump(dump, CAND, "the worker process was killed by SIGSEGV", "WorkerCrashed")
    assert _signed(dead).startswith("WorkerCrashed: the worker process was killed by SIGSEGV")
    dead.message = "the runner broke the protocol: bad frame 17"  # as the judge rewords a runner that went away
    assert _signed(dead) == "WorkerCrashed: the runner broke the protocol: bad frame <n>"


def test_an_evaluation_stored_before_the_root_fields_loads_and_signs_from_its_excerpt():
    e = next(x for x in ERRORS if x["rule"] == "zeros-not-pow2" and x["origin"].startswith("compiled"))
    old = json.dumps({"task_id": "t", "verdict": "compile_error", "backend": "cuda",
                      "error": {"exception": e["exception"], "message": e["message"], "excerpt": e["text"]}})
    ev = Evaluation.model_validate_json(old)
    assert ev.error is not None and ev.error.root_exception is None and ev.error.root_in_kernel is False
    core, _ = error_core(ev.error)
    assert core.message == "Shape element 0 must be a power of 2"
    assert _signed(ev.error) == "CompilationError: Shape element <n> must be a power of <n>"


def test_the_referee_keeps_the_root_fields_a_runner_sends_and_drops_malformed_ones():
    sent = classify(_interpreted(TypeError(NOT_CALLABLE)), STAGE_RUN, CAND).error.model_dump()
    kept = ErrorDetail(**Outcome().error({"verdict": "compile_error", "error": sent}).fields["error"])
    assert (kept.root_exception, kept.root_message, kept.root_in_kernel) == ("TypeError", NOT_CALLABLE, True)
    forged = {**sent, "root_exception": 5, "root_message": "m" * 5000, "root_in_kernel": "yes"}
    out = ErrorDetail(**Outcome().error({"verdict": "compile_error", "error": forged}).fields["error"])
    assert out.root_exception is None and len(out.root_message or "") == 1000 and out.root_in_kernel is False


@pytest.fixture(scope="module")
def judge(shared_judge: Judge) -> Judge:
    return shared_judge  # tests/conftest.py: one judge for the modules that only evaluate


def test_a_judged_candidate_carries_its_root_to_the_memory(judge: Judge) -> None:
    bad = GOOD.replace("tl.store(y_ptr + offs, x * 2 + 1, mask=mask)",
                       "tl.store(y_ptr + offs, tl.float32(x) * 2 + 1, mask=mask)")
    ev = judge.evaluate(task(), bad)
    assert ev.verdict == Verdict.compile_error and ev.error is not None
    assert (ev.error.root_exception, ev.error.root_message, ev.error.root_in_kernel) == \
        ("TypeError", NOT_CALLABLE, True)
    reworded = ev.error.model_copy(update={"message": "?", "excerpt": ""})
    assert _signed(ev.error) == _signed(reworded) == f"CompilationError: {NOT_CALLABLE}"
