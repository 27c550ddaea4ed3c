"""bench/judge_shape.py counts what issue 40 measures: modules, lines, import floors, import cycles."""

from __future__ import annotations

from bench.judge_shape import shape


def test_floors_count_the_longest_import_chain_and_a_cycle_is_one_floor(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("X = 1\n")
    (pkg / "mid.py").write_text("from .base import X\n")
    (pkg / "a.py").write_text("from . import b\nfrom .mid import X\n")
    (pkg / "b.py").write_text("from . import a\n")
    (pkg / "top.py").write_text("import pkg.a\n\ndef later():\n    import pkg.top  # deferred: not counted\n")
    s = shape(tmp_path, "pkg")
    assert s["modules"] == 6 and s["cycles"] == 1
    assert s["floors"] == 4  # top -> {a, b} -> mid -> base
    assert s["lines"] == 0 + 1 + 1 + 2 + 1 + 4


def test_a_subpackage_is_one_concept_and_its_face_adds_no_concept_floor(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "box").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("X = 1\n")
    (pkg / "box" / "__init__.py").write_text("from .inner import Y\n")  # the face
    (pkg / "box" / "inner.py").write_text("from .deeper import Z as Y\n")
    (pkg / "box" / "deeper.py").write_text("from ..base import X as Z\n")
    (pkg / "top.py").write_text("from .box import Y\n")
    s = shape(tmp_path, "pkg")
    assert s["modules"] == 6 and s["floors"] == 5  # top -> box -> inner -> deeper -> base
    assert s["concepts"] == 3  # base, box, top
    assert s["concept_floors"] == 3  # top -> box -> base
