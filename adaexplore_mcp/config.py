"""Settings: one frozen object, built once from the environment (`Settings.from_env`), passed explicitly.

The CLI's own flags (--transport, --host, --port, --token) configure serving only and are not settings.
Why one object: the research code this project re-implements read its constants with `getattr`
fallbacks in many places and ended up with four different defaults for one value. Here every
limit has exactly one default, in this file: `from_env` falls back to the fields' own defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path


def _default_home() -> Path:
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "adaexplore-mcp"


def _default_cache() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "adaexplore-mcp"


DEFAULT_STEP_LEASE_S = 1800.0  # search/service.py's default lease of a handed-out step


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw not in (None, "") else default


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw not in (None, "") else default


DEFAULT_MAX_SOURCE_BYTES = 200_000  # one candidate or reference source


@dataclass(frozen=True)
class JudgeLimits:
    """Limits of one evaluation (atol/rtol also decide a task probe's degeneracy verdict).

    Sized so a typical evaluation takes a few seconds on a GPU. The GPU timeout covers the whole evaluation,
    compiling an autotuned kernel's configurations and waiting for the timing lock included: in the campaign of
    2026-12-07 (bench/README.md, H200, 10 workers) 8 of 96 full-size KernelBench evaluations took 60-103 s, 7 of
    them correct kernels, and AdaExplore's released L2_99 kernel timed out at 60 s. 120 s passes them all."""

    timeout_s_gpu: float = 120.0
    timeout_s_cpu: float = 180.0
    max_timeout_s: float = 600.0
    trials: int = 5
    atol: float = 1e-2
    rtol: float = 1e-2
    # Relative Frobenius-norm error allowed on top of the elementwise check.
    max_rel_norm: float = 1e-2
    warmup_ms: float = 25.0
    timing_budget_ms: float = 300.0
    min_reps: int = 10
    max_reps: int = 200
    implausible_speedup: float = 20.0


@dataclass(frozen=True)
class Settings:
    """Everything configurable about one server process."""

    home: Path = field(default_factory=_default_home)
    # "auto": "cuda" when a GPU is usable, else "cpu"; "cuda" forces the GPU; "cpu" runs candidates under
    # Triton's interpreter.
    device: str = "auto"
    max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES
    # Two workers per device by default: one client's hanging evaluation (up to its timeout) then never
    # holds every other client's behind it (slots are shared fairly, judge/fair.py), and one candidate's
    # compile overlaps another's timing (timing itself stays one at a time per GPU).
    workers: int = 2  # CPU-interpreter workers
    workers_per_gpu: int = 2
    limits: JudgeLimits = field(default_factory=JudgeLimits)
    # Compiled-kernel cache (Triton), kept by the judge workers outside `home`. Runners see neither: each
    # gets only its own source's kernels from the worker (judge/kernel_cache.py, judge/referee.py).
    cache_dir: Path = field(default_factory=_default_cache)
    # Runner sandbox: "auto" (namespaces + rlimits where the host allows), "no-pid" (no PID namespace),
    # or "off" (debugging the judge only: candidates then see the host).
    sandbox: str = "auto"
    # Judge workers as Ray actors (judge/cluster/pool.py; needs the `ray` extra): "" for the local pool (default),
    # "auto" for the cluster this host belongs to, "ray://host:port", or "local" for a one-node cluster
    # started by this process. One actor per GPU of the cluster, or `workers` CPU actors without GPUs.
    ray_address: str = ""
    # A substring of the GPU name (e.g. "H100"): the Ray pool keeps only actors on matching GPUs, so
    # timings from different GPU models are never compared silently. Ignored by the local pool.
    require_gpu: str = ""
    # How long a step handed out by next_step stays leased before it goes back (search/service.py). A
    # campaign whose proposers answer between device loans (hours) sets it high.
    step_lease_s: float = DEFAULT_STEP_LEASE_S

    @property
    def db_path(self) -> Path:
        return self.home / "adaexplore.sqlite3"

    def with_overrides(self, **kwargs: object) -> "Settings":
        return replace(self, **kwargs)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls) -> "Settings":
        home = os.environ.get("ADAEXPLORE_HOME")
        limits = JudgeLimits(
            timeout_s_gpu=_env_float("ADAEXPLORE_TIMEOUT_S_GPU", JudgeLimits.timeout_s_gpu),
            timeout_s_cpu=_env_float("ADAEXPLORE_TIMEOUT_S_CPU", JudgeLimits.timeout_s_cpu),
            trials=_env_int("ADAEXPLORE_TRIALS", JudgeLimits.trials),
        )
        return cls(
            home=Path(home).expanduser() if home else _default_home(),
            device=os.environ.get("ADAEXPLORE_DEVICE", cls.device),
            max_source_bytes=_env_int("ADAEXPLORE_MAX_SOURCE_BYTES", cls.max_source_bytes),
            workers=_env_int("ADAEXPLORE_WORKERS", cls.workers),
            workers_per_gpu=_env_int("ADAEXPLORE_WORKERS_PER_GPU", cls.workers_per_gpu),
            limits=limits,
            cache_dir=Path(os.environ["ADAEXPLORE_CACHE_DIR"]).expanduser() if os.environ.get("ADAEXPLORE_CACHE_DIR")
            else _default_cache(),
            sandbox=os.environ.get("ADAEXPLORE_SANDBOX", cls.sandbox),
            ray_address=os.environ.get("ADAEXPLORE_RAY_ADDRESS", cls.ray_address).strip(),
            require_gpu=os.environ.get("ADAEXPLORE_REQUIRE_GPU", cls.require_gpu).strip(),
            step_lease_s=_env_float("ADAEXPLORE_STEP_LEASE_S", cls.step_lease_s),
        )
