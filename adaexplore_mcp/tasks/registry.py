"""Tasks in the database: registering (after a probe by the judge), looking up, listing.

Why here and not in the judge: the judge only runs code; deciding what a task *is* (its id, its
origin, whether it was seen before) is bookkeeping that must survive restarts and be shared by
every server process on the data directory.
"""

from __future__ import annotations

import json
import re
import time

from adaexplore_mcp.errors import NotFound
from adaexplore_mcp.models import TaskInfo, TaskProbe
from adaexplore_mcp.store import Store, dumps
from adaexplore_mcp.tasks.format import TaskSpec, source_hash


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-zA-Z0-9_-]+", "-", name.strip()).strip("-").lower()
    return slug[:48] or "task"


class TaskRegistry:
    def __init__(self, store: Store) -> None:
        self.store = store

    def register(
        self,
        name: str,
        source: str,
        probe: TaskProbe,
        *,
        origin: str = "user",
        small_shapes: dict[str, int] | None = None,
        description: str = "",
        task_id: str | None = None,
    ) -> tuple[TaskInfo, bool]:
        """Store a probed task; return (info, created). The same name and source is the same task."""
        digest = source_hash(source)
        task_id = task_id or self.id_for(name, source)
        info = TaskInfo(
            task_id=task_id,
            name=name,
            origin=origin,  # type: ignore[arg-type]
            degenerate=probe.degenerate,
            warnings=probe.warnings + [f"degenerate: {r}" for r in probe.degenerate_reasons],
            has_small_shapes=bool(small_shapes),
            inputs=probe.inputs,
            outputs=probe.outputs,
            description=description,
        )
        with self.store.write() as tx:
            if tx.execute("SELECT 1 FROM tasks WHERE task_id = ?", (task_id,)).fetchone():
                created = False
            else:
                tx.execute(
                    "INSERT INTO tasks (task_id, name, origin, source, source_hash, small_shapes, description,"
                    " info, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (task_id, name, origin, source, digest, dumps(small_shapes or {}), description,
                     info.model_dump_json(), time.time()),
                )
                created = True
        return (info if created else self.info(task_id)), created

    @staticmethod
    def id_for(name: str, source: str) -> str:
        """The id a user task gets: the same name and source always map to the same task."""
        return f"{slugify(name)}-{source_hash(source)[:8]}"

    def exists(self, task_id: str) -> bool:
        return self.store.read_one("SELECT 1 FROM tasks WHERE task_id = ?", (task_id,)) is not None

    def info(self, task_id: str) -> TaskInfo:
        row = self.store.read_one("SELECT info FROM tasks WHERE task_id = ?", (task_id,))
        if row is None:
            raise self._unknown(task_id)
        return TaskInfo.model_validate_json(row["info"])

    def spec(self, task_id: str) -> TaskSpec:
        row = self.store.read_one(
            "SELECT task_id, name, source, small_shapes, info FROM tasks WHERE task_id = ?", (task_id,)
        )
        if row is None:
            raise self._unknown(task_id)
        info = TaskInfo.model_validate_json(row["info"])
        return TaskSpec(
            task_id=row["task_id"],
            name=row["name"],
            source=row["source"],
            small_shapes=json.loads(row["small_shapes"] or "{}"),
            degenerate=info.degenerate,
        )

    def list(self, origin: str | None = None) -> list[TaskInfo]:
        if origin:
            rows = self.store.read("SELECT info FROM tasks WHERE origin = ? ORDER BY created_at", (origin,))
        else:
            rows = self.store.read("SELECT info FROM tasks ORDER BY origin = 'builtin' DESC, created_at")
        return [TaskInfo.model_validate_json(r["info"]) for r in rows]

    def update_probe(self, task_id: str, probe: TaskProbe) -> TaskInfo:
        """Record what a later probe learnt (e.g. a built-in's shapes, first measured lazily)."""
        info = self.info(task_id)
        info = info.model_copy(update={"inputs": probe.inputs, "outputs": probe.outputs})
        with self.store.write() as tx:
            tx.execute("UPDATE tasks SET info = ? WHERE task_id = ?", (info.model_dump_json(), task_id))
        return info

    def _unknown(self, task_id: str) -> NotFound:
        known = [r["task_id"] for r in self.store.read("SELECT task_id FROM tasks ORDER BY created_at LIMIT 30")]
        return NotFound(f"unknown task_id {task_id!r}; call list_tasks to see the known ones ({', '.join(known)})")
