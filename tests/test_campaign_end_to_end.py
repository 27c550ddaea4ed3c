"""The campaign driver end to end over stdio on the CPU: init, a round that hands briefs out, proposals written as
an outside proposer would, a round that submits them, the store's export and the table. A campaign spans
sessions and machines, so its tooling must keep working with new problems and new proposers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import campaign
from tests.tiny import SCALE_KERNEL, SCALE_TASK

pytestmark = pytest.mark.slow


def _driver(d: Path, command: str, *extra: str) -> str:
    """One driver command as the campaign's user runs it: its own process, whose stderr the server's log goes to."""
    done = subprocess.run([sys.executable, str(Path(campaign.__file__)), command, "--dir", str(d),
                           "--call-timeout-s", "300", *extra], env={**os.environ, "ADAEXPLORE_DEVICE": "cpu"},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _round(d: Path) -> None:
    _driver(d, "round", "--deadline-s", "600")


def test_a_campaign_hands_out_briefs_takes_proposals_and_prints_its_table(tmp_path, capsys):
    problem = tmp_path / "KernelBench" / "level1" / "7_Scale.py"
    problem.parent.mkdir(parents=True)
    problem.write_text(SCALE_TASK)
    d = tmp_path / "D"
    assert campaign.main(["init", "--dir", str(d), "--problem", str(problem), "--strategy", "adaexplore",
                          "--strategy", "parallel_sampling", "--steps", "2", "--in-flight", "2"]) == 0

    _round(d)  # round 1: tasks and searches made, the first briefs handed out
    state = json.loads((d / "state.json").read_text())
    assert set(state["searches"]) == {"L1_7_Scale__adaexplore", "L1_7_Scale__parallel_sampling"}
    for key in state["searches"]:
        pending = json.loads((d / "briefs" / key / "pending.json").read_text())["steps"]
        assert len(pending) == 2 and json.loads((d / "briefs" / key / "round-1.json").read_text())["step_id"] in pending
        assert "class Model" in (d / "briefs" / key / "reference.py").read_text()
        for step_id in pending:  # the proposer's answer: the whole kernel and a one-line note
            (d / "proposals" / key).mkdir(parents=True, exist_ok=True)
            (d / "proposals" / key / f"{step_id}.py").write_text(SCALE_KERNEL)
            (d / "proposals" / key / f"{step_id}.note").write_text("one masked elementwise kernel")

    renewed = _driver(d, "renew")  # the steps out wait another lease; none is added
    assert renewed.count("2 of 2 leases renewed") == 2
    _round(d)  # round 2: the proposals judged; with the budget spent, every search is done
    records = [json.loads(line) for line in (d / "records.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["ok"] and r["verdict"] == "passed" for r in records)
    assert {r["kind"] for r in records} == {"large"} and all(r["brief_chars"] > 0 for r in records)
    for key in state["searches"]:
        assert json.loads((d / "briefs" / key / "pending.json").read_text())["steps"] == {}

    out = tmp_path / "records-store.jsonl"
    assert campaign.main(["export", "--dir", str(d), "--out", str(out)]) == 0
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["step_id"] for r in exported) == sorted(r["step_id"] for r in records)
    assert "scale_kernel" not in out.read_text()  # records only: no source code leaves the store this way

    capsys.readouterr()
    assert campaign.main(["table", "--dir", str(d), "--records", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| adaexplore | 1 | 2 | 1.00 |" in table and "| parallel_sampling | 1 | 2 | 1.00 |" in table
    assert "GPU: none (CPU)" in table
