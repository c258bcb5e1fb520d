"""Shared helpers for the Python tests."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run_cli(*args: str, cwd=None, check: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m kernbench ARGS`` and capture its output."""
    proc = subprocess.run(
        [sys.executable, "-m", "kernbench", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"kernbench {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


@pytest.fixture
def cli():
    return run_cli
