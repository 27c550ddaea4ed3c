"""A speedup means the same everywhere it is shown: eager, TF32, torch.compile and % of roofline, side by side,
in the evaluation, the brief, the tree, the exported file's header and the HTML report."""

from __future__ import annotations

from pathlib import Path

from adaexplore_mcp import speedups
from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.models import Evaluation, Roofline, Timing, TimingStats
from adaexplore_mcp.search.fake_judge import FakeJudge
from tests.test_app_fake_judge import PROBED
from tests.tiny import SCALE_TASK

STATS = TimingStats(median_ms=0.1, iqr_ms=0.0, min_ms=0.1, max_ms=0.1, reps=10)
ROOF = Roofline(min_bytes=1 << 20, achieved_gbps=3000.0, peak_gbps=4800.0, peak_basis="fp32", pct_peak_bandwidth=62.5,
                pct_roofline=64.0, bound="memory", lower_bound_ms=0.0002)
FULL = "3.70x eager, 1.85x vs TF32, 1.25x vs torch.compile, 64% of roofline (memory-bound)"


def _timed(ev: Evaluation) -> Evaluation:
    ev.speedup_tf32 = ev.speedup / 2
    ev.timing = Timing(candidate=STATS, reference=STATS, method="fake", gpu="NVIDIA H200", speedup_compile=1.25,
                       roofline=ROOF)
    ev.speedups = speedups.of_evaluation(ev)
    return ev


class TimedFakeJudge(FakeJudge):
    """The fake judge on a 'GPU': every timed pass also has the TF32, torch.compile and roofline yardsticks."""

    def evaluate(self, task, kernel_source, timeout_s=None, progress=None):  # noqa: ANN001, ANN201
        ev = super().evaluate(task, kernel_source, timeout_s, progress)
        return _timed(ev) if ev.speedup is not None else ev


def test_the_summary_reads_every_yardstick_and_says_it_in_one_line() -> None:
    ev = _timed(Evaluation(task_id="t", verdict="passed", backend="cuda", speedup=3.7))
    assert ev.speedups.model_dump() == {"eager": 3.7, "tf32": 1.85, "compiled": 1.25, "pct_roofline": 64.0,
                                        "bound": "memory"}
    assert speedups.text(ev.speedups) == FULL
    assert speedups.of_fields(ev.model_dump(mode="json")) == ev.speedups  # the stored JSON says the same


def test_an_untimed_or_older_evaluation_has_no_or_partial_yardsticks() -> None:
    assert speedups.of_fields({"verdict": "passed", "speedup": None}) is None
    assert speedups.text(None) == "not timed"
    older = speedups.of_fields({"speedup": 2.0, "speedup_tf32": 1.5, "timing": {"roofline": None}})
    assert speedups.text(older) == "2.00x eager, 1.50x vs TF32"
    assert speedups.of_fields({"speedup": True}) is None  # a flag is not a number


def test_every_view_of_a_timed_node_shows_every_yardstick(tmp_path: Path) -> None:
    app = App(Settings(home=tmp_path / "home", device="cpu"), judge=TimedFakeJudge(probe=PROBED, backend="cuda"))
    try:
        info, _ = app.create_task("scale", SCALE_TASK)
        search_id = app.search.start_search(info.task_id, budget=4, seed=0)
        kernel = "import triton\nclass ModelNew:\n    pass\n# fake: verdict=passed speedup=3.7\n"
        done = app.search.expand_node(search_id, app.search.next_step(search_id).step_id, kernel_source=kernel)
        assert done.evaluation.speedups is not None and speedups.text(done.evaluation.speedups) == FULL

        node = next(n for n in app.search.get_search(search_id).nodes if n.node_id == done.node_id)
        assert node.speedups == done.evaluation.speedups  # the tree reads them out of the stored evaluation

        brief = app.search.next_step(search_id)  # the timed node is the parent, or in the pool
        shown = [e.evaluation.speedups for e in brief.working_memory + brief.pool]
        shown += [brief.parent_evaluation.speedups] if brief.parent_evaluation else []
        assert FULL in shown, shown

        header = app.export_kernel(search_id).source
        assert FULL in header
        page = Path(app.search_report(search_id, png=False).html_path).read_text()
        assert "1.25x" in page and "64%" in page and "vs torch.compile" in page
    finally:
        app.close()


def test_an_evaluation_stored_before_the_summary_existed_reads_back_with_it() -> None:
    old = ('{"task_id": "t", "verdict": "passed", "backend": "cuda", "speedup": 3.0, "speedup_tf32": 1.5, '
           '"timing": {"candidate": %s, "reference": %s, "method": "m", "speedup_compile": 0.8}}'
           % ((STATS.model_dump_json(),) * 2))
    ev = Evaluation.model_validate_json(old)
    assert speedups.text(ev.speedups) == "3.00x eager, 1.50x vs TF32, 0.80x vs torch.compile"
