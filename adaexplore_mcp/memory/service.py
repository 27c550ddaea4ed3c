"""MemoryService: the skill memory's facade (records, clusters, rules, seed rules, briefs).

Every method is one or a few short transactions on the shared SQLite store, so several server
processes on one data directory see each other's failures and rules at once.
"""

from __future__ import annotations

from pathlib import Path

from ..models import Evaluation, RuleRef
from ..store import Store
from . import MIGRATIONS
from . import clusters as clusters_mod
from . import records
from . import rules as rules_mod
from . import seed as seed_mod
from .relevance import score, task_tokens, tokens
from .types import ClusterList, HistoryEntry, MemoryReport, RuleInfo, SkillQuery

BRIEF_MAX_CHARS = 2000
MIN_LIKE_SCORE = 3
MAX_LIKE_RULES = 2


class MemoryService:
    def __init__(self, store: Store, *, seed_dir: Path | None = None, load_seeds: bool = True,
                 actor: str = "assistant") -> None:
        self.store = store
        self.actor = actor
        store.migrate(MIGRATIONS)  # a no-op on the app's store; a store opened without them gets them
        if load_seeds:
            seed_mod.load_seeds(store, seed_mod.read_seed_rules(seed_dir))

    # ------------------------------------------------------------------ records
    def record_failure(self, evaluation: Evaluation, kernel_source: str = "", *,
                       triton_version: str | None = None) -> list[RuleRef]:
        """Store a failed evaluation (no-op for a pass); return the active rules whose cluster it falls in."""
        rec = records.failure_record(evaluation, kernel_source, triton_version)
        if rec is None:
            return []
        records.insert(self.store, rec)
        if rec.category not in records.RULE_CATEGORIES:
            return []
        return self.rules_for_signature(rec.signature) or self.rules_like(rec)

    def rules_like(self, rec: records.FailureRecord) -> list[RuleRef]:
        """The active rules a failure with no ruled signature most likely broke, by the words its error shares
        with the rules' texts and signatures (a crash is matched like any other failure: the same out-of-bounds
        mistake reads differently under the interpreter, on triton 3.6 and on 3.9). The offending line is left
        out: every kernel line has tl.load and a mask, which would point every failure at the masking rule.
        At most MAX_LIKE_RULES, each sharing at least MIN_LIKE_SCORE words."""
        query = tokens(" ".join([rec.signature, rec.error_line]))
        if not query:
            return []
        ranked = [r for r in self._ranked(query, include_retired=False) if r.relevance >= MIN_LIKE_SCORE]
        return [RuleRef(rule_id=r.rule_id, text=r.text) for r in ranked[:MAX_LIKE_RULES]]

    def task_rule_ids(self, task_id: str) -> list[str]:
        """The active rules of this task's own failure clusters, the most frequent in this task first: what
        kernels for this task got wrong before, in any search on this machine."""
        rows = self.store.read(
            "SELECT rs.rule_id, COUNT(f.failure_id) AS n FROM failures f JOIN rule_signatures rs"
            " ON rs.signature = f.signature JOIN rules r ON r.rule_id = rs.rule_id"
            " WHERE f.task_id = ? AND r.status = 'active' GROUP BY rs.rule_id ORDER BY n DESC, rs.rule_id",
            (task_id,))
        return [r["rule_id"] for r in rows]

    def rules_for_signature(self, signature: str) -> list[RuleRef]:
        rows = self.store.read(
            "SELECT r.rule_id, r.text FROM rule_signatures rs JOIN rules r ON r.rule_id = rs.rule_id"
            " WHERE rs.signature = ? AND r.status = 'active' ORDER BY r.origin DESC, r.rule_id", (signature,))
        return [RuleRef(rule_id=r["rule_id"], text=r["text"]) for r in rows]

    # ------------------------------------------------------------------ reading rules
    def _task_source(self, task_id: str | None, task_source: str | None) -> str:
        if task_source:
            return task_source
        if task_id:
            row = self.store.read_one("SELECT source FROM tasks WHERE task_id = ?", (task_id,))
            if row is not None:
                return row["source"]
        return ""

    def _ranked(self, query: set[str], include_retired: bool) -> list[RuleInfo]:
        order = rules_mod.seed_order(self.store)
        ranked = []
        for rule in rules_mod.load_all(self.store, clusters_mod.cluster_id):
            if rule.status != "active" and not include_retired:
                continue
            rtoks = tokens(" ".join([rule.text, *rule.provenance.signatures]))
            ranked.append(rule.model_copy(update={"relevance": score(query, rtoks)}))
        ranked.sort(key=lambda r: (r.status != "active", -r.relevance, -r.count,
                                   order.get(r.rule_id, -1), r.rule_id))
        return ranked

    def query_skills(self, text: str = "", task_id: str | None = None, limit: int = 20,
                     include_retired: bool = True) -> SkillQuery:
        """Active rules first, then the most relevant to the text / task, then the most frequent."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        query = tokens(text) | task_tokens(self._task_source(task_id, None))
        ranked = self._ranked(query, include_retired)
        return SkillQuery(rules=ranked[:limit], total=len(ranked))

    def get_rule(self, rule_id: str) -> RuleInfo:
        for rule in rules_mod.load_all(self.store, clusters_mod.cluster_id):
            if rule.rule_id == rule_id:
                return rule
        raise ValueError(f"unknown rule id {rule_id!r}; list rules with query_skills")

    def rule_history(self, rule_id: str) -> list[HistoryEntry]:
        return rules_mod.history(self.store, rule_id)

    def rules_for_brief(self, task_id: str | None = None, task_source: str | None = None,
                        max_chars: int | None = None) -> list[RuleRef]:
        """Shown rules for a proposer's brief: relevant ones first, then most frequent, within max_chars
        (None: every shown rule; a search's brief picks the few that fit its step and counts the rest)."""
        query = task_tokens(self._task_source(task_id, task_source))
        shown = [r for r in self._ranked(query, include_retired=False) if r.shown]
        order = rules_mod.seed_order(self.store)
        shown.sort(key=lambda r: (r.relevance == 0, -r.count, -r.relevance, order.get(r.rule_id, -1), r.rule_id))
        out, used = [], 0
        for rule in shown:
            cost = len(rule.text) + 3  # "- " and a newline in the brief
            if max_chars is not None and used + cost > max_chars:
                continue
            out.append(RuleRef(rule_id=rule.rule_id, text=rule.text))
            used += cost
        return out

    # ------------------------------------------------------------------ clusters and distillation
    def failure_clusters(self, ripe_only: bool = True, limit: int = 50) -> ClusterList:
        return ClusterList(clusters=clusters_mod.list_clusters(self.store, ripe_only=ripe_only, limit=limit))

    def _cluster_signature(self, cluster_id: str) -> str:
        if not isinstance(cluster_id, str) or not cluster_id.strip():
            raise ValueError("cluster_id is empty; take one from failure_clusters")
        sig = clusters_mod.signature_of(self.store, cluster_id.strip())
        if sig is None:
            raise ValueError(f"unknown cluster id {cluster_id!r}; list clusters with failure_clusters")
        return sig

    def add_rule(self, cluster_id: str, text: str, actor: str | None = None) -> RuleInfo:
        """Write the rule for a cluster (one sentence, 'You cannot ...' / 'Always ...')."""
        text = rules_mod.validate_text(text)
        sig = self._cluster_signature(cluster_id)
        with self.store.write() as tx:
            taken = tx.execute(
                "SELECT r.rule_id FROM rule_signatures rs JOIN rules r ON r.rule_id = rs.rule_id"
                " WHERE rs.signature = ? AND r.status = 'active'", (sig,)).fetchone()
            if taken is not None:
                raise ValueError(f"cluster {cluster_id} already has rule {taken['rule_id']}; "
                                 "use update_rule to change it or merge_rules to combine rules")
            rule_id = rules_mod.insert_rule(tx, text=text, signatures=[sig], origin="user",
                                            actor=actor or self.actor, reason=f"distilled from cluster {cluster_id}")
        return self.get_rule(rule_id)

    def attach_rule(self, rule_id: str, cluster_id: str, reason: str, actor: str | None = None) -> RuleInfo:
        """Let an existing rule also cover another cluster (the same mistake, another error text)."""
        sig = self._cluster_signature(cluster_id)
        with self.store.write() as tx:
            rules_mod.attach(tx, rule_id, sig, rules_mod._reason(reason), actor or self.actor)
        return self.get_rule(rule_id)

    def update_rule(self, rule_id: str, text: str, reason: str, actor: str | None = None) -> RuleInfo:
        rules_mod.update_text(self.store, rule_id, text, reason, actor or self.actor)
        return self.get_rule(rule_id)

    def retire_rule(self, rule_id: str, reason: str, actor: str | None = None) -> RuleInfo:
        rules_mod.retire(self.store, rule_id, reason, actor or self.actor)
        return self.get_rule(rule_id)

    def merge_rules(self, rule_ids: list[str], text: str, reason: str, actor: str | None = None) -> RuleInfo:
        """One new rule covering every cluster of `rule_ids`; the old rules are retired ('merged into ...')."""
        text, reason = rules_mod.validate_text(text), rules_mod._reason(reason)
        ids = list(dict.fromkeys(rule_ids or []))
        if len(ids) < 2:
            raise ValueError("merge_rules needs at least two distinct rule ids")
        actor = actor or self.actor
        with self.store.write() as tx:
            sigs: list[str] = []
            for rid in ids:
                row = rules_mod._require(tx, rid)
                if row["status"] != "active":
                    raise ValueError(f"rule {rid!r} is retired; merge only active rules")
                sigs += [r["signature"] for r in tx.execute(
                    "SELECT signature FROM rule_signatures WHERE rule_id = ? ORDER BY added_at", (rid,))]
            new_id = rules_mod.insert_rule(tx, text=text, signatures=list(dict.fromkeys(sigs)), origin="user",
                                           actor=actor, reason=f"merged {', '.join(ids)}: {reason}")
            for rid in ids:
                rules_mod.retire(self.store, rid, f"merged into {new_id}: {reason}", actor, tx)
        return self.get_rule(new_id)

    # ------------------------------------------------------------------ Adapt measurement
    def report(self, top: int = 10) -> MemoryReport:
        from .report import build_report

        return build_report(self.store, top=top)
