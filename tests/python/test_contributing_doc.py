"""docs/contributing.md stays true: its example algorithm is the code tests/cpp/test_contributing.cpp compiles, runs
and verifies, and the files and lines its steps name exist in the tree."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "contributing.md"
TEST = ROOT / "tests" / "cpp" / "test_contributing.cpp"


def between(text: str, begin: str, end: str) -> str:
    assert begin in text and end in text, (begin, end)
    return text.split(begin, 1)[1].split(end, 1)[0]


def test_the_example_is_the_tested_code():
    """The page's example code block is, byte for byte, the region of test_contributing.cpp between its markers (the
    test that registers, runs and verifies it)."""
    block = between(DOC.read_text(), "<!-- contributing example: begin -->\n```cpp\n",
                    "```\n<!-- contributing example: end -->")
    code = between(TEST.read_text(), "// contributing.md example: begin\n", "// contributing.md example: end\n")
    assert block == code
    assert "Algorithm reverse_ring_algorithm()" in code


def test_the_steps_name_what_is_there():
    """Every repository path the page names exists, and the one-line lists the steps extend hold the built-ins in
    the form the page gives (KERNBENCH_ALGORITHM(name), KERNBENCH_PLATFORM(folder)), each with its file or folder."""
    text = DOC.read_text()
    for path in re.findall(r"`((?:src|tests|scripts|python)/[\w./{}<>,-]+)`", text):
        if "<" in path or "{" in path:
            continue
        assert (ROOT / path).exists(), path
    algos = re.findall(r"^KERNBENCH_ALGORITHM\((\w+)\)$", (ROOT / "src/ccl/algorithms/algorithms.def").read_text(), re.M)
    assert {"ring", "torus2d", "mesh2d", "nvls", "pairwise"} <= set(algos)
    sources = " ".join(p.read_text() for p in (ROOT / "src/ccl/algorithms").glob("*.cpp"))
    for a in algos:
        assert f"Algorithm {a}_algorithm()" in sources, a
    platforms = re.findall(r"^KERNBENCH_PLATFORM\((\w+)\)$", (ROOT / "src/platforms/platforms.def").read_text(), re.M)
    assert platforms == ["vgpu", "k200"]
    for p in platforms:
        folder = ROOT / "src" / "platforms" / p
        assert (folder / "config_section.cpp").is_file() and (folder / "bindings" / "bind.cpp").is_file(), p
        assert f"void bind_{p}(" in (folder / "bindings" / "bind.cpp").read_text(), p
