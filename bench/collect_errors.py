"""Re-run every broken kernel (seed-rule triggers in skills/rules/) and record the error texts observed.

On the GPU host (triton compiled for real; files written there come back only from $OUT):

    python3 bench/collect_errors.py --mode native --out $OUT/errors-gpu.json

then here, from what came back:

    python bench/collect_errors.py --from <files_at>/errors-gpu.json --check
    python bench/collect_errors.py --from <files_at>/errors-gpu.json --update-seeds --merge-fixture
    git diff skills/ tests/fixtures/errors/    # review: new signatures, SEEN += triton-3.6-cuda, groups

Without a GPU (default there: both CPU modes):

    python bench/collect_errors.py --mode interpreter --mode frontend --check
    python bench/collect_errors.py --write-fixture     # regenerate tests/fixtures/errors/errors.json

Modes: ``interpreter`` (TRITON_INTERPRET=1), ``frontend`` (the real compiler front end for a fake
sm_90 target, no GPU needed), ``native`` (the machine's GPU). Each observation carries its signature
(adaexplore_mcp/memory/signature.py) and whether it matches the rule's stored SIGNATURES.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adaexplore_mcp.memory.seed import SeedRule, read_seed_rules  # noqa: E402
from adaexplore_mcp.memory.signature import error_line, offending_line, signature  # noqa: E402
from devtools.triggers import clip_traceback, run_cases  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "errors" / "errors.json"
FIXTURE_TEXT_CHARS = (3000, 4000)  # head (root cause), tail (final error) kept per text

# Hand grouping: where a mode reports a mistake with a text that does not name it, the text gets its
# own group (and the rule lists that signature too, unless the text is shared with another mistake).
GROUP_OVERRIDES: dict[tuple[str, str], str | None] = {
    # numpy's scalar conversion error: the interpreter says the same for both mistakes.
    ("range-over-tensor", "interpreter"): "interp:numpy-scalar-conversion",
    ("math-in-kernel", "interpreter"): "interp:numpy-scalar-conversion",
    # The interpreter reports calling a kernel without [grid] as torch.dtype lacking `is_ptr`: the same
    # text as torch-dtype-in-kernel, so it names neither; left out (None).
    ("launch-without-grid", "interpreter"): None,
    ("reduce-axis-range", "interpreter"): "reduce-axis-range@interpreter",
    ("tensor-item-assign", "interpreter"): "tensor-item-assign@interpreter",
    ("tensor-index-scalar", "interpreter"): "tensor-index-scalar@interpreter",
    ("nested-def-in-kernel", "interpreter"): "nested-def-in-kernel@interpreter",
    # The compiler rejects a float mask only in MLIR ("error encountered during parsing", details on
    # stderr): a catch-all text that names no mistake; left out.
    ("non-bool-mask", "frontend"): None,
}


def triton_minor(version: str) -> str:
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else "unknown"


def seen_label(mode: str, version: str) -> str:
    suffix = {"interpreter": "interpreter", "frontend": "frontend", "native": "cuda"}[mode]
    return f"triton-{triton_minor(version)}-{suffix}"


def origin_label(mode: str, version: str) -> str:
    v = triton_minor(version)
    return {"interpreter": f"interpreter-{v}", "frontend": f"compiled-{v}-cpu-frontend", "native": f"gpu-{v}"}[mode]


JUDGE = "adaexplore_mcp.judge.classify"


def observe(seeds: list[SeedRule], modes: list[str]) -> list[dict]:
    import importlib.util

    describe = JUDGE if importlib.util.find_spec(JUDGE) else None
    cases = [(str(s.path), t) for s in seeds for t in s.triggers]
    by_path = {str(s.path): s for s in seeds}
    out = []
    for mode in modes:
        for obs in run_cases(cases, mode, describe=describe):
            rule = by_path[obs.path]
            row = {"rule": rule.key, "entry": obs.entry, "mode": mode, "triton_version": obs.triton_version,
                   "raised": obs.raised, "exception": obs.exception, "message": obs.message, "text": obs.text,
                   "note": obs.note}
            if obs.raised:
                row["signature"] = signature(obs.exception, obs.message, obs.text)
                row["error_line"] = error_line(obs.exception, obs.message, obs.text)
                row["source_line"] = offending_line(obs.text)
                row["matches_rule"] = row["signature"] in rule.signatures
                if obs.detail:  # what the server records: the judge's ErrorDetail
                    d = obs.detail
                    row["judge_detail"] = d
                    row["judge_signature"] = signature(d["exception"], d["message"], d["excerpt"])
            out.append(row)
    return out


def check(seeds: list[SeedRule], observed: list[dict]) -> list[str]:
    """Human-readable problems: a trigger that no longer raises, or raises an unlisted signature."""
    problems = []
    by_key = {s.key: s for s in seeds}
    for row in observed:
        rule = by_key[row["rule"]]
        label = seen_label(row["mode"], row["triton_version"])
        where = f"{row['rule']}.{row['entry']} [{label}]"
        if GROUP_OVERRIDES.get((row["rule"], row["mode"]), "") is None:
            continue
        if not row["raised"]:
            if label in rule.seen:
                problems.append(f"{where}: no error any more ({row['note'] or 'ran fine'})")
            continue
        if not row["matches_rule"]:
            problems.append(f"{where}: signature not in rule: {row['signature']!r} ({row['error_line'][:120]})")
        elif row.get("judge_signature", row["signature"]) != row["signature"]:
            problems.append(f"{where}: the judge's ErrorDetail gives another signature: {row['judge_signature']!r}")
    return problems


def _set_constant(source: str, name: str, value: object) -> str:
    pattern = re.compile(rf"^{name} = .*$", re.M)
    return pattern.sub(lambda _: f"{name} = {value!r}", source, count=1)


def update_seeds(seeds: list[SeedRule], observed: list[dict]) -> int:
    """Merge observed signatures / SEEN labels into the rule files (review with git diff).

    A signature raised by the triggers of 3 or more rules is the environment speaking (no GPU, a
    poisoned context), not a mistake: it is reported and left out.
    """
    owners: dict[str, set[str]] = {}
    for r in observed:
        if r["raised"]:
            owners.setdefault(r["signature"], set()).add(r["rule"])
    generic = {sig for sig, keys in owners.items() if len(keys) >= 3}
    for sig in sorted(generic):
        print(f"left out (raised by {len(owners[sig])} rules' triggers): {sig}")
    changed = 0
    for rule in seeds:
        rows = [r for r in observed if r["rule"] == rule.key and r["raised"] and r["signature"] not in generic
                and r["exception"] not in ("WorkerCrashed", "CaseTimeout")
                and GROUP_OVERRIDES.get((r["rule"], r["mode"]), "") is not None]
        if not rows:
            continue
        sigs = list(dict.fromkeys(rule.signatures + [r["signature"] for r in rows]))
        seen = list(dict.fromkeys(rule.seen + [seen_label(r["mode"], r["triton_version"]) for r in rows]))
        err = rule.error_line or rows[0]["error_line"]
        src = rule.path.read_text()
        new = _set_constant(_set_constant(_set_constant(src, "SIGNATURES", sigs), "SEEN", seen), "ERROR_LINE", err)
        if new != src:
            rule.path.write_text(new)
            changed += 1
    return changed


def fixture_entries(seeds: list[SeedRule], observed: list[dict]) -> list[dict]:
    sources = {s.key: s.path.read_text() for s in seeds}
    entries = []
    for row in observed:
        if not row["raised"] or row["exception"] in ("WorkerCrashed", "CaseTimeout"):
            continue
        group = GROUP_OVERRIDES.get((row["rule"], row["mode"]), row["rule"])
        if group is None:
            continue
        if row["mode"] == "native" and not row["matches_rule"]:
            group = f"{row['rule']}@{origin_label('native', row['triton_version'])}?"  # review by hand
        entries.append({
            "id": f"{row['rule']}.{row['entry']}.{origin_label(row['mode'], row['triton_version'])}",
            "group": group, "origin": origin_label(row["mode"], row["triton_version"]),
            "exception": row["exception"], "message": row["message"],
            "text": clip_traceback(row["text"], *FIXTURE_TEXT_CHARS),
            "source": sources[row["rule"]], "entry": row["entry"], "rule": row["rule"],
        })
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", action="append", choices=["interpreter", "frontend", "native"])
    parser.add_argument("--rule", action="append", help="only these rule keys")
    parser.add_argument("--rules-dir", type=Path, default=ROOT / "skills" / "rules",
                        help="rule files to run (skills/pending holds GPU-only rules not yet observed)")
    parser.add_argument("--out", type=Path, help="write the observations (JSON)")
    parser.add_argument("--from", dest="from_file", type=Path,
                        help="read observations written by --out (e.g. on the GPU host) instead of running")
    parser.add_argument("--check", action="store_true", help="exit 1 when a trigger disagrees with its rule")
    parser.add_argument("--update-seeds", action="store_true", help="add observed signatures/SEEN to rule files")
    parser.add_argument("--merge-fixture", action="store_true", help="add observed texts to the fixture")
    parser.add_argument("--write-fixture", action="store_true", help="rewrite the fixture (CPU modes)")
    args = parser.parse_args(argv)

    modes = args.mode
    if not modes:
        try:
            import torch

            modes = ["native"] if torch.cuda.is_available() else ["interpreter", "frontend"]
        except ImportError:
            modes = ["interpreter", "frontend"]
    seeds = read_seed_rules(args.rules_dir)
    if args.rule:
        seeds = [s for s in seeds if s.key in set(args.rule)]
    if args.from_file:
        keys = {s.key for s in seeds}
        observed = [r for r in json.loads(args.from_file.read_text()) if r["rule"] in keys]
        modes = sorted({r["mode"] for r in observed})
    else:
        observed = observe(seeds, modes)
    raised = sum(r["raised"] for r in observed)
    print(f"{len(observed)} trigger runs in {modes}: {raised} raised, "
          f"{sum(bool(r.get('matches_rule')) for r in observed)} match their rule's signatures")
    for row in observed:
        status = "ok " if row.get("matches_rule") else ("-- " if not row["raised"] else "NEW")
        print(f"  {status} {row['mode'][:5]} {row['rule']}.{row['entry']}: {row.get('signature', row['note'])}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(observed, indent=1))
        print(f"wrote {args.out}")
    if args.update_seeds:
        print(f"updated {update_seeds(seeds, observed)} rule files")
    if args.write_fixture or args.merge_fixture:
        new = fixture_entries(seeds, observed)
        old = json.loads(FIXTURE.read_text())["errors"] if args.merge_fixture and FIXTURE.exists() else []
        ids = {e["id"] for e in new}
        merged = [e for e in old if e["id"] not in ids] + new
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        FIXTURE.write_text(json.dumps({"format": 1, "errors": merged}, indent=1) + "\n")
        print(f"wrote {FIXTURE} ({len(merged)} errors)")
    if args.check:
        problems = check(seeds, observed)
        for p in problems:
            print("PROBLEM", p)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
