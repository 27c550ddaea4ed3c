"""Test-session setup that must happen before any test module imports triton.

Without a GPU every in-process kernel runs under Triton's CPU interpreter, and triton decides at
import/decoration time, so the variable is set here, once, for the whole session (a test module that
imported triton first would otherwise leave later modules with compiled-mode kernels).
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
