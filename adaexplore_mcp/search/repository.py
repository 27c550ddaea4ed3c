"""The search's tables and every SQL statement that touches them.

searches: one row per search (strategy, budget, seed, parameters, counters, a version bumped on each change)
nodes:    one row per node with its statistics N/W/M: small rows, so backpropagation along a deep path
          and loading a whole tree touch few pages
node_payloads: the node's kernel source and full evaluation (kilobytes), read only for the nodes shown
steps:    every step handed out: pending -> claimed (being evaluated) -> done, or pending -> expired when its
          lease ran out; several may be open at once (migration 7), each pending one with a lease
step_claims: who holds a claimed step (pid, process start time, host): a claim whose process is gone is
          free at once, not only after the claim timeout (migration 4, a table of its own so that it never
          depends on the order in which migrations are applied)

A node's evaluation is the row of `evaluations` its payload names (`eval_id`, migration 5): stored once, by
the evaluator. Nodes made before migration 5 have no id and keep their own copy in `node_payloads.evaluation`,
which is still read for them (new nodes leave it empty).

Migration 7 (several outstanding steps, duplicates): drops the one-open-step index, gives each step a lease
(`steps.lease_until`, NULL for steps handed out before it: they never expire) and each payload the key of
its normalized source (`node_payloads.source_key`, search/duplicates.py; NULL for nodes made before it,
which are never matched as duplicates).

Reads return small typed records (`SearchRecord`, `StepRecord`, `NodeRecord`), never raw rows; every
function takes the connection of a `Store.snapshot()` or `Store.write()` block, so one call of the service
reads one consistent state.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence

from adaexplore_mcp.search.owner import ProcessIdentity, current
from adaexplore_mcp.search.records import NodeRecord, SearchRecord, StepRecord, as_record
from adaexplore_mcp.search.tree import Tree, TreeNode
from adaexplore_mcp.store import Migration

MIGRATION_VERSION = 2
MIGRATION_SQL = """
CREATE TABLE searches (
    search_id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    strategy TEXT NOT NULL,
    budget INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    params TEXT NOT NULL,
    steps_used INTEGER NOT NULL DEFAULT 0,
    version INTEGER NOT NULL DEFAULT 0,
    best_node_id INTEGER,
    best_speedup REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX searches_by_task ON searches(task_id);

CREATE TABLE nodes (
    search_id TEXT NOT NULL,
    node_id INTEGER NOT NULL,
    parent_id INTEGER,
    kind TEXT NOT NULL,
    depth INTEGER NOT NULL,
    verdict TEXT,
    speedup REAL,
    reward REAL,
    visits INTEGER NOT NULL DEFAULT 0,
    total_reward REAL NOT NULL DEFAULT 0,
    max_reward REAL NOT NULL DEFAULT 0,
    step_id TEXT,
    created_at REAL NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (search_id, node_id)
);

CREATE TABLE node_payloads (
    search_id TEXT NOT NULL,
    node_id INTEGER NOT NULL,
    evaluation TEXT NOT NULL,
    kernel_source TEXT NOT NULL,
    PRIMARY KEY (search_id, node_id)
);

CREATE TABLE steps (
    step_id TEXT PRIMARY KEY,
    search_id TEXT NOT NULL,
    counter INTEGER NOT NULL,
    parent_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    pool TEXT NOT NULL DEFAULT '[]',
    status TEXT NOT NULL,
    claim_token TEXT,
    claimed_at REAL,
    node_id INTEGER,
    created_at REAL NOT NULL
);
CREATE INDEX steps_by_search ON steps(search_id, status);
CREATE UNIQUE INDEX steps_one_open ON steps(search_id) WHERE status IN ('pending', 'claimed')
"""

# The owner of a claim. One row per claimed step, keyed by step and token; removed when the claim ends.
CLAIMS_MIGRATION_VERSION = 4
CLAIMS_MIGRATION_SQL = """
CREATE TABLE IF NOT EXISTS step_claims (
    step_id TEXT PRIMARY KEY,
    claim_token TEXT NOT NULL,
    owner_pid INTEGER NOT NULL,
    owner_start INTEGER,
    owner_host TEXT NOT NULL DEFAULT '',
    owner_boot TEXT NOT NULL DEFAULT '',
    claimed_at REAL NOT NULL
)
"""

# A node's evaluation by id: the `evaluations` row the evaluator stored (NULL for nodes made before it).
EVALUATION_LINK_MIGRATION_VERSION = 5
EVALUATION_LINK_MIGRATION_SQL = "ALTER TABLE node_payloads ADD COLUMN eval_id TEXT"

# Several open steps per search, each with a lease; the normalized-source key that finds duplicates.
PARALLEL_MIGRATION_VERSION = 7
PARALLEL_MIGRATION_SQL = """
DROP INDEX IF EXISTS steps_one_open;
ALTER TABLE steps ADD COLUMN lease_until REAL;
ALTER TABLE node_payloads ADD COLUMN source_key TEXT;
CREATE INDEX node_payloads_by_source_key ON node_payloads(search_id, source_key)
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(MIGRATION_VERSION, MIGRATION_SQL, "search"),
    Migration(CLAIMS_MIGRATION_VERSION, CLAIMS_MIGRATION_SQL, "search"),
    Migration(EVALUATION_LINK_MIGRATION_VERSION, EVALUATION_LINK_MIGRATION_SQL, "search"),
    Migration(PARALLEL_MIGRATION_VERSION, PARALLEL_MIGRATION_SQL, "search"),
)


def _open(alias: str) -> str:
    """A step still out at a time bound as one parameter: claimed, or pending within its lease (NULL: none)."""
    # The IN comes first so that steps_by_search (search_id, status) finds the few open steps among the done ones.
    return (f"({alias}.status IN ('pending', 'claimed') AND ({alias}.status = 'claimed'"
            f" OR {alias}.lease_until IS NULL OR {alias}.lease_until > ?))")


_TREE_COLUMNS = "node_id, parent_id, kind, depth, verdict, speedup, reward, visits, total_reward, max_reward"



# -- searches --------------------------------------------------------------------------------------

def insert_search(tx: sqlite3.Connection, search_id: str, task_id: str, strategy: str, budget: int, seed: int,
                  params_json: str) -> None:
    now = time.time()
    tx.execute(
        "INSERT INTO searches (search_id, task_id, strategy, budget, seed, params, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (search_id, task_id, strategy, budget, seed, params_json, now, now),
    )
    tx.execute(
        "INSERT INTO nodes (search_id, node_id, parent_id, kind, depth, created_at) VALUES (?, 0, NULL, 'root', 0, ?)",
        (search_id, now),
    )


def load_search(conn: sqlite3.Connection, search_id: str) -> SearchRecord | None:
    row = conn.execute("SELECT * FROM searches WHERE search_id = ?", (search_id,)).fetchone()
    return None if row is None else as_record(SearchRecord, row)


def search_version(conn: sqlite3.Connection, search_id: str) -> int | None:
    row = conn.execute("SELECT version FROM searches WHERE search_id = ?", (search_id,)).fetchone()
    return None if row is None else int(row[0])


def all_searches(conn: sqlite3.Connection, task_id: str | None = None, now: float | None = None) -> list[SearchRecord]:
    """Every search (of one task), each with the ids of its steps out at `now` (oldest first)."""
    sql = ("SELECT s.*, (SELECT group_concat(step_id) FROM (SELECT t.step_id FROM steps t WHERE"
           " t.search_id = s.search_id AND " + _open("t") + " ORDER BY t.counter)) AS open_steps FROM searches s")
    params: tuple = (time.time() if now is None else now,)
    if task_id is not None:
        sql, params = sql + " WHERE s.task_id = ?", (*params, task_id)
    return [as_record(SearchRecord, r) for r in conn.execute(sql + " ORDER BY s.created_at", params)]


# -- the tree --------------------------------------------------------------------------------------

def load_tree(conn: sqlite3.Connection, search_id: str) -> Tree:
    """Structure and statistics of every node (no sources), rebuilt into an in-memory Tree."""
    version = search_version(conn, search_id)
    rows = conn.execute(
        f"SELECT {_TREE_COLUMNS} FROM nodes WHERE search_id = ? ORDER BY node_id", (search_id,)
    ).fetchall()
    tree = Tree(nodes=[])
    for r in rows:
        node = TreeNode(node_id=r[0], parent_id=r[1], kind=r[2], depth=r[3], verdict=r[4], speedup=r[5],
                        reward=r[6] or 0.0, visits=r[7], total_reward=r[8], max_reward=r[9])
        if node.parent_id is None:
            tree.nodes.append(node)
        else:
            tree.add(node)
    tree.version = version or 0
    return tree


_NODE_COLUMNS = ", ".join(f"n.{c.strip()}" for c in _TREE_COLUMNS.split(",")) + ", n.note, n.created_at"
# The stored evaluation; the node's own copy for nodes made before migration 5 (new nodes leave it empty).
_EVALUATION = "COALESCE(e.result, NULLIF(p.evaluation, '')) AS evaluation, p.eval_id"
_NODES_FROM = (" FROM nodes n LEFT JOIN node_payloads p ON p.search_id = n.search_id AND p.node_id = n.node_id"
               " LEFT JOIN evaluations e ON e.eval_id = p.eval_id")


# The speedup against every yardstick (speedups.of_columns), read out of the stored evaluation by SQLite.
_STORED = "COALESCE(e.result, NULLIF(p.evaluation, ''))"
_YARDSTICKS = ", ".join(f"json_extract({_STORED}, '$.{path}') AS {name}" for name, path in (
    ("speedup_tf32", "speedup_tf32"), ("speedup_compile", "timing.speedup_compile"),
    ("pct_roofline", "timing.roofline.pct_roofline"), ("bound", "timing.roofline.bound")))


def _node_columns(sources: bool, evaluations: bool, yardsticks: bool = False) -> str:
    cols = _NODE_COLUMNS
    if sources:
        cols += ", p.kernel_source"
    if evaluations:
        cols += ", " + _EVALUATION
    if yardsticks:
        cols += ", " + _YARDSTICKS
    return cols


def load_nodes(conn: sqlite3.Connection, search_id: str, node_ids: Sequence[int], *, sources: bool,
               evaluations: bool = False) -> dict[int, NodeRecord]:
    """The given nodes by id (those that exist), with their sources and evaluations when asked for."""
    if not node_ids:
        return {}
    rows = conn.execute(
        f"SELECT {_node_columns(sources, evaluations)}{_NODES_FROM}"
        " WHERE n.search_id = ? AND n.node_id IN (SELECT value FROM json_each(?))",
        (search_id, json.dumps(list(node_ids))),
    ).fetchall()
    return {r["node_id"]: as_record(NodeRecord, r) for r in rows}


def all_nodes(conn: sqlite3.Connection, search_id: str, *, sources: bool) -> list[NodeRecord]:
    """Every node of the search in creation order, with the speedup against every yardstick."""
    rows = conn.execute(f"SELECT {_node_columns(sources, False, yardsticks=True)}{_NODES_FROM} WHERE n.search_id = ?"
                        " ORDER BY n.node_id", (search_id,)).fetchall()
    return [as_record(NodeRecord, r) for r in rows]


def insert_node(tx: sqlite3.Connection, search_id: str, node: TreeNode, step_id: str, note: str, eval_id: str,
                kernel_source: str, source_key: str | None = None) -> None:
    """The node and its payload: the kernel, the key of its normalized source, and the id of its evaluation
    (stored once, by the evaluator; a duplicate's node names the evaluation of the node it repeats)."""
    tx.execute(
        "INSERT INTO nodes (search_id, node_id, parent_id, kind, depth, verdict, speedup, reward, visits,"
        " total_reward, max_reward, step_id, created_at, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, ?, ?, ?)",
        (search_id, node.node_id, node.parent_id, node.kind, node.depth, node.verdict, node.speedup, node.reward,
         step_id, time.time(), note),
    )
    tx.execute("INSERT INTO node_payloads (search_id, node_id, evaluation, eval_id, kernel_source, source_key)"
               " VALUES (?, ?, '', ?, ?, ?)", (search_id, node.node_id, eval_id, kernel_source, source_key))


def find_duplicate(conn: sqlite3.Connection, search_id: str, source_key: str) -> NodeRecord | None:
    """The earliest node of the search whose normalized source has this key, with its evaluation."""
    # INDEXED BY: without statistics SQLite picks the primary key (search_id, node_id) for this, a scan of
    # every node of the search (milliseconds at 10,000 nodes, on every expand_node).
    row = conn.execute("SELECT MIN(node_id) FROM node_payloads INDEXED BY node_payloads_by_source_key"
                       " WHERE search_id = ? AND source_key = ? AND eval_id IS NOT NULL",
                       (search_id, source_key)).fetchone()
    if row is None or row[0] is None:
        return None
    return load_nodes(conn, search_id, [row[0]], sources=False, evaluations=True).get(row[0])


def backpropagate(tx: sqlite3.Connection, search_id: str, node_ids: Iterable[int], r: float) -> None:
    """N += 1, W += r, M = max(M, r) on the given nodes (the new node and its ancestors), in one statement."""
    tx.execute(
        "UPDATE nodes SET visits = visits + 1, total_reward = total_reward + ?, max_reward = MAX(max_reward, ?)"
        " WHERE search_id = ? AND node_id IN (SELECT value FROM json_each(?))",
        (r, r, search_id, json.dumps(list(node_ids))),
    )


def finish_step(tx: sqlite3.Connection, search_id: str, step_id: str, node_id: int, best_node_id: int | None,
                best_speedup: float | None) -> int:
    """Mark the step done, count it, bump the version; returns the new version."""
    tx.execute("UPDATE steps SET status = 'done', node_id = ?, claim_token = NULL WHERE step_id = ?",
               (node_id, step_id))
    tx.execute("DELETE FROM step_claims WHERE step_id = ?", (step_id,))
    tx.execute(
        "UPDATE searches SET steps_used = steps_used + 1, version = version + 1, best_node_id = ?,"
        " best_speedup = ?, updated_at = ? WHERE search_id = ?",
        (best_node_id, best_speedup, time.time(), search_id),
    )
    return int(search_version(tx, search_id))  # type: ignore[arg-type]


# -- steps -----------------------------------------------------------------------------------------

# A step with its claim's owner (NULL owner columns: not claimed, or claimed by a server without migration 4).
_STEP_SELECT = (
    "SELECT s.*, c.owner_pid, c.owner_start, c.owner_host, c.owner_boot FROM steps s"
    " LEFT JOIN step_claims c ON c.step_id = s.step_id AND c.claim_token = s.claim_token"
)


def open_steps(conn: sqlite3.Connection, search_id: str, now: float) -> list[StepRecord]:
    """The steps out at `now` (pending within their lease, or claimed), oldest first."""
    rows = conn.execute(f"{_STEP_SELECT} WHERE s.search_id = ? AND {_open('s')} ORDER BY s.counter",
                        (search_id, now)).fetchall()
    return [as_record(StepRecord, r) for r in rows]


def steps_created(conn: sqlite3.Connection, search_id: str) -> int:
    """How many steps the search ever handed out (expired ones included): the next step's counter. The done
    ones are counted by searches.steps_used (finish_step counts a step as it marks it done), so only the
    few others are read."""
    row = conn.execute(
        "SELECT (SELECT steps_used FROM searches WHERE search_id = ?) + (SELECT COUNT(*) FROM steps"
        " WHERE search_id = ? AND status IN ('pending', 'claimed', 'expired'))", (search_id, search_id)).fetchone()
    return int(row[0] or 0)


def expire_steps(tx: sqlite3.Connection, search_id: str, now: float) -> int:
    """pending -> expired for every step whose lease ran out; how many expired."""
    return tx.execute("UPDATE steps SET status = 'expired' WHERE search_id = ? AND status = 'pending'"
                      " AND lease_until IS NOT NULL AND lease_until <= ?", (search_id, now)).rowcount


def renew_leases(tx: sqlite3.Connection, step_ids: Sequence[str], until: float) -> None:
    """A pending step handed out again keeps its lease until `until`."""
    tx.execute("UPDATE steps SET lease_until = MAX(COALESCE(lease_until, 0), ?) WHERE status = 'pending'"
               " AND step_id IN (SELECT value FROM json_each(?))", (until, json.dumps(list(step_ids))))


def load_step(conn: sqlite3.Connection, step_id: str) -> StepRecord | None:
    row = conn.execute(f"{_STEP_SELECT} WHERE s.step_id = ?", (step_id,)).fetchone()
    return None if row is None else as_record(StepRecord, row)


def insert_step(tx: sqlite3.Connection, step_id: str, search_id: str, counter: int, parent_id: int, kind: str,
                pool: list[int], lease_until: float | None = None) -> None:
    tx.execute(
        "INSERT INTO steps (step_id, search_id, counter, parent_id, kind, pool, status, created_at, lease_until)"
        " VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
        (step_id, search_id, counter, parent_id, kind, json.dumps(pool), time.time(), lease_until),
    )


def claim_step(tx: sqlite3.Connection, step_id: str, token: str, owner: ProcessIdentity | None = None) -> bool:
    """pending -> claimed by `owner` (this process by default); False when the step is not pending, or its
    lease ran out."""
    owner = owner or current()
    now = time.time()
    cur = tx.execute(
        "UPDATE steps SET status = 'claimed', claim_token = ?, claimed_at = ? WHERE step_id = ? AND status = 'pending'"
        " AND (lease_until IS NULL OR lease_until > ?)",
        (token, now, step_id, now),
    )
    if cur.rowcount != 1:
        return False
    tx.execute(
        "INSERT OR REPLACE INTO step_claims (step_id, claim_token, owner_pid, owner_start, owner_host, owner_boot,"
        " claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (step_id, token, owner.pid, owner.start, owner.host, owner.boot, now),
    )
    return True


def release_step(tx: sqlite3.Connection, step_id: str, token: str | None = None,
                 lease_until: float | None = None) -> bool:
    """Back to pending (evaluation crashed, or a claim expired). With a token, only that claim is released;
    with `lease_until`, the step's lease is renewed to at least that time (its caller may try again)."""
    sql = ("UPDATE steps SET status = 'pending', claim_token = NULL, claimed_at = NULL,"
           " lease_until = CASE WHEN ? IS NULL THEN lease_until ELSE MAX(COALESCE(lease_until, 0), ?) END"
           " WHERE step_id = ? AND status = 'claimed'")
    params: tuple = (lease_until, lease_until, step_id)
    if token is not None:
        sql += " AND claim_token = ?"
        params = (*params, token)
    released = tx.execute(sql, params).rowcount == 1
    if released:
        tx.execute("DELETE FROM step_claims WHERE step_id = ?", (step_id,))
    return released


def holds_claim(tx: sqlite3.Connection, step_id: str, token: str) -> bool:
    row = tx.execute("SELECT 1 FROM steps WHERE step_id = ? AND status = 'claimed' AND claim_token = ?",
                     (step_id, token)).fetchone()
    return row is not None
