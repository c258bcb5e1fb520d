"""The fenced code blocks of docs/*.md and README.md, found and classified for test_doc_snippets.py.

A block is the text between a line opening with three backticks and a language (```python) and the closing fence.
The line right before the opening fence may hold a marker, an HTML comment the reader sees in the page's source:

    <!-- snippet: skip (why it cannot run here) -->   not executed; the test reports it as skipped with the reason
    <!-- snippet: continues docs/PAGE.md -->         a Python block that goes on from PAGE's examples: their names
                                                     (a System, a Program, ...) are defined before it runs

Anything else after ``snippet:`` is an error naming the file and line, so a typo cannot hide a block.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its marker (if any)."""

    page: str            # relative to the repository root, e.g. docs/gqa.md
    line: int            # 1-based line of the opening fence
    lang: str            # the fence's language, "" when none
    code: str            # the text between the fences, dedented by the fence's indent
    skip: str | None = None       # the reason of a `snippet: skip (...)` marker
    continues: str | None = None  # the page a `snippet: continues PAGE` marker names

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page of docs/, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _marker(text: str, where: str) -> tuple[str | None, str | None]:
    m = re.fullmatch(r"skip\s*\((.+)\)", text)
    if m:
        return m.group(1).strip(), None
    m = re.fullmatch(r"continues\s+(docs/[\w.-]+\.md|README\.md)", text)
    if m:
        if not (ROOT / m.group(1)).is_file():
            raise ValueError(f"{where}: snippet marker names {m.group(1)}, which does not exist")
        return None, m.group(1)
    raise ValueError(f"{where}: unknown snippet marker {text!r} (known: 'skip (REASON)', 'continues docs/PAGE.md')")


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one page, in order; an unclosed fence or a bad marker is a ValueError naming the line."""
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text().split("\n")
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = len(m.group(1)), m.group(2)
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        if j == len(lines):
            raise ValueError(f"{rel}:{i + 1}: code fence never closed")
        code = "\n".join(ln[indent:] if ln[:indent].isspace() else ln for ln in lines[i + 1:j]) + "\n"
        skip = continues = None
        prev = MARKER.match(lines[i - 1]) if i > 0 else None
        if prev:
            skip, continues = _marker(prev.group(1), f"{rel}:{i}")
        out.append(Block(rel, i + 1, lang, code, skip, continues))
        i = j + 1
    return out


def all_blocks() -> list[Block]:
    return [b for p in pages() for b in blocks(p)]


def commands(block: Block) -> list[tuple[int, list[str]]]:
    """The shell commands of a bash/sh/console block (or the ``$ ``-prompted lines of a text block), as
    (line in the page, argv): continuation lines joined, comments dropped, a console prompt removed. A text
    block's other lines are output and are not commands."""
    prompted = block.lang in ("text", "console")
    out: list[tuple[int, list[str]]] = []
    pending, start = "", 0
    for k, raw in enumerate(block.code.split("\n")):
        line = raw.rstrip()
        if not pending:
            if prompted:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            start = block.line + 1 + k
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = (pending + line).strip()
        pending = ""
        if text and not text.startswith("#"):
            out.append((start, shlex.split(text, comments=True)))
    return out


def optional_forms(argv: list[str]) -> list[list[str]]:
    """A synopsis's ``[--flag]`` / ``[--flag VALUE]`` groups: the command without them and with each one, so
    `kernbench goldens [--update]` is checked as `kernbench goldens` and `kernbench goldens --update`; in a group,
    `serial|process` is each alternative and the placeholder `N` a number."""
    base, groups, cur, depth = [], [], [], 0
    for w in argv:
        opens, closes = w.count("[") - w.count("\\["), w.count("]")
        word = w.replace("[", "").replace("]", "")
        if depth == 0 and opens == 0:
            base.append(word)
        else:
            cur.append(word)
        depth += opens - closes
        if depth == 0 and cur:
            groups.append(cur)
            cur = []
    if not groups:
        return [argv]
    forms = [base]
    for g in groups:  # `a|b|c` in a group: each alternative; the placeholder N: a number
        alts = [[]]
        for w in g:
            words = w.split("|") if "|" in w and not w.startswith("-") else [w]
            alts = [a + ["2" if x == "N" else x] for a in alts for x in words]
        forms += [base + a for a in alts]
    return forms
