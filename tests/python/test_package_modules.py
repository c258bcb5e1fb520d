"""`import kernbench` exposes the public modules as the docs spell them (kernbench.ccl.all_reduce,
kernbench.workloads.estimate.inference), each loaded on first use, and an unknown name is still an AttributeError."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_public_modules_load_on_first_use():
    """In a fresh interpreter `import kernbench` alone does not import kernbench.ccl or kernbench.k200, yet
    kernbench.ccl.all_reduce runs a collective, the other documented modules resolve, and every name of
    PUBLIC_MODULES is a module file of the package and listed by dir()."""
    proc = run_fresh("""
        import sys, kernbench
        assert "kernbench.ccl" not in sys.modules and "kernbench.k200" not in sys.modules
        s = kernbench.System.load()
        r = kernbench.ccl.all_reduce(s, 4096)
        assert r.latency_ps > 0, r
        assert callable(kernbench.k200.run_ops) and callable(kernbench.vgpu.launches)
        assert callable(kernbench.workloads.estimate.inference) and callable(kernbench.llama.layer)
        for name in kernbench.PUBLIC_MODULES:
            assert getattr(kernbench, name).__name__ == "kernbench." + name, name
            assert name in dir(kernbench), name
        print("ok")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_an_unknown_attribute_is_still_an_error():
    """A name that is neither a package attribute nor a public module raises AttributeError naming it, for the
    package and for kernbench.workloads (whose submodules load the same way)."""
    proc = run_fresh("""
        import kernbench
        for mod, name in ((kernbench, "nope"), (kernbench.workloads, "nope_either")):
            try:
                getattr(mod, name)
            except AttributeError as e:
                assert repr(name) in str(e), e
            else:
                raise SystemExit("no error for " + name)
        print("ok")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
