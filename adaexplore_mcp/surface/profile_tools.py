"""profile_kernel: where a candidate's GPU time goes, next to where the reference's goes.

The digest (kernels, launches, host gaps, copies) is the tool's result, small enough for a model's
context; the full table of every kernel is written under the data directory and served as the resource
adaexplore://profiles/{profile_id}.
"""

from __future__ import annotations

import re
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from adaexplore_mcp.app import App
from adaexplore_mcp.errors import NotFound, UserError, quote
from adaexplore_mcp.judge.profile_digest import ProfileResult
from adaexplore_mcp.store import new_id
from adaexplore_mcp.surface.common import ADDITIVE, GetApp, resource_errors, run_blocking

MAX_RUNS = 20
KEPT_TABLES = 200  # the oldest tables beyond this many are deleted
PROFILE_ID = re.compile(r"^pf_[0-9a-f]{12}$")

PROFILE_DOC = """Profile one candidate against the task's reference on the GPU, to see where its time goes. Give
`eval_id` (of an earlier evaluation) or `task_id` with `kernel_source`; each side runs `runs` calls (default 5)
under torch.profiler in an isolated process. Returns per side and per call: wall and device-busy time, launches,
idle gaps between launches (host overhead), the costliest `kernels` (`own` marks your Triton kernels) and memory
`copies`; the full table is the resource at `table_uri`. No verdict or speedup (evaluate_kernel gives those). A few
seconds on a GPU; without one, `available` is false with the reason."""


def profiles_dir(app: App) -> Path:
    path = app.settings.home / "profiles"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _keep_table(app: App, table: str) -> str:
    """Write a profile's full table; its resource URI. Old tables beyond KEPT_TABLES go."""
    folder = profiles_dir(app)
    profile_id = new_id("pf")
    (folder / f"{profile_id}.md").write_text(table, encoding="utf-8")
    tables = sorted(folder.glob("pf_*.md"), key=lambda p: p.stat().st_mtime)
    for old in tables[:-KEPT_TABLES]:
        old.unlink(missing_ok=True)
    return f"adaexplore://profiles/{profile_id}"


def run_profile(app: App, eval_id: str | None, task_id: str | None, kernel_source: str | None, runs: int,
                progress: object = None) -> ProfileResult:
    """Check the request (a caller's mistake is a UserError), profile in a worker, keep the full table."""
    if eval_id is not None:
        if task_id is not None or kernel_source is not None:
            raise UserError("give eval_id alone, or task_id with kernel_source (not both)")
        task_id, kernel_source = app.evaluation_source(eval_id)
    elif task_id is None or kernel_source is None:
        raise UserError("give eval_id (from an evaluation's result), or task_id together with kernel_source")
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= MAX_RUNS:
        raise UserError(f"runs must be a whole number from 1 to {MAX_RUNS}")
    if not kernel_source.strip():
        raise UserError("kernel_source is empty; send Python source defining class ModelNew")
    spec = app.tasks.spec(task_id)
    profile = getattr(app.judge, "profile", None)
    if not callable(profile):
        return ProfileResult(task_id=task_id, eval_id=eval_id, available=False,
                             unavailable="this server's judge cannot profile (it runs no workers)")
    result, table = profile(spec, kernel_source, runs=runs, progress=progress)
    result.eval_id = eval_id
    if table:
        result.table_uri = _keep_table(app, table)
    return result


def register(mcp: MCPServer, get_app: GetApp) -> None:
    async def profile_kernel(eval_id: str | None = None, task_id: str | None = None, kernel_source: str | None = None,
                             runs: int = 5, ctx: Context | None = None) -> ProfileResult:
        return await run_blocking(ctx, run_profile, get_app(), eval_id, task_id, kernel_source, runs)

    mcp.tool(description=PROFILE_DOC, annotations=ADDITIVE)(profile_kernel)

    @mcp.resource("adaexplore://profiles/{profile_id}", mime_type="text/markdown")
    def profile_table(profile_id: str) -> str:
        """The full table of one profile_kernel call: every kernel and copy of both sides."""
        with resource_errors():
            path = profiles_dir(get_app()) / f"{profile_id}.md"
            if not PROFILE_ID.match(profile_id) or not path.is_file():
                raise NotFound(f"no profile {quote(profile_id, 40)}; profile_kernel results name theirs in table_uri")
            return path.read_text(encoding="utf-8")


__all__ = ["register", "run_profile"]
