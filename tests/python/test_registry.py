"""Bench registration, the discovery audit, and --set parsing."""

from __future__ import annotations

import sys
import textwrap

import pytest

import kernbench
from kernbench import overrides, registry


def _make_package(tmp_path, name, modules):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for mod, text in modules.items():
        (pkg / f"{mod}.py").write_text(textwrap.dedent(text))
    return name


@pytest.fixture
def tmp_package(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    created = []

    def make(name, modules):
        created.append(name)
        return _make_package(tmp_path, name, modules)

    yield make
    for name in created:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]


GOOD = """
    from kernbench import bench

    @bench(name="{name}", description="a test bench", params={{"n": 3}})
    def run(ctx):
        return {{"results": [{{"n": ctx.params["n"]}}]}}
"""


def test_audit_catches_an_undecorated_bench_module(tmp_package):
    """A public module without @bench fails discovery, naming the module."""
    pkg = tmp_package("kb_audit_pkg", {
        "good": GOOD.format(name="audit-good"),
        "forgot": "def run(ctx):\n    return {}\n",
        "_helper": "X = 1\n",
    })
    with pytest.raises(kernbench.BenchAuditError, match=r"kb_audit_pkg\.forgot registers no bench"):
        registry.discover(pkg)


def test_helpers_are_skipped_and_benches_found(tmp_package):
    """Underscore modules are helpers; decorated modules are found, sorted by name."""
    pkg = tmp_package("kb_ok_pkg", {
        "b": GOOD.format(name="ok-b"),
        "a": GOOD.format(name="ok-a"),
        "_util": "Y = 2\n",
    })
    names = [b.name for b in registry.discover(pkg)]
    assert names == ["ok-a", "ok-b"]
    assert registry.get_bench("1", pkg).name == "ok-b"
    with pytest.raises(kernbench.ConfigError, match=r"unknown bench 'ok-c' \(known: ok-a, ok-b\)"):
        registry.get_bench("ok-c", pkg)
    with pytest.raises(kernbench.ConfigError, match=r"no bench with index 7 \(valid: 0..1\)"):
        registry.get_bench(7, pkg)


def test_duplicate_bench_name_is_refused(tmp_package):
    """Two modules registering one name is an audit error naming both."""
    pkg = tmp_package("kb_dup_pkg", {"x": GOOD.format(name="dup-name"), "y": GOOD.format(name="dup-name")})
    with pytest.raises(kernbench.BenchAuditError, match="defined twice"):
        registry.discover(pkg)


def test_installed_benches_pass_the_audit():
    """The shipped benches all register; perf-phold is one of them."""
    names = [b.name for b in kernbench.list_benches()]
    assert "perf-phold" in names
    assert names == sorted(names)


@pytest.mark.parametrize(
    "value, default, expected",
    [("1e6", 10, 1_000_000), ("42", 1, 42), ("2.5", 1.0, 2.5), ("7", 1.0, 7.0),
     ("true", False, True), ("off", True, False), ("a,b", ["x"], ["a", "b"]), ("1,2", [3], [1, 2]),
     ("text", "s", "text")],
)
def test_override_values_are_typed_like_their_defaults(value, default, expected):
    """--set values take the type of the parameter's default."""
    got = overrides.coerce(value, default)
    assert got == expected and type(got) is type(expected)


def test_override_split_keeps_config_paths_apart():
    """bench.* keys become params; other paths are passed on as config overrides."""
    params, config = overrides.apply_bench_overrides(
        "b", {"events": 10}, ["bench.events=1e3", "system.sips.w=4"]
    )
    assert params == {"events": 1000}
    assert config == {"system.sips.w": "4"}
    with pytest.raises(kernbench.ConfigError, match=r"known: bench\.events"):
        overrides.apply_bench_overrides("b", {"events": 10}, ["bench.nope=1"])


# ---- the README's index, plugin benches --------------------------------------------------------

def test_the_docs_name_the_right_bench_index():
    """Every "--bench NAME ... --bench N" line of the README and docs gives NAME's real index."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    names = [b.name for b in kernbench.list_benches()]
    claims = []
    for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for line in path.read_text().splitlines():
            m = re.search(r"--bench ([a-z][\w-]*)\b.*--bench (\d+)\b", line)
            if m:
                claims.append((path.name, m.group(1), int(m.group(2))))
    assert claims, "the README shows running a bench by its index"
    for where, name, index in claims:
        assert names[index] == name, f"{where}: --bench {index} is {names[index]}, not {name}"


PLUGIN = """
    from kernbench import bench

    @bench(name="{name}", description="a plugin bench", params={{"n": 3, "rate": "32 GB/s"}},
           smoke={{"bench.n": 1}}, outputs={{"n.csv": "the n rows"}})
    def run(ctx):
        rows = [{{"i": i, "n": ctx.params["n"], "twice": 2 * i}} for i in range(ctx.params["n"])]
        ctx.write_csv("n.csv", rows)
        return {{"results": rows}}
"""


@pytest.fixture
def plugin_state(monkeypatch):
    """Plugin registrations made by a test are undone after it (the registry is process-global)."""
    saved = (dict(registry._BENCHES), list(registry._EXTRA_PATHS), dict(registry._LOADED_FILES),
             set(registry._PLUGIN_MODULES), registry._ENTRY_POINTS_LOADED)
    monkeypatch.delenv(registry.BENCH_PATH_ENV, raising=False)
    yield
    registry._BENCHES.clear()
    registry._BENCHES.update(saved[0])
    registry._EXTRA_PATHS[:] = saved[1]
    registry._LOADED_FILES.clear()
    registry._LOADED_FILES.update(saved[2])
    registry._PLUGIN_MODULES.clear()
    registry._PLUGIN_MODULES.update(saved[3])
    registry._ENTRY_POINTS_LOADED = saved[4]


def test_a_bench_path_adds_plugins_after_the_shipped_benches(tmp_path, plugin_state):
    """Public *.py files of a --bench-path folder register benches; they list after the shipped ones,
    whose indices do not move; helpers beside them can be imported."""
    shipped = [b.name for b in kernbench.list_benches()]
    (tmp_path / "_helper.py").write_text("N = 5\n")
    (tmp_path / "zz_first.py").write_text(textwrap.dedent(PLUGIN.format(name="aa-plugin")))
    (tmp_path / "second.py").write_text("from _helper import N\n" + textwrap.dedent(PLUGIN.format(name="plug-two")))
    registry.add_bench_path(tmp_path)
    benches = kernbench.list_benches()
    assert [b.name for b in benches] == shipped + ["aa-plugin", "plug-two"]
    b = registry.get_bench("aa-plugin")
    assert b.plugin and b.source == str(tmp_path / "zz_first.py") and not benches[0].plugin
    assert registry.get_bench(str(len(shipped) + 1)).name == "plug-two"
    with pytest.raises(kernbench.ConfigError, match="no such folder"):
        registry.add_bench_path(tmp_path / "missing")


def test_plugins_from_the_environment_run_from_the_cli(tmp_path, cli, monkeypatch):
    """KERNBENCH_BENCH_PATH and --bench-path reach list, describe, run and sweep."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "mine.py").write_text(textwrap.dedent(PLUGIN.format(name="my-plugin")))
    proc = cli("list", "--bench-path", str(plugins))
    assert proc.returncode == 0 and "my-plugin" in proc.stdout and f"[plugin: {plugins / 'mine.py'}]" in proc.stdout
    proc = cli("describe", "my-plugin", "--bench-path", str(plugins))
    assert proc.returncode == 0, proc.stderr
    assert "bench.rate  str  default 32 GB/s" in proc.stdout and "n.csv" in proc.stdout
    out = tmp_path / "run"
    proc = cli("run", "--bench", "my-plugin", "--bench-path", str(plugins), "--smoke", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    import json

    doc = json.loads((out / "sweep.json").read_text())
    assert doc["params"]["n"] == 1 and (out / "n.csv").exists()
    monkeypatch.setenv("KERNBENCH_BENCH_PATH", str(plugins))
    proc = cli("sweep", "--bench", "my-plugin", "--grid", "bench.n=1,2", "--workers", "2", "--out", str(tmp_path / "sw"))
    assert proc.returncode == 0, proc.stderr  # the worker processes find the plugin too
    doc = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert [r["bench.n"] for r in doc["results"]] == [1, 2, 2]


@pytest.mark.parametrize("text, words", [
    ("from kernbench import bench\n\n@bench(name='broken', description='x'\ndef run(ctx): pass\n", "does not parse"),
    ("import no_such_module_for_kernbench\n", "failed to import: ModuleNotFoundError"),
    ("X = 1\n", "registers no bench"),
])
def test_a_bad_plugin_is_one_line_naming_the_file(tmp_path, cli, text, words):
    """A --bench-path plugin that does not parse, fails to import or registers no bench makes `kernbench list` exit 2
    with one line naming the file and the reason, without a traceback."""
    (tmp_path / "bad.py").write_text(text)
    proc = cli("list", "--bench-path", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert str(tmp_path / "bad.py") in proc.stderr and words in proc.stderr


def test_a_plugin_reusing_a_shipped_name_is_refused(tmp_path, plugin_state):
    """A plugin defining a bench under a shipped bench's name (perf-phold) is a BenchAuditError naming the file and
    the duplicated name."""
    (tmp_path / "dup.py").write_text(textwrap.dedent(PLUGIN.format(name="perf-phold")))
    registry.add_bench_path(tmp_path)
    with pytest.raises(kernbench.BenchAuditError, match=r"dup\.py: bench 'perf-phold' is defined twice"):
        kernbench.list_benches()


def test_entry_point_benches(tmp_path, plugin_state, monkeypatch):
    """A distribution's entry point in group kernbench.benches names a module that registers benches;
    a broken one is an error naming the entry point."""
    pkg = tmp_path / "kb_ep_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "benches.py").write_text(textwrap.dedent(PLUGIN.format(name="ep-bench")))
    dist = tmp_path / "kb_ep_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kb-ep-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[kernbench.benches]\nmine = kb_ep_plugin.benches\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._ENTRY_POINTS_LOADED = False
    try:
        names = [b.name for b in kernbench.list_benches()]
        assert names[-1] == "ep-bench" and registry.get_bench("ep-bench").plugin
        (dist / "entry_points.txt").write_text("[kernbench.benches]\nbroken = kb_ep_missing.benches\n")
        registry._ENTRY_POINTS_LOADED = False
        with pytest.raises(kernbench.BenchAuditError,
                           match=r"entry point broken = kb_ep_missing\.benches \(group kernbench\.benches, "
                                 r"distribution kb-ep-plugin\): failed to import: ModuleNotFoundError"):
            kernbench.list_benches()
    finally:
        for key in [k for k in sys.modules if k.startswith("kb_ep_plugin")]:
            del sys.modules[key]
