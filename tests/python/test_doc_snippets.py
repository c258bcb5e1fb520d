"""Every code block in docs/*.md and README.md is executed or checked by its language (issue 30, item 5).

python   the page's blocks run in order in one namespace, as a reader pastes them, in a scratch folder that holds
         the repository's configs/ and tests/ (commands and paths in the docs are written from the repository
         root); an output a block claims in a comment is checked against the run (CLAIMS).
bash     every `kernbench ...` command is parsed by the real parser and its bench, --set keys and values, grid
         values and configs checked without running (kernbench.cli_check); the cheap verbs (list, describe,
         validate, schema, show) are run; a repository script a block names exists.
text     a `$ kernbench ...` line of a transcript is checked as a bash command; where the command is cheap, the
         output the page prints is compared with the real output (`...` stands for lines or text left out).
yaml     a whole config is loaded; a fragment is loaded on top of configs/topology.yaml, or else its keys are
         looked up in the exported schema; a measured-data file is read by kernbench.calibrate.
csv      a measured-data file, read by kernbench.calibrate.
toml     parsed; the entry point group is the registry's.
cmake    the package and target it names are the ones the build exports.
cpp      README's DES-core fragment: every sim:: name it uses is declared in src/sim; docs/contributing.md's
         example is compiled and run by test_contributing_doc.py (its block sits between that test's markers).

A block that cannot run here carries `<!-- snippet: skip (REASON) -->` right before its fence and is reported as
skipped with the reason; a block without a language fails.
"""
from __future__ import annotations

import contextlib
import glob
import io
import os
import re
import shutil
import tomllib

import matplotlib
import pytest
import yaml

import doc_snippets as ds

# Headless plots in this process only: MPLBACKEND in os.environ would reach the notebook kernels that
# test_notebooks.py starts later in the session, and a kernel on Agg draws no inline figure.
matplotlib.use("Agg")

ROOT = ds.ROOT
BLOCKS = ds.all_blocks()
CHECKED = ("python", "bash", "sh", "console", "text", "yaml", "csv", "toml", "cmake", "cpp")  # text: shown as is
RUNS = {"list", "describe", "validate", "schema", "show"}  # cheap verbs: run, not only checked
MAX_SKIPS = 6


def by_lang(*langs: str) -> list[ds.Block]:
    return [b for b in BLOCKS if b.lang in langs and b.skip is None]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A scratch folder that looks like the repository root to the docs' relative paths (configs/, tests/), with
    the user files the docs name: measured.yaml is docs/calibrate.md's data block, ar.txt an nccl-tests log
    (tests/nccl/), out/pe-dma-perf/ a smoke run of pe-dma-perf."""
    d = tmp_path_factory.mktemp("snippets")
    for name in ("configs", "tests"):
        os.symlink(ROOT / name, d / name)
    data = [b for b in BLOCKS if b.page == "docs/calibrate.md" and b.lang == "yaml" and "\nrows:" in "\n" + b.code]
    assert len(data) == 1, "docs/calibrate.md: expected one measured-data yaml block (a `rows:` list)"
    (d / "measured.yaml").write_text(data[0].code)
    shutil.copy(ROOT / "tests" / "nccl" / "h100_all_reduce_perf.txt", d / "ar.txt")
    from kernbench.cli import main

    with contextlib.chdir(d), contextlib.redirect_stdout(io.StringIO()):  # the run docs/sweep-json.md reads
        assert main(["run", "--bench", "pe-dma-perf", "--smoke", "--quiet", "--out", "out/pe-dma-perf"]) == 0
    return d


# ---- python ---------------------------------------------------------------------------------------------------


def _close(v: float, printed: str) -> bool:
    """``v`` equals the printed figure within its last printed digit's rounding."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(v - float(printed)) <= 0.5 * 10 ** -decimals + 1e-12


# Outputs the blocks claim in comments: (page, a text of the block) -> a check on the page's namespace after it.
CLAIMS = {
    ("README.md", "# Pollaczek-Khinchine: 4.05 us"): lambda ns: _close(ns["r"]["theory_wait_ps"] / 1e6, "4.05")
    and abs(ns["r"]["mean_wait_ps"] / ns["r"]["theory_wait_ps"] - 1) < 0.05,
    ("docs/workloads.md", "# 68,976,648,192 parameters"): lambda ns: ns["spec"].params == 68_976_648_192,
    ("docs/critical-path.md", "# always"): lambda ns: ns["cp"].length_ps == ns["res"].makespan_ps > 0
    and set(ns["kernbench"].critical_path.summarize(ns["res"])) >= {"length_ps", "makespan_ps", "share"},
}

_NAMESPACES: dict[str, dict] = {}


@contextlib.contextmanager
def _registries_restored():
    """The benches and measurement functions a block registers (docs/benches.md's `my-study`) are forgotten after
    it, so the other tests of the session see the registries as they were."""
    from kernbench import registry
    from kernbench.calibrate.registry import REGISTRY

    benches, measurements = dict(registry._BENCHES), dict(REGISTRY._items)
    try:
        yield
    finally:
        registry._BENCHES.clear()
        registry._BENCHES.update(benches)
        REGISTRY._items.clear()
        REGISTRY._items.update(measurements)


def run_page(page: str, workdir) -> dict:
    """Run the page's python blocks in order in one namespace (once per session); returns the namespace."""
    if page in _NAMESPACES:
        return _NAMESPACES[page]
    ns: dict = {"__name__": "__main__"}
    for b in [b for b in by_lang("python") if b.page == page]:
        if b.continues:
            for k, v in run_page(b.continues, workdir).items():
                ns.setdefault(k, v)
        with contextlib.chdir(workdir), contextlib.redirect_stdout(io.StringIO()), _registries_restored():
            try:
                exec(compile(b.code, b.where, "exec"), ns)
            except Exception as e:
                raise AssertionError(f"{b.where}: the python block raised {type(e).__name__}: {e}") from e
        for (p, text), check in CLAIMS.items():
            if p == page and text in b.code:
                assert check(ns), f"{b.where}: the output its comment {text!r} claims is not what it computes"
    _NAMESPACES[page] = ns
    return ns


@pytest.mark.parametrize("page", sorted({b.page for b in by_lang("python")}))
def test_python_blocks_run(page, workdir):
    """The page's python blocks run in order, as pasted into one interpreter, without an error or a warning, and
    every output a comment of theirs claims (CLAIMS) is what they compute."""
    run_page(page, workdir)


def test_every_claim_names_a_block():
    """Each claimed output of CLAIMS is found in exactly one python block of its page (a claim whose text left the
    docs would never be checked)."""
    for page, text in CLAIMS:
        assert sum(text in b.code for b in by_lang("python") if b.page == page) == 1, (page, text)


# ---- shell commands -------------------------------------------------------------------------------------------


def _simple_commands(argv: list[str]) -> list[list[str]]:
    """One shell line cut at `&&`, `||`, `;` and `|`, with `> FILE` redirections dropped."""
    out, cur, skip_next = [], [], False
    for w in argv:
        if skip_next:
            skip_next = False
        elif w in ("&&", "||", ";", "|"):
            out.append(cur)
            cur = []
        elif w in (">", ">>", "2>"):
            skip_next = True
        else:
            cur.append(w)
    return [c for c in out + [cur] if c]


def _expand(argv: list[str], workdir) -> list[str]:
    """Shell globs of the repository's files (configs/machines/*.yaml), as the shell expands them."""
    out = []
    for w in argv:
        hits = sorted(glob.glob(w, root_dir=workdir)) if any(c in w for c in "*?") and "/" in w else []
        out += hits or [w]
    return out


_RAN: dict[tuple[str, ...], str] = {}


def check_kernbench(argv: list[str], workdir, where: str) -> str:
    """Dry-check ``kernbench ARGV`` (each optional [...] form of a synopsis); run it when it is a cheap verb.
    Returns the last run's stdout ("" when nothing ran)."""
    from kernbench.cli import main
    from kernbench.cli_check import check_command

    printed = ""
    for form in ds.optional_forms(argv):
        form = _expand(form, workdir)
        with contextlib.chdir(workdir):
            try:
                check_command(form)
            except Exception as e:
                raise AssertionError(f"{where}: kernbench {' '.join(form)}: {type(e).__name__}: {e}") from e
            if form and form[0] in RUNS and "--bench-path" not in form:  # a plugin folder is the reader's own
                key = tuple(form)
                if key not in _RAN:  # the same command on several pages runs once
                    out = io.StringIO()
                    with contextlib.redirect_stdout(out):
                        rc = main(form)
                    assert rc == 0, f"{where}: kernbench {' '.join(form)} exited {rc}"
                    _RAN[key] = out.getvalue()
                printed = _RAN[key]
    return printed


def check_shell(b: ds.Block, workdir) -> dict[int, str]:
    """Every command of the block checked; returns {line: stdout} of the commands that ran."""
    ran = {}
    for line, argv in ds.commands(b):
        for cmd in _simple_commands(argv):
            where = f"{b.page}:{line}"
            if cmd[0] == "kernbench":
                ran[line] = check_kernbench(cmd[1:], workdir, where)
            elif cmd[0].startswith(("scripts/", "./scripts/")):
                assert (ROOT / cmd[0]).is_file(), f"{where}: {cmd[0]}: no such script in the repository"
            else:  # cmake, or a tool on the user's machine (nccl-tests): named, not run
                assert cmd[0] in ("cmake", "./build/all_reduce_perf"), f"{where}: unexpected command {cmd[0]!r}"
    return ran


# Shell blocks whose comment after a command prints that command's output, and the command is cheap (a second):
# (page, the comment's start). The command runs at the page's size; only the wall time may differ.
OUTPUT_CLAIMS = {("docs/gpu-target.md", "# inference llama3_70b dp=1 tp=8 pp=1 b=8 prompt=32:")}


def check_output_claim(b: ds.Block, start: str, workdir) -> None:
    from kernbench.cli import main

    lines = b.code.split("\n")
    k = next(i for i, ln in enumerate(lines) if ln.startswith(start))
    cmd = [(line, argv) for line, argv in ds.commands(b) if line - b.line - 1 < k][-1][1]
    out = io.StringIO()
    with contextlib.chdir(workdir), contextlib.redirect_stdout(out):
        assert main([*cmd[1:], "--out", "out/claim"]) == 0, b.where
    claim = re.sub(r"\([\d.]+ s wall\)", "(... s wall)", lines[k][2:])
    assert _matches(["..." + claim], out.getvalue().split("\n")) is None, \
        f"{b.where}: the page says {lines[k]!r}; the run printed:\n{out.getvalue()}"


@pytest.mark.parametrize("b", by_lang("bash", "sh", "console"), ids=lambda b: b.where)
def test_shell_blocks(b, workdir):
    """Each `kernbench` command of a shell block parses and names real benches, keys, values and configs; the cheap
    ones run and exit 0; each repository script it calls exists; an output its comment claims (OUTPUT_CLAIMS) is
    what the command prints."""
    assert ds.commands(b), f"{b.where}: a shell block without a command"
    check_shell(b, workdir)
    for page, start in OUTPUT_CLAIMS:
        if page == b.page and start in b.code:
            check_output_claim(b, start, workdir)


def test_every_output_claim_names_a_block():
    """Each claim of OUTPUT_CLAIMS is in exactly one shell block of its page."""
    for page, start in OUTPUT_CLAIMS:
        assert sum(start in b.code for b in by_lang("bash") if b.page == page) == 1, (page, start)


def _matches(doc: list[str], real: list[str]) -> str | None:
    """The page's printed lines against the real ones: each doc line, in order, equals a real line, `...` in it
    standing for any text and a line of only `...` for any lines. Returns the first line that has no match."""
    i = 0
    for line in doc:
        if line.strip() in ("...", ""):
            continue
        pat = re.compile(".*".join(re.escape(p) for p in line.rstrip().split("...")) + r"\s*")
        while i < len(real) and not pat.fullmatch(real[i].rstrip()):
            i += 1
        if i == len(real):
            return line
        i += 1
    return None


@pytest.mark.parametrize("b", [b for b in by_lang("text") if ds.commands(b)], ids=lambda b: b.where)
def test_transcripts(b, workdir):
    """A `$ kernbench ...` transcript: the command is checked like a shell block's; when it is a cheap verb it runs
    and the lines the page prints are its real output."""
    ran = check_shell(b, workdir)
    cmds = ds.commands(b)
    if len(cmds) == 1 and cmds[0][1][0] == "kernbench" and cmds[0][1][1] in RUNS:
        printed, cont = [], False
        for ln in b.code.split("\n"):
            if not (ln.startswith("$ ") or cont):
                printed.append(ln)
            cont = (ln.startswith("$ ") or cont) and ln.endswith("\\")
        missing = _matches(printed, ran[cmds[0][0]].split("\n"))
        assert missing is None, f"{b.where}: the page prints {missing!r}, the command does not"


# ---- yaml, csv, toml, cmake -----------------------------------------------------------------------------------


def unknown_keys(tree, where: str = "") -> list[str]:
    """The config paths of ``tree`` (a parsed YAML fragment) that the exported schema does not know."""
    from kernbench.calibrate.data import schema_key

    bad = []
    for k, v in tree.items():
        path = f"{where}.{k}" if where else str(k)
        node = schema_key(path)
        if node is None:
            bad.append(path)
        elif isinstance(v, dict) and isinstance(node.get("keys"), dict):  # a section with named keys
            bad += unknown_keys(v, path)
        elif isinstance(v, list) and node.get("type") == "list":
            for i, item in enumerate(v):
                if isinstance(item, dict):
                    bad += unknown_keys(item, f"{path}.{i}")
    return bad


# Pages whose YAML blocks are parts of a graph (one node, an elided node list) that cannot load by themselves:
# their keys are checked against the schema. Every other config block must load.
YAML_FRAGMENTS = {"docs/ccl.md", "docs/concepts.md"}


def check_config_yaml(b: ds.Block, workdir) -> str:
    """A config block loaded whole, else on top of the default machine (an include), else its keys looked up in
    the schema. Returns how it was checked."""
    from kernbench import System

    tree = yaml.safe_load(b.code)
    assert isinstance(tree, dict) and tree, f"{b.where}: not a YAML mapping"
    errors = []
    for how, text in (("whole", b.code), ("on topology.yaml", "include: configs/topology.yaml\n" + b.code)):
        path = workdir / f"snippet-{b.line}.yaml"
        path.write_text(text)
        try:
            System.load(path, include_dirs=[ROOT / "configs"])
            return how
        except Exception as e:  # noqa: BLE001 -- the next way is tried, the errors are reported together
            errors.append(f"{how}: {e}")
    bad = unknown_keys(tree)
    assert not bad, f"{b.where}: keys unknown to the config schema: {bad} ({'; '.join(errors)})"
    return "schema keys"


@pytest.mark.parametrize("b", by_lang("yaml", "csv"), ids=lambda b: b.where)
def test_yaml_and_csv_blocks(b, workdir):
    """A measured-data block (rows of measurements) is read by kernbench.calibrate; a config block loads, whole or
    on top of the default machine, or (a fragment) uses only keys the schema defines."""
    from kernbench.calibrate.data import load_data

    if b.lang == "csv" or "rows" in yaml.safe_load(b.code):
        path = workdir / f"data-{b.line}.{b.lang}"
        path.write_text(b.code)
        if b.lang == "csv":
            expected = sum(1 for ln in b.code.split("\n")[1:] if ln.strip() and not ln.startswith("#"))
        else:
            expected = len(yaml.safe_load(b.code)["rows"])
        assert len(load_data(path).rows) == expected, b.where
    else:
        how = check_config_yaml(b, workdir)
        assert how != "schema keys" or b.page in YAML_FRAGMENTS, f"{b.where}: does not load ({how} only)"


@pytest.mark.parametrize("b", by_lang("toml"), ids=lambda b: b.where)
def test_toml_blocks(b):
    """A pyproject fragment parses and declares benches under the entry point group the registry reads."""
    from kernbench.registry import ENTRY_POINT_GROUP

    tree = tomllib.loads(b.code)
    assert tree["project"]["entry-points"][ENTRY_POINT_GROUP], b.where


@pytest.mark.parametrize("b", by_lang("cmake"), ids=lambda b: b.where)
def test_cmake_blocks(b):
    """A consumer's CMake fragment names the package and the target the build installs (the package config file
    and the export namespace of CMakeLists.txt)."""
    cmake = (ROOT / "CMakeLists.txt").read_text() + "".join(p.read_text() for p in (ROOT / "cmake").glob("*"))
    package = re.search(r"find_package\((\w+)", b.code).group(1)
    assert f"{package}Config.cmake" in cmake or f"{package}-config.cmake" in cmake, b.where
    target = re.search(r"target_link_libraries\(\w+ PRIVATE (\w+)::(\w+)\)", b.code)
    assert f"NAMESPACE {target.group(1)}::" in cmake and f"EXPORT_NAME {target.group(2)})" in cmake, b.where


# ---- cpp --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("b", by_lang("cpp"), ids=lambda b: b.where)
def test_cpp_blocks(b):
    """docs/contributing.md's example is the code test_contributing.cpp compiles (test_contributing_doc.py checks
    the bytes); any other block is a fragment of the DES core whose every sim:: name is declared in src/sim and
    whose every member call names a function declared there."""
    text = (ROOT / b.page).read_text()
    if b.page == "docs/contributing.md":
        assert f"<!-- contributing example: begin -->\n```cpp\n{b.code}```" in text, b.where
        return
    headers = "".join(p.read_text() for p in (ROOT / "src" / "sim").glob("*.hpp"))
    names = set(re.findall(r"\bsim::(\w+)", b.code))
    members = set(re.findall(r"\.(\w+)\(", b.code)) - {"c_str"}
    assert names and members, b.where
    for n in names:
        assert re.search(rf"\b(class|struct|using|enum class|constexpr [\w:]+|inline constexpr [\w:]+) {n}\b",
                         headers), f"{b.where}: sim::{n} is not declared in src/sim"
    for m in members:
        assert re.search(rf"\b{m}\(", headers), f"{b.where}: no function {m}() in src/sim"


# ---- the inventory ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("b", [b for b in BLOCKS if b.skip is not None], ids=lambda b: b.where)
def test_marked_skips(b):
    """A block marked `snippet: skip` is reported as skipped with its reason (pytest -rs lists them)."""
    assert len(b.skip) > 10, f"{b.where}: give a reason a reader understands"
    pytest.skip(f"{b.where} ({b.lang}): {b.skip}")


def test_every_block_has_a_language_and_a_check():
    """Every block of docs/ and README.md has a language this test checks (text without commands is output or a
    diagram, shown as is); skips are few and each has a reason; a `continues` marker sits on a python block."""
    assert len(BLOCKS) > 60
    for b in BLOCKS:
        assert b.lang, f"{b.where}: a code block without a language"
        assert b.lang in CHECKED, f"{b.where}: language {b.lang!r} is not checked (known: {CHECKED})"
        assert b.continues is None or b.lang == "python", b.where
    skips = [b for b in BLOCKS if b.skip is not None]
    assert len(skips) <= MAX_SKIPS, [b.where for b in skips]


def test_unknown_keys_are_found():
    """The schema walk that checks YAML fragments finds a misspelt key at any depth, in list items and in
    sections, and passes the keys of docs/ccl.md's switch node."""
    assert unknown_keys({"graph": {"nodes": [{"name": "x", "kindd": "switch", "reduction": {"bw": 1}}],
                                   "layout": {"grid": {"w": 4, "hh": 2}}}, "fabrik": {}}) == \
        ["graph.nodes.0.kindd", "graph.nodes.0.reduction.bw", "graph.layout.grid.hh", "fabrik"]
    assert unknown_keys({"graph": {"nodes": [{"name": "s", "kind": "switch", "overhead": "1 ns",
                                              "reduction": {"bandwidth": "1 GB/s"}}]}}) == []


def test_the_finder_sees_markers_and_fences(tmp_path, monkeypatch):
    """doc_snippets reads a fence's language, its dedented text and the marker on the line before it; an unknown
    marker and an unclosed fence are errors naming the file and line."""
    monkeypatch.setattr(ds, "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "p.md"
    page.write_text("x\n<!-- snippet: skip (needs a GPU here) -->\n  ```python\n  print(1)\n  ```\n\n```\nplain\n```\n")
    got = ds.blocks(page)
    assert [(b.line, b.lang, b.code, b.skip) for b in got] == [(3, "python", "print(1)\n", "needs a GPU here"),
                                                               (7, "", "plain\n", None)]
    page.write_text("<!-- snippet: skipp (typo) -->\n```python\nx\n```\n")
    with pytest.raises(ValueError, match=r"docs/p.md:1: unknown snippet marker"):
        ds.blocks(page)
    page.write_text("ok\n```bash\nkernbench list\n")
    with pytest.raises(ValueError, match=r"docs/p.md:2: code fence never closed"):
        ds.blocks(page)
    assert ds.optional_forms(["goldens", "[--update]"]) == [["goldens"], ["goldens", "--update"]]
    assert ds.commands(ds.Block("p", 1, "text", "$ kernbench a \\\n    --b c\nout put\n")) == [(2, ["kernbench", "a", "--b", "c"])]
