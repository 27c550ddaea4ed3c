"""SearchService: the search as the assistant drives it. select -> choose step -> brief -> (assistant writes
a kernel) -> evaluate -> attach -> backpropagate.

Several steps may be out at once (`next_step(count=k)`): k is how many steps the caller works on together,
a window. The steps out come first (the same ones until they are expanded), then new ones are made until k
are out or the budget is spent (steps out + steps used never pass the budget). A new step is planned with
virtual loss (tree.with_pending): every step out counts as a visit with reward 0 of the node it grows and of
that node's ancestors, so steps handed out together spread over the tree. Each pending step has a lease
(`lease_s`, STEP_LEASE_S by default, renewed whenever next_step hands it out again): one not expanded in
time goes back (status 'expired': its virtual loss and its share of the budget are freed) and expanding it
afterwards is a UserError. A step being evaluated (claimed) does not expire.

Replay: a step's random draws come from (seed, the step's counter = how many steps the search handed out
before it), and its plan from the tree and the steps out at that moment. So the same seed and the same
sequence of calls (next_step counts, and expansions in the same order with the same verdicts) give the same
tree; one step at a time, that is the same seed and the same verdicts. Expansions that arrive in another
order give another tree (the nodes are numbered in the order they are attached), and an expired lease makes
the run depend on the clock.

Duplicates (search/duplicates.py): a kernel whose normalized source (trailing whitespace and blank lines
dropped) equals a node's of this search is not judged again: the step still makes a node (it is a step of
the search: the budget counts it, and its reward is backpropagated like any other), linked to the earlier
node's stored evaluation, and the result says `duplicate_of` with a warning. Two identical kernels evaluated
at the same moment are both judged.

Everything lives in the database (searches, nodes, steps); the in-memory tree is only a cache keyed by
the search's version counter, so a restarted server or a second process resumes exactly. Each mutation
is one short `store.write()` transaction; evaluation runs outside any transaction, under a claim on the
step (claimed in a transaction first, released if the evaluation raises), so two concurrent
`expand_node` calls on one step cannot both win. A claim belongs to a live process: one whose owner is
gone (the server was killed mid-evaluation, or its pid now names another process) is free at once at
next_step, expand_node and get_search; the claim timeout stays as a backstop for owners this process
cannot check (another host or container, a claim from before migration 4).

The service is given one `Evaluator` (search/evaluator.py): it judges a kernel and stores the result, and
says what a task is and which rules a brief shows. The node made from an evaluation links to the stored
result by its eval_id. Reads go through `Store.snapshot()`, writes through `Store.write()`, and the
repository answers with typed records (search/records.py).
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError

from adaexplore_mcp.config import DEFAULT_MAX_SOURCE_BYTES, DEFAULT_STEP_LEASE_S
from adaexplore_mcp import speedups
from adaexplore_mcp.errors import INT64_MAX, INT64_MIN, NotFound, UserError, clip, printable, quote
from adaexplore_mcp.models import Evaluation, TaskInfo
from adaexplore_mcp.ranking import beats
from adaexplore_mcp.search import batch as BATCH
from adaexplore_mcp.search import brief as B
from adaexplore_mcp.search import brief_batch as BRIEFS
from adaexplore_mcp.search import owner as O
from adaexplore_mcp.search import repository as R
from adaexplore_mcp.search import views as V
from adaexplore_mcp.search.duplicates import source_key
from adaexplore_mcp.search.edits import candidate_source
from adaexplore_mcp.search.evaluator import Evaluator, Progress
from adaexplore_mcp.search.records import SearchRecord, StepRecord
from adaexplore_mcp.search.strategies import plan_step
from adaexplore_mcp.search.tree import Tree, TreeNode, backpropagate, with_pending
from adaexplore_mcp.search.types import (
    MAX_BUDGET, MAX_STEPS_AT_ONCE, STRATEGIES, BestKernel, Edit, ExpandBatch, ExpandItem, ExpandResult,
    SearchParams, SearchSummary, SearchTree, StepBrief,
)
from adaexplore_mcp.search.views import TREE_SOURCE_CHARS
from adaexplore_mcp.store import Store, new_id

T = TypeVar("T")

# A claim older than this can be taken over even when its owner cannot be checked (another host or container).
CLAIM_TIMEOUT_S = 1800.0
# A pending step not expanded this long after next_step last handed it out goes back (expires); the server
# takes it from Settings.step_lease_s (ADAEXPLORE_STEP_LEASE_S).
STEP_LEASE_S = DEFAULT_STEP_LEASE_S
MAX_NOTE_CHARS = 300


class SearchService:
    def __init__(self, store: Store, evaluator: Evaluator, *, gpu: str | None = None,
                 max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES, claim_timeout_s: float = CLAIM_TIMEOUT_S,
                 lease_s: float = STEP_LEASE_S) -> None:
        self.store = store
        store.migrate(R.MIGRATIONS)  # a no-op on the app's store; a store opened without them gets them
        self.evaluator = evaluator
        self.gpu = gpu
        self.max_source_bytes = max_source_bytes
        self.claim_timeout_s = claim_timeout_s
        self.lease_s = lease_s
        self._trees: dict[str, Tree] = {}
        self._lock = threading.RLock()

    @property
    def timing_available(self) -> bool:
        return self.evaluator.timing_available

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
        if self._task(task_id) is None:  # a first use: the evaluator may probe the task now
            raise NotFound(f"unknown task_id {quote(task_id)}: create the task first or pick one from the task list")
        search_id = new_id("srch")
        with self.store.write() as tx:
            R.insert_search(tx, search_id, task_id, strategy, budget, seed, params.model_dump_json())
        return search_id

    # -- next step -----------------------------------------------------------------------------
    def next_step(self, search_id: str, count: int = 1, resend: bool = False) -> StepBrief:
        """The briefs of up to `count` steps: the steps out first (the same ones until they are expanded), then
        new ones until `count` are out; the first brief's fields, the others in `more_steps`, each thing said
        once (search/brief_batch.py). A step an earlier call handed out comes back as a stub naming its step_id
        unless `resend`. `done` when nothing is out and the budget is spent; a UserError when every step out is
        being evaluated."""
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_STEPS_AT_ONCE:
            raise UserError(f"count must be an integer from 1 to {MAX_STEPS_AT_ONCE}, got {quote(count)}")
        search = self._search(search_id)
        steps, created = self._hand_out(search_id, count)
        if not steps:
            with self._lock, self.store.snapshot() as conn:
                search = self._search(search_id, conn)
                return V.done_brief(search, self._tree(conn, search_id), self.timing_available, self.gpu)
        briefs = [self._brief(search.search_id, step) for step in steps]
        return BRIEFS.assemble(briefs, [resend or s.step_id in created for s in steps])

    def _brief(self, search_id: str, step: StepRecord) -> StepBrief:
        """The brief of one pending step (assembled by search/brief.py). The reference source is read here from
        the task table when the store has one; a root step and a repair (a small step on a failed parent) show
        it: many clients never let the model read a resource."""
        search = self._search(search_id)
        task, rules = self._task(search.task_id), self.evaluator.rules(search.task_id)  # outside any snapshot
        task_rules = self.evaluator.task_rule_ids(search.task_id)
        gpu = self.gpu or (self.evaluator.gpu_name if self.timing_available else None)
        with self._lock, self.store.snapshot() as conn:
            search = self._search(search_id, conn)
            tree = self._tree(conn, search_id)
            shown = V.brief_nodes(step, tree, search.search_params)
            nodes = R.load_nodes(conn, search_id, shown.wanted(step.parent_id), sources=True, evaluations=True)
            try:  # whether the brief shows it is step_brief's call (a root step, a repair)
                row = conn.execute("SELECT source FROM tasks WHERE task_id = ?", (search.task_id,)).fetchone()
            except sqlite3.OperationalError:  # a store without the task registry (a search over a fake evaluator)
                row = None
            reference = row[0] if row is not None else None
            return B.step_brief(search, step, shown.memory, shown.pool, nodes, task, rules, self.timing_available,
                                gpu, V.best_summary(search_id, tree), reference, task_rules)

    def _hand_out(self, search_id: str, count: int, created: set[str] | None = None) -> tuple[list[StepRecord], set[str]]:
        """The pending steps to brief (at most `count`, oldest first), after making new ones while fewer than
        `count` are out, and the ids of the steps this call made; their leases are renewed. Empty when nothing
        is out and the budget is spent. (A step whose lease ran out is no longer out for any query; it is marked
        'expired' here, in the same write.)"""
        created = set() if created is None else created
        out = self._open_steps(search_id)
        if len(out) < count:
            created |= self._new_step(search_id, count)
            out = self._open_steps(search_id)
        pending = [s for s in out if s.status == "pending"][:count]
        if not pending and out:
            busy = ", ".join(s.step_id for s in out)
            more = f", or ask for count={len(out) + 1} to work on another step meanwhile" if (
                len(out) < MAX_STEPS_AT_ONCE) else ""
            raise UserError(f"every step out ({busy}) of search {search_id} is being evaluated by another call; "
                            f"call next_step again when that expand_node returns{more}")
        with self.store.write() as tx:
            now = time.time()
            R.expire_steps(tx, search_id, now)
            still = {s.step_id for s in R.open_steps(tx, search_id, now)}  # a lease may have run out just now
            kept = [s for s in pending if s.step_id in still]
            R.renew_leases(tx, [s.step_id for s in kept], now + self.lease_s)
        return (kept, created) if kept or not pending else self._hand_out(search_id, count, created)

    def _open_steps(self, search_id: str) -> list[StepRecord]:
        """The steps out now, oldest first; a stale claim on one (its owner is gone, or it timed out) is
        released first."""
        steps = self._read(R.open_steps, search_id, time.time())
        if any([self._release_if_stale(step) for step in steps]):  # (a list: release every stale one)
            steps = self._read(R.open_steps, search_id, time.time())
        return steps

    def claim_is_stale(self, step: StepRecord) -> bool:
        """A claim is free when its owner process is gone (or its pid was reused), or, whoever owns it, when
        it is older than claim_timeout_s (the backstop for owners this process cannot check)."""
        if step.status != "claimed":
            return False
        if step.claimed_at is None or time.time() - step.claimed_at > self.claim_timeout_s:
            return True
        return O.is_alive(step.owner_pid, step.owner_start, step.owner_host, step.owner_boot) is False

    def _release_if_stale(self, step: StepRecord) -> bool:
        """Release the step's claim when it is stale; True when it was released (by this call or another)."""
        if not self.claim_is_stale(step):
            return False
        with self.store.write() as tx:
            R.release_step(tx, step.step_id, step.claim_token)  # only that claim: a fresh one stays
        return True

    def _new_step(self, search_id: str, count: int) -> set[str]:
        """Make new steps, one at a time, until `count` are out or the budget is spent, each planned with
        virtual loss (every step out counts as a visit of its node); a plan is made again when another call
        changed the search meanwhile. Returns the new steps' ids."""
        failures = 0
        made: set[str] = set()
        while failures < 20:
            with self._lock, self.store.snapshot() as conn:
                search = self._search(search_id, conn)
                out = R.open_steps(conn, search_id, time.time())
                if len(out) >= count or search.steps_used + len(out) >= search.budget:
                    return made
                tree = self._tree(conn, search_id)
                counter = R.steps_created(conn, search_id)
                seen = [s.step_id for s in out]
                planned = with_pending(tree, [(s.parent_id, s.kind) for s in out])
                plan = plan_step(search.strategy, planned, search.search_params, search.seed, counter,
                                 search.task_id)
            with self.store.write() as tx:
                now = time.time()
                fresh = self._search(search_id, tx)
                if (fresh.version != tree.version or R.steps_created(tx, search_id) != counter
                        or [s.step_id for s in R.open_steps(tx, search_id, now)] != seen):
                    failures += 1
                    continue  # another call changed the tree or the steps out meanwhile: plan again
                step_id = new_id("step")
                R.insert_step(tx, step_id, search_id, counter, plan.parent_id, plan.kind, plan.pool,
                              lease_until=now + self.lease_s)
                made.add(step_id)
        raise RuntimeError(f"search {search_id}: could not plan a step (the tree kept changing)")

    # -- expand --------------------------------------------------------------------------------
    def expand_node(self, search_id: str, step_id: str, kernel_source: str | None = None,
                    edits: Sequence[Edit | Mapping[str, str]] | None = None, note: str = "",
                    progress: Progress | None = None, next: int = 0) -> ExpandResult:
        """Evaluate the step's candidate (edits to the parent, or a full kernel), attach it, backpropagate.

        A kernel that repeats a node of this search (search/duplicates.py) is answered from that node's stored
        evaluation, with a warning, and still makes a node. With `next` (k, 0 to MAX_STEPS_AT_ONCE; true is 1),
        the result carries the next briefs (next_step(count=k)); when none can be handed out, a warning says why."""
        search = self._search(search_id)
        step = self._usable_step(search_id, step_id)
        source = self._candidate(search_id, step, kernel_source, edits)
        note = " ".join(str(note or "").split())[:MAX_NOTE_CHARS]
        key = source_key(source)
        same = self._read(R.find_duplicate, search_id, key)
        token = uuid.uuid4().hex
        with self.store.write() as tx:
            won = R.claim_step(tx, step_id, token)
        if not won:
            self._usable_step(search_id, step_id)  # says why (used, being evaluated, expired)
            raise UserError(f"step {step_id} was just taken by another expand_node call; call next_step")
        warnings: list[str] = []
        try:
            if same is not None and same.evaluation:
                evaluation = Evaluation.model_validate_json(same.evaluation)
                warnings.append(
                    f"duplicate: this kernel is node {same.node_id}'s again (compared without trailing whitespace "
                    f"and blank lines), so nothing was run: node {same.node_id}'s stored evaluation "
                    f"({evaluation.verdict.value}) is reused. The step is used and counts in the budget; send a "
                    "kernel that differs from every node of the search next time.")
            else:
                same = None
                evaluation = self.evaluator.evaluate(search.task_id, source, progress)
                if not evaluation.eval_id:
                    raise RuntimeError("the evaluator returned an evaluation it did not store (no eval_id)")
        except BaseException:
            with self.store.write() as tx:  # the caller may try again: its lease starts over
                R.release_step(tx, step_id, token, lease_until=time.time() + self.lease_s)
            raise
        result = self._attach(search_id, step, token, source, note, evaluation, key)
        result.warnings = warnings + result.warnings
        result.duplicate_of = same.node_id if same is not None else None
        if next:
            try:
                result.next_step = self.next_step(search_id, int(next))
            except UserError as exc:  # the node is added; only the next brief is missing
                result.warnings.append(f"no next step in this result: {exc}")
        return result

    def expand_nodes(self, search_id: str, items: Sequence[ExpandItem | Mapping[str, Any]], next: int = 0,
                     progress: Progress | None = None) -> ExpandBatch:
        """Several steps' kernels evaluated at once (threads; the judge runs them on its workers), one result
        per item; an item that fails gets its error, the others go on. `next`: then hand out that many
        briefs (next_step(count=next))."""
        return BATCH.expand_batch(self, search_id, items, next, progress)

    def _usable_step(self, search_id: str, step_id: str) -> StepRecord:
        step = self._read(R.load_step, step_id)
        if step is None:
            raise NotFound(f"unknown step_id {quote(step_id)}; call next_step({quote(search_id)}) for the current "
                           "step")
        if self._release_if_stale(step):  # claimed by a server that stopped mid-evaluation: free again
            step = self._read(R.load_step, step_id)
            assert step is not None  # steps are never deleted
        if step.search_id != search_id:
            raise UserError(f"step {step_id} belongs to search {step.search_id}, not {clip(printable(search_id))}")
        if step.status == "expired" or (step.status == "pending" and step.lease_until is not None
                                        and step.lease_until <= time.time()):
            with self.store.write() as tx:
                R.expire_steps(tx, search_id, time.time())
            lease = f"{self.lease_s / 60:g} minutes" if self.lease_s >= 120 else f"{self.lease_s:g} seconds"
            raise UserError(f"step {step_id} expired: it was not expanded within {lease} of "
                            "the last next_step that handed it out, so it went back (its place in the tree and "
                            "its share of the budget are free again). Call next_step for a new step.")
        if step.status == "done":
            raise UserError(f"step {step_id} was already used (it made node {step.node_id}); "
                            "a step id is used once: call next_step for a new one")
        if step.status == "claimed":
            raise UserError(f"step {step_id} is being evaluated by another call; wait for it, then call next_step")
        return step

    def _candidate(self, search_id: str, step: StepRecord, kernel_source: str | None, edits) -> str:
        parent = (lambda: self._read(R.load_nodes, search_id, [step.parent_id], sources=True)[step.parent_id]
                  .kernel_source or "")
        return candidate_source(step.kind, parent, kernel_source, edits, self.max_source_bytes)

    def _attach(self, search_id: str, step: StepRecord, token: str, source: str, note: str,
                evaluation: Evaluation, key: str) -> ExpandResult:
        verdict = evaluation.verdict.value
        with self._lock:
            with self.store.write() as tx:
                if not R.holds_claim(tx, step.step_id, token):
                    raise UserError(f"the claim on step {step.step_id} expired and was taken over; call next_step")
                search = self._search(search_id, tx)
                speedup, yardstick = speedups.ranked(evaluation)
                r = search.search_params.reward(verdict, speedup)
                tree = self._tree(tx, search_id)
                parent = tree.nodes[step.parent_id]
                node = TreeNode(node_id=len(tree), parent_id=parent.node_id, kind=step.kind,  # type: ignore[arg-type]
                                depth=parent.depth + 1, verdict=verdict, speedup=speedup, reward=r)
                is_new_best = beats(node, None if tree.best is None else tree.nodes[tree.best])
                best_id = node.node_id if is_new_best else tree.best
                best_speedup = speedup if is_new_best else (
                    tree.nodes[best_id].speedup if best_id is not None else None)
                path = [node.node_id] + tree.path_to_root(parent.node_id)
                R.insert_node(tx, search_id, node, step.step_id, note, evaluation.eval_id, source, key)
                R.backpropagate(tx, search_id, path, r)
                version = R.finish_step(tx, search_id, step.step_id, node.node_id, best_id, best_speedup)
            tree.add(node)
            backpropagate(tree, node.node_id, r, path)
            tree.version = version
            best = V.best_summary(search_id, tree)
        used = search.steps_used + 1
        result = ExpandResult(search_id=search_id, step_id=step.step_id, node_id=node.node_id, kind=node.kind,
                              parent_node_id=parent.node_id, evaluation=evaluation, reward=round(r, 6), best=best,
                              is_new_best=is_new_best, steps_used=used, steps_left=search.budget - used,
                              done=used >= search.budget, ranked_speedup=speedup, ranked_against=yardstick)
        if yardstick == "tf32" and evaluation.verdict.value == "passed":
            result.warnings.append(B.below_precision_note(evaluation))
        return result

    # -- views ---------------------------------------------------------------------------------
    def get_search(self, search_id: str, include_sources: bool = False) -> SearchTree:
        out = self._open_steps(search_id)  # a stale claim is released, nothing is opened
        with self.store.snapshot() as conn:
            search = self._search(search_id, conn)
            nodes = R.all_nodes(conn, search_id, sources=include_sources)
        return V.tree_view(search, nodes, [s.step_id for s in out], include_sources)

    def summary(self, search_id: str) -> SearchSummary:
        """One search's summary without loading its nodes; NotFound for an unknown id. Reads only (but releases
        a stale claim, as get_search does): it never opens a step."""
        search = self._search(search_id)
        out = self._open_steps(search_id)
        return V.summary(search, [s.step_id for s in out])

    def list_searches(self, task_id: str | None = None) -> list[SearchSummary]:
        return [V.summary(s, s.open_step_ids) for s in self._read(R.all_searches, task_id)]

    def best_kernel(self, search_id: str) -> BestKernel:
        """The best node (adaexplore_mcp.ranking) with its source and evaluation; a UserError when none passed."""
        with self.store.snapshot() as conn:
            search = self._search(search_id, conn)
            best = search.best_node_id
            if best is None:
                raise UserError(f"search {search_id} has no correct kernel yet ({search.steps_used} of "
                                f"{search.budget} steps used)")
            r = R.load_nodes(conn, search_id, [best], sources=True, evaluations=True)[best]
        return BestKernel(search_id=search_id, node_id=best, step_index=best, speedup=r.speedup,
                          verdict=r.verdict or "", note=r.note, kernel_uri=B.kernel_uri(search_id, best),
                          kernel_source=r.kernel_source or "",
                          evaluation=Evaluation.model_validate_json(r.evaluation) if r.evaluation else None)

    def node_kernel(self, search_id: str, node_id: int) -> str:
        """The full source of one node (the resource behind every kernel_uri)."""
        with self.store.snapshot() as conn:
            search = self._search(search_id, conn)
            if node_id == 0:
                raise UserError(f"node 0 is the root (the PyTorch reference): read {B.reference_uri(search.task_id)}")
            nodes = R.load_nodes(conn, search_id, [node_id], sources=True)
        if node_id not in nodes:
            raise NotFound(f"search {search_id} has no node {node_id}")
        return nodes[node_id].kernel_source or ""

    # -- helpers -------------------------------------------------------------------------------
    def _read(self, query: Callable[..., T], *args, **kwargs) -> T:
        """One repository read in a snapshot of its own."""
        with self.store.snapshot() as conn:
            return query(conn, *args, **kwargs)

    def _search(self, search_id: str, conn: sqlite3.Connection | None = None) -> SearchRecord:
        search = R.load_search(conn, search_id) if conn is not None else self._read(R.load_search, search_id)
        if search is None:
            raise NotFound(f"unknown search_id {quote(search_id)}; list_searches shows the existing ones")
        return search

    def _task(self, task_id: str) -> TaskInfo | None:
        try:
            return self.evaluator.task_info(task_id)
        except (LookupError, NotFound):
            return None

    def _tree(self, conn: sqlite3.Connection, search_id: str) -> Tree:
        """The cached tree if it is at the database's version, else a fresh load (call under self._lock)."""
        version = R.search_version(conn, search_id)
        tree = self._trees.get(search_id)
        if tree is None or tree.version != version:
            tree = self._trees[search_id] = R.load_tree(conn, search_id)
        return tree


__all__ = ["CLAIM_TIMEOUT_S", "MAX_NOTE_CHARS", "STEP_LEASE_S", "TREE_SOURCE_CHARS", "SearchService"]
