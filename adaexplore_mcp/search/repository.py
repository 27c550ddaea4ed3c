"""The search's tables and every SQL statement that touches them.

searches: one row per search (strategy, budget, seed, parameters, counters, a version bumped on each change)
nodes:    one row per node with its statistics N/W/M: small rows, so backpropagation along a deep path
          and loading a whole tree touch few pages
node_payloads: the node's kernel source and full evaluation (kilobytes), read only for the nodes shown
steps:    every step handed out: pending -> claimed (being evaluated) -> done; at most one open per search
step_claims: who holds a claimed step (pid, process start time, host): a claim whose process is gone is
          free at once, not only after the claim timeout (migration 4, a table of its own so that it never
          depends on the order in which migrations are applied)
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence

from adaexplore_mcp.search.owner import ProcessIdentity, current
from adaexplore_mcp.search.tree import Tree, TreeNode
from adaexplore_mcp.store import Store

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

_TREE_COLUMNS = "node_id, parent_id, kind, depth, verdict, speedup, reward, visits, total_reward, max_reward"


def register() -> None:
    from adaexplore_mcp.store import register_migration

    register_migration(MIGRATION_VERSION, MIGRATION_SQL)
    register_migration(CLAIMS_MIGRATION_VERSION, CLAIMS_MIGRATION_SQL)


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


def search_row(conn: sqlite3.Connection, search_id: str) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM searches WHERE search_id = ?", (search_id,)).fetchone()


def search_version(conn: sqlite3.Connection, search_id: str) -> int | None:
    row = conn.execute("SELECT version FROM searches WHERE search_id = ?", (search_id,)).fetchone()
    return None if row is None else int(row[0])


def all_searches(store: Store) -> list[sqlite3.Row]:
    return store.read(
        "SELECT s.*, (SELECT step_id FROM steps t WHERE t.search_id = s.search_id"
        " AND t.status IN ('pending', 'claimed')) AS open_step FROM searches s ORDER BY s.created_at"
    )


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


def node_rows(conn: sqlite3.Connection, search_id: str, node_ids: Sequence[int], *, sources: bool,
              evaluations: bool = False) -> dict[int, sqlite3.Row]:
    if not node_ids:
        return {}
    cols = "n.node_id, n.parent_id, n.kind, n.verdict, n.speedup, n.reward, n.note"
    if sources:
        cols += ", p.kernel_source"
    if evaluations:
        cols += ", p.evaluation"
    rows = conn.execute(
        f"SELECT {cols} FROM nodes n LEFT JOIN node_payloads p ON p.search_id = n.search_id AND p.node_id = n.node_id"
        " WHERE n.search_id = ? AND n.node_id IN (SELECT value FROM json_each(?))",
        (search_id, json.dumps(list(node_ids))),
    ).fetchall()
    return {r["node_id"]: r for r in rows}


def all_node_rows(conn: sqlite3.Connection, search_id: str, *, sources: bool) -> list[sqlite3.Row]:
    cols = ", ".join(f"n.{c.strip()}" for c in _TREE_COLUMNS.split(",")) + ", n.note, n.created_at"
    if sources:
        cols += ", p.kernel_source"
    return conn.execute(
        f"SELECT {cols} FROM nodes n LEFT JOIN node_payloads p ON p.search_id = n.search_id AND p.node_id = n.node_id"
        " WHERE n.search_id = ? ORDER BY n.node_id", (search_id,)).fetchall()


def insert_node(tx: sqlite3.Connection, search_id: str, node: TreeNode, step_id: str, note: str,
                evaluation_json: str, kernel_source: str) -> None:
    tx.execute(
        "INSERT INTO nodes (search_id, node_id, parent_id, kind, depth, verdict, speedup, reward, visits,"
        " total_reward, max_reward, step_id, created_at, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, ?, ?, ?)",
        (search_id, node.node_id, node.parent_id, node.kind, node.depth, node.verdict, node.speedup, node.reward,
         step_id, time.time(), note),
    )
    tx.execute("INSERT INTO node_payloads (search_id, node_id, evaluation, kernel_source) VALUES (?, ?, ?, ?)",
               (search_id, node.node_id, evaluation_json, kernel_source))


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


def open_step(conn: sqlite3.Connection, search_id: str) -> sqlite3.Row | None:
    return conn.execute(
        f"{_STEP_SELECT} WHERE s.search_id = ? AND s.status IN ('pending', 'claimed')", (search_id,)
    ).fetchone()


def step_row(conn: sqlite3.Connection, step_id: str) -> sqlite3.Row | None:
    return conn.execute(f"{_STEP_SELECT} WHERE s.step_id = ?", (step_id,)).fetchone()


def insert_step(tx: sqlite3.Connection, step_id: str, search_id: str, counter: int, parent_id: int, kind: str,
                pool: list[int]) -> None:
    tx.execute(
        "INSERT INTO steps (step_id, search_id, counter, parent_id, kind, pool, status, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
        (step_id, search_id, counter, parent_id, kind, json.dumps(pool), time.time()),
    )


def claim_step(tx: sqlite3.Connection, step_id: str, token: str, owner: ProcessIdentity | None = None) -> bool:
    """pending -> claimed by `owner` (this process by default); False when the step is not pending."""
    owner = owner or current()
    now = time.time()
    cur = tx.execute(
        "UPDATE steps SET status = 'claimed', claim_token = ?, claimed_at = ? WHERE step_id = ? AND status = 'pending'",
        (token, now, step_id),
    )
    if cur.rowcount != 1:
        return False
    tx.execute(
        "INSERT OR REPLACE INTO step_claims (step_id, claim_token, owner_pid, owner_start, owner_host, owner_boot,"
        " claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (step_id, token, owner.pid, owner.start, owner.host, owner.boot, now),
    )
    return True


def release_step(tx: sqlite3.Connection, step_id: str, token: str | None = None) -> bool:
    """Back to pending (evaluation crashed, or a claim expired). With a token, only that claim is released."""
    sql = "UPDATE steps SET status = 'pending', claim_token = NULL, claimed_at = NULL WHERE step_id = ? AND status = 'claimed'"
    params: tuple = (step_id,)
    if token is not None:
        sql += " AND claim_token = ?"
        params = (step_id, token)
    released = tx.execute(sql, params).rowcount == 1
    if released:
        tx.execute("DELETE FROM step_claims WHERE step_id = ?", (step_id,))
    return released


def holds_claim(tx: sqlite3.Connection, step_id: str, token: str) -> bool:
    row = tx.execute("SELECT 1 FROM steps WHERE step_id = ? AND status = 'claimed' AND claim_token = ?",
                     (step_id, token)).fetchone()
    return row is not None
