"""Tools for tests and benchmarks, kept out of the installed `adaexplore_mcp` package.

Nothing in the server imports this package. Tests import it from the repo root (pyproject's pytest `pythonpath`
puts it on sys.path); bench scripts run as `python3 bench/x.py` put the repo root on sys.path first.

- `devtools.triggers`: runs the seed rules' broken kernels (interpreter, compiler front end, native GPU)
  and captures the error texts they really raise.
- `devtools.scripted_search`: drives a whole search through the SearchService API with the scripted
  proposer (the proposer itself is product code: `adaexplore-mcp demo` uses it).
- `devtools.task_checks`: runs a task's reference in this process to say whether it is degenerate (tests
  of the built-in library, GPU probes of synthesized tasks); the server decides that in a judge worker.
"""
