"""What the runner sandbox achieves on this host, for the CPU and the GPU policy: the mechanisms applied and,
for each one missing, the reason. With a GPU, also which steps of a runner's CUDA work succeed under the GPU
policy and under each relaxation of it (why a judge would fall back to a weaker sandbox on this host).
Prints a table; --out writes JSON.

    python bench/sandbox_report.py [--out sandbox_report.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
from pathlib import Path

from adaexplore_mcp.judge.referee import sandbox_policy
from adaexplore_mcp.judge.sandbox.core import SandboxPolicy, enter, install_filter
from adaexplore_mcp.judge.sandbox.probe import capabilities

CUDA_STEPS = (
    ("import torch", "import torch"),
    ("cuda context", "torch.zeros(1, device='cuda').sum().item()"),
    ("triton kernel", "import importlib.util, os, tempfile\n"
     "path = os.path.join(tempfile.mkdtemp(), 'k.py')\n"
     "open(path, 'w').write('import triton\\nimport triton.language as tl\\n@triton.jit\\ndef k(p):\\n    tl.store(p, 1.0)\\n')\n"
     "spec = importlib.util.spec_from_file_location('k', path); mod = importlib.util.module_from_spec(spec)\n"
     "spec.loader.exec_module(mod)\nx = torch.zeros(1, device='cuda'); mod.k[(1,)](x); torch.cuda.synchronize()"),
    ("share by CUDA IPC", "torch.ones(4, device='cuda').untyped_storage()._share_cuda_()"),
)


def report(device: str, home: Path) -> dict:
    policy = sandbox_policy("auto", home, home / "cache", device)
    rep = capabilities(policy, timeout_s=30.0)
    return {"device": device, "summary": rep.summary, "mechanisms": list(rep.mechanisms), "missing": list(rep.missing),
            "hidden_dirs": list(policy.hidden_dirs), "visible_dirs": list(policy.visible_dirs)}


def filter_variants() -> dict[str, list]:
    """The seccomp filter's rules one at a time (a call number no system has stands in for socket()): which one a
    host's CUDA driver trips over."""
    import platform

    from adaexplore_mcp.judge.sandbox import seccomp

    arch, nr_socket, other_abi, refused, nr_prctl = seccomp._ARCHES[platform.machine()]
    none = 0xFFFF
    return {"AF_UNIX socket": seccomp.program(arch, nr_socket, other_abi),
            "socketpair": seccomp.program(arch, none, other_abi, refused[:1]),
            "io_uring": seccomp.program(arch, none, other_abi, refused[1:4]),
            "keyrings": seccomp.program(arch, none, other_abi, refused[4:7]),
            "setsid, inotify, fanotify": seccomp.program(arch, none, other_abi, refused[7:]),
            "prctl PDEATHSIG": seccomp.program(arch, none, other_abi, (), nr_prctl),
            "loop ioctls": seccomp.program(arch, none, other_abi, (), None, seccomp._NR_IOCTL[platform.machine()]),
            "file leases": seccomp.program(arch, none, other_abi, (), None, None, seccomp._NR_FCNTL[platform.machine()]),
            "fallocate KEEP_SIZE": seccomp.program(arch, none, other_abi, (), None, None, None,
                                                   seccomp._NR_FALLOCATE[platform.machine()]),
            "other ABIs": seccomp.program(arch, none, other_abi)}


def cuda_steps(policy: SandboxPolicy, extra_filter: list | None = None, as_runner: bool = False) -> list[str]:
    """Each CUDA step a runner takes, run in a forked child confined by `policy` (and `extra_filter`, a seccomp
    program): 'ok' or its error, in order; 'died (wait status N)' where the child died without a word."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            report = enter(policy, defer_filter=as_runner)  # as_runner: the filter after the context, as zygote.py does
            if extra_filter is not None:
                from adaexplore_mcp.judge.sandbox.seccomp import install

                install(extra_filter)
            scope: dict = {}
            for name, code in CUDA_STEPS:
                try:
                    exec(compile(code, f"<{name}>", "exec"), scope)
                    if as_runner and name == "cuda context":
                        report = install_filter(policy, report)
                        name += " (then the filter: " + ("applied" if "seccomp-unix" in report.mechanisms else
                                                         f"missing, {report.missing[-1:]}") + ")"
                    os.write(w, (json.dumps(f"{name}: ok") + "\n").encode())
                except BaseException as e:  # noqa: BLE001 - each failure is the answer
                    os.write(w, (json.dumps(f"{name}: {type(e).__name__}: {str(e)[:300]}") + "\n").encode())
                    break
            os.write(w, (json.dumps("/dev: " + " ".join(sorted(os.listdir("/dev")))) + "\n").encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        lines = [json.loads(line) for line in f]
    status = os.waitpid(pid, 0)[1]
    return lines + ([] if status == 0 else [f"died (wait status {status})"])


def relaxations(policy: SandboxPolicy, home: Path) -> dict[str, SandboxPolicy]:
    base_hidden = tuple(d for d in policy.hidden_dirs if d in (str(home), str(home / "cache")))
    return {"gpu policy": policy,
            "without seccomp": dataclasses.replace(policy, deny_unix_sockets=False),
            "host /dev": dataclasses.replace(policy, private_dev=False),
            "host dirs visible": dataclasses.replace(policy, hidden_dirs=base_hidden)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "cache").mkdir()
        rows = [report(device, Path(tmp)) for device in ("cpu", "cuda")]
        steps = {}
        if os.path.exists("/dev/nvidiactl"):  # not torch.cuda.is_available(): no CUDA in the parent before forking
            policy = sandbox_policy("auto", Path(tmp), Path(tmp) / "cache", "cuda")
            steps = {name: cuda_steps(p) for name, p in relaxations(policy, Path(tmp)).items()}
            steps["gpu policy, as a runner takes it"] = cuda_steps(policy, as_runner=True)
            bare = dataclasses.replace(policy, deny_unix_sockets=False)
            steps |= {f"only the filter's {rule} rule": cuda_steps(bare, code) for rule, code in filter_variants().items()}
    for r in rows:
        print(f"{r['device']:5} {r['summary']:32} applied: {', '.join(r['mechanisms'])}")
        for m in r["missing"]:
            print(f"{'':5} missing: {m}")
    for name, lines in steps.items():
        print(f"cuda steps, {name}: {' | '.join(lines)}")
    if args.out:
        args.out.write_text(json.dumps({"policies": rows, "cuda_steps": steps}, indent=2))


if __name__ == "__main__":
    main()
