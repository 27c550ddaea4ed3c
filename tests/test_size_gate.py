"""The size gate (.ci/size_check.py): 450 lines a module, and a ceiling on the judge's concepts (top-level
modules plus subpackages, a subpackage counting once however many files it holds)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, files: dict[str, str], ceiling: int) -> subprocess.CompletedProcess:
    for name, text in {"bench/b.py": "", "devtools/d.py": "", **files}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / ".ci").mkdir(exist_ok=True)
    (tmp_path / ".ci" / "judge_concepts_max.txt").write_text(f"{ceiling}\n")
    return subprocess.run([sys.executable, str(REPO / ".ci" / "size_check.py")], cwd=tmp_path,
                          capture_output=True, text=True)


JUDGE = {"adaexplore_mcp/__init__.py": "", "adaexplore_mcp/judge/__init__.py": "",
         "adaexplore_mcp/judge/a.py": "", "adaexplore_mcp/judge/box/__init__.py": "",
         "adaexplore_mcp/judge/box/one.py": "", "adaexplore_mcp/judge/box/two.py": ""}


def test_a_subpackage_counts_once_and_a_top_level_split_passes_the_ceiling(tmp_path):
    ok = _run(tmp_path, JUDGE, ceiling=2)
    assert ok.returncode == 0, ok.stdout
    assert "2 concepts (1 modules, 1 subpackages: box)" in ok.stdout
    split = _run(tmp_path, {**JUDGE, "adaexplore_mcp/judge/a_part2.py": ""}, ceiling=2)
    assert split.returncode == 1 and "3 concepts, over the ceiling of 2" in split.stdout


def test_a_module_over_450_lines_fails(tmp_path):
    big = _run(tmp_path, {**JUDGE, "adaexplore_mcp/judge/a.py": "x = 1\n" * 451}, ceiling=2)
    assert big.returncode == 1 and "adaexplore_mcp/judge/a.py: 451 lines" in big.stdout
