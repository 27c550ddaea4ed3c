"""The shipped seed memory: `skills/rules/NNN_slug.py`, one readable, git-diffable file per rule.

Each file holds the rule's metadata as module constants (read here with `ast`, never imported, so the
server does not import torch/triton to load them) and a minimal kernel with `trigger*(device)`
functions that reproduce the error (run by tests and `bench/collect_errors.py`).

Loading is idempotent (`rules.seed_key` is unique): a new database gets every seed rule; later starts
add new seed rules and new signatures, refresh the text of seed rules nobody edited, and leave
user-retired or user-edited seed rules as they are.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..store import Store, dumps
from . import rules as rules_mod
from adaexplore_mcp import pyparse

FORMAT_VERSION = 1
ACTOR = "seed"
_REQUIRED = ("KEY", "TEXT", "SIGNATURES", "ERROR_LINE", "SEEN")


@dataclass(frozen=True)
class SeedRule:
    key: str
    text: str
    signatures: list[str]
    error_line: str
    seen: list[str]
    path: Path
    order: int
    gpu_only: bool = False
    expected_gpu_error: str = ""
    triggers: list[str] = field(default_factory=list)

    @property
    def rule_id(self) -> str:
        return f"seed-{self.key}"


def default_rules_dir() -> Path | None:
    """`$ADAEXPLORE_SKILLS_DIR`, else `skills/rules` of the source checkout, else the copy a (non-editable)
    install puts under `<prefix>/share/adaexplore-mcp/skills/rules` (pyproject's data-files)."""
    env = os.environ.get("ADAEXPLORE_SKILLS_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2] / "skills" / "rules")
    candidates.append(Path(sys.prefix) / "share" / "adaexplore-mcp" / "skills" / "rules")
    for c in candidates:
        if c.is_dir():
            return c
    return None


def read_rule_file(path: Path, order: int = 0) -> SeedRule:
    tree = pyparse.parse(Path(path).read_text())
    consts: dict[str, object] = {}
    triggers = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.isupper():
                try:
                    consts[name] = ast.literal_eval(node.value)
                except ValueError:
                    pass
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("trigger"):
            triggers.append(node.name)
    missing = [k for k in _REQUIRED if k not in consts]
    if missing:
        raise ValueError(f"{path}: seed rule file lacks {', '.join(missing)}")
    fmt = consts.get("FORMAT", FORMAT_VERSION)
    if fmt != FORMAT_VERSION:
        raise ValueError(f"{path}: seed rule FORMAT {fmt} is not supported (expected {FORMAT_VERSION})")
    return SeedRule(
        key=str(consts["KEY"]), text=rules_mod.validate_text(str(consts["TEXT"])),
        signatures=list(consts["SIGNATURES"]), error_line=str(consts["ERROR_LINE"]), seen=list(consts["SEEN"]),
        path=Path(path), order=order, gpu_only=bool(consts.get("GPU_ONLY", False)),
        expected_gpu_error=str(consts.get("EXPECTED_GPU_ERROR", "")), triggers=triggers,
    )


def read_seed_rules(rules_dir: Path | None = None) -> list[SeedRule]:
    rules_dir = rules_dir or default_rules_dir()
    if rules_dir is None:
        return []
    files = sorted(p for p in Path(rules_dir).glob("[0-9]*.py"))
    seeds = [read_rule_file(p, order=i) for i, p in enumerate(files)]
    keys = [s.key for s in seeds]
    if len(keys) != len(set(keys)):
        raise ValueError(f"duplicate seed rule keys in {rules_dir}")
    return seeds


def load_seeds(store: Store, seeds: list[SeedRule]) -> int:
    """Insert missing seed rules, add new signatures; one transaction. Returns how many were new."""
    added = 0
    with store.write() as tx:
        for seed in seeds:
            meta = {"order": seed.order, "seen": seed.seen, "error_line": seed.error_line,
                    "gpu_only": seed.gpu_only, "file": seed.path.name, "format": FORMAT_VERSION}
            new = rules_mod.insert_rule(tx, text=seed.text, signatures=seed.signatures, origin="seed", actor=ACTOR,
                                        reason=f"seed rule from skills/rules/{seed.path.name}",
                                        seed_key=seed.key, meta=meta, rule_id=seed.rule_id)
            if new:
                added += 1
                continue
            row = tx.execute("SELECT rule_id, text, status, meta FROM rules WHERE seed_key = ?", (seed.key,)).fetchone()
            now = time.time()
            for sig in seed.signatures:
                tx.execute("INSERT OR IGNORE INTO rule_signatures (rule_id, signature, added_at) VALUES (?,?,?)",
                           (row["rule_id"], sig, now))
            old_meta = json.loads(row["meta"] or "{}")
            if old_meta != meta:
                tx.execute("UPDATE rules SET meta = ? WHERE rule_id = ?", (dumps(meta), row["rule_id"]))
            touched = tx.execute("SELECT 1 FROM rule_history WHERE rule_id = ? AND actor != ?",
                                 (row["rule_id"], ACTOR)).fetchone()
            if row["status"] == "active" and not touched and row["text"] != seed.text:
                tx.execute("UPDATE rules SET text = ?, updated_at = ? WHERE rule_id = ?",
                           (seed.text, now, row["rule_id"]))
                tx.execute("INSERT INTO rule_history (rule_id, action, text, reason, actor, at) VALUES (?,?,?,?,?,?)",
                           (row["rule_id"], "update", seed.text, "seed file changed", ACTOR, now))
    return added
