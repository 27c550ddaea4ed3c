"""Test-session setup that must happen before any test module imports triton.

Without a GPU every in-process kernel runs under Triton's CPU interpreter, and triton decides at
import/decoration time, so the variable is set here, once, for the whole session (a test module that
imported triton first would otherwise leave later modules with compiled-mode kernels).
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The judge's kernel cache defaults to $XDG_CACHE_HOME/adaexplore-mcp: tests never share it with the user
# (or with an earlier test run, whose files a later run of the same candidate source would get back).
if "ADAEXPLORE_TEST_KEEP_CACHE" not in os.environ:
    import tempfile

    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="adaexplore-test-cache-")
