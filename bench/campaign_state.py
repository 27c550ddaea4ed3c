"""Keep a campaign's state between sessions without keeping the problems' sources: pack and unpack.

A campaign runs for days across machines lent call by call, and its folder (the server's store, the briefs, the
proposals) is the search itself: lose it and every search starts over. Its problems are someone else's files
(KernelBench), which this repository does not hold. `pack` writes the folder to one tarball with every copy of a
problem's source replaced by a token naming the problem and its hash (the store's task rows, the briefs' inline
reference, reference.py, campaign.json), and checks that no source line is left; `unpack` puts the sources back
from a checkout of the problems, refusing a file whose hash differs.

    python bench/campaign_state.py pack   --dir D --out bench/results/<campaign>/state.tgz
    python bench/campaign_state.py unpack --state bench/results/<campaign>/state.tgz --dir D --problems ROOT

ROOT holds the problems at the paths campaign.json names from `KernelBench/` on (a KernelBench checkout).
The server's logs and locks are not kept (they are the host's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sqlite3
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

STORE = Path("home") / "adaexplore.sqlite3"
LEFT_OUT = ("home/logs", "home/locks")
SHARE_OF_LINES = 0.6  # of a source's code lines in one file: a copy of it, not a kernel quoting its shapes


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def token(name: str, source: str) -> str:
    return f"<<problem {name} sha256:{digest(source)}>>"


def _swap_json(value: Any, swaps: dict[str, str]) -> Any:
    """Every string of a JSON value that is one of `swaps`' keys, replaced by its value."""
    if isinstance(value, str):
        return swaps.get(value, value)
    if isinstance(value, list):
        return [_swap_json(v, swaps) for v in value]
    if isinstance(value, dict):
        return {k: _swap_json(v, swaps) for k, v in value.items()}
    return value


def _swap_folder(root: Path, swaps: dict[str, str], references: dict[str, str]) -> None:
    """Swap sources for tokens (or back) in the store, the briefs and campaign.json of the folder at `root`.
    `references`: search folder name -> the text its reference.py holds after the swap."""
    conn = sqlite3.connect(root / STORE)
    for old, new in swaps.items():
        conn.execute("UPDATE tasks SET source = ? WHERE source = ?", (new, old))
    conn.commit()
    conn.execute("VACUUM")  # rewrite the file: the old rows' text must not stay in free pages
    conn.close()
    for path in sorted((root / "briefs").glob("*/*.json")) + [root / "campaign.json"]:
        data = json.loads(path.read_text())
        swapped = _swap_json(data, swaps)
        if swapped != data:
            path.write_text(json.dumps(swapped, indent=1))
    for folder, text in references.items():
        (root / "briefs" / folder / "reference.py").write_text(text)


def _problems(d: Path) -> list[dict]:
    return json.loads((d / "campaign.json").read_text())["problems"]


def _search_problems(d: Path) -> dict[str, str]:
    """Search folder name -> its problem's name (folders are `<problem>__<strategy>`)."""
    return {p.name: p.name.split("__", 1)[0] for p in (d / "briefs").iterdir() if p.is_dir()}


def pack(d: Path, out: Path) -> int:
    problems = _problems(d)
    swaps = {p["source"]: token(p["name"], p["source"]) for p in problems if p.get("source")}
    tokens = {p["name"]: token(p["name"], p["source"]) for p in problems if p.get("source")}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "D"
        shutil.copytree(d, copy, ignore=shutil.ignore_patterns("*.sqlite3", "*.sqlite3-wal", "*.sqlite3-shm"))
        for left in LEFT_OUT:
            shutil.rmtree(copy / left, ignore_errors=True)
        src = sqlite3.connect(f"file:{(d / STORE).resolve()}?mode=ro", uri=True)
        dst = sqlite3.connect(copy / STORE)
        src.backup(dst)  # a consistent copy, whatever the WAL holds
        src.close()
        dst.close()
        refs = {name: tokens[problem] for name, problem in _search_problems(copy).items()
                if (copy / "briefs" / name / "reference.py").exists()}
        _swap_folder(copy, swaps, refs)
        leaks = _leaks(copy, [p["source"] for p in problems if p.get("source")])
        if leaks:
            print("pack refused: a problem's source is still in " + ", ".join(leaks), file=sys.stderr)
            return 1
        out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out, "w:gz") as tar:
            tar.add(copy, arcname="D")
    print(f"packed {d} -> {out} ({out.stat().st_size / 1e6:.1f} MB; {len(swaps)} problem sources left out)")
    return 0


def _leaks(root: Path, sources: list[str]) -> list[str]:
    """Files under `root` that still hold a problem's source: the whole text (plain or JSON-escaped), or most of
    its code lines. A kernel written for the problem repeats a few of them (its shapes, get_inputs), which is not
    the problem's file."""
    def forms(text: str) -> tuple[bytes, bytes]:
        return text.encode(), json.dumps(text)[1:-1].encode()  # as written, and JSON-escaped

    marks = [(forms(s), [forms(line) for line in {x.strip() for x in s.splitlines() if len(x.strip()) > 20}])
             for s in sources]
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for whole_forms, lines in marks:
            seen = sum(1 for line_forms in lines if any(f in data for f in line_forms))
            whole = any(f in data for f in whole_forms)
            if whole or (lines and seen / len(lines) > SHARE_OF_LINES):
                found.append(f"{path.relative_to(root)} ({seen} of {len(lines)} lines)")
                break
    return found


def unpack(state: Path, d: Path, problems_root: Path) -> int:
    if d.exists():
        print(f"unpack refused: {d} exists (move it aside first; nothing was changed)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(state) as tar:
            tar.extractall(tmp, filter="data")
        copy = Path(tmp) / "D"
        problems = _problems(copy)
        swaps, sources = {}, {}
        for p in problems:
            rel = p["path"][p["path"].index("KernelBench/"):] if "KernelBench/" in p["path"] else p["path"]
            path = problems_root / rel
            if not path.exists():
                print(f"unpack refused: {path} not found (pass --problems, the folder holding KernelBench/)",
                      file=sys.stderr)
                return 1
            text = path.read_text()
            tok = p.get("source") or ""
            if tok != token(p["name"], text):
                print(f"unpack refused: {path} is not the file this campaign ran ({tok} vs its sha256 "
                      f"{digest(text)})", file=sys.stderr)
                return 1
            swaps[tok], sources[p["name"]] = text, text
        refs = {name: sources[problem] for name, problem in _search_problems(copy).items()
                if (copy / "briefs" / name / "reference.py").exists()}
        _swap_folder(copy, swaps, refs)
        shutil.copytree(copy, d)
    print(f"unpacked {state} -> {d} ({len(swaps)} problem sources put back)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--dir", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("unpack")
    p.add_argument("--state", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--problems", required=True, help="the folder holding KernelBench/ (a checkout)")
    args = ap.parse_args(argv)
    if args.cmd == "pack":
        return pack(Path(args.dir), Path(args.out))
    return unpack(Path(args.state), Path(args.dir), Path(args.problems))


if __name__ == "__main__":
    sys.exit(main())
