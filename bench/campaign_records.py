"""What a campaign records of a step: from an expand result the driver saw return, or from the server's own store
(every node a call attached, a cut-off call's too). Reads only; `campaign.py` drives the rounds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load(path: Path, default: Any = None) -> Any:
    return json.loads(path.read_text()) if path.exists() else default


def steps_of(brief: dict) -> list[dict]:
    """A next_step response's steps: the top-level brief, then its `more_steps`."""
    return [brief, *brief.get("more_steps", [])]


def step_record(key: str, search_id: str, rnd: int, res: dict, info: dict, seconds: float) -> dict:
    """What the table needs of one expanded step (and the item's error when it did not expand)."""
    problem, label = key.split("__", 1)
    rec: dict[str, Any] = {"search": key, "problem": problem, "strategy": label, "search_id": search_id,
                           "round": info.get("round"), "call": rnd, "step_id": res["step_id"], "kind": info.get("kind"),
                           "parent": info.get("parent"), "brief_chars": info.get("brief_chars"),
                           "ok": res["ok"], "seconds": round(seconds, 2)}
    if not res["ok"]:
        rec["error"] = str(res.get("error"))[:500]
        return rec
    r = res["result"]
    ev = r["evaluation"]
    timing = ev.get("timing") or {}
    roof = timing.get("roofline") or {}
    err = ev.get("error") or {}
    rec.update(node=r["node_id"], verdict=ev["verdict"], speedup=ev.get("speedup"),
               speedup_tf32=ev.get("speedup_tf32"), speedup_compile=timing.get("speedup_compile"),
               pct_roofline=roof.get("pct_roofline"), ranked_speedup=r.get("ranked_speedup"),
               ranked_against=r.get("ranked_against"),
               below_fp32=bool((ev.get("precision") or {}).get("below_fp32")), reward=r["reward"],
               is_new_best=r["is_new_best"], duplicate_of=r.get("duplicate_of"),
               error=(f"{err.get('exception')}: {err.get('message')}"[:300] if err else
                      (ev.get("rejected") or {}).get("check") or (ev.get("mismatch") or {}).get("reason")),
               rules=[x.get("rule_id") for x in ev.get("rules") or []], gpu=timing.get("gpu"))
    return rec


def read_store(d: Path):
    """The server's store in the campaign folder, opened read-only (the driver never writes it)."""
    import sqlite3

    return sqlite3.connect(f"file:{(d / 'home' / 'adaexplore.sqlite3').resolve()}?mode=ro", uri=True)


def records_from_store(d: Path) -> list[dict]:
    """Every node of every search, as step records, read from the server's own store: the table's source when a
    call was cut off (expand_nodes attaches each item as its evaluation ends, so the store holds steps whose batch
    never returned to the driver). Brief sizes come from the round files that handed each step out."""
    state = load(d / "state.json")
    chars: dict[str, int] = {}
    for path in (d / "briefs").glob("*/round-*.json"):
        brief = load(path)
        steps = steps_of(brief)
        for st in steps:
            if st.get("step_id"):
                chars[st["step_id"]] = round(len(json.dumps(brief)) / len(steps))
    conn = read_store(d)
    out = []
    for key, search_id in state["searches"].items():
        rows = conn.execute(
            "SELECT n.node_id, n.parent_id, n.kind, n.verdict, n.speedup, n.reward, n.step_id,"
            " COALESCE(e.result, p.evaluation) FROM nodes n JOIN node_payloads p ON p.search_id = n.search_id"
            " AND p.node_id = n.node_id LEFT JOIN evaluations e ON e.eval_id = p.eval_id"
            " WHERE n.search_id = ? AND n.node_id > 0 ORDER BY n.node_id", (search_id,)).fetchall()
        for node_id, parent, kind, verdict, ranked, reward, step_id, evaluation in rows:
            ev = {**json.loads(evaluation or "{}"), "verdict": verdict}
            res = {"step_id": step_id, "ok": True, "result": {
                "node_id": node_id, "reward": reward, "is_new_best": None, "ranked_speedup": ranked,
                "ranked_against": None if ranked is None else ("tf32" if (ev.get("precision") or {}).get(
                    "below_fp32") else "fp32"), "evaluation": ev}}
            rec = step_record(key, search_id, None, res, {"kind": kind, "parent": parent,
                                                           "brief_chars": chars.get(step_id)}, 0.0)
            out.append(rec)
    return out
