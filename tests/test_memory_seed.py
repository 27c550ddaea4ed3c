"""Seed rules: readable files, real errors re-triggered, loaded once, user decisions kept."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import re
import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest

from adaexplore_mcp.memory import MemoryService
from adaexplore_mcp.memory.clusters import cluster_id
from adaexplore_mcp.memory.records import failure_record
from adaexplore_mcp.memory.seed import read_seed_rules
from adaexplore_mcp.memory.signature import signature
from devtools.triggers import run_cases
from adaexplore_mcp.models import ErrorDetail, Evaluation, Verdict
from adaexplore_mcp.store import Store

SEEDS = read_seed_rules()
TRITON = ".".join(version("triton").split(".")[:2])
# The judge's classifier, when present: the signature of the ErrorDetail the server really records.
JUDGE = "adaexplore_mcp.judge.classify" if importlib.util.find_spec("adaexplore_mcp.judge.classify") else None
# Where the judge's excerpt drops the root cause (a CompilationError nested deeper than its three
# exceptions, e.g. recursion), signing the excerpt gives the generic "CompilationError: <no message>";
# the root_* fields, read from the live exception, still name it.
JUDGE_GAPS = {"recursion"}


def test_at_least_forty_seed_rules_each_with_text_signatures_and_a_trigger():
    assert len(SEEDS) >= 40
    for s in SEEDS:
        assert s.text.startswith(("You cannot", "Always")) and len(s.text) <= 300, s.key
        assert s.signatures and s.error_line and s.triggers, s.key
        assert s.seen or s.gpu_only, s.key
        if s.gpu_only:
            assert s.expected_gpu_error, s.key


def test_seed_signatures_name_one_mistake_each_except_documented_shared_interpreter_texts():
    owners: dict[str, list[str]] = {}
    for s in SEEDS:
        for sig in s.signatures:
            owners.setdefault(sig, []).append(s.key)
    shared = {sig: keys for sig, keys in owners.items() if len(keys) > 1}
    assert set(shared) <= {"CompilationError: only <n>-dimensional arrays can be converted to Python scalars"}, shared


@functools.cache
def _run(mode: str) -> tuple:
    """One run of the triggers per mode for the whole module (two tests read it)."""
    label = f"triton-{TRITON}-{'interpreter' if mode == 'interpreter' else 'frontend'}"
    wanted = [s for s in SEEDS if label in s.seen]
    by_path = {str(s.path): s for s in wanted}
    obs = run_cases([(str(s.path), t) for s in wanted for t in s.triggers], mode, describe=JUDGE) if wanted else []
    return tuple((by_path[o.path], o) for o in obs)


def _observed(mode: str) -> list[tuple]:
    results = list(_run(mode))
    if not results:
        pytest.skip(f"no seed rule was recorded on triton-{TRITON}-{mode}")
    return results


def _recorded(detail: ErrorDetail) -> str:
    """The signature the memory records for a failed evaluation with this detail."""
    rec = failure_record(Evaluation(task_id="t", verdict=Verdict.compile_error, backend="cpu-interpreter",
                                    error=detail), triton_version="x")
    assert rec is not None
    return rec.signature


@pytest.mark.parametrize("mode", ["interpreter", "frontend"])
def test_every_seed_rule_seen_on_this_triton_re_triggers_its_error_with_its_signature_raw_and_via_the_judge(mode):
    results = _observed(mode)
    reproduced = set()
    for rule, o in results:
        if not o.raised:
            continue
        sig = signature(o.exception, o.message, o.text)
        if rule.key == "launch-without-grid" and mode == "interpreter":
            continue
        assert sig in rule.signatures, (rule.key, o.entry, sig)
        if JUDGE:
            d = o.detail
            judged = signature(d["exception"], d["message"], d["excerpt"])
            assert judged == sig or (rule.key in JUDGE_GAPS and judged == "CompilationError: <no message>"), \
                (rule.key, o.entry, d)
            assert d["root_exception"] and _recorded(ErrorDetail(**d)) == sig, (rule.key, o.entry, d)
        reproduced.add(rule.key)
    label = f"triton-{TRITON}-{'interpreter' if mode == 'interpreter' else 'frontend'}"
    expected = {s.key for s in SEEDS if label in s.seen}
    assert expected <= reproduced, expected - reproduced


def _reformatted(d: ErrorDetail) -> dict[str, ErrorDetail]:
    """The same error told differently: what a cosmetic change to the judge's message or excerpt does."""
    wrapped = "\n".join(textwrap.wrap(d.excerpt, 37))
    return {
        "prefixed": d.model_copy(update={"message": "error: " + d.message,
                                         "excerpt": "Traceback (most recent call last):\n" + d.excerpt}),
        "indented": d.model_copy(update={"excerpt": textwrap.indent(d.excerpt, "    | ")}),
        "rewrapped": d.model_copy(update={"excerpt": wrapped, "message": d.message.replace(" ", "\n")}),
        "head_only": d.model_copy(update={"excerpt": d.excerpt[:60], "message": d.message[:12] + "..."}),
        "tail_only": d.model_copy(update={"excerpt": d.excerpt[-60:], "message": ""}),
        "empty": d.model_copy(update={"excerpt": "", "message": "", "exception": "Error"}),
        "swapped": d.model_copy(update={"excerpt": d.message, "message": d.excerpt}),
    }


@pytest.mark.skipif(JUDGE is None, reason="needs the judge's classifier")
def test_reformatting_the_judges_message_and_excerpt_leaves_every_seed_rules_matching_intact():
    checked, legacy_broken = set(), 0
    for mode in ("interpreter", "frontend"):
        for rule, o in _run(mode):
            if not o.raised or (rule.key == "launch-without-grid" and mode == "interpreter"):
                continue
            base = ErrorDetail(**o.detail)
            sig = _recorded(base)
            assert sig in rule.signatures, (rule.key, o.entry, sig)
            for how, variant in _reformatted(base).items():
                got = _recorded(variant)
                assert got == sig and cluster_id(got) == cluster_id(sig), (rule.key, o.entry, how, got)
                legacy = variant.model_copy(update={"root_exception": None, "root_message": None})
                legacy_broken += _recorded(legacy) != sig
            checked.add(rule.key)
    if not checked:
        pytest.skip(f"no seed rule was recorded on triton-{TRITON}")
    expected = {s.key for s in SEEDS if {f"triton-{TRITON}-interpreter", f"triton-{TRITON}-frontend"} & set(s.seen)}
    assert checked == expected, expected ^ checked
    assert legacy_broken  # the variants do move a signature read from the text: the fields are what hold


def test_a_reworded_detail_still_finds_its_seed_rule_through_the_service(tmp_path):
    svc = MemoryService(Store(tmp_path / "db.sqlite3"))
    detail = ErrorDetail(exception="CompilationError", message="(reworded for people)", excerpt="...",
                         root_exception="TypeError", root_message="'dtype' object is not callable",
                         root_in_kernel=True)
    refs = svc.record_failure(Evaluation(task_id="t", verdict=Verdict.compile_error, backend="cuda", error=detail))
    assert [r.rule_id for r in refs] == ["seed-dtype-call"]


def test_gpu_only_rules_are_marked_and_left_to_the_collect_script():
    gpu_only = [s for s in SEEDS if s.gpu_only]
    assert gpu_only and all(not any(l.endswith(("interpreter", "frontend")) for l in s.seen) for s in gpu_only)


def _fixture_gpu_errors() -> list[dict]:
    path = Path(__file__).parent / "fixtures" / "errors" / "errors.json"
    return [e for e in json.loads(path.read_text())["errors"] if e["origin"].startswith("gpu-")]


def _gpu_origin(label: str) -> str:
    return "gpu-" + label.removeprefix("triton-").removesuffix("-cuda")


def test_every_gpu_seen_label_is_backed_by_a_gpu_text_in_the_fixture_with_one_of_the_rule_signatures():
    gpu = _fixture_gpu_errors()
    for s in SEEDS:
        for label in (l for l in s.seen if l.endswith("-cuda")):
            sigs = {e.get("signature") or e.get("gpu_signature") or signature(e["exception"], e["message"], e["text"])
                    for e in gpu if e["rule"] == s.key and e["origin"] == _gpu_origin(label)}
            assert sigs & set(s.signatures), (s.key, label, sigs)


def test_gpu_only_rules_are_confirmed_only_where_their_expected_text_was_seen_on_that_gpu():
    gpu = _fixture_gpu_errors()
    for s in (s for s in SEEDS if s.gpu_only):
        consts = {n.targets[0].id: n.value for n in ast.parse(s.path.read_text()).body
                  if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}
        confirmed = ast.literal_eval(consts["GPU_CONFIRMED"])
        assert set(confirmed) <= set(s.seen), s.key
        for label in confirmed:
            firsts = {e["message"].strip().splitlines()[0] for e in gpu
                      if e["rule"] == s.key and e["origin"] == _gpu_origin(label)}
            assert s.expected_gpu_error in firsts, (s.key, label, firsts)


def test_seed_rules_load_once_and_a_retired_seed_rule_stays_retired_across_restarts(tmp_path):
    db = tmp_path / "db.sqlite3"
    svc = MemoryService(Store(db))
    assert svc.query_skills(limit=100).total == len(SEEDS)
    retired = svc.retire_rule("seed-grid-int", "not useful for my kernels")
    svc.update_rule("seed-dtype-call", "Always convert with x.to(tl.float32); tl.float32(x) is not a function.",
                    "shorter")
    again = MemoryService(Store(db))
    rules = {r.rule_id: r for r in again.query_skills(limit=100).rules}
    assert len(rules) == len(SEEDS)
    assert rules[retired.rule_id].status == "retired"
    assert rules["seed-dtype-call"].text.startswith("Always convert")
    assert all(r.provenance.origin == "seed" and r.shown == (r.status == "active") for r in rules.values())
    counts = again.store.read_one("SELECT COUNT(*) AS n FROM rule_history WHERE action = 'seed'")
    assert counts["n"] == len(SEEDS)


def test_seed_rule_files_are_readable_python_with_constants_first():
    for s in SEEDS:
        head = s.path.read_text().split("import ", 1)[0]
        for name in ("KEY", "TEXT", "SIGNATURES", "ERROR_LINE", "SEEN", "GPU_ONLY"):
            assert re.search(rf"^{name} = ", head, re.M), (s.path.name, name)
