"""A profile a model can read in one glance: which GPU kernels ran, how often, how long, and where the
host left the GPU idle. For candidate and reference alike, so the difference is the lesson.

`collect` runs in a runner (untrusted) and turns `torch.profiler` events into a compact wire form;
everything else is pure and runs in the referee: `parse_events` bounds and validates that form,
`digest` summarizes it in well under 2k tokens, `full_table` writes every row (served as a resource).

Per call (the runner marks each call with `CALL_MARK` and synchronizes inside it, so every device op of
a call falls inside its window): wall time on the host, device busy time (the union of kernel and copy
intervals), gaps between the first and last device op where the device idled (launch latency, Python
between launches), and the time before the first device op.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from .wire import finite_number

CALL_MARK = "adaexplore::call"
LAUNCH_NAMES = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"})
KINDS = ("kernel", "memcpy", "memset", "call", "launch")
DEVICE_KINDS = ("kernel", "memcpy", "memset")
MAX_EVENTS = 50_000
MAX_NAME = 300
TOP_KERNELS = 8
NO_GPU = ("profiling needs a GPU: this server judges under Triton's CPU interpreter, where there are no GPU "
          "kernels to profile")
NCU = ("not attempted: Nsight Compute replays each kernel many times in a process of its own, outside the "
       "judge's sandbox, which is too costly and too open for a tool call")


def ncu_status() -> str:
    """What the result says of Nsight Compute: whether it is installed, and that it was not run."""
    import shutil

    found = shutil.which("ncu")
    return f"ncu is on PATH ({found}) but {NCU}" if found else f"ncu is not on PATH; {NCU}"


class KernelRow(BaseModel):
    name: str = Field(description="kernel name, template arguments folded")
    per_call: float = Field(description="launches per forward call")
    mean_us: float
    share: float = Field(description="share of the device time of the calls")
    own: bool = Field(default=False, description="a Triton kernel defined in the candidate")
    variants: int = Field(default=1, description="distinct full names folded into this row (template instances)")


class CopyRow(BaseModel):
    kind: str = Field(description="e.g. 'Memcpy DtoD', 'Memset'")
    per_call: float
    us_per_call: float


class ProfileSide(BaseModel):
    """One side (candidate or reference), per forward call, averaged over the profiled calls."""

    calls: int
    wall_us: float = Field(description="host time of one call, synchronize included")
    device_busy_us: float = Field(description="time some kernel or copy ran on the device")
    launches: float = Field(description="kernels, copies and memsets per call")
    gaps_us: float = Field(description="device idle between the first and last device op (host overhead "
                           "between launches)")
    before_first_us: float = Field(description="host time from the call's start to its first device op")
    host_overhead_share: float = Field(description="1 - device_busy / wall")
    own_share: float | None = Field(default=None, description="share of device time in the candidate's own "
                                    "Triton kernels")
    kernels: list[KernelRow] = Field(default_factory=list, description=f"the {TOP_KERNELS} costliest kernels")
    other_kernels: int = Field(default=0, description="distinct kernels not listed")
    other_share: float = 0.0
    copies: list[CopyRow] = Field(default_factory=list)


class ProfileResult(BaseModel):
    """What profile_kernel answers: a digest of both sides; the full table is a resource."""

    task_id: str
    eval_id: str | None = None
    available: bool = True
    unavailable: str | None = Field(default=None, description="why there is no profile (no GPU)")
    error: str | None = Field(default=None, description="the candidate or the reference failed to run")
    gpu: str | None = None
    runs: int = 0
    candidate: ProfileSide | None = None
    reference: ProfileSide | None = None
    table_uri: str | None = Field(default=None, description="every kernel of both sides, as Markdown")
    ncu: str = NCU
    note: str = ("measured by torch.profiler inside each side's process after one warm call; profiler "
                 "overhead inflates host gaps; not a verdict (evaluate_kernel judges and times)")


@dataclass(frozen=True)
class Event:
    kind: str
    name: str
    start_us: float
    dur_us: float

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


# -- in the runner ------------------------------------------------------------------------------------
def _kind(event: Any) -> str | None:
    name = str(event.name)
    if str(getattr(event, "device_type", "")).endswith("CUDA"):
        if getattr(event, "is_user_annotation", False) or name == CALL_MARK:
            return None  # the device-side copy of a record_function range spans kernels; it is none itself
        return "memcpy" if name.startswith("Memcpy") else "memset" if name.startswith("Memset") else "kernel"
    if name == CALL_MARK:
        return "call"
    return "launch" if name in LAUNCH_NAMES else None


def collect(prof: Any, detail: bool) -> dict[str, Any]:
    """Device time by name (the work-share check) and, with `detail`, the events in wire form:
    {"names": [...], "rows": [[kind, name index, start µs, duration µs], ...], "dropped": n}."""
    totals: dict[str, float] = {}
    names: list[str] = []
    index: dict[str, int] = {}
    rows: list[list[Any]] = []
    dropped = 0
    for e in prof.events():
        kind = _kind(e)
        if kind is None:
            continue
        if kind in DEVICE_KINDS:
            us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)
            if us:
                totals[e.name] = totals.get(e.name, 0.0) + float(us)
        if not detail:
            continue
        if len(rows) >= MAX_EVENTS:
            dropped += 1
            continue
        name = str(e.name)[:MAX_NAME]
        if name not in index:
            index[name] = len(names)
            names.append(name)
        start, end = float(e.time_range.start), float(e.time_range.end)
        rows.append([KINDS.index(kind), index[name], round(start, 3), round(max(0.0, end - start), 3)])
    reply: dict[str, Any] = {"kernels": sorted(totals.items(), key=lambda kv: -kv[1])[:40]}
    if detail:
        reply["events"] = {"names": names, "rows": rows, "dropped": dropped}
    return reply


# -- in the referee (pure) -------------------------------------------------------------------------------
def parse_events(raw: Any) -> list[Event]:
    """Events from a runner's wire form; anything malformed is dropped, never trusted. Pure."""
    if not isinstance(raw, dict) or not isinstance(raw.get("names"), list) or not isinstance(raw.get("rows"), list):
        return []
    names = [str(n)[:MAX_NAME] for n in raw["names"][:MAX_EVENTS]]
    events = []
    for row in raw["rows"][:MAX_EVENTS]:
        if not isinstance(row, list) or len(row) != 4:
            continue
        kind, name, start, dur = row
        if not (isinstance(kind, int) and 0 <= kind < len(KINDS) and isinstance(name, int) and 0 <= name < len(names)):
            continue
        start_us, dur_us = finite_number(start), finite_number(dur)
        if start_us is None or dur_us is None or dur_us < 0:
            continue
        events.append(Event(KINDS[kind], names[name], start_us, dur_us))
    return events


def compact_name(name: str, limit: int = 80) -> str:
    """A C++ kernel name without its `void`, argument list and template arguments (`<…>`). Pure."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            out.append(ch)
    short = "".join(out).strip() or text
    return short if len(short) <= limit else short[:limit - 1] + "…"


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def _windows(events: list[Event]) -> list[tuple[Event | None, list[Event]]]:
    """Each call's mark (None when the runner left none) and the device ops that started in it."""
    device = sorted((e for e in events if e.kind in DEVICE_KINDS), key=lambda e: e.start_us)
    calls = sorted((e for e in events if e.kind == "call"), key=lambda e: e.start_us)
    if not calls:
        return [(None, device)] if device else []
    windows: list[tuple[Event | None, list[Event]]] = []
    for i, call in enumerate(calls):
        stop = calls[i + 1].start_us if i + 1 < len(calls) else math.inf
        windows.append((call, [e for e in device if call.start_us <= e.start_us < stop]))
    return windows


def _is_own(name: str, own: Iterable[str]) -> bool:
    return any(o and o in name for o in own)


def digest(events: list[Event], runs: int, own: Iterable[str] = (), top: int = TOP_KERNELS) -> ProfileSide:
    """Per-call summary of one side's events; `own` names the candidate's Triton kernels. Pure."""
    own = [str(o) for o in own]
    windows = _windows(events)
    calls = max(1, len([w for w in windows if w[0] is not None]) or runs)
    wall = busy = gaps = before = 0.0
    for call, ops in windows:
        if not ops:
            wall += call.dur_us if isinstance(call, Event) else 0.0
            continue
        b = _union([(e.start_us, e.end_us) for e in ops])
        first, last = min(e.start_us for e in ops), max(e.end_us for e in ops)
        busy += b
        gaps += max(0.0, (last - first) - b)
        if isinstance(call, Event):
            wall += call.dur_us
            before += max(0.0, first - call.start_us)
        else:
            wall += last - first
    device_ops = [e for _, ops in windows for e in ops]
    total = sum(e.dur_us for e in device_ops) or 1.0
    by_name: dict[str, list[float]] = {}  # by folded name: template instances of one kernel are one row
    full: dict[str, set[str]] = {}
    copies: dict[str, list[float]] = {}
    for e in device_ops:
        if e.kind == "kernel":
            by_name.setdefault(compact_name(e.name), []).append(e.dur_us)
            full.setdefault(compact_name(e.name), set()).add(e.name)
        else:
            copies.setdefault(e.name, []).append(e.dur_us)
    ranked = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))
    rows = [KernelRow(name=n, per_call=round(len(d) / calls, 2), mean_us=round(sum(d) / len(d), 2),
                      share=round(sum(d) / total, 3), own=any(_is_own(f, own) for f in full[n]), variants=len(full[n]))
            for n, d in ranked[:top]]
    copy_kinds: dict[str, list[float]] = {}
    for n, d in copies.items():
        copy_kinds.setdefault(" ".join(n.split()[:2]) if n.startswith("Memcpy") else "Memset", []).extend(d)
    own_time = sum(e.dur_us for e in device_ops if e.kind == "kernel" and _is_own(e.name, own))
    return ProfileSide(
        calls=calls, wall_us=round(wall / calls, 2), device_busy_us=round(busy / calls, 2),
        launches=round(len(device_ops) / calls, 2), gaps_us=round(gaps / calls, 2),
        before_first_us=round(before / calls, 2),
        host_overhead_share=round(max(0.0, 1 - busy / wall), 3) if wall > 0 else 0.0,
        own_share=round(own_time / total, 3) if own else None, kernels=rows,
        other_kernels=max(0, len(ranked) - top), other_share=round(sum(sum(d) for _, d in ranked[top:]) / total, 3),
        copies=[CopyRow(kind=k, per_call=round(len(d) / calls, 2), us_per_call=round(sum(d) / calls, 2))
                for k, d in sorted(copy_kinds.items(), key=lambda kv: -sum(kv[1]))])


def full_table(label: str, events: list[Event], side: ProfileSide) -> str:
    """Every device op of one side by name, as Markdown (the resource behind `table_uri`). Pure."""
    lines = [f"## {label}", "", f"{side.calls} call(s); per call: wall {side.wall_us} µs, device busy "
             f"{side.device_busy_us} µs, gaps {side.gaps_us} µs, before the first op {side.before_first_us} µs, "
             f"{side.launches} launches", "", "| share | per call | mean µs | total µs | kind | name |",
             "| ---: | ---: | ---: | ---: | --- | --- |"]
    groups: dict[tuple[str, str], list[float]] = {}
    for e in events:
        if e.kind in DEVICE_KINDS:
            groups.setdefault((e.kind, e.name), []).append(e.dur_us)
    total = sum(sum(d) for d in groups.values()) or 1.0
    for (kind, name), d in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
        cell = name.replace("|", "\\|")
        lines.append(f"| {sum(d) / total:.3f} | {len(d) / side.calls:.2f} | {sum(d) / len(d):.2f} | {sum(d):.1f} "
                     f"| {kind} | `{cell}` |")
    return "\n".join(lines) + "\n"


__all__ = ["CALL_MARK", "NCU", "NO_GPU", "ncu_status", "Event", "ProfileResult", "ProfileSide", "collect", "compact_name",
           "digest", "full_table", "parse_events"]
