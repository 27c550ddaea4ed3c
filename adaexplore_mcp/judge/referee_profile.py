"""The referee's side of `profile_kernel`: both sides run a few calls under torch.profiler, each in its
own runner, on the same input set; the digest is built here from what they report.

A profile is advice, not a verdict: nothing is compared and nothing is rejected (evaluate_kernel does
that). The candidate runs in a fresh runner that is killed after, as in an evaluation; the reference in
the task's cached runner. Both profile under the per-GPU lock, so no evaluation is timed meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import printable
from . import wire
from .evaluation import fresh_seed
from .profile_digest import digest, full_table, parse_events
from .referee import Referee, ReferenceFailure
from .processes import RunnerGone
from .timing import gpu_lock

MAX_RUNS = 20
MAX_REPLY = 32 << 20  # a profile's events (50k at most, a few dozen bytes each)
MAX_TABLE = 200_000


def _failure(what: str, reply: Any) -> str:
    """One line from a runner's failed answer (untrusted text: trimmed, printable)."""
    reply = reply if isinstance(reply, dict) else {}
    error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
    text = ": ".join(printable(str(error.get(k)))[:300] for k in ("exception", "message") if error.get(k))
    line = error.get("source_line")
    if line:
        text += f" (line {error.get('source_lineno')}: `{printable(str(line))[:160]}`)"
    return f"{what} failed: {text or printable(str(reply.get('internal') or reply.get('ref_error') or 'no answer'))[:300]}"


def profile(referee: Referee, req: dict, progress: Callable[[float, str], None]) -> dict[str, Any]:
    """{"candidate": ProfileSide, "reference": ProfileSide, "table": markdown, ...} or {"error": why}."""
    deadline = time.monotonic() + float(req["timeout_s"])
    runs = max(1, min(int(req.get("runs", 5)), MAX_RUNS))
    cand = None
    try:
        progress(0.1, "loading the candidate and the reference")
        ref = referee.reference(req["task"], deadline)
        cand = referee.candidate_runner(deadline)
        files = getattr(referee, "kernel_files", None)
        names, kernels = files(req["cand_module"]) if callable(files) else ([], [])
        reply, _ = cand.call({"op": "load", "role": "cand", "module": req["cand_module"], "source": req["cand_source"],
                              "kernel_files": names}, list(kernels), deadline)
        if "ok" not in reply:
            return {"error": _failure("importing the candidate", reply)}
        seed = fresh_seed()
        referee.call_ref(ref, {"op": "build", "seed": seed}, deadline, "building the reference")
        reply, _ = cand.call({"op": "build", "seed": seed, "init_inputs": ref.init_inputs}, list(ref.init_buffers),
                             deadline)
        if "ok" not in reply:
            return {"error": _failure("building ModelNew", reply)}
        made, bufs = referee.call_ref(ref, {"op": "make", "seeds": [fresh_seed()], "key": "profile", "outputs": False},
                                      deadline, "drawing inputs")
        lent = wire.pack(list(wire.decode_value(made["sets"][0]["inputs"], bufs)))
        buffers: list[Any] = []
        header = {"op": "profile", "inputs": wire.encode_value(lent, buffers, pack=False), "runs": runs, "detail": True}
        referee.wait_spares(deadline)
        progress(0.4, f"profiling {runs} calls of each side")
        with gpu_lock(referee.home, referee.physical_index or 0):
            mine, _ = cand.call(header, buffers, deadline, MAX_REPLY)
            theirs, _ = referee.call_ref(ref, {"op": "profile", "key": "profile", "runs": runs, "detail": True},
                                         deadline, "profiling the reference")
        del lent
        released, _ = referee.call_ref(ref, {"op": "release"}, deadline, "releasing the reference")
        referee.account(ref, int(released.get("reserved", 0)))
        # torch.profiler leaves CUPTI attached to a process after it ends (kineto tears it down only when
        # told to), and every later launch there pays for it: a reference timed in this process afterwards
        # would look slower, and every later speedup on this task larger. The next evaluation builds anew.
        referee.forget(req["task"])
    except RunnerGone as exc:
        how = "did not finish in time" if exc.kind == "timeout" else "died"
        return {"error": f"the candidate's process {how} while being profiled ({printable(str(exc))[:200]})"}
    except ReferenceFailure as exc:
        return {"error": f"the reference failed: {printable(str(exc))[:300]}"}
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError, wire.WireError) as exc:
        referee.forget(req["task"])  # an answer out of step: its channel can no longer be trusted
        return {"error": f"a runner answered malformed data ({type(exc).__name__})"}
    finally:
        if cand is not None:
            cand.retire()
    if "events" not in mine:
        return {"error": _failure("running the candidate under the profiler", mine)}
    progress(0.9, "digesting")
    return _digest(referee.gpu_name, runs, mine, theirs)


def _digest(gpu: str | None, runs: int, mine: dict, theirs: dict) -> dict[str, Any]:
    launched = mine.get("launched") if isinstance(mine.get("launched"), list) else []
    own = [str(n)[:80] for n in launched if isinstance(n, str)][:32]
    cand_events, ref_events = parse_events(mine.get("events")), parse_events(theirs.get("events"))
    cand_side, ref_side = digest(cand_events, runs, own), digest(ref_events, runs)
    table = (f"# Profile: candidate and reference, {runs} call(s) each after one warm call ({gpu or 'GPU'})\n\n"
             + full_table("Candidate (ModelNew)", cand_events, cand_side) + "\n"
             + full_table("Reference (Model)", ref_events, ref_side))
    return {"candidate": cand_side.model_dump(), "reference": ref_side.model_dump(), "runs": runs, "gpu": gpu,
            "table": table[:MAX_TABLE]}


__all__ = ["profile"]
