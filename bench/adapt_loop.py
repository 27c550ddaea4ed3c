"""The Adapt-stage measurement: synthesized tasks x first-draft kernels -> real failures -> clusters -> rules.

    python bench/adapt_loop.py --tasks 24 --drafts 6 --seed 0 --home /tmp/adapt --out adapt.json --device auto

1. `App.synthesize_tasks(N, seed)` registers N probed practice tasks.
2. For each task, `bench/adapt/codegen.py` writes K first drafts (LLM-like idioms, some of which the real
   Triton rejects); each is judged by `App.evaluate_kernel`, which records failures in the skill memory
   and names the seed rules a failure falls under.
3. Ripe clusters (3+ failures from 2+ tasks, no rule yet) get a rule: from a table of templates keyed by
   what the cluster's signature / examples mention, else a generic rule from the signature's fixed words
   (marked `fallback`: worth rewriting by hand). Rules are stored with `App.memory.add_rule`.
4. Compared with the seed memory: which failures a seed rule already covered, which rules are new.

Prints a markdown summary; writes everything to --out (JSON), with the environment. Progress on stderr.
Use a fresh --home (the default is a new temp dir): rules written by an earlier run are not ripe again.
Evaluations go round-robin over tasks (every task's draft 0, then draft 1...), so --deadline keeps every task.

GPU (H200, ~8 min):  python3 bench/adapt_loop.py --tasks 24 --drafts 6 --seed 0 --device cuda --deadline 420 \
                         --home /tmp/adapt-gpu --out adapt_gpu.json
CPU (interpreter, small shapes, ~20 s):  python bench/adapt_loop.py --tasks 6 --drafts 4 --seed 0 --device cpu
Compiler front end on the CPU for a CPU run's drafts:  python bench/adapt/frontend.py adapt_results.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.app import App  # noqa: E402
from adaexplore_mcp.config import JudgeLimits, Settings  # noqa: E402
from adaexplore_mcp.memory.signature import error_line, signature  # noqa: E402
from bench.adapt.codegen import draft_kernels  # noqa: E402

# (pattern over signature + example error/source lines, rule text). First match wins.
RULE_TEMPLATES: list[tuple[str, str]] = [
    (r"NoneType|Did you forget to add @triton\.jit",
     "You cannot run libdevice.* / tl.extra.cuda.libdevice.* under the CPU interpreter (it returns None or "
     "fails); write the math from tl.exp, tl.erf, tl.sigmoid when the kernel must also run on CPU."),
    (r"bad operand type for <fn>\(\)|abs\(x\)",
     "You cannot call Python's abs() on a Triton block; use tl.abs(x)."),
    (r"WorkerCrashed|killed by SIG",
     "Never let a kernel touch memory outside its tensors: mask every tl.load/tl.store (mask=offs < n) and "
     "combine masks with & and parentheses, never Python and/or."),
    (r"triton\.language\.math.*has no attribute|tl\.math\.tanh",
     "You cannot call functions missing from tl.math (tl.math.tanh, tl.math.sigmoid...); use libdevice "
     "(from triton.language.extra import libdevice; libdevice.tanh) or write them from tl.exp / tl.sigmoid."),
    (r"(?s)has no attribute.*\btanh\b|\btl\.tanh\b",
     "You cannot call tl.tanh (it does not exist); use libdevice.tanh from triton.language.extra or "
     "2 * tl.sigmoid(2 * x) - 1."),
    (r"libdevice.*not defined|name <name> is not defined.*libdevice",
     "Always import libdevice (from triton.language.extra import libdevice) before calling libdevice.* in a kernel."),
    (r"extra.*has no attribute|has no attribute.*cuda",
     "You cannot reach libdevice as tl.extra.cuda.libdevice on every Triton version; import it with "
     "from triton.language.extra import libdevice."),
    (r"Cannot access global variable",
     "You cannot read a plain module-level constant inside a kernel; declare it NAME = tl.constexpr(value) "
     "or pass it as an argument."),
    (r"zeros\(\)|missing <n> required positional argument: <name>.*zeros|tl\.zeros\(BLOCK\)",
     "Always give tl.zeros both a shape list and a dtype: tl.zeros([BLOCK], dtype=tl.float32)."),
    (r"Loop-carried|loop-carried|type.*changed.*loop|loop.*type",
     "Always initialize a loop accumulator with the type it keeps (acc = tl.zeros([BLOCK], dtype=tl.float32) "
     "or a tl.float32 scalar), never a Python float that the loop turns into a tensor."),
    (r"'float' object|'tensor' object has no attribute <name>.*float|\.float\(\)",
     "You cannot call .float() on a Triton block; convert with x.to(tl.float32)."),
    (r"torch\.dtype|torch\.float32",
     "Always use tl dtypes inside kernels: x.to(tl.float32), not x.to(torch.float32)."),
    (r"(?s)'tensor' object has no attribute.*clamp|x\.clamp",
     "You cannot call .clamp() on a Triton block; use tl.clamp(x, lo, hi) or tl.minimum(tl.maximum(x, lo), hi)."),
    (r"\*\*|__pow__|pow",
     "You cannot use ** on Triton blocks; multiply (x * x) or use tl.exp(y * tl.log(x))."),
    (r"static_range",
     "You cannot give tl.static_range a runtime bound; loop with range() unless the bound is tl.constexpr."),
    (r"dot.*K >= <n>|K >= <n>",
     "Always make tl.dot's BLOCK_K at least 16."),
    (r"allow_tf32",
     "You cannot pass allow_tf32 to tl.dot on recent Triton; use input_precision=\"ieee\" (exact) or \"tf32\"."),
    (r"Boolean value of Tensor|and.*or|chained boolean",
     "You cannot combine block masks with Python and/or; use & and | with parentheses."),
    (r"Expected dtype \[<dtype>\] but got <dtype>",
     "Always convert fp16/bf16 blocks to fp32 (x.to(tl.float32)) before tl.exp/tl.log/tl.sqrt and friends."),
    (r"arange's arguments must be of type tl\.constexpr",
     "Always size tl.arange with a tl.constexpr BLOCK (triton.next_power_of_2(n)) and mask, never a runtime dim."),
    (r"power of <n>",
     "Always make tl.arange lengths powers of 2: pass BLOCK = triton.next_power_of_2(n) and mask offs < n."),
    (r"\bmax\(\)|\bmin\(\)|builtin|'>' not supported|truth value",
     "You cannot use Python's max()/min()/abs() on Triton blocks; use tl.maximum, tl.minimum, tl.abs."),
    (r"gelu|silu|relu|softmax",
     "You cannot call activation functions from tl (tl.gelu, tl.silu, tl.relu); write them from tl.erf, "
     "tl.sigmoid, tl.maximum."),
    (r"axis",
     "Always reduce a 1D block over axis=0; a block has no axis beyond its rank."),
    (r"illegal memory access|out of bounds",
     "Always mask every tl.load/tl.store with offs < n when the block may run past the tensor."),
]
_FIXED = re.compile(r"<[a-z]+>|[\W_]+")


def distill(cluster) -> tuple[str, str]:
    """(rule text, 'template' | 'fallback') for a ripe cluster."""
    text = "\n".join([cluster.signature] + [f"{e.error_line}\n{e.source_line}" for e in cluster.examples])
    for pattern, rule in RULE_TEMPLATES:
        if re.search(pattern, text):
            return rule, "template"
    kind, _, message = cluster.signature.partition(": ")
    words = " ".join(w for w in _FIXED.sub(" ", message).split() if len(w) > 1)[:160]
    line = cluster.examples[0].source_line if cluster.examples else ""
    rule = f"Never write kernel code that raises {kind} '{words}' (seen at: {line[:80]})."
    return rule[:300], "fallback"


def _share(pair: list[int] | None) -> float | None:
    """Share of a cluster's evaluations the judge marked unconfirmed (interpreter-only suspicion)."""
    return round(pair[0] / pair[1], 2) if pair and pair[1] else None


def environment(app: App) -> dict:
    import torch
    import triton

    gpu = None
    if app.judge.backend == "cuda" and torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(0)
    return {"backend": app.judge.backend, "gpu": gpu or "CPU (Triton interpreter)", "torch": torch.__version__,
            "triton": triton.__version__, "python": platform.python_version(), "platform": platform.platform(),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict:
    started = time.monotonic()
    home = Path(args.home)
    limits = JudgeLimits(trials=args.trials, timing_budget_ms=args.timing_ms, warmup_ms=min(25.0, args.timing_ms),
                         min_reps=3)
    app = App(Settings(home=home, device=args.device, limits=limits))
    try:
        backend = app.judge.backend
        log(f"backend {backend}; synthesizing {args.tasks} tasks (seed {args.seed})")
        t0 = time.monotonic()
        tasks = app.synthesize_tasks(args.tasks, args.seed,
                                     progress=lambda f, m: log(f"  synth {f:.0%} {m}"))
        synth_s = time.monotonic() - t0
        log(f"{len(tasks)} tasks in {synth_s:.0f}s")
        timeout = args.eval_timeout or (60.0 if backend == "cuda" else 150.0)
        evals = []
        seed_hits: Counter[str] = Counter()
        jobs: list[list[tuple]] = []
        for info in tasks:
            spec = app.tasks.spec(info.task_id)
            rng = random.Random(f"adapt-drafts:{args.seed}:{info.name}")
            try:
                jobs.append([(info, di, src) for di, src in enumerate(draft_kernels((None, spec.source), rng,
                                                                                     args.drafts))])
            except ValueError as exc:
                log(f"  skip {info.name}: {exc}")
        # Round-robin (every task's draft 0, then every draft 1...): a --deadline cut keeps all tasks in.
        order = [j[r] for r in range(args.drafts) for j in jobs if r < len(j)]
        for n, (info, di, src) in enumerate(order):
            if args.deadline and time.monotonic() - started > args.deadline:
                log(f"deadline reached: {len(order) - n} evaluations not run")
                break
            t1 = time.monotonic()
            ev = app.evaluate_kernel(info.task_id, src, timeout_s=timeout)
            dur = time.monotonic() - t1
            err = ev.error
            sig = signature(err.exception, err.message, err.excerpt) if err else None
            row = {"task": info.name, "task_id": info.task_id, "draft": di, "verdict": ev.verdict.value,
                   "signature": sig, "seconds": round(dur, 2),
                   "error": error_line(err.exception, err.message, err.excerpt)[:300] if err else None,
                   "source_line": err.source_line if err else None,
                   "mismatch": ev.mismatch.reason if ev.mismatch else None,
                   "rejected": ev.rejected.check if ev.rejected else None,
                   "rules": [r.rule_id for r in ev.rules], "unconfirmed": bool(ev.unconfirmed)}
            if args.keep_sources or ev.verdict.value != "passed":
                row["source"] = src
            seed_hits.update(r.rule_id for r in ev.rules)
            evals.append(row)
            log(f"  [{n + 1}/{len(order)}] {info.name} draft {di}: {ev.verdict.value} ({dur:.1f}s)"
                + (f" {row['error'][:120]}" if err else "") + (f" rules={row['rules']}" if ev.rules else ""))
        eval_s = time.monotonic() - t0 - synth_s
        all_clusters = app.memory.failure_clusters(ripe_only=False, limit=1000).clusters
        ripe = app.memory.failure_clusters(ripe_only=True, limit=1000).clusters
        unconfirmed: dict[str, list[int]] = {}
        for e in evals:
            if e["signature"]:
                u = unconfirmed.setdefault(e["signature"], [0, 0])
                u[0] += e["unconfirmed"]
                u[1] += 1
        distilled = []
        by_text: dict[str, str] = {}  # rule text -> rule id: a second cluster of the same mistake is attached
        for c in ripe:
            text, how = distill(c)
            attached = text in by_text
            try:
                if attached:
                    rule = app.memory.attach_rule(by_text[text], c.cluster_id, "same mistake, another error text",
                                                  actor="adapt_loop")
                else:
                    rule = app.memory.add_rule(c.cluster_id, text, actor="adapt_loop")
                rule_id = by_text.setdefault(text, rule.rule_id)
            except ValueError as exc:
                rule_id = None
                log(f"  add_rule failed for {c.cluster_id}: {exc}")
            distilled.append({"cluster_id": c.cluster_id, "signature": c.signature, "count": c.count,
                              "tasks": len(c.tasks), "rule": text, "written_by": how, "rule_id": rule_id,
                              "attached_to_earlier_rule": attached,
                              "unconfirmed_share": _share(unconfirmed.get(c.signature)),
                              "examples": [e.model_dump() for e in c.examples]})
        seed_sigs = {s for r in app.memory.query_skills(limit=1000).rules if r.provenance.origin == "seed"
                     for s in r.provenance.signatures}
        clusters_out = []
        for c in all_clusters:
            covered = c.signature in seed_sigs or any(r.startswith("seed-") for r in c.rule_ids)
            clusters_out.append({"cluster_id": c.cluster_id, "signature": c.signature, "count": c.count,
                                 "tasks": len(c.tasks), "ripe": c.ripe, "seed_rules": c.rule_ids,
                                 "covered_by_seed": covered,
                                 "unconfirmed_share": _share(unconfirmed.get(c.signature)),
                                 "example": c.examples[0].model_dump() if c.examples else None})
        report = app.memory.report()
        verdicts = Counter(e["verdict"] for e in evals)
        result = {
            "environment": environment(app),
            "args": vars(args),
            "tasks": [t.name for t in tasks],
            "task_sources": {t.name: {"source": app.tasks.spec(t.task_id).source,
                                      "small_shapes": app.tasks.spec(t.task_id).small_shapes} for t in tasks},
            "summary": {
                "tasks": len(tasks), "evaluations": len(evals), "verdicts": dict(verdicts),
                "failures_recorded": report.failures, "failures_by_category": report.failures_by_category,
                "clusters": len(all_clusters), "ripe_clusters": len(ripe),
                "clusters_covered_by_seed": sum(c["covered_by_seed"] for c in clusters_out),
                "evaluations_naming_a_seed_rule": sum(bool(e["rules"]) for e in evals),
                "rules_distilled": len(distilled),
                "rules_from_template": sum(d["written_by"] == "template" for d in distilled),
                "rules_fallback": sum(d["written_by"] == "fallback" for d in distilled),
                # ripe clusters have no active (seed) rule by definition: every distilled rule is new
                "new_rules": len({d["rule_id"] or d["rule"] for d in distilled}),
                "seed_rule_hits": dict(seed_hits.most_common()),
                "synth_seconds": round(synth_s, 1), "eval_seconds": round(eval_s, 1),
                "total_seconds": round(time.monotonic() - started, 1),
            },
            "clusters": clusters_out,
            "distilled": distilled,
            "evaluations": evals,
        }
        return result
    finally:
        app.close()


def markdown(res: dict) -> str:
    s, env = res["summary"], res["environment"]
    lines = [f"## Adapt loop: {env['gpu']}, torch {env['torch']}, triton {env['triton']}, {env['date']}", "",
             "| measure | value |", "|---|---|"]
    rows = [
        ("tasks", s["tasks"]), ("evaluations", s["evaluations"]),
        ("verdicts", ", ".join(f"{k} {v}" for k, v in sorted(s["verdicts"].items()))),
        ("failures recorded", f"{s['failures_recorded']} ({', '.join(f'{k} {v}' for k, v in s['failures_by_category'].items())})"),
        ("clusters (all / ripe)", f"{s['clusters']} / {s['ripe_clusters']}"),
        ("clusters covered by a seed rule", s["clusters_covered_by_seed"]),
        ("evaluations naming a seed rule", s["evaluations_naming_a_seed_rule"]),
        ("ripe clusters ruled (template / fallback)", f"{s['rules_distilled']} ({s['rules_from_template']} / {s['rules_fallback']})"),
        ("new rules (not in the seed memory)", s["new_rules"]),
        ("seed rules hit", ", ".join(f"{k} x{v}" for k, v in s["seed_rule_hits"].items()) or "-"),
        ("time (synth / evals / total s)", f"{s['synth_seconds']} / {s['eval_seconds']} / {s['total_seconds']}"),
    ]
    lines += [f"| {k} | {v} |" for k, v in rows]
    lines += ["", "### Clusters", "", "| count | tasks | seed rule | signature |", "|---|---|---|---|"]
    for c in res["clusters"]:
        seed = ",".join(r.removeprefix("seed-") for r in c["seed_rules"]) or ("ripe" if c["ripe"] else "-")
        lines.append(f"| {c['count']} | {c['tasks']} | {seed} | `{c['signature'][:110]}` |")
    lines += ["", "### New rules", ""]
    for d in res["distilled"]:
        ex = d["examples"][0] if d["examples"] else {"error_line": "", "source_line": ""}
        unc = f"; unconfirmed {d['unconfirmed_share']:.0%}" if d.get("unconfirmed_share") else ""
        unc += "; attached to the rule above" if d.get("attached_to_earlier_rule") else ""
        lines += [f"- **{d['rule']}** ({d['written_by']}; {d['count']} failures, {d['tasks']} tasks{unc})",
                  f"  - signature: `{d['signature']}`",
                  f"  - error: `{ex['error_line'][:160]}`",
                  f"  - line: `{ex['source_line'][:160]}`"]
    if not res["distilled"]:
        lines.append("(none)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=24)
    p.add_argument("--drafts", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--home", default=None, help="data dir (a fresh temp dir by default)")
    p.add_argument("--out", default="adapt_results.json")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    p.add_argument("--eval-timeout", type=float, default=None, help="seconds per evaluation (60 GPU, 150 CPU)")
    p.add_argument("--deadline", type=float, default=0.0, help="stop starting evaluations after this many seconds")
    p.add_argument("--trials", type=int, default=3, help="judge trials per evaluation (fresh inputs each)")
    p.add_argument("--timing-ms", type=float, default=50.0, help="judge timing budget per evaluation on a GPU")
    p.add_argument("--keep-sources", action="store_true", help="store every draft's source in the JSON (failed ones are always kept)")
    args = p.parse_args(argv)
    if args.home is None:
        import tempfile

        args.home = tempfile.mkdtemp(prefix="adapt-")
    res = run(args)
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    print(markdown(res))
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
