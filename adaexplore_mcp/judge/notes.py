"""The referees' own notes: a reference dropped and why, a referee replaced, a sandbox relaxed.

A referee writes them to its worker's log (stderr), one line each, after NOTE_PREFIX (`note`). The pool copies
them to `judge-notes.log` before a worker's log goes (`keep_notes`), so they explain a slow or odd evaluation
after the fact; `read_notes` gives them back, kept and live, to the benches and the GPU tests.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

NOTES_FILE = "judge-notes.log"
NOTES_MAX_BYTES = 1 << 20
NOTE_PREFIX = "adaexplore-mcp judge:"


def note(text: str) -> None:
    """One note, in the worker's log."""
    print(f"{NOTE_PREFIX} {text}", file=sys.stderr, flush=True)


def keep_notes(log_path: Path) -> None:
    """Before a worker's log goes: its notes are appended to `judge-notes.log` beside it, which keeps the last MiB
    or so; the rest of the log (runner output) is not kept."""
    try:
        with open(log_path, "rb") as fh:
            lines = [ln for ln in fh.read().decode(errors="replace").splitlines() if ln.startswith(NOTE_PREFIX)]
        if not lines:
            return
        notes = log_path.parent / NOTES_FILE
        if notes.exists() and notes.stat().st_size > NOTES_MAX_BYTES:
            notes.replace(notes.with_suffix(".log.1"))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        with open(notes, "a", encoding="utf-8") as out:
            out.writelines(f"{stamp} {log_path.name.split('-')[0]} {ln[len(NOTE_PREFIX):].strip()[:500]}\n"
                           for ln in lines)
    except OSError:
        pass


def read_notes(log_dir: Path, limit: int = 200) -> list[str]:
    """The referees' notes, oldest first: those kept from workers that ended, then those of live workers."""
    notes: list[str] = []
    try:
        kept = sorted(log_dir.glob(NOTES_FILE + "*"), key=lambda p: p.name, reverse=True)  # .log.1 before .log
        notes += [ln for p in kept for ln in p.read_text(errors="replace").splitlines()]
        for log in sorted(log_dir.glob("worker*.log")):
            notes += [f"live {log.name.split('-')[0]} {ln[len(NOTE_PREFIX):].strip()[:500]}"
                      for ln in log.read_text(errors="replace").splitlines() if ln.startswith(NOTE_PREFIX)]
    except OSError:
        pass
    return notes[-limit:]
