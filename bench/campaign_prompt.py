"""The proposers' side of a campaign: which searches each proposer takes, and the prompt it reads.

A proposer is an assistant session shown only files: each of its searches' newest `next_step` response (the
brief), the reference (what `get_task` returns) and the full kernels behind cut pointers; it writes one kernel
and a one-line note per pending step and never runs code, so the server stays the only judge. One proposer takes
several searches of different problems, one search per problem, so that nothing it learns on a problem reaches
another strategy's search of the same problem; a fresh proposer every round (what it knows is what the brief
says).

    python bench/campaign_prompt.py groups --dir D --proposers 8      # one line of searches per proposer
    python bench/campaign_prompt.py prompt --dir D SEARCH [SEARCH...]  # the prompt, with absolute paths
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

RULES = """Strict conditions: you never run code (no python, no tests, no GPU, no pip): the server is the only judge.
Do not use the bash tool at all (not even ls). Use only the file viewing and file creating tools, and only on the
paths named here (the brief files, the reference files, the kernels folders, and the files you write). Do not read
any other file, folder or repository, and do not search the web."""


def groups(d: Path, proposers: int) -> list[list[str]]:
    """Searches dealt to proposers so that no proposer holds two searches of one problem: the searches in order of
    (strategy, problem), every proposer-th one to the same proposer; a count that would repeat a problem in one
    hand is refused (6 problems x 4 strategies: 7 or 8 proposers deal cleanly, 6 does not)."""
    cfg = json.loads((d / "campaign.json").read_text())
    problems = [p["name"] for p in cfg["problems"]]
    keys = [f"{p}__{s}" for s in cfg["strategies"] for p in problems]
    dealt = [keys[h::proposers] for h in range(proposers)]
    for hand in dealt:
        names = [k.split("__", 1)[0] for k in hand]
        if len(set(names)) != len(names):
            raise SystemExit(f"{proposers} proposers would give one of them two searches of a problem: {hand}")
    return dealt


def search_part(d: Path, key: str) -> str:
    folder = d.resolve() / "briefs" / key
    rounds = sorted(folder.glob("round-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    if not rounds:
        raise SystemExit(f"{key}: no brief handed out yet (run `campaign.py round --hand-out-only` first)")
    steps = json.loads((folder / "pending.json").read_text())["steps"]
    errors = sorted(folder.glob("errors-call-*.json"))
    out = [f"- Search `{key}`: brief file `{rounds[-1]}` (the newest next_step response); reference source "
           f"`{folder / 'reference.py'}`; full kernels behind kernel_uri pointers, where the brief cut them, in "
           f"`{folder / 'kernels'}/node-<id>.py` (if that folder exists)."]
    if errors:
        out.append(f"  A previous answer of yours was refused by the server: read `{errors[-1]}` and avoid that error.")
    proposals = d.resolve() / "proposals" / key
    for step_id, info in steps.items():
        out.append(f"  - step `{step_id}` ({info.get('kind')} step, parent node {info.get('parent')}): write "
                   f"`{proposals / (step_id + '.py')}` and `{proposals / (step_id + '.note')}`")
    return "\n".join(out)


def prompt(d: Path, keys: list[str]) -> str:
    parts = "\n".join(search_part(d, k) for k in keys)
    return f"""You are a GPU kernel engineer using the adaexplore-mcp server, which judges Triton kernels on a GPU and runs
a search over them. Here you talk to it through files: each brief file below is exactly the server's `next_step`
response for one search (JSON). You answer each pending step by writing files; the server judges them later.
You are the proposer for {len(keys)} independent searches (different problems). Treat each search on its own.

For each search:
1. Read its brief file. It holds one step at the top level and the others in `more_steps`; fields listed in a
   step's `same_as_first` are the same as the first step's (said once), and a step with `same_parent_as` grows
   from the same parent as the step it names, whose parent fields hold it. Read `instructions`, `kind`, `rules`,
   `timing_note`, `parent_kernel` / `parent_evaluation` / `parent_failure` (small steps), `working_memory`,
   `pool` (large steps: the best kernels of other branches, to beat), `best`, `task` (shapes, dtypes).
2. Read the reference source file (the PyTorch `Model` your `ModelNew` must match; it is what get_task returns).
3. For every pending step listed, write a complete Python module defining `class ModelNew(nn.Module)` with
   Triton kernels (imports included) to the .py path given, and one line describing the approach to the .note
   path. A small step's answer is the parent kernel with your change applied, written out in full. Make the steps
   of one search differ from one another (they are explored in parallel). Aim for correct and fast on the GPU at
   the task's full shapes; respect every rule and the precision contract in the instructions.

{RULES}

Where a brief's pool or parent kernel was cut (it says so and points to a kernel_uri), the full source is in
that search's kernels folder as node-<id>.py. A refused answer of yours from an earlier round, if any, is named below.

Your searches:
{parts}

When done, reply with one line per step: the path written and the approach in a few words."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("groups")
    p.add_argument("--dir", required=True)
    p.add_argument("--proposers", type=int, default=8)
    p = sub.add_parser("prompt")
    p.add_argument("--dir", required=True)
    p.add_argument("search", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd == "groups":
        for hand in groups(Path(args.dir), args.proposers):
            print(" ".join(hand))
    else:
        print(prompt(Path(args.dir), args.search))
    return 0


if __name__ == "__main__":
    sys.exit(main())
