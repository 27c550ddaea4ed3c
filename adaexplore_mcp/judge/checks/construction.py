"""Construction: the candidate imported, then both models built under one fresh seed and perturbed alike.

Answers a candidate that is not a drop-in for the task's Model: no ModelNew, a constructor that fails on the
task's init inputs, global precision flags flipped at import or construction (TF32 switched on for every
matmul). KernelBench's convention: Model and ModelNew are built under the same seed and left in the mode their
constructors leave them in (training, usually); parameters still at one constant are then perturbed alike in
both (perturbation.py), so a candidate cannot ignore them.
"""

from __future__ import annotations

from typing import Any

from ..answers import BuildAnswer, Failure
from ..outcome import fresh_seed
from .context import Judging
from .perturbation import perturb_both

DETERMINISTIC = "reference deterministic on identical inputs: compared with one run of it, within the tolerance"
NONDETERMINISTIC = ("reference NOT deterministic on identical inputs (dropout in training mode? atomics?): compared "
                    "with one run of it, within the tolerance; a mismatch may be the reference's own noise")


def load_candidate(ev: Judging) -> None:
    """Import the candidate in its runner, with what earlier runs of the same source compiled (an import error
    or a missing ModelNew is the candidate's verdict)."""
    ev.out.fields["determinism"] = DETERMINISTIC if ev.req["task"].get("deterministic", True) else NONDETERMINISTIC
    names, kernels = ev.referee.kernel_files(ev.module)
    reply, _ = ev.cand_call({"op": "load", "role": "cand", "module": ev.module, "source": ev.req["cand_source"],
                             "kernel_files": names}, kernels)
    ev.mark("load")
    failure = Failure.unless_ok(reply)
    if failure is not None:
        ev.out.error(failure)


def build_models(ev: Judging) -> None:
    """Both models under one fresh seed (a constructor that fails is the candidate's verdict), flags the
    candidate's constructor flipped noted, then the parameters that sit at a constant perturbed alike."""
    seed = fresh_seed()
    built, _ = ev.referee.call_ref(ev.ref, {"op": "build", "seed": seed}, ev.deadline, "building the reference")
    reply, _ = ev.cand_call({"op": "build", "seed": seed, "init_inputs": ev.ref.init_inputs}, ev.ref.init_buffers)
    answer = BuildAnswer.parse(reply)
    if answer.failure is not None:
        ev.out.error(answer.failure)
        return
    note_flags(ev, answer.flags, "while building")
    perturb_both(ev, seed, built.get("state"), answer.state)  # parameters that matter
    ev.mark("build")


def note_flags(ev: Judging, changes: Any, when: str) -> None:
    """Global precision flags the candidate changed (TF32, reduced-precision reductions): a precision reason,
    whatever the outputs show (the runner restores them after each call)."""
    if isinstance(changes, list) and changes:
        text = "; ".join(str(c)[:120] for c in changes[:6])
        ev.out.precision_reasons.append(f"changed global precision flags {when}: {text}")
