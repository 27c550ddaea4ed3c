"""The campaign's tables, from records.jsonl (and reference.jsonl) alone: per strategy, and best-so-far by step.

Conventions (AdaExplore's): a search's result is its best correct kernel's speedup, capped at 10x; a problem
without a correct kernel counts 0 in the mean. The speedup ranked is `ranked_speedup`: against strict fp32,
or against the TF32 reference for a kernel below the task's precision. The geometric mean is over the
searches with a correct kernel (their number is shown). fast_1: the share of searches whose best beats 1.0x.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

CAP = 10.0


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def best_by_step(records: list[dict]) -> list[float]:
    """After each expanded step (in order), the capped ranked speedup of the best correct kernel so far (0
    before one passed)."""
    best, out = 0.0, []
    for r in records:
        if r.get("verdict") == "passed" and r.get("ranked_speedup") is not None:
            best = max(best, min(CAP, r["ranked_speedup"]))
        out.append(best)
    return out


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _geo(xs: list[float]) -> float | None:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def summarize(records: list[dict]) -> dict[str, dict]:
    """Per strategy: steps, correctness, best speedups (vs eager/ranked and vs torch.compile), curves, brief size."""
    by_search: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r.get("ok"):
            by_search[r["search"]].append(r)
    out: dict[str, dict] = {}
    for strategy in sorted({r["strategy"] for r in records}):
        searches = {k: v for k, v in by_search.items() if k.split("__", 1)[1] == strategy}
        steps = [r for v in searches.values() for r in v]
        bests, compiled, curves, below = [], [], [], 0
        for recs in searches.values():
            curve = best_by_step(recs)
            curves.append(curve)
            bests.append(curve[-1] if curve else 0.0)
            passed = [r for r in recs if r.get("verdict") == "passed" and r.get("ranked_speedup") is not None]
            if passed:
                top = max(passed, key=lambda r: r["ranked_speedup"])
                below += bool(top.get("below_fp32"))
                if top.get("speedup_compile") is not None:
                    compiled.append(min(CAP, top["speedup_compile"]))
        depth = max((len(c) for c in curves), default=0)
        curve = [_mean([c[i] for c in curves if len(c) > i]) for i in range(depth)]  # searches that reached k
        reached = [sum(len(c) > i for c in curves) for i in range(depth)]
        out[strategy] = {
            "searches": len(searches), "steps": len(steps),
            "correct": sum(r.get("verdict") == "passed" for r in steps) / len(steps) if steps else None,
            "mean": _mean(bests), "geomean": _geo(bests), "with_correct": sum(b > 0 for b in bests),
            "fast_1": sum(b > 1.0 for b in bests) / len(bests) if bests else None,
            "compile_mean": _mean(compiled), "compile_geomean": _geo(compiled),
            "best_below_fp32": below,
            "brief_chars": _mean([r["brief_chars"] for r in steps if r.get("brief_chars")]),
            "curve": curve, "reached": reached,
        }
    return out


def by_kind(records: list[dict]) -> dict[tuple[str, str], dict]:
    """Per strategy and step kind (small; large off the root; large from the root): how often a step passed,
    beat its parent's ranked speedup (a correct parent only), and set a new best for its search. The evidence
    for the step rule's constants: what each kind of step is worth."""
    ranked: dict[tuple[str, int], float] = {}
    for r in records:
        if r.get("ok") and r.get("verdict") == "passed" and r.get("ranked_speedup") is not None:
            ranked[(r["search"], r["node"])] = r["ranked_speedup"]
    out: dict[tuple[str, str], dict] = defaultdict(lambda: {"steps": 0, "passed": 0, "beat": 0, "vs_parent": 0,
                                                              "new_best": 0})
    best: dict[str, float] = defaultdict(float)
    for r in records:
        if not r.get("ok"):
            continue
        kind = r.get("kind") or "?"
        if kind == "large":
            kind = "large (root)" if r.get("parent") in (0, None) else "large (off root)"
        row = out[(r["strategy"], kind)]
        row["steps"] += 1
        mine = ranked.get((r["search"], r["node"]))
        row["passed"] += mine is not None
        parent = ranked.get((r["search"], r.get("parent")))
        if parent is not None:
            row["vs_parent"] += 1
            row["beat"] += mine is not None and mine > parent
        if mine is not None and mine > best[r["search"]]:
            row["new_best"] += best[r["search"]] > 0  # the first correct kernel of a search is not counted
            best[r["search"]] = mine
    return dict(out)


def ranked_cell(ref: dict) -> str:
    """A reference kernel's speedup as a search would rank it: vs the TF32 reference when below fp32."""
    if ref.get("below_fp32") and ref.get("speedup_tf32") is not None:
        return f"{_fmt(ref['speedup_tf32'])}x (TF32; {_fmt(ref.get('speedup'))}x vs strict fp32)"
    return f"{_fmt(ref.get('speedup'))}x"


def first_steps(records: list[dict], n: int) -> list[dict]:
    """Each search's first n expanded steps (records in order): strategies compared at an equal budget."""
    seen: dict[str, int] = defaultdict(int)
    out = []
    for r in records:
        if r.get("ok"):
            seen[r["search"]] += 1
            if seen[r["search"]] > n:
                continue
        out.append(r)
    return out


def equal_budget(records: list[dict]) -> tuple[dict[str, int], dict[str, dict[str, float]]]:
    """Per problem, the steps every strategy reached (the smallest count among its searches) and each
    strategy's best after that many steps: strategies compared at equal steps even when calls were cut off."""
    by_search: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r.get("ok"):
            by_search[r["search"]].append(r)
    budget: dict[str, int] = {}
    best: dict[str, dict[str, float]] = defaultdict(dict)
    for problem in sorted({r["problem"] for r in records}):
        searches = {k: v for k, v in by_search.items() if k.split("__", 1)[0] == problem}
        k = min(len(v) for v in searches.values())
        budget[problem] = k
        for key, recs in searches.items():
            curve = best_by_step(recs[:k])
            best[key.split("__", 1)[1]][problem] = curve[-1] if curve else 0.0
    return budget, best


def print_tables(d: Path, records: list[dict] | None = None, steps: int = 0) -> int:
    records = read_jsonl(d / "records.jsonl") if records is None else records
    if steps:
        records = first_steps(records, steps)
    cfg = json.loads((d / "campaign.json").read_text()) if (d / "campaign.json").exists() else {}
    if not records:
        print("no records yet")
        return 1
    gpus = sorted({r["gpu"] for r in records if r.get("gpu")})
    print(f"campaign {d}: {len(cfg.get('problems', []))} problems, {cfg.get('steps')} steps per search, "
          f"{cfg.get('in_flight')} in flight; GPU: {', '.join(gpus) or 'none (CPU)'}")
    stats = summarize(records)
    print("\n| strategy | searches | steps | correct | mean best (capped 10x, 0 if none) | geomean best (n) | "
          "fast_1 | vs torch.compile mean / geomean | best below fp32 | brief chars/step |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, s in stats.items():
        print(f"| {name} | {s['searches']} | {s['steps']} | {_fmt(s['correct'])} | {_fmt(s['mean'])}x | "
              f"{_fmt(s['geomean'])}x ({s['with_correct']}) | {_fmt(s['fast_1'])} | "
              f"{_fmt(s['compile_mean'])}x / {_fmt(s['compile_geomean'])}x | {s['best_below_fp32']} | "
              f"{_fmt(s['brief_chars'], 0)} |")
    marks = [i for i in range(1, 33) if any(len(s["curve"]) >= i for s in stats.values())]
    print("\nmean best-so-far (capped ranked speedup) after step k, over the searches that reached step k (n):\n")
    print("| strategy | " + " | ".join(f"k={i}" for i in marks) + " |")
    print("|---|" + "---|" * len(marks))
    for name, s in stats.items():
        print(f"| {name} | " + " | ".join(f"{_fmt(s['curve'][i - 1])} (n={s['reached'][i - 1]})"
                                            if len(s["curve"]) >= i else "-" for i in marks) + " |")
    budget, at_budget = equal_budget(records)
    print("\nat equal steps per problem (each problem's steps = the fewest any of its searches reached):\n")
    print("| strategy | " + " | ".join(f"{p} ({k})" for p, k in budget.items()) + " | mean | geomean |")
    print("|---|" + "---|" * (len(budget) + 2))
    for name, per in sorted(at_budget.items()):
        vals = [per.get(p, 0.0) for p in budget]
        print(f"| {name} | " + " | ".join(f"{_fmt(v)}x" for v in vals) + f" | {_fmt(_mean(vals))}x | "
              f"{_fmt(_geo(vals))}x |")
    print("\nby step kind: passed, beat a correct parent, and improved on its search's best (the first correct "
          "kernel of a search not counted):\n")
    print("| strategy | kind | steps | passed | beat parent (of steps with a correct parent) | new best |")
    print("|---|---|---|---|---|---|")
    for (name, kind), row in sorted(by_kind(records).items()):
        print(f"| {name} | {kind} | {row['steps']} | {row['passed']} | {row['beat']} of {row['vs_parent']} | "
              f"{row['new_best']} |")
    problems = sorted({r["problem"] for r in records})
    print("\nbest ranked speedup per problem, all steps (verdicts: passed/steps):\n")
    names = list(stats)
    print("| problem | " + " | ".join(names) + " | reference kernel |")
    print("|---|" + "---|" * (len(names) + 1))
    refs = {r["problem"]: r for r in read_jsonl(d / "reference.jsonl")}
    for p in problems:
        cells = []
        for name in names:
            recs = [r for r in records if r["problem"] == p and r["strategy"] == name and r.get("ok")]
            curve = best_by_step(recs)
            ok = sum(r.get("verdict") == "passed" for r in recs)
            cells.append(f"{_fmt(curve[-1]) if curve else '-'}x ({ok}/{len(recs)})")
        ref = refs.get(p)
        ref_cell = "-" if ref is None else (ranked_cell(ref) if ref["verdict"] == "passed" else ref["verdict"])
        print(f"| {p} | " + " | ".join(cells) + f" | {ref_cell} |")
    return 0
