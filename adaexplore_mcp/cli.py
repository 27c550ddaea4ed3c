"""Console entry points: serve over stdio (default) or streamable HTTP, and headless commands.

Nothing but protocol may reach stdout while serving stdio, so every human-readable line here goes
to stderr, except in the headless `demo` command, which owns its terminal.
"""

from __future__ import annotations

import argparse
import os
import sys

from adaexplore_mcp.config import Settings


def _serve(args: argparse.Namespace) -> int:
    from adaexplore_mcp.server import build_server

    settings = _choose_workers(Settings.from_env(), args.workers)
    if settings.ray_address:  # fail now, with the address, rather than in the server's lifespan
        from adaexplore_mcp.judge.processes import WorkerStartError
        from adaexplore_mcp.judge.cluster import connect

        try:
            connect(settings.ray_address)
        except WorkerStartError as exc:
            print(f"adaexplore-mcp: {exc}", file=sys.stderr)
            return 2
    _announce_sandbox(settings)
    server = build_server(settings)  # cheap: the app (store, workers) starts in the server's lifespan
    if args.transport == "stdio":
        server.run("stdio")
        return 0
    import anyio

    from adaexplore_mcp.http_security import InsecureBindError, check_bind, serve_http

    token = args.token or os.environ.get("ADAEXPLORE_TOKEN") or None
    try:
        check_bind(args.host, token)  # refuse before serving (the app itself starts in the server's lifespan)
    except InsecureBindError as exc:
        print(f"adaexplore-mcp: {exc}", file=sys.stderr)
        return 2
    anyio.run(serve_http, server, args.host, args.port, token)
    return 0


def _choose_workers(settings: Settings, workers: str | None) -> Settings:
    """`--workers ray` joins the Ray cluster named by ADAEXPLORE_RAY_ADDRESS (default "auto": the one this
    host belongs to); `--workers local` keeps this host's own workers even when that variable is set."""
    if workers == "local":
        return settings.with_overrides(ray_address="")
    if workers == "ray":
        print(f"adaexplore-mcp: judge workers: Ray actors (cluster {settings.ray_address or 'auto'}; the sandbox "
              "below is probed here, the actors' hosts apply their own)", file=sys.stderr)
        return settings.with_overrides(ray_address=settings.ray_address or "auto")
    return settings


def _announce_sandbox(settings: Settings) -> None:
    """Say at start (stderr: stdout may be the protocol) how candidates will be confined on this host.

    Probed with the CPU runner's policy. A GPU runner's differs only in having no address-space limit and
    sharing /dev/shm (judge/referee.py: sandbox_policy), so on a GPU host the report may name those two."""
    from adaexplore_mcp.judge.referee import sandbox_policy
    from adaexplore_mcp.judge.sandbox import capabilities

    policy = sandbox_policy(settings.sandbox, settings.home, settings.cache_dir, "cpu")
    if policy is None:
        print("adaexplore-mcp: sandbox: none (ADAEXPLORE_SANDBOX=off): candidates run with this user's full "
              "access", file=sys.stderr)
        return
    report = capabilities(policy)
    missing = f"; missing: {'; '.join(report.missing)}" if report.missing else ""
    memory = f", {policy.max_memory_bytes / 2**30:.1f} GiB of host memory" if policy.max_memory_bytes else ""
    print(f"adaexplore-mcp: sandbox: {report.summary} ({', '.join(report.mechanisms)}){missing}; a runner may "
          f"start {policy.max_processes} processes{memory}", file=sys.stderr)


def _demo(args: argparse.Namespace) -> int:
    from adaexplore_mcp.demo import run_demo

    return run_demo(task=args.task, budget=args.budget, seed=args.seed, strategy=args.strategy)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adaexplore-mcp",
        description="MCP server that judges and searches Triton kernels (AdaExplore). "
        "Data directory: $ADAEXPLORE_HOME (default: the XDG data dir).",
    )
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address (non-loopback needs a token)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--token", default=None, help="bearer token for HTTP (or $ADAEXPLORE_TOKEN)")
    parser.add_argument("--workers", choices=["local", "ray"], default=None,
                        help="judge workers: this host's processes (default) or actors on a Ray cluster "
                        "($ADAEXPLORE_RAY_ADDRESS, default auto; needs pip install 'adaexplore-mcp[ray]')")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="run a short scripted search on a built-in task and print the tree")
    demo.add_argument("--task", default="scaled_softmax")
    demo.add_argument("--budget", type=int, default=8)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--strategy", default="adaexplore")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
