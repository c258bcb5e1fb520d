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
