"""MemoryService: failures become clusters, clusters become rules, rules reach results and briefs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaexplore_mcp.memory import MemoryService
from adaexplore_mcp.memory.clusters import cluster_id
from adaexplore_mcp.models import ErrorDetail, Evaluation, MismatchDetail, Verdict
from adaexplore_mcp.store import Store

ERRORS = json.loads((Path(__file__).parent / "fixtures" / "errors" / "errors.json").read_text())["errors"]


def _err(rule: str, origin: str = "compiled") -> dict:
    return next(e for e in ERRORS if e["rule"] == rule and e["origin"].startswith(origin))


def failed(task: str, e: dict, verdict: Verdict = Verdict.compile_error) -> Evaluation:
    return Evaluation(task_id=task, verdict=verdict, backend="cpu-interpreter",
                      error=ErrorDetail(exception=e["exception"], message=e["message"], excerpt=e["text"]))


@pytest.fixture
def svc(tmp_path) -> MemoryService:
    return MemoryService(Store(tmp_path / "db.sqlite3"), load_seeds=False)


@pytest.fixture
def seeded(tmp_path) -> MemoryService:
    return MemoryService(Store(tmp_path / "db.sqlite3"))


def test_a_failure_is_recorded_with_its_signature_error_line_and_offending_source_line(svc):
    assert svc.record_failure(failed("t1", _err("dtype-call")), "src") == []
    row = svc.store.read_one("SELECT * FROM failures")
    assert row["category"] == "compile_error"
    assert row["signature"] == "CompilationError: 'dtype' object is not callable"
    assert row["error_line"] == "TypeError: 'dtype' object is not callable"
    assert row["source_line"] == "y = tl.float32(x)"
    assert row["backend"] == "cpu-interpreter" and row["triton_version"]


def test_a_failure_names_the_seed_rule_whose_cluster_it_falls_in_on_both_backends(seeded):
    for origin in ("compiled", "interpreter"):
        refs = seeded.record_failure(failed("t1", _err("dtype-call", origin)))
        assert [r.rule_id for r in refs] == ["seed-dtype-call"]
    assert seeded.record_failure(Evaluation(task_id="t1", verdict=Verdict.passed, backend="cuda")) == []


def test_a_cluster_ripens_at_three_failures_from_two_tasks_and_lists_short_examples(svc):
    e = _err("arange-not-pow2")
    svc.record_failure(failed("t1", e))
    svc.record_failure(failed("t1", e))
    assert svc.failure_clusters().clusters == []  # one task only
    svc.record_failure(failed("t2", _err("arange-not-pow2", "interpreter"), Verdict.runtime_error))
    [c] = svc.failure_clusters().clusters
    assert c.ripe and c.count == 3 and c.tasks == ["t1", "t2"]
    assert 2 <= len(c.examples) <= 3 and {x.task_id for x in c.examples} == {"t1", "t2"}
    assert c.examples[0].error_line.startswith("ValueError: arange's range must be a power of 2")
    assert c.cluster_id == cluster_id(c.signature)


def test_mismatches_and_rejections_are_stored_but_never_form_clusters(svc):
    for task in ("a", "b", "c", "d"):
        svc.record_failure(Evaluation(task_id=task, verdict=Verdict.mismatch, backend="cuda",
                                      mismatch=MismatchDetail(output_index=0, trial=0, shape=[4], reason="values")))
    assert svc.store.read_one("SELECT COUNT(*) AS n FROM failures")["n"] == 4
    assert svc.failure_clusters(ripe_only=False).clusters == []


def _ripe(svc: MemoryService, rule: str = "dot-dtype-mismatch") -> str:
    for task in ("t1", "t2", "t3"):
        svc.record_failure(failed(task, _err(rule)))
    return svc.failure_clusters().clusters[0].cluster_id


def test_adding_a_rule_to_a_ripe_cluster_makes_later_failures_name_it(svc):
    cid = _ripe(svc)
    rule = svc.add_rule(cid, "Always cast both tl.dot operands to the same dtype.", actor="claude")
    assert rule.status == "active" and rule.count == 3 and rule.shown
    assert rule.provenance.origin == "user" and rule.provenance.cluster_ids == [cid]
    assert svc.failure_clusters().clusters == []
    refs = svc.record_failure(failed("t9", _err("dot-dtype-mismatch", "interpreter")))
    assert [r.rule_id for r in refs] == [rule.rule_id]
    assert svc.get_rule(rule.rule_id).count == 4
    [h] = svc.rule_history(rule.rule_id)
    assert (h.action, h.actor) == ("add", "claude") and cid in h.reason


@pytest.mark.parametrize("cid,text,match", [
    ("c_0000000000", "Always do it.", "unknown cluster"),
    ("", "Always do it.", "cluster_id is empty"),
    (None, "", "empty"),
    (None, "Always " + "x" * 300, "at most 300"),
    (None, "Try to cast operands.", "must start with"),
])
def test_bad_rule_input_is_refused_with_a_clear_message(svc, cid, text, match):
    real = _ripe(svc)
    with pytest.raises(ValueError, match=match):
        svc.add_rule(real if cid is None else cid, text)


def test_a_cluster_that_already_has_a_rule_refuses_a_second(svc):
    cid = _ripe(svc)
    svc.add_rule(cid, "Always cast both tl.dot operands to the same dtype.")
    with pytest.raises(ValueError, match="already has rule"):
        svc.add_rule(cid, "You cannot mix dtypes in tl.dot.")


def test_update_retire_and_merge_keep_history_with_who_when_and_why(svc):
    a = svc.add_rule(_ripe(svc, "dot-dtype-mismatch"), "Always cast both tl.dot operands to the same dtype.")
    b = svc.add_rule(_ripe(svc, "dot-shape-mismatch"), "Always make tl.dot inner dimensions agree.")
    svc.update_rule(a.rule_id, "Always give tl.dot operands one dtype.", "clearer", actor="user")
    with pytest.raises(ValueError, match="reason"):
        svc.update_rule(a.rule_id, "Always x.", "")
    with pytest.raises(ValueError, match="unknown rule"):
        svc.retire_rule("rule_nope", "gone")
    merged = svc.merge_rules([a.rule_id, b.rule_id], "Always give tl.dot same-dtype [M,K] x [K,N] operands.", "one idea")
    assert sorted(merged.provenance.signatures) == sorted(a.provenance.signatures + b.provenance.signatures)
    assert merged.count == 6
    assert svc.get_rule(a.rule_id).status == "retired"
    actions = [(h.action, h.actor) for h in svc.rule_history(a.rule_id)]
    assert actions == [("add", "assistant"), ("update", "user"), ("retire", "assistant")]
    assert "merged into " + merged.rule_id in svc.rule_history(a.rule_id)[-1].reason
    with pytest.raises(ValueError, match="already retired"):
        svc.retire_rule(a.rule_id, "again")


def test_attach_lets_one_rule_cover_the_same_mistake_seen_through_another_error_text(svc):
    rule = svc.add_rule(_ripe(svc, "tensor-item-assign"), "You cannot assign into a block element in a kernel.")
    svc.record_failure(failed("t1", _err("tensor-item-assign", "interpreter")))
    other = cluster_id(svc.store.read("SELECT signature FROM failures ORDER BY failure_id DESC LIMIT 1")[0][0])
    svc.attach_rule(rule.rule_id, other, "the interpreter words it differently")
    refs = svc.record_failure(failed("t2", _err("tensor-item-assign", "interpreter")))
    assert [r.rule_id for r in refs] == [rule.rule_id]


def test_query_skills_puts_active_rules_first_then_the_most_relevant(seeded):
    seeded.retire_rule("seed-dot-1d", "testing")
    rules = seeded.query_skills(text="tl.dot operands with different dtype", limit=100).rules
    assert rules[0].rule_id == "seed-dot-dtype-mismatch"
    assert rules[-1].rule_id == "seed-dot-1d"
    assert all(r.status == "active" for r in rules[:-1])
    assert rules[0].provenance.signatures and rules[0].provenance.versions_seen


def test_query_skills_ranks_by_the_tasks_reference_ops(seeded):
    with seeded.store.write() as tx:
        tx.execute("INSERT INTO tasks VALUES ('mm', 'mm', 'user', ?, 'h', NULL, '', '{}', 0)",
                   ("import torch\nclass Model:\n    def forward(self, a, b):\n        return torch.matmul(a, b)\n",))
    top = [r.rule_id for r in seeded.query_skills(task_id="mm", limit=4).rules]
    assert any("dot" in r for r in top[:3]), top


def test_brief_rules_are_frequent_first_relevant_first_and_within_budget(seeded):
    for task in ("t1", "t2", "t3", "t4"):
        seeded.record_failure(failed(task, _err("global-access")))
    brief = seeded.rules_for_brief(task_source="y = torch.softmax(x, dim=1)", max_chars=2000)
    assert sum(len(r.text) + 3 for r in brief) <= 2000
    ids = [r.rule_id for r in brief]
    # relevant to a softmax (reductions) first, then the most frequent of the others
    assert ids.index("seed-reduce-axis-range") < ids.index("seed-global-access") < ids.index("seed-dtype-call")
    assert ids.index("seed-global-access") == min(ids.index(i) for i in ids
                                                  if i in ("seed-dtype-call", "seed-grid-int", "seed-lambda-in-kernel",
                                                           "seed-global-access"))
    assert len(seeded.rules_for_brief(max_chars=300)) <= 3


def test_user_rules_under_the_threshold_are_kept_but_not_in_the_brief(svc):
    cid = _ripe(svc)
    rule = svc.add_rule(cid, "Always cast both tl.dot operands to the same dtype.")
    with svc.store.write() as tx:
        tx.execute("DELETE FROM failures WHERE failure_id > 1")
    info = svc.get_rule(rule.rule_id)
    assert info.count == 1 and not info.shown and info.status == "active"
    assert svc.rules_for_brief() == []


def test_the_report_lists_clusters_not_covered_by_any_seed_rule(seeded):
    for task in ("t1", "t2", "t3"):
        seeded.record_failure(failed(task, _err("dot-dtype-mismatch")))
    odd = {"exception": "RuntimeError", "message": "something new happened at line 12", "text": ""}
    for task in ("a", "b", "c"):
        seeded.record_failure(failed(task, odd, Verdict.runtime_error))
    rep = seeded.report()
    assert rep.failures == 6 and rep.clusters == 2 and rep.ripe_clusters == 1
    assert [c.signature for c in rep.uncovered_by_seed] == ["RuntimeError: something new happened at line <n>"]
    assert "dot-dtype-mismatch" not in rep.seed_rules_never_hit and "dtype-call" in rep.seed_rules_never_hit


def test_timeouts_and_crashes_cluster_by_their_own_signature(svc):
    ev = Evaluation(task_id="t", verdict=Verdict.timeout, backend="cuda")
    crash = Evaluation(task_id="t", verdict=Verdict.crashed, backend="cuda", error=ErrorDetail(
        exception="WorkerDied", message="CUDA error: an illegal memory access was encountered at 0x7f00aa"))
    svc.record_failure(ev)
    svc.record_failure(crash)
    sigs = {r["signature"] for r in svc.store.read("SELECT signature FROM failures")}
    assert sigs == {"timeout: no error detail",
                    "WorkerDied: CUDA error: an illegal memory access was encountered at <addr>"}


def test_a_syntax_error_line_number_never_makes_its_own_cluster(svc):
    for k, task in enumerate(("a", "b", "c")):
        svc.record_failure(Evaluation(task_id=task, verdict=Verdict.compile_error, backend="cuda", error=ErrorDetail(
            exception="SyntaxError", message=f"invalid syntax (kernel_{k}.py, line {223 + k})")))
    [c] = svc.failure_clusters().clusters
    assert c.signature == "SyntaxError: invalid syntax (<file>.py, line <n>)"
