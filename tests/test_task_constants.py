"""small_shapes rewrite the task's constants in its source, so constants derived from them follow, and
tuple constants may be given (issue 39, item 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaexplore_mcp.tasks.format import (TaskFormatError, check_small_shapes, import_file, source_with_constants,
                                         write_module_file)

DERIVED = '''
import torch
import torch.nn as nn

batch_size = 128
in_channels, out_channels = 3, 16  # two knobs on one line
height = width = 64
bias_shape = (out_channels, 1, 1)
hidden: int = out_channels * 2


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return self.conv(x) + self.bias


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, bias_shape]
'''


def _load(tmp_path: Path, source: str, name: str):
    module_name, path = write_module_file(tmp_path, name, source)
    return import_file(module_name, path)


def test_derived_constants_follow_the_overrides(tmp_path: Path):
    rewritten = source_with_constants(DERIVED, {"out_channels": 5, "batch_size": 2, "height": 9, "width": 7})
    assert rewritten.count("\n") == DERIVED.count("\n")  # line numbers do not move
    module = _load(tmp_path, rewritten, "derived")
    assert module.bias_shape == (5, 1, 1) and module.hidden == 10 and module.in_channels == 3
    model = module.Model(*module.get_init_inputs())
    (x,) = module.get_inputs()
    assert list(x.shape) == [2, 3, 9, 7] and list(model(x).shape) == [2, 5, 7, 5]


def test_tuple_values_are_accepted_for_tuple_constants(tmp_path: Path):
    shapes = check_small_shapes(DERIVED, {"out_channels": 4, "bias_shape": [4, 1, 1]})
    assert shapes == {"out_channels": 4, "bias_shape": (4, 1, 1)}
    module = _load(tmp_path, source_with_constants(DERIVED, shapes), "tuples")
    assert module.bias_shape == (4, 1, 1)
    for bad in ({"bias_shape": 4}, {"out_channels": (4,)}, {"bias_shape": [4, 0]}, {"bias_shape": []}):
        with pytest.raises(TaskFormatError, match="positive integers"):
            check_small_shapes(DERIVED, bad)
    with pytest.raises(TaskFormatError, match="tuple constants: \\['bias_shape'\\]"):
        check_small_shapes(DERIVED, {"nope": 1})


def test_an_override_lands_after_a_statement_with_a_comment_and_after_every_assignment():
    source = "n = 4  # rows\nm = n + 1\nn = 8\nk = n\n"
    namespace: dict = {}
    exec(source_with_constants(source, {"n": 3}), namespace)
    assert (namespace["n"], namespace["m"], namespace["k"]) == (3, 4, 3)
    assert source_with_constants(source, {}) == source
