"""The search's signals reward the right thing: a kernel below the task's precision is ranked against the
reference at that precision, a repair brief carries the whole failure and the reference, the rules shown come
from this task's own failures first (and can be withheld for the ablation), a crash is matched to the rules
it broke, and without GPU timing the brief asks for correctness, not tuning."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

from adaexplore_mcp.memory.records import FailureRecord
from adaexplore_mcp.memory.service import MemoryService
from adaexplore_mcp.models import MismatchDetail, RuleRef, TaskInfo
from adaexplore_mcp.search import SearchService
from adaexplore_mcp.search.fake_judge import FakeEvaluator, FakeJudge
from adaexplore_mcp.store import Store

REFERENCE = "class Model:  # the reference\n    pass\n"
RULES = [RuleRef(rule_id=f"r{k}", text=f"Always respect rule number {k} about widgets.") for k in range(8)]


def kernel(verdict: str = "passed", speedup: str = "2.0", tag: str = "") -> str:
    return textwrap.dedent(f"""\
        import triton
        class ModelNew:
            pass  # {tag}
        # fake: verdict={verdict} speedup={speedup}
        """)


class PrecisionJudge(FakeJudge):
    """A fake judge whose `tf32` kernels compute below fp32 (a TF32 dot): timed twice as fast against strict
    fp32 as against the TF32 reference; its mismatches carry the full detail the real judge gives."""

    def evaluate(self, task, kernel_source, timeout_s=None, progress=None):
        ev = super().evaluate(task, kernel_source, timeout_s, progress)
        if ev.speedup is not None:
            ev.speedup_tf32 = ev.speedup / 2 if "tf32" in kernel_source else ev.speedup
            ev.speedups = None
            ev.model_post_init(None)
        if "tf32" in kernel_source:
            ev.precision.below_fp32 = True
            ev.precision.reasons = ["tl.dot with input_precision tf32"]
        if ev.verdict.value == "mismatch":
            ev.mismatch = MismatchDetail(output_index=0, trial=2, shape=[8, 100], reason="values", max_abs_error=0.5,
                                         max_rel_error=0.25, worst_index=[3, 97], expected=2.0, got=1.5,
                                         mismatched_fraction=0.03)
        return ev


def service(tmp_path: Path, timing: bool = True, task_rule_ids=()) -> SearchService:
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = Store(tmp_path / "db.sqlite3")
    with store.write() as tx:  # the task's row as the registry keeps it: the brief reads its source
        columns = {r[1]: r[2] for r in tx.execute("PRAGMA table_info(tasks)")}
        values = {c: ("" if "TEXT" in kind.upper() else 0) for c, kind in columns.items()}
        values.update(task_id="t1", name="t1", source=REFERENCE)
        tx.execute(f"INSERT INTO tasks ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                   list(values.values()))
    judge = PrecisionJudge(backend="cuda" if timing else "cpu-interpreter")
    evaluator = FakeEvaluator(store, judge, tasks=lambda t: TaskInfo(task_id=t, name=t), rules=RULES,
                              timing_available=timing, task_rule_ids=task_rule_ids)
    return SearchService(store, evaluator)


def test_a_kernel_below_the_tasks_precision_is_ranked_against_the_tf32_reference(tmp_path):
    svc = service(tmp_path)
    sid = svc.start_search("t1", 4, strategy="parallel_sampling")
    tf32 = svc.expand_node(sid, svc.next_step(sid).step_id, kernel_source=kernel(speedup="3.0", tag="tf32"))
    assert tf32.evaluation.speedup == 3.0  # the evaluation keeps every yardstick as measured
    assert (tf32.ranked_speedup, tf32.ranked_against) == (1.5, "tf32")
    assert any("below the task's precision" in w and "1.50x" in w for w in tf32.warnings)
    fp32 = svc.expand_node(sid, svc.next_step(sid).step_id, kernel_source=kernel(speedup="2.0"))
    assert (fp32.ranked_speedup, fp32.ranked_against) == (2.0, "fp32") and not fp32.warnings
    assert fp32.is_new_best and fp32.reward > tf32.reward  # 2.0x at fp32 beats 3.0x bought with TF32
    assert svc.best_kernel(sid).node_id == fp32.node_id
    shown = {n.node_id: n for n in svc.get_search(sid).nodes}
    assert shown[tf32.node_id].speedup == 1.5
    brief = svc.next_step(sid)  # parallel sampling shows no pool; an adaexplore large step would
    assert brief.kind == "large" and "reduced precision (TF32)" in brief.instructions


def test_a_repair_brief_carries_the_whole_mismatch_and_the_reference(tmp_path):
    svc = service(tmp_path)
    sid = svc.start_search("t1", 4, strategy="iterative_refinement")
    first = svc.next_step(sid)
    assert first.reference_source == REFERENCE
    svc.expand_node(sid, first.step_id, kernel_source=kernel(verdict="mismatch"))
    repair = svc.next_step(sid)
    assert repair.kind == "small" and repair.parent_evaluation.verdict == "mismatch"
    for part in ("worst_index=[3, 97]", "expected=2.0", "got=1.5", "mismatched_fraction=0.03", "trial=2"):
        assert part in repair.parent_failure
    assert repair.reference_source == REFERENCE
    svc.expand_node(sid, repair.step_id, kernel_source=kernel(tag="fixed"))
    tune = svc.next_step(sid)  # a small step on a passing parent: no failure, no reference again
    assert tune.kind == "small" and tune.parent_failure is None and tune.reference_source is None


def test_rules_of_this_tasks_own_failures_come_first_and_the_ablation_withholds_them(tmp_path):
    svc = service(tmp_path / "a", task_rule_ids=["r7", "r6"])
    brief = svc.next_step(svc.start_search("t1", 3))
    assert [r.rule_id for r in brief.rules][:2] == ["r7", "r6"] and len(brief.rules) == 5
    none = svc.next_step(svc.start_search("t1", 3, max_rules=0))
    assert none.rules == [] and none.rules_more == 0


def test_without_timing_a_small_step_asks_for_correctness_not_tuning(tmp_path):
    svc = service(tmp_path, timing=False)
    sid = svc.start_search("t1", 3, p_large=0.0)
    svc.expand_node(sid, svc.next_step(sid).step_id, kernel_source=kernel(speedup="none"))
    small = svc.next_step(sid)
    assert small.kind == "small" and "correctness only" in small.instructions
    assert "tiles, num_warps" not in small.instructions and "do not spend steps tuning" in small.instructions


def test_a_crash_is_matched_to_the_rule_it_broke_by_its_words(tmp_path):
    memory = MemoryService(Store(tmp_path / "m.sqlite3"))
    crash = FailureRecord(
        eval_id="e1", task_id="t1", category="crashed",
        signature="WorkerCrashed: the worker process was killed by SIGSEGV while running the candidate (a "
                  "segfault, os._exit, or a fatal CUDA error such as an out-of-bounds access?)",
        exception="WorkerCrashed", error_line="WorkerCrashed: killed by SIGSEGV (an out-of-bounds access?)",
        source_line="    x = tl.load(x_ptr + offs)", backend="cpu-interpreter", triton_version="3.9.0")
    matched = [r.rule_id for r in memory.rules_like(crash)]
    assert matched and any("out-of-bounds" in r for r in matched)
    unrelated = replace(crash, signature="TypeError: widget frobnication", error_line="TypeError")
    assert memory.rules_like(unrelated) == []  # a masked tl.load in the offending line is no evidence


def test_a_brief_names_the_gpu_of_the_latest_timed_evaluation(tmp_path):
    from adaexplore_mcp.app import App
    from adaexplore_mcp.config import Settings
    from adaexplore_mcp.evaluator import record_evaluation
    from adaexplore_mcp.models import Evaluation, Timing, TimingStats

    app = App(Settings(home=tmp_path), judge=FakeJudge(backend="cuda"))
    try:
        assert app.evaluator.gpu_name is None
        stats = TimingStats(median_ms=1.0, iqr_ms=0.0, min_ms=1.0, max_ms=1.0, reps=10)
        ev = Evaluation(eval_id="ev1", task_id="t", verdict="passed", backend="cuda", speedup=1.0,
                        timing=Timing(candidate=stats, reference=stats, gpu="NVIDIA H100 80GB HBM3",
                                      method="cuda events"))
        with app.store.write() as tx:
            record_evaluation(tx, ev, "src")
        assert app.evaluator.gpu_name == "NVIDIA H100 80GB HBM3"
    finally:
        app.close()
