"""Adapt-stage measurement: a first-draft Triton kernel writer and its loop (bench/adapt_loop.py)."""
