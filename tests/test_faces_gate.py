"""The faces gate (.ci/faces.py): package code reaches a judge subpackage only through its __init__'s __all__."""

from __future__ import annotations

from pathlib import Path

from tests.ci_scripts import REPO, load

faces = load("faces")


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_imports_past_a_face_fail_and_through_it_pass(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "judge/__init__.py": "",
        "judge/box/__init__.py": "from .core import enter\nfrom . import limits\n__all__ = ['enter', 'limits']\n",
        "judge/box/core.py": "from .limits import cap\ndef enter(): return cap\n",  # inside: free
        "judge/box/limits.py": "cap = 1\n",
        "judge/good.py": "from .box import enter, limits\nfrom pkg.judge import box\n",
        "judge/bad.py": "from .box.core import enter\n",
        "judge/bad_late.py": "def later():\n    from .box import core\n",  # a name the face does not give
        "cli.py": "import pkg.judge.box.limits\n",
    })
    found = faces.violations(root)
    assert faces.faces(root) == {"pkg.judge.box": {"enter", "limits"}}
    assert sorted(line.split(":")[0].rsplit("/", 1)[1] for line in found) == ["bad.py", "bad_late.py", "cli.py"]
    assert all("use its face: enter, limits" in line for line in found)


def test_the_package_itself_passes_the_gate():
    root = REPO / "adaexplore_mcp"
    assert faces.violations(root) == []
    assert {"adaexplore_mcp.judge.sandbox", "adaexplore_mcp.judge.processes", "adaexplore_mcp.judge.replay",
            "adaexplore_mcp.judge.frontend", "adaexplore_mcp.judge.cluster"} <= set(faces.faces(root))
