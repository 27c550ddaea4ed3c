"""A scripted proposer (no LLM) playing the assistant's part: each step brief gets expand_node's arguments.

It starts from template Triton kernels for the task (`adaexplore_mcp.tasks.solutions`, or any provider
you pass) and answers small steps by changing one launch parameter of the parent kernel, sent as an exact
edit (`BLOCK_SIZE = 1024` -> `BLOCK_SIZE = 512`), and large steps by switching to another template
variant with randomized tunables. A failed parent is repaired by reverting its tunables to the template
defaults. Tunables are lines of the form `BLOCK_SIZE = 1024  # tunable: 256, 512, 1024, 2048`.
Everything is seeded, so a run is replayable. Product code: `adaexplore-mcp demo` plays it through the
MCP tools; `devtools.scripted_search` drives whole searches with it for the tests and bench/.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from adaexplore_mcp.search.types import StepBrief

TUNABLE_LINE = re.compile(
    r"^[ \t]*(?P<assign>(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>-?\d+))\s*#\s*tunable:\s*(?P<choices>-?\d+(?:\s*,\s*-?\d+)*)\s*$",
    re.MULTILINE,
)
_VARIANT = re.compile(r"variant=(\S+)")


class TemplateLike(Protocol):
    variant: str
    source: str


TemplateProvider = Callable[[str], Sequence[TemplateLike]]


@dataclass(frozen=True)
class Tunable:
    name: str
    value: int
    choices: tuple[int, ...]
    assign: str  # e.g. "BLOCK_SIZE = 1024"
    line: str  # the whole line


def tunables(source: str) -> dict[str, Tunable]:
    """Every `NAME = <int>  # tunable: a, b, c` line of a kernel (the first one wins per name)."""
    out: dict[str, Tunable] = {}
    for m in TUNABLE_LINE.finditer(source):
        if m["name"] not in out:
            choices = tuple(int(c) for c in m["choices"].split(","))
            out[m["name"]] = Tunable(m["name"], int(m["value"]), choices, m["assign"], m.group(0))
    return out


def set_tunables(source: str, values: dict[str, int]) -> str:
    def sub(m: re.Match) -> str:
        if m["name"] not in values:
            return m.group(0)
        return m.group(0).replace(m["assign"], f"{m['name']} = {values[m['name']]}", 1)

    return TUNABLE_LINE.sub(sub, source)


def default_templates(task_name: str) -> Sequence[TemplateLike]:
    from adaexplore_mcp.tasks.solutions import solutions

    return solutions(task_name)


def variant_of(note: str) -> str | None:
    m = _VARIANT.search(note or "")
    return m.group(1) if m else None


class ScriptedProposer:
    def __init__(self, templates: Sequence[TemplateLike], seed: int = 0) -> None:
        if not templates:
            raise ValueError("the scripted proposer needs at least one template kernel for the task")
        self.templates = {t.variant: t for t in templates}
        self.seed = seed

    def propose(self, brief: StepBrief) -> dict[str, Any]:
        """The keyword arguments of expand_node for this brief (kernel_source or edits, and a note)."""
        rng = random.Random(f"proposer:{self.seed}:{brief.steps_used}")
        if brief.kind == "large":
            return self._large(brief, rng)
        return self._small(brief, rng)

    def _large(self, brief: StepBrief, rng: random.Random) -> dict[str, Any]:
        in_pool = {variant_of(k.note) for k in brief.pool}
        fresh = [v for v in self.templates if v not in in_pool] or list(self.templates)
        variant = rng.choice(fresh)
        template = self.templates[variant].source
        values = {t.name: rng.choice(t.choices) for t in tunables(template).values()}
        source = set_tunables(template, values)
        return {"kernel_source": source, "note": f"variant={variant} {_fmt(values)}"}

    def _small(self, brief: StepBrief, rng: random.Random) -> dict[str, Any]:
        parent = brief.parent_kernel or ""
        parent_note = brief.working_memory[-1].note if brief.working_memory else ""
        variant = variant_of(parent_note)
        knobs = tunables(parent)
        failed = brief.parent_evaluation is not None and brief.parent_evaluation.verdict != "passed"
        if failed:
            return self._repair(parent, variant, knobs, rng)
        movable = [t for t in knobs.values() if len(set(t.choices) - {t.value}) > 0]
        if not movable:
            return {"kernel_source": parent, "note": f"variant={variant} unchanged (no tunables)"}
        knob = rng.choice(movable)
        new = rng.choice([c for c in knob.choices if c != knob.value])
        return {"edits": [_edit(parent, knob, new)], "note": f"variant={variant} {knob.name} {knob.value}->{new}"}

    def _repair(self, parent: str, variant: str | None, knobs: dict[str, Tunable], rng: random.Random):
        template = self.templates.get(variant or "")
        if template is not None:
            defaults = {t.name: t.value for t in tunables(template.source).values()}
            edits = [_edit(parent, knobs[n], v) for n, v in defaults.items() if n in knobs and knobs[n].value != v]
            if edits:
                return {"edits": edits, "note": f"variant={variant} repair: tunables back to template defaults"}
        others = [v for v in self.templates if v != variant] or list(self.templates)
        other = rng.choice(others)
        return {"kernel_source": self.templates[other].source, "note": f"variant={other} repair: switched template"}


def _edit(source: str, knob: Tunable, new: int) -> dict[str, str]:
    old = knob.assign if source.count(knob.assign) == 1 else knob.line
    return {"old": old, "new": old.replace(knob.assign, f"{knob.name} = {new}", 1)}


def _fmt(values: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())
