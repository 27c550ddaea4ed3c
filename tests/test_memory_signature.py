"""Signatures on real error texts: one per mistake, different mistakes apart, no over-specific artifacts."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from adaexplore_mcp.memory.signature import (core_from_root, core_from_text, error_line, error_line_of,
                                              normalize_message, offending_line, signature, signature_of)

FIXTURE = Path(__file__).parent / "fixtures" / "errors" / "errors.json"
ERRORS = json.loads(FIXTURE.read_text())["errors"]


def _sig(e: dict) -> str:
    return signature(e["exception"], e["message"], e["text"])


def test_the_fixture_holds_at_least_thirty_distinct_real_errors_from_interpreter_and_compiler():
    assert len({(e["exception"], e["message"]) for e in ERRORS}) >= 30
    origins = {e["origin"].split("-")[0] for e in ERRORS}
    assert {"interpreter", "compiled", "gpu"} <= origins
    assert len({e["group"] for e in ERRORS}) >= 30


def test_every_pair_in_the_same_mistake_group_shares_a_signature():
    by_group: dict[str, set[str]] = {}
    for e in ERRORS:
        by_group.setdefault(e["group"], set()).add(_sig(e))
    split = {g: s for g, s in by_group.items() if len(s) > 1}
    assert not split, split


def test_different_mistake_groups_get_different_signatures():
    by_sig: dict[str, set[str]] = {}
    for e in ERRORS:
        by_sig.setdefault(_sig(e), set()).add(e["group"])
    merged = {s: g for s, g in by_sig.items() if len(g) > 1}
    assert not merged, merged


@pytest.mark.parametrize("a,b", [
    ("invalid syntax at line 223", "invalid syntax at line 17"),
    ("Cannot make_shape_compatible: incompatible dimensions at index 0: 64 and 32",
     "Cannot make_shape_compatible: incompatible dimensions at index 1: 128 and 256"),
    ("No such file or directory: '/tmp/a/k_1.py'", "No such file or directory: '/home/u/.cache/k_99.py'"),
    ("illegal memory access at 0x7f3a2b001000", "illegal memory access at 0x55aa"),
    ("Both operands must be same dtype. Got fp32 and fp16", "Both operands must be same dtype. Got bf16 and fp32"),
    ("name 'scale' is not defined", "name 'BLOCK_N' is not defined"),
    ("Unsupported ptr type <['64'], int32> in `tl.load`", "Unsupported ptr type <['16', '32'], fp32> in `tl.load`"),
])
def test_line_numbers_paths_addresses_shapes_dtypes_and_identifiers_do_not_split_a_signature(a, b):
    assert normalize_message(a) == normalize_message(b)


def test_the_triton_api_named_and_the_fixed_words_are_kept():
    load = normalize_message("Unsupported ptr type <['64'], int32> in `tl.load`")
    store = normalize_message("Unsupported ptr type <['64'], int32> in `tl.store`")
    assert "`tl.load`" in load and load != store
    assert normalize_message("unsupported AST node type: Break") != normalize_message("unsupported AST node type: Try")


def test_a_compilation_error_and_the_interpreter_agree_on_a_wrapped_error():
    compiled = ("triton.compiler.errors.CompilationError: at 4:8:\ndef k(x_ptr):\n    y = tl.float32(x)\n"
                "        ^\nTypeError(\"'dtype' object is not callable\")")
    interp = "triton.runtime.errors.InterpreterError: TypeError(\"'dtype' object is not callable\")"
    assert signature("CompilationError", "", compiled) == signature("InterpreterError", "", interp) \
        == "CompilationError: 'dtype' object is not callable"
    assert error_line("CompilationError", "", compiled) == "TypeError: 'dtype' object is not callable"
    assert offending_line(compiled) == "y = tl.float32(x)"


def test_a_compilation_error_whose_reason_is_its_cause_is_unwrapped_through_the_chain():
    e = next(x for x in ERRORS if x["rule"] == "zeros-not-pow2" and x["origin"].startswith("compiled"))
    assert e["text"].rstrip().endswith("^")  # the final exception only shows the source excerpt
    assert core_from_text(e["exception"], e["message"], e["text"]).message == "Shape element 0 must be a power of 2"


def test_a_tail_only_excerpt_falls_back_to_the_given_message():
    tail = "triton.compiler.errors.CompilationError: at 2:10:\ndef k(x, B):\n    a = tl.zeros((B,), tl.float32)\n          ^\n"
    assert signature("CompilationError", "ValueError('Shape element 0 must be a power of 2')", tail) \
        == "CompilationError: Shape element <n> must be a power of <n>"


def test_signatures_are_short_and_deterministic():
    sigs = [_sig(e) for e in ERRORS]
    assert sigs == [_sig(e) for e in ERRORS]
    assert max(len(s) for s in sigs) <= 200
    assert all("\n" not in s and "/" not in s.split(":", 1)[1].replace("</", "") for s in sigs)


def test_host_side_errors_keep_their_own_type():
    a = signature("TypeError", "add_kernel() missing 1 required positional argument: 'n'")
    b = signature("TypeError", "dynamic_func() missing 1 required positional argument: 'BLOCK'")
    assert a == b == "TypeError: <fn>() missing <n> required positional argument: <name>"
    assert list(itertools.islice((e for e in ERRORS if e["rule"] == "launch-args-mismatch"), 1))


def test_the_missing_argument_name_and_the_static_range_bound_are_folded():
    kernel = {signature("CompilationError", f"TypeError(\"{m}\")") for m in (
        "zeros() missing 1 required positional argument: 'dtype'",
        "where() missing 1 required positional argument: 'y'")}
    assert kernel == {"CompilationError: <fn>() missing <n> required positional argument: <name>"}
    host = signature("TypeError", "add_kernel() missing 1 required positional argument: 'dtype'")
    assert host == "TypeError: <fn>() missing <n> required positional argument: <name>" and host not in kernel
    assert signature("TypeError", "f() missing 2 required keyword-only arguments: 'a' and 'b'") \
        == "TypeError: <fn>() missing <n> required keyword-only arguments: <name>"
    bounds = {signature("CompilationError", f"AssertionError('int32[] used as tl.static_range {b} value is not a constexpr')")
              for b in ("start", "end", "step")}
    assert bounds == {"CompilationError: <dtype>[] used as tl.static_range <bound> value is not a constexpr"}


def test_a_compact_judge_excerpt_reads_like_a_traceback():
    excerpt = ('  File "candidate.py", line 40, in forward\n    mm_kernel[grid](a, b, c)\n'
               "OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448. "
               "Reducing block sizes or `num_stages` may help.")
    assert signature("OutOfResources", "out of resource: ...", excerpt) \
        == "OutOfResources: out of resource: shared memory, Required: <n>, Hardware limit: <n>"
    interp = ('  File "candidate.py", line 12, in k\n    y = tl.float16(acc)\n'
              "TypeError: 'dtype' object is not callable\nInterpreterError: TypeError(\"'dtype' object is not callable\")")
    assert signature("TypeError", "'dtype' object is not callable", interp) == "CompilationError: 'dtype' object is not callable"


def test_gpu_texts_sign_as_the_gpu_host_did_and_join_their_cpu_siblings():
    gpu = [e for e in ERRORS if e["origin"].startswith("gpu-")]
    assert len(gpu) >= 15
    # The adapt loop's compact judge lines: signed here as the GPU host signed the full ErrorDetail, except
    # where the line lost the root cause (it only quotes the source line): that one is a group of its own.
    # `signature`, where present: what the current normalizer gives, after it learned to fold a word the
    # GPU host's signature still kept (a missing argument's name, which tl.static_range bound).
    for e in gpu:
        if e.get("gpu_signature"):
            expected = e.get("signature", e["gpu_signature"])
            assert (_sig(e) == expected) == (not e["group"].endswith("@judge-line")), e["id"]
            assert ("signature" in e) == (e["gpu_signature"] != expected), e["id"]
    cpu_groups = {e["group"] for e in ERRORS if not e["origin"].startswith("gpu-")}
    joined = {e["group"] for e in gpu if e["group"] in cpu_groups}
    assert {"dtype-call", "arange-not-pow2", "unknown-tl-api", "arange-runtime-bound", "global-access",
            "tensor-method-missing", "tl-call-missing-arg", "static-range-runtime"} <= joined


def test_an_illegal_address_and_the_next_call_in_the_poisoned_context_share_one_signature():
    texts = [e for e in ERRORS if e["group"] == "unmasked-out-of-bounds"]
    assert len(texts) == 2 and {_sig(e) for e in texts} == {
        "AcceleratorError: CUDA error: an illegal memory access was encountered"}


def test_the_judges_root_fields_sign_like_the_text_they_came_from_without_parsing_anything():
    compiled = ("triton.compiler.errors.CompilationError: at 4:8:\ndef k(x_ptr):\n    y = tl.float32(x)\n"
                "        ^\nTypeError(\"'dtype' object is not callable\")")
    root = core_from_root("TypeError", "'dtype' object is not callable\n(a second line)", in_kernel=True)
    assert signature_of(root) == signature("CompilationError", "", compiled)
    assert error_line_of(root) == error_line("CompilationError", "", compiled) == "TypeError: 'dtype' object is not callable"
    # a message shaped like a traceback is still just a message: no chain is read out of it
    assert signature_of(core_from_root("ValueError", "RuntimeError: x\nThe above exception was ...", False)) \
        == "ValueError: RuntimeError: x"
    host = core_from_root("TypeError", "add_kernel() missing 1 required positional argument: 'n'", in_kernel=False)
    assert signature_of(host) == "TypeError: <fn>() missing <n> required positional argument: <name>"


def test_a_wrapper_that_carried_only_text_names_no_inner_type_on_either_path():
    text = ("triton.compiler.errors.UnsupportedLanguageConstruct: at 3:8:\n    for i in range(4):\n        break\n"
            "        ^\nunsupported AST node type: Break")
    root = core_from_root("UnsupportedLanguageConstruct", "unsupported AST node type: Break", in_kernel=True)
    assert root == core_from_text("UnsupportedLanguageConstruct", "", text)
    assert signature_of(root) == "CompilationError: unsupported AST node type: Break"
    assert error_line_of(root) == "CompilationError: unsupported AST node type: Break"
    assert signature_of(core_from_root("CompilationError", "", in_kernel=True)) == "CompilationError: <no message>"
