#!/usr/bin/env python3
"""check_layout.py -- the layering and size check (issue 21, "Checks").

Fails (exit 1) when

* a C++ file under src/ or python/bindings/ includes a header of a layer it
  may not depend on (the table ALLOWED below), or a non-public header of a
  layer it may only use through its public headers (PUBLIC_ONLY), or
* a file under src/<layer>/ opens a namespace of another layer
  (`namespace kernbench::<other>`) to declare anything but forward
  declarations, or writes `using namespace` of another layer at namespace
  scope: namespaces follow folders (src/runtime/ is
  kernbench::runtime, src/platforms/k200/ kernbench::platforms::k200,
  src/workloads/serving/ kernbench::workloads::serving), or
* a source file (src/**, python/bindings/**, python/**/*.py, benches/**) is
  longer than MAX_LINES lines.

Each offence is one line, `path:line: rule: detail`, then a summary.
Includes are `#include "layer/..."`, relative to src/ (or to the including
file's directory); system includes (<...>), commented-out lines and
`#if 0` blocks are ignored. Layers of the table that do not exist yet in
the tree are fine; a directory under src/ that is not in the table is an
offence (add it to the table).

Usage: scripts/check_layout.py [--root DIR] [--max-lines N]
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# ---- the rules, as data -------------------------------------------------------
# Layer order, lowest first: sim < {config, solver} < topology < runtime < ccl <
# {kernels, workloads, platforms} < bindings (python/bindings) < python.
# A layer is src/<layer>/, except sim/models (src/sim/models/: the reference
# models), a sublayer above sim that only bindings (and tests) may include.
# src/solver/ holds the generic numerical solvers the models use (the
# max-min fair share of the flow fabric), apart from any model, as SimGrid
# keeps its LMM solver in src/kernel/lmm/.
# ALLOWED[layer] = the other layers its files may include (its own is always
# allowed).
_CORE = ("sim", "config", "solver", "topology", "runtime", "ccl")
ALLOWED: dict[str, frozenset[str]] = {
    "sim": frozenset(),
    "sim/models": frozenset({"sim"}),
    "config": frozenset({"sim"}),
    "solver": frozenset({"sim"}),
    "topology": frozenset({"sim", "config", "solver"}),
    "runtime": frozenset({"sim", "config", "solver", "topology"}),
    "ccl": frozenset({"sim", "config", "solver", "topology", "runtime"}),
    "kernels": frozenset(_CORE),                                  # not workloads, platforms
    "platforms": frozenset(_CORE),                                # not kernels, workloads
    "workloads": frozenset(_CORE + ("kernels", "platforms")),     # kernels, platforms: public headers only
    # src/kernbench.{hpp,cpp}: the library's front door (the whole config
    # schema, composed from every owner's sections), above every layer.
    "api": frozenset(_CORE + ("kernels", "platforms", "workloads")),
    "bindings": frozenset(_CORE + ("sim/models", "kernels", "platforms", "workloads", "api")),
}
# A platform's bindings live in its folder (src/platforms/<p>/bindings/) and
# count as the bindings layer.
# (from, to): `from` may include only the public headers of `to`.
PUBLIC_ONLY: frozenset[tuple[str, str]] = frozenset({("workloads", "kernels"), ("workloads", "platforms")})
# A header is not public when it is a .cpp/.ipp/.inl, lies under one of these
# directories, or its name ends with one of these suffixes.
PRIVATE_DIRS = frozenset({"detail", "internal", "impl"})
PRIVATE_SUFFIXES = ("_impl.hpp", "_detail.hpp", "_internal.hpp", ".cpp", ".ipp", ".inl")

MAX_LINES = 600  # the house rule (issue 26): split a file before it passes it
CXX_SUFFIXES = frozenset({".cpp", ".cc", ".cxx", ".hpp", ".hh", ".hxx", ".h", ".ipp", ".inl"})
# Size-checked files: (directory, suffixes).
SIZE_CHECKED = (
    ("src", CXX_SUFFIXES),
    ("python/bindings", CXX_SUFFIXES),
    ("python", frozenset({".py"})),
    ("benches", frozenset({".py"})),
)
SKIP_DIRS = frozenset({"__pycache__", ".pytest_cache"})


@dataclass(frozen=True)
class Offence:
    path: str
    line: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.detail}"


# ---- parsing -----------------------------------------------------------------
_RAW = re.compile(r'"([^()\\\s"]{0,16})\(')


def strip_comments(text: str) -> str:
    """Remove // and /* */ comments, keeping string and char literals and every
    newline (so line numbers stay)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j) or " ")
            i = j
        elif c == '"' and i > 0 and text[i - 1] == "R" and _RAW.match(text, i):
            delim = ")" + _RAW.match(text, i).group(1) + '"'
            j = text.find(delim, i)
            j = n if j < 0 else j + len(delim)
            out.append(text[i:j])
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*)$")
_QUOTED = re.compile(r'^"([^"]+)"')


def quoted_includes(text: str) -> list[tuple[int, str]]:
    """(line number, path) of every active `#include "path"`: not in a comment,
    not in an `#if 0` block; <system> includes are left out."""
    found: list[tuple[int, str]] = []
    stack: list[bool] = []   # per open #if: is this branch dead because of an `#if 0`?
    for lineno, line in enumerate(strip_comments(text).splitlines(), 1):
        m = _DIRECTIVE.match(line)
        if not m:
            continue
        word, rest = m.group(1), m.group(2).strip()
        dead = any(stack)
        if word in ("if", "ifdef", "ifndef"):
            stack.append(word == "if" and rest in ("0", "(0)", "false"))
        elif word in ("elif", "else") and stack:
            # `#if 0 ... #else`: the else branch is live again (outer state permitting).
            if stack[-1]:
                stack[-1] = False
        elif word == "endif" and stack:
            stack.pop()
        elif word == "include" and not dead:
            q = _QUOTED.match(rest)
            if q:
                found.append((lineno, q.group(1)))
    return found


# ---- layers ------------------------------------------------------------------
def layer_of(rel_to_src: Path) -> str:
    """The layer of a path relative to src/ ("sim/models/x.hpp" -> "sim/models")."""
    parts = rel_to_src.parts
    if len(parts) >= 3 and parts[0] == "sim" and parts[1] == "models":
        return "sim/models"
    # A platform's own bindings (src/platforms/<p>/bindings/): the bindings layer, kept in the platform's folder.
    if len(parts) >= 4 and parts[0] == "platforms" and parts[2] == "bindings":
        return "bindings"
    return parts[0] if len(parts) > 1 else "api"   # files directly in src/: the front door


def is_public(rel_in_layer: Path) -> bool:
    if any(p in PRIVATE_DIRS for p in rel_in_layer.parts[:-1]):
        return False
    return not rel_in_layer.name.endswith(PRIVATE_SUFFIXES)


def _display(p: Path, root: Path) -> str:
    try:
        return p.relative_to(root).as_posix()
    except ValueError:
        return p.as_posix()


def check_includes(root: Path) -> list[Offence]:
    src = root / "src"
    offences: list[Offence] = []
    files: list[tuple[Path, str]] = []
    if src.is_dir():
        for f in sorted(src.rglob("*")):
            if f.is_file() and f.suffix in CXX_SUFFIXES:
                files.append((f, layer_of(f.relative_to(src))))
    bindings = root / "python" / "bindings"
    if bindings.is_dir():
        files += [(f, "bindings") for f in sorted(bindings.rglob("*")) if f.is_file() and f.suffix in CXX_SUFFIXES]

    for f, layer in files:
        shown = _display(f, root)
        if layer not in ALLOWED:
            what = f"src/{layer}/" if layer else "src/ itself"
            offences.append(Offence(shown, 1, "layer", f"{what} is not in the layer table of scripts/check_layout.py"))
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        for lineno, inc in quoted_includes(text):
            target = resolve(inc, f, src)
            if target is None:
                continue   # not a project header (a third-party header in quotes, or a missing file)
            to = layer_of(target)
            if to == layer or not to:
                continue
            if to not in ALLOWED[layer]:
                may = ", ".join(sorted(ALLOWED[layer])) or "nothing below it"
                offences.append(Offence(shown, lineno, "layer",
                                        f'{layer} may not include {to} ("{inc}"); {layer} may include: {may}'))
            elif (layer, to) in PUBLIC_ONLY:
                if not is_public(target.relative_to(to)):
                    offences.append(Offence(shown, lineno, "layer",
                                            f'{layer} may include only the public headers of {to}, not "{inc}"'))
    return offences


def resolve(inc: str, including: Path, src: Path) -> Path | None:
    """The included file relative to src/, or None when it is not a project header.
    A path next to the including file wins (as the preprocessor does), then src/;
    a path whose first part names a layer counts even if the file is missing."""
    local = (including.parent / inc).resolve()
    for cand in (local, (src / inc).resolve()):
        if cand.is_file():
            try:
                return cand.relative_to(src.resolve())
            except ValueError:
                return None   # e.g. python/bindings/bindings.hpp: not under src/
    first = Path(inc).parts[0] if Path(inc).parts else ""
    if first in ALLOWED:
        return Path(inc)
    return None


# ---- namespaces --------------------------------------------------------------
_NS_OPEN = re.compile(r"^\s*namespace\s+([A-Za-z_][\w:]*)\s*\{")
_USING_NS = re.compile(r"^\s*using\s+namespace\s+([A-Za-z_][\w:]*)\s*;")
_FORWARD = re.compile(r"^\s*(class|struct|enum\s+class|enum\s+struct)\s+\w+(\s*:\s*[\w:]+)?\s*;\s*$")


def namespace_of(layer: str) -> str:
    """The namespace a layer's files declare in: kernbench::<layer> (sim/models: kernbench::sim)."""
    return "kernbench::" + layer.split("/")[0]


def _block_is_forward_only(lines: list[str], start: int) -> bool:
    """Whether the namespace block opened on lines[start] holds forward declarations only."""
    depth, body = 0, []
    for i in range(start, len(lines)):
        line = lines[i]
        text = line[line.index("{") + 1:] if i == start else line
        for ch in text:
            depth += ch == "{"
            if ch == "}":
                if depth == 0:
                    return all(_FORWARD.match(b) for b in body if b.strip())
                depth -= 1
        body.append(text.split("}")[0] if "}" in text else text)
    return False


def check_namespaces(root: Path) -> list[Offence]:
    """Namespaces follow folders: a file under src/<layer>/ declares in kernbench::<layer>[::...] only (a block of
    forward declarations of another layer's types excepted), and no file writes `using namespace` of another layer at
    namespace scope (a using-declaration names what it takes; a function body may do as it likes)."""
    src = root / "src"
    offences: list[Offence] = []
    if not src.is_dir():
        return offences
    for f in sorted(src.rglob("*")):
        if not f.is_file() or f.suffix not in CXX_SUFFIXES:
            continue
        layer = layer_of(f.relative_to(src))
        if layer not in ALLOWED or layer == "api":
            continue
        binding = layer == "bindings"  # the top layer: a using-directive of what it binds is its idiom
        own = namespace_of(layer)
        lines = strip_comments(f.read_text(encoding="utf-8", errors="replace")).splitlines()
        depth = 0
        for i, line in enumerate(lines):
            m = _NS_OPEN.match(line)
            if m and depth == 0:
                ns = m.group(1)
                if ns.startswith("kernbench::") or ns == "kernbench":
                    mine = ns == own or ns.startswith(own + "::") or (ns == "kernbench" and layer == "sim")
                    if not mine and not _block_is_forward_only(lines, i):
                        offences.append(Offence(_display(f, root), i + 1, "namespace",
                                                f"src/{layer}/ declares in {ns}; its namespace is {own} "
                                                f"(namespaces follow folders)"))
            u = _USING_NS.match(line)
            if u and depth <= 1 and not binding:
                used = u.group(1).removeprefix("kernbench::")
                if used.split("::")[0] in {ly.split("/")[0] for ly in ALLOWED} - {layer.split("/")[0]}:
                    offences.append(Offence(_display(f, root), i + 1, "namespace",
                                            f"'using namespace {u.group(1)}' at namespace scope: name what is taken "
                                            f"with using-declarations"))
            depth += line.count("{") - line.count("}")
    return offences


# ---- sizes -------------------------------------------------------------------
def check_sizes(root: Path, max_lines: int) -> list[Offence]:
    offences: list[Offence] = []
    seen: set[Path] = set()
    for sub, suffixes in SIZE_CHECKED:
        d = root / sub
        if not d.is_dir():
            continue
        for f in sorted(d.rglob("*")):
            if f in seen or not f.is_file() or f.suffix not in suffixes or SKIP_DIRS & set(f.parts):
                continue
            seen.add(f)
            with f.open("rb") as fh:
                n = sum(1 for _ in fh)
            if n > max_lines:
                offences.append(Offence(_display(f, root), max_lines + 1, "size",
                                        f"{n} lines, more than the limit of {max_lines}"))
    return offences


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                    help="the repository root (default: the one this script is in)")
    ap.add_argument("--max-lines", type=int, default=MAX_LINES)
    args = ap.parse_args(argv)
    root = args.root.resolve()
    layer_offences = check_includes(root) + check_namespaces(root)
    size_offences = check_sizes(root, args.max_lines)
    for o in layer_offences + size_offences:
        print(o)
    if layer_offences or size_offences:
        print(f"check_layout: FAILED: {len(layer_offences)} layering, {len(size_offences)} size offence(s)")
        return 1
    present = sorted(layer for layer in ALLOWED if layer != "bindings" and (root / "src" / layer).is_dir())
    print(f"check_layout: ok (layers present: {', '.join(present)}; no file over {args.max_lines} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
