"""Confined includes and the loader's size limits, from Python and the CLI (issue 22).

A config's ``include:`` may read its own folder tree, the packaged configs and
the folders the user names (``include_dirs=``, ``--include-dir``,
``KERNBENCH_INCLUDE_PATH``); anything else is refused by path, unread, so no
message can quote a foreign file. The bad-input corpus holds the refusals;
these tests check what must still work, the options, and that nothing leaks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kernbench
from kernbench._core import ConfigError
from kernbench.cli import main

BASE = Path(__file__).resolve().parent.parent / "bad_inputs" / "configs" / "_base_system.yaml"
SECRET = "SECRET-CONTENT-LINE"


@pytest.fixture
def layout(tmp_path):
    """top/cfg.yaml includes ../shared/base.yaml; outside/secret.yaml is invalid YAML holding SECRET."""
    (tmp_path / "top").mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "shared" / "base.yaml").write_text(BASE.read_text())
    (tmp_path / "outside" / "secret.yaml").write_text(f"{SECRET}: [\n")
    cfg = tmp_path / "top" / "cfg.yaml"
    cfg.write_text("include: ../shared/base.yaml\n")
    return tmp_path, cfg


def test_include_dirs_keyword_and_environment(layout, monkeypatch):
    """../ is refused by default; include_dirs= (a folder or a list) and KERNBENCH_INCLUDE_PATH allow it."""
    root, cfg = layout
    monkeypatch.delenv("KERNBENCH_INCLUDE_PATH", raising=False)
    with pytest.raises(ConfigError, match="outside the folders includes may read"):
        kernbench.System.load(cfg)
    assert kernbench.System.load(cfg, include_dirs=root / "shared").num_nodes == 7
    assert kernbench.System.load(cfg, include_dirs=[str(root / "shared")]).num_nodes == 7
    assert kernbench.config.validate(cfg, include_dirs=root / "shared")["total_pes"] == 2
    monkeypatch.setenv("KERNBENCH_INCLUDE_PATH", os.pathsep.join(["/nonexistent", str(root / "shared")]))
    assert kernbench.System.load(cfg).num_nodes == 7
    assert kernbench._core.load_config_summary(str(cfg))["total_pes"] == 2  # the binding's default reads it too


def test_cli_include_dir_on_every_loading_verb(layout, tmp_path, capsys, monkeypatch):
    """--include-dir allows a folder for validate and show, and leaves the environment as it was."""
    root, cfg = layout
    monkeypatch.delenv("KERNBENCH_INCLUDE_PATH", raising=False)
    assert main(["validate", str(cfg)]) == 1
    assert "outside the folders includes may read" in capsys.readouterr().err
    assert main(["validate", str(cfg), "--include-dir", str(root / "shared")]) == 0
    assert "valid" in capsys.readouterr().out
    assert main(["show", str(cfg), "--include-dir", str(root / "shared")]) == 0
    assert "KERNBENCH_INCLUDE_PATH" not in os.environ


def test_refused_include_is_never_quoted(layout):
    """A refused include, by ../, absolute path or symlink, is named by path; its content never appears."""
    root, cfg = layout
    secret = root / "outside" / "secret.yaml"
    (root / "top" / "link.yaml").symlink_to(secret)
    for include in ["../outside/secret.yaml", str(secret), "link.yaml"]:
        cfg.write_text(f"include: {include}\n")
        with pytest.raises(ConfigError) as e:
            kernbench.System.load(cfg)
        assert "outside the folders includes may read" in str(e.value)
        assert str(secret.resolve()) in str(e.value)
        assert SECRET not in str(e.value)
    # Allowed explicitly, the same file's parse error may quote it, as for any config.
    cfg.write_text("include: ../outside/secret.yaml\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        kernbench.System.load(cfg, include_dirs=root / "outside")


def test_packaged_configs_are_allowed(tmp_path):
    """A config anywhere may include a packaged preset (the configs/ folder is always allowed)."""
    packaged = kernbench.system.config_path("topology.yaml").resolve()
    cfg = tmp_path / "mine.yaml"
    cfg.write_text(f"include: {packaged}\nsystem: {{name: mine}}\n")
    assert kernbench.config.validate(cfg)["name"] == "mine"


def test_large_sip_grid_loads_in_linear_memory():
    """32,000 SIPs load within 1 GiB of address space (an n x n routing table took 4.1 GB and 35 s)."""
    code = (
        "import resource, kernbench\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        f"s = kernbench.System.load({str(BASE)!r}, set={{'system.sips.w': 32000}})\n"
        "print(s.num_nodes)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(32000 * 7)
