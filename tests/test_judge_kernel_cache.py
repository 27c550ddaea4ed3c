"""Compiled kernels are kept per candidate source (judge/kernel_cache.py): a run gets back what earlier
runs of the same source compiled, never what another source left, and nothing unbounded or oddly named
reaches the host's disk."""

from __future__ import annotations

from pathlib import Path

import os
import time

import pytest

from adaexplore_mcp.judge import Judge, kernel_cache
from adaexplore_mcp.judge.kernel_cache import (
    BLOCK, MAX_BYTES, RECORD, STALE_S, KernelCache, read_tree, recorded_charge, safe_name, write_tree,
)
from adaexplore_mcp.models import Verdict
from tests.test_judge_cases import candidate, task


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
    one = 4 * BLOCK  # a source's folder, its record, its folder K and its one file
    cache = KernelCache(tmp_path / "kernels", max_total_bytes=int(2.5 * one))
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



def hidden(root: Path) -> list[str]:
    return [p.name for p in root.iterdir() if p.name.startswith(".")] if root.is_dir() else []


def test_names_that_cannot_be_written_together_are_dropped_and_the_rest_kept(tmp_path: Path) -> None:
    """"b" a file and "b/c" a file under a folder "b": written as sent, the store failed half-way and left
    its temporary folder (15 MiB a time) behind for good (red team, round 13)."""
    cache = KernelCache(tmp_path / "kernels")
    sent = [("aaa", b"1"), ("b", b"2"), ("b/c", b"3"), ("K/d.bin", b"4"), ("K", b"5"), ("e", b"6"), ("e", b"7")]
    assert cache.keep("cand", sent) == 2
    assert sorted(cache.files("cand")) == [("aaa", b"1"), ("e", b"6")]
    assert hidden(cache.root) == []


def test_a_store_that_fails_leaves_no_temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = KernelCache(tmp_path / "kernels")
    cache.keep("cand", [("K/a.bin", b"old")])

    def half_then_fail(root: Path, files: list) -> int:
        write_tree(root, files[:1])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(kernel_cache, "write_tree", half_then_fail)
    with pytest.raises(OSError):
        cache.keep("cand", [("K/a.bin", b"new"), ("K/b.bin", b"new")])
    assert hidden(cache.root) == []
    assert cache.files("cand") == [("K/a.bin", b"old")]  # what was stored before stays


def test_empty_files_and_folders_are_charged_as_blocks_and_pruned(tmp_path: Path) -> None:
    """512 empty files, each in its own folder: 1025 inodes that counted 0 bytes and were never pruned."""
    empty = [(f"d{i:04d}/f", b"") for i in range(512)]
    cache = KernelCache(tmp_path / "kernels", max_total_bytes=6 << 20)
    assert cache.keep("cand_0", empty) == 512
    assert recorded_charge(cache.root / "cand_0") >= 512 * BLOCK * 2
    cache.keep("cand_1", empty)
    assert sorted(p.name for p in cache.root.iterdir()) == ["cand_1"]


def test_the_per_source_bound_charges_blocks(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path / "kernels")
    sent = [(f"d{i:04d}/f", b"x") for i in range(512)] + [("big.bin", b"z" * (MAX_BYTES - 512 * 2 * BLOCK))]
    assert cache.keep("cand", sent) == 512  # the 512 tiny files took 4 MiB of the 16: the big one no longer fits
    assert read_tree(cache.root / "cand") == sorted(sent[:512])


def test_prune_uses_the_record_and_walks_a_folder_without_one_once(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path / "kernels")
    cache.keep("cand", [("K/a.bin", b"y" * 5000)])
    assert recorded_charge(cache.root / "cand") == 2 * BLOCK + BLOCK + 2 * BLOCK
    assert RECORD not in dict(cache.files("cand"))  # never sent to a runner
    (cache.root / "cand" / RECORD).unlink()  # stored before records were kept
    before = (cache.root / "cand").stat().st_mtime_ns
    cache.prune()
    assert (cache.root / "cand" / RECORD).read_text() == str(5 * BLOCK)
    assert (cache.root / "cand").stat().st_mtime_ns == before  # its place in the line is kept


def test_prune_removes_stale_temporary_folders_and_counts_young_ones(tmp_path: Path) -> None:
    """A referee that died while storing left its temporary folder: prune skipped every dot-folder."""
    cache = KernelCache(tmp_path / "kernels", max_total_bytes=44 * BLOCK)
    cache.keep("cand", [("K/a.bin", b"y")])  # 4 blocks
    stale, young = cache.root / ".cand.1.2", cache.root / ".other.1.3"
    for folder in (stale, young):
        write_tree(folder, [(f"K/{i}.bin", b"") for i in range(40)])  # 42 blocks each, with their folders
    old = time.time() - STALE_S - 60
    os.utime(stale, (old, old))
    cache.prune()
    assert hidden(cache.root) == [young.name]
    assert not (cache.root / "cand").exists()  # the young temporary counts: 42 + 4 blocks pass the bound of 44


def test_at_most_max_sources_are_kept_least_recently_used_out_first(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path / "kernels", max_sources=3)
    for i in range(5):
        cache.keep(f"cand_{i}", [("K/x.bin", b"y")])
        cache.files("cand_0")  # used again: stays
    assert sorted(p.name for p in cache.root.iterdir()) == ["cand_0", "cand_3", "cand_4"]


@pytest.fixture(scope="module")
def judge(shared_judge: Judge) -> Judge:
    return shared_judge  # tests/conftest.py; the sources below are this module's own, so is their cache


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


def test_a_replay_hands_later_replays_only_the_shared_libraries_triton_compiled(monkeypatch) -> None:
    """A replay's compiled launchers are reused by later replays (of any source): only `.so` files with safe names,
    never a `.py` a program could have planted there (red team, round 17)."""
    from adaexplore_mcp.judge import referee as referee_module

    files = [("ab/__triton_launcher.so", b"elf"), ("ab/helper.py", b"import os"), ("../up.so", b"x"),
             ("cd/cuda_utils.so", b"elf2"), ("ab/__triton_launcher.so", b"second")]
    monkeypatch.setattr(referee_module, "_compiled_files", lambda runner, deadline: files)
    ref = referee_module.Referee.__new__(referee_module.Referee)
    ref.device, ref.replay_launchers = "cuda", {}
    ref.keep_launchers(object(), 0.0)
    assert ref.replay_launchers == {"ab/__triton_launcher.so": b"elf", "cd/cuda_utils.so": b"elf2"}
