"""The proposers' side of a campaign (bench/campaign_prompt.py): how searches are dealt, and what a prompt names."""

from __future__ import annotations

import json

import pytest

from bench import campaign_prompt

PROBLEMS = ["P1", "P2", "P3", "P4", "P5", "P6"]
STRATEGIES = ["adaexplore", "iterative_refinement", "parallel_sampling", "adaexplore_norules"]


def _campaign(tmp_path):
    (tmp_path / "campaign.json").write_text(json.dumps({"problems": [{"name": p} for p in PROBLEMS],
                                                        "strategies": STRATEGIES}))
    return tmp_path


def test_no_proposer_holds_two_searches_of_one_problem(tmp_path):
    d = _campaign(tmp_path)
    hands = campaign_prompt.groups(d, 8)
    assert sorted(k for hand in hands for k in hand) == sorted(f"{p}__{s}" for p in PROBLEMS for s in STRATEGIES)
    for hand in hands:
        problems = [k.split("__")[0] for k in hand]
        assert len(problems) == len(set(problems)) == 3
    with pytest.raises(SystemExit, match="two searches of a problem"):
        campaign_prompt.groups(d, 6)


def test_a_prompt_names_every_pending_step_and_the_files_to_write(tmp_path):
    d = _campaign(tmp_path)
    folder = d / "briefs" / "P1__adaexplore"
    folder.mkdir(parents=True)
    (folder / "round-1.json").write_text("{}")
    (folder / "round-2.json").write_text("{}")
    (folder / "pending.json").write_text(json.dumps({"steps": {"step_a": {"kind": "small", "parent": 3}}}))
    text = campaign_prompt.prompt(d, ["P1__adaexplore"])
    assert "round-2.json" in text and "round-1.json" not in text
    assert "step `step_a` (small step, parent node 3)" in text
    assert str(d.resolve() / "proposals" / "P1__adaexplore" / "step_a.py") in text
    assert "you never run code" in text and "refused" not in text.split("Your searches:")[1]
    with pytest.raises(SystemExit, match="no brief handed out"):
        campaign_prompt.prompt(d, ["P2__adaexplore"])
