"""Tasks in the database: registering (after a probe by the judge), looking up, listing.

Why here and not in the judge: the judge only runs code; deciding what a task *is* (its id, its
origin, whether it was seen before) is bookkeeping that must survive restarts and be shared by
every server process on the data directory.

A task registered without a probe (the built-ins, which are this project's own code and need not run
at startup) has no `probed_at` (migration 6) until its first evaluation or search probes it
(`KernelEvaluator.task_spec`) and `update_probe` stores what the probe found.
"""

from __future__ import annotations

import hashlib
import json
import re
import time

from adaexplore_mcp.errors import NotFound
from adaexplore_mcp.models import TaskInfo, TaskProbe
from adaexplore_mcp.store import Migration, Store, dumps
from adaexplore_mcp.tasks.format import TaskSpec, source_hash


# When the task's reference was last probed; NULL for the built-ins, registered without running them.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        6,
        """
        ALTER TABLE tasks ADD COLUMN probed_at REAL;
        UPDATE tasks SET probed_at = created_at WHERE origin != 'builtin'
        """,
        "tasks",
    ),
    # Degenerate tasks probed before the probe named their degenerate outputs (and before a scalar output stopped
    # counting as one): probed again on first use, so the work checks judge their other outputs.
    Migration(
        9,
        """
        UPDATE tasks SET probed_at = NULL
        WHERE json_extract(info, '$.degenerate') = 1 AND json_type(info, '$.degenerate_outputs') IS NULL
        """,
        "tasks",
    ),
)


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-zA-Z0-9_-]+", "-", name.strip()).strip("-").lower()
    return slug[:48] or "task"


class TaskRegistry:
    def __init__(self, store: Store) -> None:
        self.store = store
        store.migrate(MIGRATIONS)  # a no-op on the app's store; a store opened without them gets them

    def register(
        self,
        name: str,
        source: str,
        probe: TaskProbe | None,
        *,
        origin: str = "user",
        small_shapes: dict[str, int] | None = None,
        description: str = "",
        task_id: str | None = None,
    ) -> tuple[TaskInfo, bool]:
        """Store a probed task; return (info, created).

        A task is (name, source, small_shapes): the same three again return the stored task. A name
        already used with another source or other small_shapes gets a task of its own, with a distinct
        id and a warning saying so (nothing is ever silently answered with a different task).
        An explicit `task_id` (the built-ins) is used as given. `probe` None: registered without running the
        reference (it is probed on first use, see `update_probe`).
        """
        shapes = dict(small_shapes or {})
        digest = source_hash(source)
        with self.store.write() as tx:
            if task_id is not None:
                if tx.execute("SELECT 1 FROM tasks WHERE task_id = ?", (task_id,)).fetchone():
                    return self._info_in(tx, task_id), False
                new_id, warnings = task_id, []
            else:
                same = self._find_in(tx, name, digest, source, shapes)
                if same is not None:
                    return self._info_in(tx, same), False
                new_id = self._free_id(tx, name, source, shapes)
                warnings = self._sibling_warnings(tx, name, digest, source, shapes, new_id)
            info = _with_probe(TaskInfo(
                task_id=new_id,
                name=name,
                origin=origin,  # type: ignore[arg-type]
                warnings=warnings,
                has_small_shapes=bool(shapes),
                small_shapes=shapes,
                source_hash=digest,
                description=description,
            ), probe or TaskProbe(ok=True))
            now = time.time()
            tx.execute(
                "INSERT INTO tasks (task_id, name, origin, source, source_hash, small_shapes, description,"
                " info, created_at, probed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (new_id, name, origin, source, digest, dumps(shapes), description,
                 info.model_dump_json(), now, now if probe is not None else None),
            )
        return info, True

    def find(self, name: str, source: str, small_shapes: dict[str, int] | None = None) -> TaskInfo | None:
        """The stored task with exactly this name, source and small_shapes, if any."""
        digest = source_hash(source)
        rows = self.store.read(
            "SELECT task_id, source, small_shapes FROM tasks WHERE name = ? AND source_hash = ? ORDER BY created_at",
            (name, digest),
        )
        for row in rows:
            if row["source"] == source and _shapes(row["small_shapes"]) == dict(small_shapes or {}):
                return self.info(row["task_id"])
        return None

    @staticmethod
    def id_for(name: str, source: str, small_shapes: dict[str, int] | None = None) -> str:
        """The id a user task gets: the name's slug and a hash of the source (and of the small_shapes,
        when there are any). The first choice only: `register` lengthens the hash on a collision."""
        return f"{slugify(name)}-{_identity_hash(source, small_shapes)[:8]}"

    @staticmethod
    def _find_in(tx, name: str, digest: str, source: str, shapes: dict[str, int]) -> str | None:
        rows = tx.execute(
            "SELECT task_id, source, small_shapes FROM tasks WHERE name = ? AND source_hash = ? ORDER BY created_at",
            (name, digest),
        ).fetchall()
        for row in rows:
            if row["source"] == source and _shapes(row["small_shapes"]) == shapes:
                return row["task_id"]
        return None

    @staticmethod
    def _free_id(tx, name: str, source: str, shapes: dict[str, int]) -> str:
        """slug-<8 hex>, longer (then numbered) when taken by another task, e.g. one stored before
        small_shapes counted in the id or whose name slugifies the same."""
        full = _identity_hash(source, shapes)
        slug = slugify(name)
        candidates = [f"{slug}-{full[:n]}" for n in (8, 12, 16)]
        candidates += [f"{slug}-{full[:8]}-{i}" for i in range(2, 1000)]
        for candidate in candidates:
            if not tx.execute("SELECT 1 FROM tasks WHERE task_id = ?", (candidate,)).fetchone():
                return candidate
        raise RuntimeError(f"no free task id for {name!r}")  # pragma: no cover - 1000 collisions

    @staticmethod
    def _sibling_warnings(tx, name: str, digest: str, source: str, shapes: dict[str, int], new_id: str) -> list[str]:
        rows = tx.execute(
            "SELECT task_id, origin, source, small_shapes FROM tasks WHERE name = ? ORDER BY created_at", (name,)
        ).fetchall()
        if not rows:
            return []
        others = []
        for row in rows:
            differs = []
            if row["source"] != source:
                differs.append("another source")
            if _shapes(row["small_shapes"]) != shapes:
                differs.append("other small_shapes")
            kind = "built-in " if row["origin"] == "builtin" else ""
            others.append((row["task_id"], kind, " and ".join(differs) or "another id"))
        if len(others) == 1:
            other_id, kind, how = others[0]
            head = f"a {kind}task named {name!r} already exists with {how} ({other_id!r})"
        else:
            listed = ", ".join(f"{tid!r} ({kind}{how})" for tid, kind, how in others)
            head = f"{len(others)} tasks named {name!r} already exist: {listed}"
        return [f"{head}; this one is registered as {new_id!r} (small_shapes {json.dumps(shapes)}): "
                "use that task_id for it"]

    def exists(self, task_id: str) -> bool:
        return self.store.read_one("SELECT 1 FROM tasks WHERE task_id = ?", (task_id,)) is not None

    def info(self, task_id: str) -> TaskInfo:
        row = self.store.read_one(
            "SELECT info, small_shapes, source_hash FROM tasks WHERE task_id = ?", (task_id,)
        )
        if row is None:
            raise self._unknown(task_id)
        return _info(row)

    def _info_in(self, tx, task_id: str) -> TaskInfo:
        row = tx.execute("SELECT info, small_shapes, source_hash FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
        return _info(row)

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
            small_shapes=_shapes(row["small_shapes"]),
            degenerate=info.degenerate,
            deterministic=info.deterministic,
            degenerate_outputs=None if info.degenerate_outputs is None else tuple(info.degenerate_outputs),
        )

    def list(self, origin: str | None = None) -> list[TaskInfo]:
        """Tasks sharing a name are told apart by task_id, small_shapes and source_hash."""
        cols = "info, small_shapes, source_hash"
        if origin:
            rows = self.store.read(f"SELECT {cols} FROM tasks WHERE origin = ? ORDER BY created_at", (origin,))
        else:
            rows = self.store.read(f"SELECT {cols} FROM tasks ORDER BY origin = 'builtin' DESC, created_at")
        return [_info(r) for r in rows]

    def is_probed(self, task_id: str) -> bool:
        """Whether the task's reference was ever run (False for a built-in before its first use)."""
        row = self.store.read_one("SELECT probed_at FROM tasks WHERE task_id = ?", (task_id,))
        if row is None:
            raise self._unknown(task_id)
        return row["probed_at"] is not None

    def update_probe(self, task_id: str, probe: TaskProbe) -> TaskInfo:
        """Store what the first probe of a task registered without one found (a built-in's shapes and
        degeneracy, measured on first use). A task already probed (by another process meanwhile) keeps its
        probe, so its warnings never repeat."""
        with self.store.write() as tx:
            row = tx.execute("SELECT info, probed_at FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
            if row is None:
                raise self._unknown(task_id)
            if row["probed_at"] is None:
                stored = TaskInfo.model_validate_json(row["info"])  # a task probed again keeps no stale finding
                stored.warnings = [w for w in stored.warnings if not w.startswith("degenerate: ")]
                info = _with_probe(stored, probe)
                tx.execute("UPDATE tasks SET info = ?, probed_at = ? WHERE task_id = ?",
                           (info.model_dump_json(), time.time(), task_id))
        return self.info(task_id)

    def _unknown(self, task_id: str) -> NotFound:
        known = [r["task_id"] for r in self.store.read("SELECT task_id FROM tasks ORDER BY created_at LIMIT 30")]
        return NotFound(f"unknown task_id {task_id!r}; call list_tasks to see the known ones ({', '.join(known)})")


def _with_probe(info: TaskInfo, probe: TaskProbe) -> TaskInfo:
    """The task with what its probe found; its own warnings (a sibling of the same name) come first."""
    return info.model_copy(update={
        "degenerate": probe.degenerate,
        "degenerate_outputs": list(probe.degenerate_outputs),
        "deterministic": probe.deterministic,
        "warnings": list(dict.fromkeys(info.warnings + probe.warnings +
                                       [f"degenerate: {r}" for r in probe.degenerate_reasons])),
        "inputs": probe.inputs,
        "outputs": probe.outputs,
    })


def _shapes(stored: str | None) -> dict[str, int]:
    return dict(json.loads(stored or "{}"))


def _identity_hash(source: str, small_shapes: dict[str, int] | None) -> str:
    """Without small_shapes, the source's hash (the ids tasks have always had); with them, a hash of both."""
    if not small_shapes:
        return source_hash(source)
    return hashlib.sha256((source + "\0small_shapes=" + json.dumps(small_shapes, sort_keys=True)).encode()).hexdigest()


def _info(row) -> TaskInfo:
    """A stored TaskInfo, with small_shapes and source_hash from their columns (rows stored before
    TaskInfo carried them have them only there)."""
    info = TaskInfo.model_validate_json(row["info"])
    return info.model_copy(update={
        "small_shapes": _shapes(row["small_shapes"]),
        "has_small_shapes": bool(_shapes(row["small_shapes"])),
        "source_hash": row["source_hash"],
    })
