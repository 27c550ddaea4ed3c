"""The campaign driver's bookkeeping (bench/campaign.py, bench/campaign_table.py), without a server: how a
proposal is read, what a step's record keeps, and the table's conventions (capped best, 0 for no correct
kernel, the ranked speedup, best-so-far by step)."""

from __future__ import annotations

import json

from bench import campaign
from bench.campaign import problem_name, read_proposal, step_record
from bench.campaign_table import best_by_step, by_kind, equal_budget, summarize


def test_a_proposal_is_a_py_kernel_with_a_note_or_json_edits(tmp_path):
    (tmp_path / "step_a.py").write_text("class ModelNew: pass\n")
    (tmp_path / "step_a.note").write_text("  fused epilogue \n")
    (tmp_path / "step_b.json").write_text(json.dumps({"edits": [{"old": "a", "new": "b"}], "note": "tile 128"}))
    assert read_proposal(tmp_path, "step_a") == {"kernel_source": "class ModelNew: pass\n", "note": "fused epilogue"}
    assert read_proposal(tmp_path, "step_b")["edits"] == [{"old": "a", "new": "b"}]
    assert read_proposal(tmp_path, "step_c") is None
    assert problem_name("x/KernelBench/level2/12_Gemm_Multiply_LeakyReLU.py") == "L2_12_Gemm_Multiply_LeakyReLU"


def test_a_step_record_keeps_every_yardstick_and_the_ranked_speedup():
    res = {"step_id": "s1", "ok": True, "result": {
        "node_id": 3, "reward": 0.6, "is_new_best": True, "ranked_speedup": 1.5, "ranked_against": "tf32",
        "evaluation": {"verdict": "passed", "speedup": 3.0, "speedup_tf32": 1.5, "precision": {"below_fp32": True},
                       "timing": {"speedup_compile": 2.0, "gpu": "H100", "roofline": {"pct_roofline": 40.0}}}}}
    rec = step_record("P1__adaexplore", "srch_1", 2, res, {"kind": "small", "parent": 1, "brief_chars": 900,
                                                           "round": 2}, 1.234)
    assert (rec["problem"], rec["strategy"], rec["kind"], rec["parent"], rec["round"], rec["call"]) == (
        "P1", "adaexplore", "small", 1, 2, 2)
    assert (rec["speedup"], rec["speedup_tf32"], rec["speedup_compile"], rec["pct_roofline"]) == (3.0, 1.5, 2.0, 40.0)
    assert rec["ranked_speedup"] == 1.5 and rec["below_fp32"] and rec["brief_chars"] == 900
    refused = step_record("P1__adaexplore", "srch_1", 2, {"step_id": "s2", "ok": False, "error": "large step"}, {}, 0)
    assert refused["ok"] is False and "large step" in refused["error"]


def test_the_table_caps_counts_no_correct_kernel_as_zero_and_ranks_by_the_ranked_speedup():
    def rec(search, verdict, ranked, compile_=None):
        return {"search": search, "strategy": search.split("__")[1], "problem": search.split("__")[0], "ok": True,
                "verdict": verdict, "ranked_speedup": ranked, "speedup_compile": compile_, "brief_chars": 100}
    records = [rec("A__s", "passed", 2.0), rec("A__s", "mismatch", None), rec("A__s", "passed", 40.0, 5.0),
               rec("B__s", "compile_error", None), rec("B__s", "mismatch", None)]
    assert best_by_step(records[:3]) == [2.0, 2.0, 10.0]  # capped at 10x
    s = summarize(records)["s"]
    assert s["searches"] == 2 and s["steps"] == 5 and s["correct"] == 0.4
    assert s["mean"] == 5.0 and abs(s["geomean"] - 10.0) < 1e-9 and s["with_correct"] == 1  # B counts 0 in the mean
    assert s["fast_1"] == 0.5 and s["compile_mean"] == 5.0
    assert s["curve"] == [1.0, 1.0, 10.0] and s["reached"] == [2, 2, 1]  # step 3: only A got there
    budget, best = equal_budget(records)
    assert budget == {"A": 3, "B": 2} and best["s"] == {"A": 10.0, "B": 0.0}


def test_steps_are_counted_by_kind_against_a_correct_parent_and_the_searchs_best():
    def rec(node, parent, kind, ranked):
        return {"search": "A__s", "strategy": "s", "problem": "A", "ok": True, "node": node, "parent": parent,
                "kind": kind, "verdict": "passed" if ranked else "mismatch", "ranked_speedup": ranked}
    records = [rec(1, 0, "large", 2.0), rec(2, 0, "large", None), rec(3, 1, "small", 3.0),
               rec(4, 2, "small", 5.0), rec(5, 3, "large", 2.5), rec(6, 1, "small", 1.0)]
    rows = by_kind(records)
    assert rows[("s", "large (root)")] == {"steps": 2, "passed": 1, "beat": 0, "vs_parent": 0, "new_best": 0}
    # node 4's parent failed: it counts as passed and a new best, not against a parent
    assert rows[("s", "small")] == {"steps": 3, "passed": 3, "beat": 1, "vs_parent": 2, "new_best": 2}
    assert rows[("s", "large (off root)")] == {"steps": 1, "passed": 1, "beat": 0, "vs_parent": 1, "new_best": 0}


def test_steps_a_cut_call_attached_leave_pending_and_the_rest_stay(tmp_path):
    import sqlite3

    (tmp_path / "home").mkdir()
    conn = sqlite3.connect(tmp_path / "home" / "adaexplore.sqlite3")
    conn.execute("CREATE TABLE steps (step_id TEXT PRIMARY KEY, status TEXT)")
    conn.executemany("INSERT INTO steps VALUES (?, ?)", [("a", "done"), ("b", "claimed"), ("c", "pending")])
    conn.commit()
    conn.close()
    folder = tmp_path / "briefs" / "P__adaexplore"
    folder.mkdir(parents=True)
    campaign.save(folder / "pending.json", {"steps": {s: {"kind": "small"} for s in "abc"}})
    assert campaign.forget_finished_steps(tmp_path) == {"P__adaexplore": 1}
    assert sorted(campaign.load(folder / "pending.json")["steps"]) == ["b", "c"]
    assert campaign.forget_finished_steps(tmp_path) == {}  # nothing more to drop


def test_the_full_source_behind_a_cut_kernel_is_saved_beside_the_briefs(tmp_path):
    """A large step off a node carries only its parent's kernel_uri, and a pool kernel cut to its head points to
    its kernel_uri: the driver reads each such resource once, as an assistant following the pointer would."""
    import anyio

    class FakeClient:
        def __init__(self):
            self.read = []

        async def read_resource(self, uri):
            self.read.append(uri)
            return type("R", (), {"contents": [type("C", (), {"text": f"# source of {uri}\n"})()]})()

    brief = {"parent_node_id": 2, "parent_kernel_uri": "adaexplore://searches/s/nodes/2/kernel", "parent_kernel": None,
             "pool": [{"node_id": 5, "kernel": "head", "kernel_truncated": True,
                       "kernel_uri": "adaexplore://searches/s/nodes/5/kernel"},
                      {"node_id": 6, "kernel": "whole", "kernel_truncated": False,
                       "kernel_uri": "adaexplore://searches/s/nodes/6/kernel"}],
             "more_steps": [{"parent_node_id": 3, "parent_kernel": "inline source",
                             "parent_kernel_uri": "adaexplore://searches/s/nodes/3/kernel",
                             "best": {"node_id": 7, "speedup": 2.0, "reward": 0.6,
                                      "kernel_uri": "adaexplore://searches/s/nodes/7/kernel"}}]}
    client = FakeClient()
    anyio.run(campaign.save_kernels, client, tmp_path, brief)
    assert sorted(p.name for p in (tmp_path / "kernels").iterdir()) == ["node-2.py", "node-5.py", "node-7.py"]
    assert (tmp_path / "kernels" / "node-5.py").read_text() == "# source of adaexplore://searches/s/nodes/5/kernel\n"
    anyio.run(campaign.save_kernels, client, tmp_path, brief)  # already there: not read again
    assert len(client.read) == 3
