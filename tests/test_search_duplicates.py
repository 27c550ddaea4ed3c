"""Two kernels share a verdict only when they are the same program (search/duplicates.py)."""

from __future__ import annotations

from adaexplore_mcp.search.duplicates import normalized, source_key


def test_blank_lines_and_trailing_spaces_inside_a_string_count() -> None:
    """Found by a red team: two kernels differing only in blank lines inside a triple-quoted string that the
    code reads were one node's verdict (the second, a mismatch on its own, was stored as passed)."""
    a = 'K = """\n\n\n"""\n\nclass ModelNew:\n    n = K.count("\\n")\n'
    b = 'K = """\n"""\n\nclass ModelNew:\n    n = K.count("\\n")\n'
    assert source_key(a) != source_key(b)
    assert source_key('s = """a  \nb"""\n') != source_key('s = """a\nb"""\n')


def test_blank_lines_and_trailing_spaces_outside_strings_do_not() -> None:
    assert source_key("x = 1   \n\n\ny = 2\n") == source_key("x = 1\ny = 2")


def test_a_source_python_cannot_tokenize_is_kept_as_it_is() -> None:
    broken = 's = """never closed\n\n'
    assert normalized(broken) == broken
