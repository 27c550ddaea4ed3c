"""SearchService: the search as the assistant drives it. select -> choose step -> brief -> (assistant writes
a kernel) -> evaluate -> attach -> backpropagate.

Everything lives in the database (searches, nodes, steps); the in-memory tree is only a cache keyed by
the search's version counter, so a restarted server or a second process resumes exactly. Each mutation
is one short `store.write()` transaction; evaluation runs outside any transaction, under a claim on the
step (claimed in a transaction first, released if the evaluation raises), so two concurrent
`expand_node` calls on one step cannot both win. A claim belongs to a live process: one whose owner is
gone (the server was killed mid-evaluation, or its pid now names another process) is free at once at
next_step, expand_node and get_search; the claim timeout stays as a backstop for owners this process
cannot check (another host or container, a claim from before migration 4).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence

from pydantic import ValidationError

from adaexplore_mcp.config import DEFAULT_MAX_SOURCE_BYTES
from adaexplore_mcp.errors import INT64_MAX, INT64_MIN, NotFound, UserError, clip, printable, quote
from adaexplore_mcp.models import Evaluation, RuleRef, TaskInfo
from adaexplore_mcp.search import brief as B
from adaexplore_mcp.search import owner as O
from adaexplore_mcp.search import repository as R
from adaexplore_mcp.search.edits import apply_edits
from adaexplore_mcp.search.memory_pool import working_memory
from adaexplore_mcp.search.strategies import plan_step
from adaexplore_mcp.search.tree import Tree, TreeNode, backpropagate, better
from adaexplore_mcp.search.types import (
    MAX_BUDGET, STRATEGIES, BestKernel, BestSummary, Edit, ExpandResult, NodeView, SearchParams, SearchSummary,
    SearchTree, StepBrief,
)
from adaexplore_mcp.store import Store, new_id

Progress = Callable[[float, str], None]
Evaluate = Callable[[str, str, "Progress | None"], Evaluation]  # (task_id, kernel_source, progress)
TaskLookup = Callable[[str], "TaskInfo | None"]
RulesProvider = Callable[[str], Sequence[RuleRef]]

# A claim older than this can be taken over even when its owner cannot be checked (another host or container).
CLAIM_TIMEOUT_S = 1800.0
MAX_NOTE_CHARS = 300
TREE_SOURCE_CHARS = 60_000  # all kernel sources in one get_search result (~15k tokens)


class SearchService:
    def __init__(self, store: Store, evaluate: Evaluate, task_lookup: TaskLookup,
                 rules_provider: RulesProvider | None = None, timing_available: bool = False, *,
                 gpu: str | None = None, max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES,
                 claim_timeout_s: float = CLAIM_TIMEOUT_S) -> None:
        self.store = store
        tables = {r[0] for r in store.read("SELECT name FROM sqlite_master WHERE type = 'table'"
                                             " AND name IN ('searches', 'step_claims')")}
        if len(tables) < 2:
            store.migrate()  # the Store was opened before this package registered its tables
        self._evaluate = evaluate
        self._task_lookup = task_lookup
        self._rules = rules_provider
        self.timing_available = timing_available
        self.gpu = gpu
        self.max_source_bytes = max_source_bytes
        self.claim_timeout_s = claim_timeout_s
        self._trees: dict[str, Tree] = {}
        self._lock = threading.RLock()

    # -- start ---------------------------------------------------------------------------------
    def start_search(self, task_id: str, budget: int, seed: int = 0, strategy: str = "adaexplore",
                     **constants: float) -> str:
        """Create a search; every SEARCH.md constant may be overridden by name (see SearchParams)."""
        if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_BUDGET:
            raise UserError(f"budget must be an integer number of steps from 1 to {MAX_BUDGET}, got {quote(budget)}")
        # The seed is stored as given (so a search reports the seed it was started with): it must fit SQLite's
        # 64-bit INTEGER; it is not reduced modulo 2**63, which would make two different seeds one search.
        if isinstance(seed, bool) or not isinstance(seed, int) or not INT64_MIN <= seed <= INT64_MAX:
            raise UserError(f"seed must be an integer from {INT64_MIN} to {INT64_MAX}, got {quote(seed)}")
        if strategy not in STRATEGIES:
            raise UserError(f"unknown strategy {quote(strategy)}; choose one of {', '.join(STRATEGIES)}")
        try:
            params = SearchParams(**constants)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise UserError(f"bad search constants ({problems}); the constants are: "
                            f"{', '.join(SearchParams.model_fields)}") from None
        if self._lookup_task(task_id) is None:
            raise NotFound(f"unknown task_id {quote(task_id)}: create the task first or pick one from the task list")
        search_id = new_id("srch")
        with self.store.write() as tx:
            R.insert_search(tx, search_id, task_id, strategy, budget, seed, params.model_dump_json())
        return search_id

    # -- next step -----------------------------------------------------------------------------
    def next_step(self, search_id: str) -> StepBrief:
        """The pending step (the same one until it is expanded), a new one, or `done` when the budget is spent."""
        conn = self._conn()
        row = self._search_row(search_id)
        step = self._open_step(search_id)
        if step is None and row["steps_used"] < row["budget"]:
            step = self._new_step(search_id)
        row = self._search_row(search_id)
        if step is None:
            return self._done_brief(row)
        if step["status"] == "claimed":
            raise UserError(f"step {step['step_id']} of search {search_id} is being evaluated by another call; "
                            "call next_step again when that expand_node returns")
        with self._lock:
            tree = self._tree(conn, search_id)
            return self._brief(row, step, tree)

    def _open_step(self, search_id: str):
        """The open step; a stale claim on it (its owner is gone, or it timed out) is released first."""
        step = R.open_step(self._conn(), search_id)
        if step is not None and self._release_if_stale(step):
            step = R.open_step(self._conn(), search_id)
        return step

    def claim_is_stale(self, step) -> bool:
        """A claim is free when its owner process is gone (or its pid was reused), or, whoever owns it, when
        it is older than claim_timeout_s (the backstop for owners this process cannot check)."""
        if step["status"] != "claimed":
            return False
        claimed_at = step["claimed_at"]
        if claimed_at is None or time.time() - claimed_at > self.claim_timeout_s:
            return True
        return O.is_alive(step["owner_pid"], step["owner_start"], step["owner_host"], step["owner_boot"]) is False

    def _release_if_stale(self, step) -> bool:
        """Release the step's claim when it is stale; True when it was released (by this call or another)."""
        if not self.claim_is_stale(step):
            return False
        with self.store.write() as tx:
            R.release_step(tx, step["step_id"], step["claim_token"])  # only that claim: a fresh one stays
        return True

    def _new_step(self, search_id: str):
        conn = self._conn()
        for _ in range(20):
            with self._lock:
                tree = self._tree(conn, search_id)
                row = self._search_row(search_id)
                counter = row["steps_used"]
                params = SearchParams.model_validate_json(row["params"])
                plan = plan_step(row["strategy"], tree, params, row["seed"], counter)
            with self.store.write() as tx:
                existing = R.open_step(tx, search_id)
                if existing is not None:
                    return existing
                fresh = R.search_row(tx, search_id)
                if fresh["version"] != tree.version or fresh["steps_used"] != counter:
                    continue  # another process changed the tree meanwhile: plan again
                if fresh["steps_used"] >= fresh["budget"]:
                    return None
                step_id = new_id("step")
                R.insert_step(tx, step_id, search_id, counter, plan.parent_id, plan.kind, plan.pool)
                return R.step_row(tx, step_id)
        raise RuntimeError(f"search {search_id}: could not plan a step (the tree kept changing)")

    def _brief(self, row, step, tree: Tree) -> StepBrief:
        sid, task_id = row["search_id"], row["task_id"]
        params = SearchParams.model_validate_json(row["params"])
        kind, parent = step["kind"], step["parent_id"]
        conn = self._conn()
        memory_ids = working_memory(tree, parent, params.memory_size) if kind == "small" else []
        pool_ids = json.loads(step["pool"]) if kind == "large" else []
        wanted = set(memory_ids) | set(pool_ids) | ({parent} if parent != 0 else set())
        rows = R.node_rows(conn, sid, sorted(wanted), sources=True, evaluations=True)
        task = B.task_brief(task_id, self._lookup_task(task_id))
        out = StepBrief(
            search_id=sid, step_id=step["step_id"], kind=kind, parent_node_id=parent, strategy=row["strategy"],
            rules=list(self._rules(task_id)) if self._rules else [], task=task,
            timing_available=self.timing_available, gpu=self.gpu,
            timing_note=B.TIMING_ON if self.timing_available else B.TIMING_OFF,
            instructions=B.instructions(kind, self.timing_available, task.reference_uri),
            budget=row["budget"], steps_used=row["steps_used"], steps_left=row["budget"] - row["steps_used"],
            best=self._best_summary(sid, tree),
        )
        if parent != 0:
            p = rows[parent]
            out.parent_kernel_uri = B.kernel_uri(sid, parent)
            out.parent_evaluation = B.evaluation_summary(p["evaluation"], p["verdict"], p["speedup"], p["reward"])
            if kind == "small":
                out.parent_kernel = p["kernel_source"]
        if kind == "small":
            out.working_memory = B.kernel_refs(sid, memory_ids, rows, omit={parent})
        else:
            out.pool = B.kernel_refs(sid, pool_ids, rows)
        return out

    def _done_brief(self, row) -> StepBrief:
        with self._lock:
            tree = self._tree(self._conn(), row["search_id"])
            best = self._best_summary(row["search_id"], tree)
        if best is None:
            text = "The budget is spent and no kernel was correct."
        else:
            text = (f"The budget is spent. The best kernel is node {best.node_id} (speedup "
                    f"{best.speedup if best.speedup is not None else 'not timed'}); best_kernel returns it.")
        return StepBrief(search_id=row["search_id"], done=True, strategy=row["strategy"],
                         timing_available=self.timing_available, gpu=self.gpu, instructions=text,
                         budget=row["budget"], steps_used=row["steps_used"], steps_left=0, best=best)

    # -- expand --------------------------------------------------------------------------------
    def expand_node(self, search_id: str, step_id: str, kernel_source: str | None = None,
                    edits: Sequence[Edit | Mapping[str, str]] | None = None, note: str = "",
                    progress: Progress | None = None) -> ExpandResult:
        """Evaluate the step's candidate (edits to the parent, or a full kernel), attach it, backpropagate."""
        conn = self._conn()
        row = self._search_row(search_id)
        step = self._usable_step(search_id, step_id)
        source = self._candidate(search_id, step, kernel_source, edits)
        note = " ".join(str(note or "").split())[:MAX_NOTE_CHARS]
        token = uuid.uuid4().hex
        with self.store.write() as tx:
            if not R.claim_step(tx, step_id, token):
                raise UserError(f"step {step_id} was just taken by another expand_node call; call next_step")
        try:
            evaluation = self._evaluate(row["task_id"], source, progress)
        except BaseException:
            with self.store.write() as tx:
                R.release_step(tx, step_id, token)
            raise
        return self._attach(conn, search_id, step, token, source, note, evaluation)

    def _usable_step(self, search_id: str, step_id: str):
        step = R.step_row(self._conn(), step_id)
        if step is None:
            raise NotFound(f"unknown step_id {quote(step_id)}; call next_step({quote(search_id)}) for the current "
                           "step")
        if self._release_if_stale(step):  # claimed by a server that stopped mid-evaluation: free again
            step = R.step_row(self._conn(), step_id)
        if step["search_id"] != search_id:
            raise UserError(f"step {step_id} belongs to search {step['search_id']}, not {clip(printable(search_id))}")
        if step["status"] == "done":
            raise UserError(f"step {step_id} was already used (it made node {step['node_id']}); "
                            "a step id is used once: call next_step for a new one")
        if step["status"] == "claimed":
            raise UserError(f"step {step_id} is being evaluated by another call; wait for it, then call next_step")
        return step

    def _candidate(self, search_id: str, step, kernel_source: str | None, edits) -> str:
        if kernel_source is not None and edits:
            raise UserError("send either edits or kernel_source, not both")
        if edits:
            if step["kind"] == "large":
                raise UserError("this is a large step: send a complete kernel_source (edits are for small steps)")
            parent = R.node_rows(self._conn(), search_id, [step["parent_id"]], sources=True)
            source = apply_edits(parent[step["parent_id"]]["kernel_source"] or "", edits)
        elif kernel_source is not None:
            source = kernel_source
        else:
            need = "kernel_source" if step["kind"] == "large" else "edits (or a full kernel_source)"
            raise UserError(f"expand_node needs {need} for this {step['kind']} step")
        if not isinstance(source, str) or not source.strip():
            raise UserError("the kernel is empty; send Python source defining class ModelNew")
        size = len(source.encode())
        if size > self.max_source_bytes:
            raise UserError(f"the kernel is {size} bytes; the limit is {self.max_source_bytes} bytes")
        return source

    def _attach(self, conn, search_id: str, step, token: str, source: str, note: str,
                evaluation: Evaluation) -> ExpandResult:
        verdict = evaluation.verdict.value
        with self._lock:
            with self.store.write() as tx:
                if not R.holds_claim(tx, step["step_id"], token):
                    raise UserError(f"the claim on step {step['step_id']} expired and was taken over; call next_step")
                row = R.search_row(tx, search_id)
                params = SearchParams.model_validate_json(row["params"])
                r = params.reward(verdict, evaluation.speedup)
                tree = self._trees.get(search_id)
                if tree is None or tree.version != row["version"]:
                    tree = self._trees[search_id] = R.load_tree(tx, search_id)
                parent = tree.nodes[step["parent_id"]]
                node = TreeNode(node_id=len(tree), parent_id=parent.node_id, kind=step["kind"],
                                depth=parent.depth + 1, verdict=verdict, speedup=evaluation.speedup, reward=r)
                is_new_best = node.correct and (tree.best is None or better(node, tree.nodes[tree.best]))
                best_id = node.node_id if is_new_best else tree.best
                best_speedup = evaluation.speedup if is_new_best else (
                    tree.nodes[best_id].speedup if best_id is not None else None)
                path = [node.node_id] + tree.path_to_root(parent.node_id)
                R.insert_node(tx, search_id, node, step["step_id"], note, evaluation.model_dump_json(), source)
                R.backpropagate(tx, search_id, path, r)
                version = R.finish_step(tx, search_id, step["step_id"], node.node_id, best_id, best_speedup)
            tree.add(node)
            backpropagate(tree, node.node_id, r, path)
            tree.version = version
            best = self._best_summary(search_id, tree)
        used = row["steps_used"] + 1
        return ExpandResult(search_id=search_id, step_id=step["step_id"], node_id=node.node_id, kind=node.kind,
                            parent_node_id=parent.node_id, evaluation=evaluation, reward=round(r, 6), best=best,
                            is_new_best=is_new_best, steps_used=used, steps_left=row["budget"] - used,
                            done=used >= row["budget"])

    # -- views ---------------------------------------------------------------------------------
    def get_search(self, search_id: str, include_sources: bool = False) -> SearchTree:
        row = self._search_row(search_id)
        nodes, curve, best = [], [], None
        budget = TREE_SOURCE_CHARS  # sources beyond it are left out; each node's full kernel is a resource
        for r in R.all_node_rows(self._conn(), search_id, sources=include_sources):
            n = NodeView(node_id=r["node_id"], step_index=r["node_id"], parent_id=r["parent_id"], kind=r["kind"],
                         depth=r["depth"], verdict=r["verdict"], speedup=r["speedup"], reward=r["reward"],
                         visits=r["visits"], total_reward=r["total_reward"],
                         mean_reward=r["total_reward"] / r["visits"] if r["visits"] else 0.0,
                         max_reward=r["max_reward"], note=r["note"], created_at=r["created_at"],
                         kernel_source=self._budgeted_source(r, include_sources, budget))
            if n.kernel_source:
                budget -= len(n.kernel_source)
            nodes.append(n)
            if n.verdict == "passed":
                s = n.speedup if n.speedup is not None else 1.0
                best = s if best is None else max(best, s)
            curve.append(best)
        return SearchTree(**self._summary_of(row).model_dump(),
                          params=SearchParams.model_validate_json(row["params"]), nodes=nodes, best_curve=curve)

    def summary(self, search_id: str) -> SearchSummary:
        """One search's summary without loading its nodes; NotFound for an unknown id. Reads only (but releases
        a stale claim, as get_search does): it never opens a step."""
        return self._summary_of(self._search_row(search_id))

    def _summary_of(self, row) -> SearchSummary:
        open_step = self._open_step(row["search_id"])  # a stale claim is released, nothing is opened
        return self._summary(row, open_step["step_id"] if open_step else None)

    @staticmethod
    def _budgeted_source(row, include_sources: bool, budget: int) -> str | None:
        """A node's source trimmed to the per-kernel and remaining whole-tree budgets (results stay compact)."""
        source = row["kernel_source"] if include_sources else None
        if not source or budget <= len(B.TRUNCATION_MARK):
            return None
        limit = min(B.KERNEL_CHARS, budget)
        return source if len(source) <= limit else source[: limit - len(B.TRUNCATION_MARK)] + B.TRUNCATION_MARK

    def list_searches(self, task_id: str | None = None) -> list[SearchSummary]:
        return [self._summary(r, r["open_step"]) for r in R.all_searches(self.store)
                if task_id is None or r["task_id"] == task_id]

    def best_kernel(self, search_id: str) -> BestKernel:
        """The correct node with the highest speedup (earliest on ties); a UserError when none is correct."""
        row = self._search_row(search_id)
        best = row["best_node_id"]
        if best is None:
            raise UserError(f"search {search_id} has no correct kernel yet ({row['steps_used']} of "
                            f"{row['budget']} steps used)")
        r = R.node_rows(self._conn(), search_id, [best], sources=True, evaluations=True)[best]
        return BestKernel(search_id=search_id, node_id=best, step_index=best, speedup=r["speedup"],
                          verdict=r["verdict"], note=r["note"], kernel_uri=B.kernel_uri(search_id, best),
                          kernel_source=r["kernel_source"],
                          evaluation=Evaluation.model_validate_json(r["evaluation"]) if r["evaluation"] else None)

    def node_kernel(self, search_id: str, node_id: int) -> str:
        """The full source of one node (the resource behind every kernel_uri)."""
        row = self._search_row(search_id)
        if node_id == 0:
            raise UserError(f"node 0 is the root (the PyTorch reference): read {B.reference_uri(row['task_id'])}")
        rows = R.node_rows(self._conn(), search_id, [node_id], sources=True)
        if node_id not in rows:
            raise NotFound(f"search {search_id} has no node {node_id}")
        return rows[node_id]["kernel_source"]

    # -- helpers -------------------------------------------------------------------------------
    def _conn(self):
        return self.store._connect()  # this thread's connection (the store keeps one per thread)

    def _search_row(self, search_id: str):
        row = R.search_row(self._conn(), search_id)
        if row is None:
            raise NotFound(f"unknown search_id {quote(search_id)}; list_searches shows the existing ones")
        return row

    def _lookup_task(self, task_id: str) -> TaskInfo | None:
        try:
            return self._task_lookup(task_id)
        except (LookupError, NotFound):
            return None

    def _tree(self, conn, search_id: str) -> Tree:
        """The cached tree if it is at the database's version, else a fresh load (call under self._lock)."""
        version = R.search_version(conn, search_id)
        tree = self._trees.get(search_id)
        if tree is None or tree.version != version:
            tree = self._trees[search_id] = R.load_tree(conn, search_id)
        return tree

    @staticmethod
    def _best_summary(search_id: str, tree: Tree) -> BestSummary | None:
        if tree.best is None:
            return None
        n = tree.nodes[tree.best]
        return BestSummary(node_id=n.node_id, speedup=n.speedup, reward=round(n.reward, 6),
                           kernel_uri=B.kernel_uri(search_id, n.node_id))

    @staticmethod
    def _summary(row, open_step: str | None) -> SearchSummary:
        return SearchSummary(
            search_id=row["search_id"], task_id=row["task_id"], strategy=row["strategy"], budget=row["budget"],
            seed=row["seed"], steps_used=row["steps_used"], steps_left=row["budget"] - row["steps_used"],
            done=row["steps_used"] >= row["budget"], best_node_id=row["best_node_id"],
            best_speedup=row["best_speedup"], pending_step_id=open_step, created_at=row["created_at"], updated_at=row["updated_at"])
