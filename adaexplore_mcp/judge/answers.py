"""A runner's answers as the referee reads them: typed, from the JSON header a runner sent (runner_candidate.py).

A runner is untrusted, so nothing here is believed: every field is read defensively (a missing or mistyped one
reads as absent), and the checks decide what it is worth (checks/correctness.py). What a runner says about its
own state (`oom`) stays apart from what it proposes as the candidate's verdict (`verdict`, `error`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Failure:
    """A failure the runner classified (runner.Runner._error), or its own error (`internal`): the verdict it
    proposes and the error's fields (both trimmed and validated by Outcome.error), and whether it said it ran out
    of device memory."""

    verdict: Any = None
    error: Any = None
    internal: Any = None
    oom: bool = False

    @classmethod
    def of(cls, reply: Any) -> "Failure":
        reply = reply if isinstance(reply, dict) else {}
        return cls(reply.get("verdict"), reply.get("error"), reply.get("internal"), bool(reply.get("oom")))

    @classmethod
    def unless_ok(cls, reply: Any) -> "Failure | None":
        """The failure in a `load` or `build` answer: any answer with a verdict, or without `ok`."""
        if isinstance(reply, dict) and "verdict" not in reply and "ok" in reply:
            return None
        return cls.of(reply)


@dataclass(frozen=True)
class BuildAnswer:
    """A `build` answer from the candidate's runner: its failure, or the precision flags its constructor changed
    and the index of its constant tensors (checks/perturbation.py: state_index)."""

    failure: Failure | None
    flags: Any = None
    state: Any = None

    @classmethod
    def parse(cls, reply: Any) -> "BuildAnswer":
        failure = Failure.unless_ok(reply)
        if failure is not None:
            return cls(failure)
        return cls(None, reply.get("flags"), reply.get("state"))


@dataclass(frozen=True)
class CallAnswer:
    """One trial's answer from the candidate's runner (an entry of a `forward` reply's `results`)."""

    failure: Failure | None  # the call failed (its verdict), or the GPU front end refused it (`frontend`)
    frontend: bool  # the GPU compiler's front end refused what the interpreter ran (CPU only)
    launched: list[str]  # the candidate's kernels that launched during the call, as the runner reports them
    flags: Any  # global precision flags the call changed
    unconfirmed: str | None  # what the runner could not check (the front end unavailable)
    aliased: bool  # an output is a view of an input (the runner's check; outputs travel as copies)
    unsendable: str | None  # why the outputs could not be sent as plain tensors
    outputs: Any  # the wire form of the outputs
    inputs_after: Any  # on the CPU: the wire form of the runner's inputs after the call

    @classmethod
    def parse(cls, reply: Any, names_seen: int) -> "CallAnswer":
        """`reply` read defensively; at most `names_seen` launched names, each cut to 80 characters."""
        reply = reply if isinstance(reply, dict) else {}
        failed = "verdict" in reply or bool(reply.get("frontend"))
        launched = reply.get("launched")
        return cls(
            failure=Failure.of(reply) if failed else None, frontend=bool(reply.get("frontend")),
            launched=[str(n)[:80] for n in launched][:names_seen] if isinstance(launched, list) else [],
            flags=reply.get("flags"),
            unconfirmed=str(reply["unconfirmed"])[:300] if reply.get("unconfirmed") else None,
            aliased=bool(reply.get("aliased")),
            unsendable=str(reply["unsendable"])[:400] if reply.get("unsendable") else None,
            outputs=reply.get("outputs"), inputs_after=reply.get("inputs_after"))
