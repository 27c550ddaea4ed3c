"""Compiled kernels are kept per candidate source (judge/kernel_cache.py): a run gets back what earlier
runs of the same source compiled, never what another source left, and nothing unbounded or oddly named
reaches the host's disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.judge.kernel_cache import MAX_BYTES, KernelCache, read_tree, safe_name, write_tree
from adaexplore_mcp.models import Verdict
from tests.test_judge_cases import candidate, cpu_settings, task


@pytest.mark.parametrize("name", ["/etc/passwd", "../x", "a/../b", "a/b/c", "", "a\nb", "x/.", "ab/..", 7, None])
def test_names_a_runner_sends_are_checked(name: object) -> None:
    assert safe_name(name) is None


def test_triton_layout_names_are_kept() -> None:
    assert safe_name("ABCDEF234/kernel.cubin") == "ABCDEF234/kernel.cubin"
    assert safe_name("__grp__kernel.json") == "__grp__kernel.json"


def test_keep_then_files_round_trips_and_drops_what_is_malformed(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path / "kernels")
    sent = [("K1/a.cubin", b"abc"), ("../escape", b"x"), ("K1/b.json", "not bytes"), "junk", ("K2/c.so", b"\0" * 10)]
    assert cache.keep("cand_1", sent) == 2
    assert sorted(cache.files("cand_1")) == [("K1/a.cubin", b"abc"), ("K2/c.so", b"\0" * 10)]
    assert cache.files("cand_2") == []
    assert not (tmp_path / "escape").exists() and not (tmp_path / "kernels" / "escape").exists()
    with pytest.raises(ValueError):
        cache.files("../cand_1")


def test_a_source_keeps_at_most_max_bytes(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path / "kernels")
    big = [(f"K/{i}.bin", b"z" * (MAX_BYTES // 4)) for i in range(8)]
    cache.keep("cand_big", big)
    assert sum(len(d) for _, d in cache.files("cand_big")) <= MAX_BYTES


def test_the_least_recently_used_sources_go_first(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path / "kernels", max_total_bytes=2500)
    for i in range(3):
        cache.keep(f"cand_{i}", [("K/x.bin", b"y" * 1000)])
        cache.files("cand_0")  # used again: stays
    kept = {p.name for p in (tmp_path / "kernels").iterdir()}
    assert "cand_0" in kept and "cand_2" in kept and "cand_1" not in kept, kept


def test_symlinks_in_a_tree_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("s")
    root = tmp_path / "tree"
    write_tree(root, [("K/a.bin", b"1")])
    (root / "K" / "link").symlink_to(tmp_path / "secret")
    assert read_tree(root) == [("K/a.bin", b"1")]


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory):
    j = Judge(cpu_settings(tmp_path_factory.mktemp("kcache")))
    j.start(wait=True)
    yield j
    j.close()


# Writes a mark naming this process's run into its kernel cache; raises when it finds one left by an earlier run.
PERSIST = ("        d = os.environ['TRITON_CACHE_DIR']\n        p = os.path.join(d, 'KEY', 'mark.bin')\n"
           "        if os.path.exists(p) and open(p).read() != RUN:\n"
           "            raise RuntimeError('compiled before: {tag}')\n"
           "        os.makedirs(os.path.dirname(p), exist_ok=True)\n        open(p, 'w').write(RUN)\n"
           "        return affine(x)")
EXTRA = "\nimport os\nRUN = os.urandom(8).hex()\n"


def test_a_second_run_of_the_same_source_gets_what_the_first_compiled(judge: Judge) -> None:
    source = candidate(PERSIST.format(tag="first"), extra=EXTRA)
    assert judge.evaluate(task(), source).verdict == Verdict.passed
    again = judge.evaluate(task(), source)
    assert again.verdict == Verdict.runtime_error and "compiled before: first" in again.error.message, again.error
    other = candidate(PERSIST.format(tag="other"), extra=EXTRA)  # another source: a cache of its own
    assert judge.evaluate(task(), other).verdict == Verdict.passed
