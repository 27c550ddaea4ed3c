"""A search campaign driven over MCP, with the proposer outside the server: rounds of briefs out, proposals in.

Any MCP client can be the proposer, a person or an assistant: each round this driver writes every search's
`next_step` response to a file (exactly what an assistant receives), and takes back the proposals written
beside it. The server's data lives in the campaign folder, so rounds can run on different machines (a GPU
host lent call by call): copy the folder back and forth.

    python bench/campaign.py init  --dir D --problem KernelBench/level2/12_Gemm.py ... [--steps 16] [--in-flight 4]
    python bench/campaign.py round --dir D [--deadline-s 480]   # submit D/proposals/*, write D/briefs/*

A round call serves every search at its own pace: it submits the proposals that are there, and hands out a
search's next briefs once none of its steps waits for a proposal (searches need not move in lockstep).
    python bench/campaign.py reference --dir D --kernel NAME=PATH ...   # e.g. a paper's released kernels
    python bench/campaign.py renew --dir D     # steps out wait another lease for their proposals (no GPU)
    python bench/campaign.py table --dir D                        # the table, from D/records.jsonl alone
    python bench/campaign.py table --dir D --from-store [--steps N]   # from the server's store (cut-off calls too)
    python bench/campaign.py export --dir D --out records.jsonl   # the store's records, to keep with results

Folder layout:
    campaign.json             problems (sources unchanged), strategies, steps, steps in flight, seed, lease
    state.json                task ids and search ids, the round number
    home/                     ADAEXPLORE_HOME of the server (SQLite: tasks, trees, evaluations, memory)
    briefs/<search>/round-<n>.json      the search's n-th next_step response (what the proposer reads)
    briefs/<search>/pending.json        the step ids waiting for a proposal, and each one's kind
    briefs/<search>/reference.py        get_task's reference_source: a brief that only points to the reference
                                        (a small step, a large step off the root) is answered with it at hand,
                                        as an assistant that follows the pointer would
    briefs/<search>/kernels/node-<id>.py  the full source behind a kernel_uri whose kernel the brief cut or left
                                        out (a pool kernel's tail, a large step's parent), for the same reason
    proposals/<search>/<step_id>.json   {"kernel_source": ...} or {"edits": [{old, new}...]}, and "note";
                                        or <step_id>.py, the whole kernel, and <step_id>.note, one line
    records.jsonl             one line per expanded step (and reference.jsonl per reference kernel)

Strategies: `adaexplore`, `iterative_refinement`, `parallel_sampling`, and `adaexplore_norules` (adaexplore
with the skill memory's rules withheld from its briefs, max_rules=0: the Adapt stage's ablation).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.campaign_records import load, read_store, records_from_store, step_record, steps_of  # noqa: E402
from bench.campaign_table import print_tables, read_jsonl  # noqa: E402

STRATEGIES = {  # label -> (server strategy, search constants)
    "adaexplore": ("adaexplore", {}),
    "iterative_refinement": ("iterative_refinement", {}),
    "parallel_sampling": ("parallel_sampling", {}),
    "adaexplore_norules": ("adaexplore", {"max_rules": 0}),
}
LEASE_S = 7 * 24 * 3600.0  # proposers answer between device loans: a step handed out must not expire


def save(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def problem_name(path: str) -> str:
    """'KernelBench/level2/12_Gemm_Multiply_LeakyReLU.py' -> 'L2_12_Gemm_Multiply_LeakyReLU'."""
    p = Path(path)
    level = "".join(ch for ch in p.parent.name if ch.isdigit())
    return f"L{level}_{p.stem}" if level else p.stem


def init(args: argparse.Namespace) -> int:
    d = Path(args.dir)
    if (d / "campaign.json").exists() and not args.force:
        print(f"{d}/campaign.json exists (use --force to start over)", file=sys.stderr)
        return 2
    problems = [{"name": problem_name(p), "path": p, "source": Path(p).read_text()} for p in args.problem]
    for s in args.strategy:
        if s not in STRATEGIES:
            raise SystemExit(f"unknown strategy {s!r}; choose from {', '.join(STRATEGIES)}")
    save(d / "campaign.json", {"problems": problems, "strategies": args.strategy, "steps": args.steps,
                               "in_flight": args.in_flight, "seed": args.seed, "lease_s": args.lease_s,
                               "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})
    save(d / "state.json", {"round": 0, "tasks": {}, "searches": {}})
    print(f"campaign in {d}: {len(problems)} problems x {len(args.strategy)} strategies, {args.steps} steps, "
          f"{args.in_flight} in flight")
    return 0


def server_params(d: Path, lease_s: float):
    from mcp.client.stdio import StdioServerParameters

    env = dict(os.environ)
    env.update(ADAEXPLORE_HOME=str((d / "home").resolve()), ADAEXPLORE_STEP_LEASE_S=str(lease_s))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return StdioServerParameters(command=sys.executable, args=["-m", "adaexplore_mcp"], env=env, cwd=str(ROOT))


async def call(client, tool: str, arguments: dict) -> dict:
    """One tool call; a tool error raises with the server's text (the driver never guesses around one)."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise RuntimeError(f"{tool} failed: {text[:2000]}")
    return result.structured_content or {}


async def run_round(args: argparse.Namespace) -> int:
    import anyio
    from mcp import Client

    d = Path(args.dir)
    cfg, state = load(d / "campaign.json"), load(d / "state.json")
    deadline = time.monotonic() + args.deadline_s
    log = (d / "round.log").open("a")

    def say(text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    for key, gone in forget_finished_steps(d).items():
        say(f"{key}: {gone} pending steps were already attached by a call that was cut off (records: `export`)")
    async with Client(server_params(d, cfg["lease_s"]), read_timeout_seconds=args.call_timeout_s) as client:
        for prob in cfg["problems"]:
            if prob["name"] not in state["tasks"]:
                t0 = time.monotonic()
                made = await call(client, "create_task", {"name": prob["name"], "reference_source": prob["source"]})
                state["tasks"][prob["name"]] = made["task_id"]
                say(f"task {prob['name']}: {made['task_id']} ({time.monotonic() - t0:.1f}s, warnings "
                    f"{made.get('warnings')})")
                save(d / "state.json", state)
        for prob in cfg["problems"]:
            for label in cfg["strategies"]:
                key = f"{prob['name']}__{label}"
                if key not in state["searches"]:
                    strategy, constants = STRATEGIES[label]
                    started = await call(client, "start_search", {
                        "task_id": state["tasks"][prob["name"]], "budget": cfg["steps"], "seed": cfg["seed"],
                        "strategy": strategy, **({"constants": constants} if constants else {})})
                    state["searches"][key] = started["search_id"]
                    save(d / "state.json", state)
        state["round"] += 1
        rnd = state["round"]
        limiter = anyio.Semaphore(args.concurrency)

        async def one_search(key: str, search_id: str) -> None:
            """Searches move at their own pace: a search's proposals are submitted when they are there, and
            its next briefs are handed out once none of its steps waits for a proposal any more."""
            async with limiter:
                if time.monotonic() > deadline:
                    say(f"{key}: deadline reached, left for the next round")
                    return
                if not args.hand_out_only:
                    await submit(client, d, key, search_id, rnd, say)
                if time.monotonic() > deadline:
                    return
                waiting = {k: v for k, v in load(d / "briefs" / key / "pending.json", {"steps": {}})["steps"].items()
                           if "error" not in v}  # a step whose answer was refused goes out again with the next briefs
                if waiting:
                    say(f"{key}: {len(waiting)} steps still wait for proposals")
                    return
                await hand_out(client, d, key, search_id, rnd, cfg["in_flight"], say)

        async with anyio.create_task_group() as tg:
            for key, search_id in state["searches"].items():
                if not args.search or key in args.search:
                    tg.start_soon(one_search, key, search_id)
    save(d / "state.json", state)
    say(f"round {rnd} done")
    return 0


async def submit(client, d: Path, key: str, search_id: str, rnd: int, say) -> None:
    """Expand every pending step of `key` that has a proposal; one record per step."""
    pending = load(d / "briefs" / key / "pending.json", {"steps": {}})
    items, meta = [], {}
    for step_id, info in pending["steps"].items():
        prop = read_proposal(d / "proposals" / key, step_id)
        if prop is None:
            continue
        item = {"step_id": step_id, "note": str(prop.get("note", ""))[:300]}
        if prop.get("edits"):
            item["edits"] = prop["edits"]
        else:
            item["kernel_source"] = prop.get("kernel_source", "")
        items.append(item)
        meta[step_id] = info
    if not items:
        return
    t0 = time.monotonic()
    batch = await call(client, "expand_nodes", {"search_id": search_id, "items": items})
    elapsed = time.monotonic() - t0
    errors = {}
    with (d / "records.jsonl").open("a") as out:
        for res in batch["results"]:
            info = meta.get(res["step_id"], {})
            out.write(json.dumps(step_record(key, search_id, rnd, res, info, elapsed / len(items))) + "\n")
            if res["ok"]:
                pending["steps"].pop(res["step_id"], None)
            else:  # the step stays out; its proposal is moved aside and the error shown with the next briefs
                pending["steps"][res["step_id"]]["error"] = errors[res["step_id"]] = res.get("error")
                for ext in (".py", ".note", ".json"):
                    old = d / "proposals" / key / f"{res['step_id']}{ext}"
                    if old.exists():
                        old.rename(old.with_suffix(f"{ext}.rejected-{rnd}"))
    if errors:  # what expand_nodes answered for those items, as the assistant would have read it
        save(d / "briefs" / key / f"errors-call-{rnd}.json", errors)
    save(d / "briefs" / key / "pending.json", pending)
    verdicts = [r["result"]["evaluation"]["verdict"] if r["ok"] else "error" for r in batch["results"]]
    say(f"{key}: expanded {len(items)} in {elapsed:.1f}s: {verdicts}")


def forget_finished_steps(d: Path) -> dict[str, int]:
    """Drop from every pending.json the steps the server's store says are done. A call cut off mid-round leaves
    steps that the store attached (each item is attached as its evaluation ends) but that the driver never saw
    return; submitting them again would only record an item error. Their records come from `export`."""
    if not (d / "home" / "adaexplore.sqlite3").exists():
        return {}
    conn = read_store(d)
    done = {row[0] for row in conn.execute("SELECT step_id FROM steps WHERE status = 'done'")}
    conn.close()
    dropped = {}
    for path in sorted((d / "briefs").glob("*/pending.json")):
        pending = load(path)
        finished = [s for s in pending["steps"] if s in done]
        if finished:
            for step_id in finished:
                pending["steps"].pop(step_id)
            save(path, pending)
            dropped[path.parent.name] = len(finished)
    return dropped


def read_proposal(folder: Path, step_id: str) -> dict | None:
    """A step's proposal: <step_id>.json ({kernel_source | edits, note}), or <step_id>.py (the whole kernel)
    with an optional one-line <step_id>.note (easier to write by hand than source escaped in JSON)."""
    if (folder / f"{step_id}.json").exists():
        return load(folder / f"{step_id}.json")
    if (folder / f"{step_id}.py").exists():
        note = folder / f"{step_id}.note"
        return {"kernel_source": (folder / f"{step_id}.py").read_text(),
                "note": note.read_text().strip() if note.exists() else ""}
    return None


async def hand_out(client, d: Path, key: str, search_id: str, rnd: int, in_flight: int, say) -> None:
    """next_step(count=in_flight): the whole response to briefs/<key>/round-<n>.json, the steps to pending."""
    brief = await call(client, "next_step", {"search_id": search_id, "count": in_flight, "resend": True})
    folder = d / "briefs" / key
    folder.mkdir(parents=True, exist_ok=True)
    pending = load(folder / "pending.json", {"steps": {}})
    if brief.get("done"):
        say(f"{key}: done")
        save(folder / "pending.json", pending)
        return
    if not (folder / "reference.py").exists():  # what an assistant gets when it follows the brief's pointer
        task_id = next(((s.get("task") or {}).get("task_id") for s in steps_of(brief)
                        if (s.get("task") or {}).get("task_id")), None)
        if task_id:
            detail = await call(client, "get_task", {"task_id": task_id})
            (folder / "reference.py").write_text(detail["reference_source"])
    await save_kernels(client, folder, brief)
    own_round = len(list(folder.glob("round-*.json"))) + 1  # this search's own round (searches move apart)
    save(folder / f"round-{own_round}.json", brief)
    steps = steps_of(brief)
    size = len(json.dumps(brief))  # what the proposer reads; shared parts are said once, so each step's share
    pending["steps"] = {}
    for s in steps:
        if s.get("step_id") is None:
            continue
        pending["steps"][s["step_id"]] = {"kind": s.get("kind"), "parent": s.get("parent_node_id"),
                                          "round": own_round, "call": rnd, "brief_chars": round(size / len(steps))}
    pending["response_chars"] = size
    save(folder / "pending.json", pending)
    say(f"{key}: {len(steps)} briefs ({pending['response_chars']} chars), "
        f"kinds {[s.get('kind') for s in steps]}")


async def save_kernels(client, folder: Path, brief: dict) -> None:
    """The full source behind every kernel_uri whose kernel a brief cut or left out (a large step's parent, a pool
    kernel's tail, the search's best), to kernels/node-<id>.py: what an assistant following the pointer reads."""
    wanted = {}
    for step in steps_of(brief):
        if step.get("parent_kernel_uri") and not step.get("parent_kernel") and not step.get("same_parent_as"):
            wanted[step["parent_node_id"]] = step["parent_kernel_uri"]
        for ref in [*(step.get("pool") or []), *([step["best"]] if step.get("best") else [])]:
            if ref.get("kernel_truncated") or not ref.get("kernel"):  # `best` names its kernel by URI only
                wanted[ref["node_id"]] = ref["kernel_uri"]
    for node_id, uri in wanted.items():
        path = folder / "kernels" / f"node-{node_id}.py"
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            path.write_text((await client.read_resource(uri)).contents[0].text)


async def run_renew(args: argparse.Namespace) -> int:
    """Renew the leases of every step handed out and not yet answered (next_step with resend, as many steps as
    are out, so no new step is made): proposals written for them stay answerable another lease. Needs no GPU."""
    from mcp import Client

    d = Path(args.dir)
    cfg, state = load(d / "campaign.json"), load(d / "state.json")
    gone = 0
    async with Client(server_params(d, cfg["lease_s"]), read_timeout_seconds=args.call_timeout_s) as client:
        for key, search_id in state["searches"].items():
            pending = set(load(d / "briefs" / key / "pending.json", {"steps": {}})["steps"])
            if not pending:
                continue
            brief = await call(client, "next_step", {"search_id": search_id, "count": len(pending), "resend": True})
            out = {s.get("step_id") for s in steps_of(brief)} - {None}
            missing = sorted(pending - out)
            gone += len(missing)
            print(f"{key}: {len(pending & out)} of {len(pending)} leases renewed"
                  + (f"; no longer out (expired or answered): {missing}" if missing else ""), flush=True)
    return 1 if gone else 0


async def run_reference(args: argparse.Namespace) -> int:
    """Evaluate given kernels (NAME=PATH, NAME a campaign problem) through evaluate_kernel: a reference point."""
    from mcp import Client

    d = Path(args.dir)
    cfg, state = load(d / "campaign.json"), load(d / "state.json")
    async with Client(server_params(d, cfg["lease_s"]), read_timeout_seconds=args.call_timeout_s) as client:
        for spec in args.kernel:
            name, path = spec.split("=", 1)
            if name not in state["tasks"]:
                raise SystemExit(f"{name} is not a problem of this campaign (init and round first)")
            t0 = time.monotonic()
            ev = await call(client, "evaluate_kernel", {"task_id": state["tasks"][name],
                                                        "kernel_source": Path(path).read_text()})
            timing = ev.get("timing") or {}
            err = ev.get("error") or {}
            rec = {"problem": name, "path": path, "verdict": ev["verdict"], "speedup": ev.get("speedup"),
                   "speedup_tf32": ev.get("speedup_tf32"), "speedup_compile": timing.get("speedup_compile"),
                   "below_fp32": bool((ev.get("precision") or {}).get("below_fp32")),
                   "error": (f"{err.get('exception')}: {err.get('message')}"[:300] if err else
                             (ev.get("rejected") or {}).get("message") or (ev.get("mismatch") or {}).get("reason")),
                   "seconds": round(time.monotonic() - t0, 1), "gpu": timing.get("gpu")}
            with (d / "reference.jsonl").open("a") as out:
                out.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("init")
    p.add_argument("--dir", required=True)
    p.add_argument("--problem", action="append", required=True, help="a KernelBench problem file (repeatable)")
    p.add_argument("--strategy", action="append", default=None)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--in-flight", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lease-s", type=float, default=LEASE_S)
    p.add_argument("--force", action="store_true")
    for name in ("round", "reference", "renew"):
        p = sub.add_parser(name)
        p.add_argument("--dir", required=True)
        p.add_argument("--call-timeout-s", type=float, default=900.0)
        if name != "renew":
            p.add_argument("--deadline-s", type=float, default=480.0, help="stop starting new work after this")
            p.add_argument("--concurrency", type=int, default=8, help="searches submitted at once")
        if name == "round":
            p.add_argument("--search", action="append", help="only this search (repeatable)")
            p.add_argument("--hand-out-only", action="store_true", help="submit nothing, only hand out briefs "
                           "(needs no GPU: with ADAEXPLORE_DEVICE=cuda the briefs say what the GPU host would)")
        if name == "reference":
            p.add_argument("--kernel", action="append", required=True, help="NAME=PATH (repeatable)")
    p = sub.add_parser("table")
    p.add_argument("--dir", required=True)
    p.add_argument("--from-store", action="store_true", help="rebuild the records from the server's store "
                   "(every step it attached, a cut-off call's too) instead of records.jsonl")
    p.add_argument("--steps", type=int, default=0, help="only each search's first N steps (equal budget)")
    p.add_argument("--records", help="a records file instead (e.g. one `export` wrote)")
    p = sub.add_parser("export")
    p.add_argument("--dir", required=True)
    p.add_argument("--out", required=True, help="the store's records as JSON lines (no source code in them)")
    args = ap.parse_args(argv)
    if args.cmd == "init":
        args.strategy = args.strategy or list(STRATEGIES)
        return init(args)
    if args.cmd == "table":
        records = (records_from_store(Path(args.dir)) if args.from_store else
                   read_jsonl(Path(args.records)) if args.records else None)
        return print_tables(Path(args.dir), records, args.steps)
    if args.cmd == "export":
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in records_from_store(Path(args.dir))))
        return 0
    import anyio

    return anyio.run({"round": run_round, "reference": run_reference, "renew": run_renew}[args.cmd], args)


if __name__ == "__main__":
    raise SystemExit(main())
