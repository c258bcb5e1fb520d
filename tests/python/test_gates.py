"""Gates on the test suite itself, read from the source with ``ast``: every pytest test says in a docstring what
behaviour it asserts."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MIN_WORDS = 4  # "Time is integer picoseconds." is the shortest that says something


def pytest_tests(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions pytest collects from a module: ``test*`` functions at module level and ``test*`` methods of
    ``Test*`` classes (nested ones too), parametrized or not."""
    out: list[ast.FunctionDef | ast.AsyncFunctionDef] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                out.append(node)
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                visit(node.body)

    visit(tree.body)
    return out


def undocumented(source: str) -> list[str]:
    """``name (line N)`` of each test in ``source`` without a docstring that says something: none at all, one of
    fewer than MIN_WORDS words, or a generic ``Test ...`` line."""
    out = []
    for fn in pytest_tests(ast.parse(source)):
        doc = (ast.get_docstring(fn) or "").strip()
        if len(doc.split()) < MIN_WORDS or doc.split()[0].rstrip(".:") in ("Test", "Tests"):
            out.append(f"{fn.name} (line {fn.lineno})")
    return out


def test_the_gate_finds_tests_without_a_docstring():
    """The checker itself: a module-level test, a parametrized one and a method of a Test class without a
    docstring are all named, as are an empty and a generic ``Test X.`` docstring; helpers and non-Test classes
    are not tests, and a documented test passes."""
    source = '''
import pytest

def helper():
    pass

def test_documented():
    """The answer is 42, as the spec says."""

@pytest.mark.parametrize("x", [1, 2])
def test_bare(x):
    assert x

class TestGroup:
    def test_method(self):
        pass

    def helper(self):
        pass

    class TestInner:
        async def test_nested(self):
            pass

class Helpers:
    def test_not_collected(self):
        pass

def test_generic():
    """Test bare."""

def test_empty():
    """"""
'''
    assert undocumented(source) == ["test_bare (line 11)", "test_method (line 15)", "test_nested (line 22)",
                                    "test_generic (line 29)", "test_empty (line 32)"]


def test_every_test_has_a_docstring():
    """Every pytest test in tests/python (parametrized ones and Test-class methods included) has a docstring of
    what behaviour it asserts, so a failure says what broke without reading the body."""
    files = sorted(TESTS.glob("*.py"))
    assert len(files) > 40
    missing = {p.name: found for p in files if (found := undocumented(p.read_text()))}
    assert missing == {}, "tests without a docstring:\n" + "\n".join(
        f"  {name}: {', '.join(tests)}" for name, tests in missing.items())
