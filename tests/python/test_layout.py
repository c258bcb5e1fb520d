"""The layering and size check (scripts/check_layout.py): the repository passes
it, and the check itself finds what it should in fake trees."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layout.py"


def run_check(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), *args],
                          capture_output=True, text=True, timeout=120)


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_repository_layering_and_sizes():
    """The repository itself passes scripts/check_layout.py: no include crosses the layer table and no source file is
    over the line limit."""
    proc = run_check(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_reports_a_bad_include_and_a_long_file(tmp_path):
    """In a fake tree the check reports an include from sim into runtime (with what sim may include) and a file one
    line over the limit, each on its own line with file and line, and a summary of the offence counts; it exits 1."""
    write(tmp_path, "src/runtime/executor.hpp", "#pragma once\n")
    write(tmp_path, "src/sim/event.hpp", "#pragma once\n")
    write(tmp_path, "src/sim/queue.hpp",
          '#pragma once\n#include "sim/event.hpp"\n#include "runtime/executor.hpp"\n')
    write(tmp_path, "src/topology/big.cpp", "int x;\n" * 601)
    proc = run_check(tmp_path)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert ('src/sim/queue.hpp:3: layer: sim may not include runtime ("runtime/executor.hpp"); '
            "sim may include: nothing below it") in lines
    assert "src/topology/big.cpp:601: size: 601 lines, more than the limit of 600" in lines
    assert lines[-1] == "check_layout: FAILED: 1 layering, 1 size offence(s)"


def test_ignores_comments_system_includes_and_if0(tmp_path):
    """Includes in comments, angle-bracket includes, `#if 0` blocks, string and raw-string literals are not counted,
    but an include after `#if 0 ... #else` or after a closed block comment is."""
    write(tmp_path, "src/sim/a.hpp", "\n".join([
        "#pragma once",
        '// #include "runtime/executor.hpp"',
        '/* #include "ccl/ccl.hpp"',
        '   #include "kernels/gemm.hpp" */',
        "#include <runtime/executor.hpp>",
        "#if 0",
        '#include "topology/graph/machine.hpp"',
        "#endif",
        'const char* s = "/* not a comment";',
        '#include "sim/b.hpp"  // fine: own layer',
        'auto r = R"x(#include "runtime/x.hpp")x";',
        "",
    ]))
    write(tmp_path, "src/sim/b.hpp", "#pragma once\n")
    proc = run_check(tmp_path)
    assert proc.returncode == 0, proc.stdout
    # ... but an include after an `#if 0 / #else` is live, and after a block comment too.
    write(tmp_path, "src/sim/c.hpp", '#if 0\n#else\n#include "ccl/x.hpp"\n#endif\n/* x */ #include "runtime/y.hpp"\n')
    proc = run_check(tmp_path)
    assert "src/sim/c.hpp:3: layer: sim may not include ccl" in proc.stdout
    assert "src/sim/c.hpp:5: layer: sim may not include runtime" in proc.stdout


def test_exactly_the_limit_passes_and_python_and_benches_are_counted(tmp_path):
    """A file of exactly the limit passes; Python files of the package, the bindings and the benches are measured too
    (non-source files are not), and --max-lines raises the limit."""
    write(tmp_path, "src/sim/ok.cpp", "int x;\n" * 600)
    write(tmp_path, "python/kernbench/long.py", "x = 1\n" * 900)
    write(tmp_path, "python/bindings/bind_long.cpp", "int y;\n" * 1000)
    write(tmp_path, "benches/long_bench.py", "y = 2\n" * 601)
    write(tmp_path, "python/kernbench/notes.txt", "z\n" * 5000)   # not a source file
    proc = run_check(tmp_path)
    assert proc.returncode == 1
    offenders = sorted(line.split(":")[0] for line in proc.stdout.splitlines() if ": size: " in line)
    assert offenders == ["benches/long_bench.py", "python/bindings/bind_long.cpp", "python/kernbench/long.py"]
    assert "python/kernbench/long.py:601: size: 900 lines" in proc.stdout
    assert run_check(tmp_path, "--max-lines", "1000").returncode == 0


def test_the_side_by_side_layers_and_the_models_sublayer(tmp_path):
    """The side-by-side layers may not include each other (kernels -> workloads, platforms -> kernels or workloads),
    runtime may not include sim/models, workloads may use only kernels' public headers, and the bindings may include
    everything."""
    for h in ["sim/models/phold.hpp", "kernels/gemm.hpp", "kernels/detail/tiles.hpp",
              "platforms/k200/k200.hpp", "workloads/llama.hpp", "runtime/program.hpp"]:
        write(tmp_path, "src/" + h, "#pragma once\n")
    write(tmp_path, "src/workloads/llama.cpp",
          '#include "workloads/llama.hpp"\n#include "kernels/gemm.hpp"\n#include "platforms/k200/k200.hpp"\n'
          '#include "kernels/detail/tiles.hpp"\n')
    write(tmp_path, "src/platforms/k200/k200.cpp",
          '#include "k200.hpp"\n#include "runtime/program.hpp"\n#include "kernels/gemm.hpp"\n'
          '#include "workloads/llama.hpp"\n')
    write(tmp_path, "src/kernels/gemm.cpp", '#include "gemm.hpp"\n#include "workloads/llama.hpp"\n')
    write(tmp_path, "src/runtime/program.cpp", '#include "program.hpp"\n#include "sim/models/phold.hpp"\n')
    write(tmp_path, "python/bindings/module.cpp",
          '#include "bindings.hpp"\n#include "sim/models/phold.hpp"\n#include "workloads/llama.hpp"\n')
    write(tmp_path, "python/bindings/bindings.hpp", "#pragma once\n")
    out = run_check(tmp_path).stdout.splitlines()
    layer = sorted(line for line in out if ": layer: " in line)
    assert layer == [
        'src/kernels/gemm.cpp:2: layer: kernels may not include workloads ("workloads/llama.hpp"); '
        "kernels may include: ccl, config, runtime, sim, solver, topology",
        'src/platforms/k200/k200.cpp:3: layer: platforms may not include kernels ("kernels/gemm.hpp"); '
        "platforms may include: ccl, config, runtime, sim, solver, topology",
        'src/platforms/k200/k200.cpp:4: layer: platforms may not include workloads ("workloads/llama.hpp"); '
        "platforms may include: ccl, config, runtime, sim, solver, topology",
        'src/runtime/program.cpp:2: layer: runtime may not include sim/models ("sim/models/phold.hpp"); '
        "runtime may include: config, sim, solver, topology",
        'src/workloads/llama.cpp:4: layer: workloads may include only the public headers of kernels, '
        'not "kernels/detail/tiles.hpp"',
    ], out


def test_missing_layers_are_fine_but_an_unknown_one_is_not(tmp_path):
    """A tree with only some layers passes and says which are present, while a folder under src/ that is not in the
    layer table is an offence naming the table."""
    write(tmp_path, "src/sim/a.hpp", "#pragma once\n")
    proc = run_check(tmp_path)
    assert proc.returncode == 0 and "layers present: sim" in proc.stdout, proc.stdout
    write(tmp_path, "src/misc/b.hpp", '#include "sim/a.hpp"\n')
    proc = run_check(tmp_path)
    assert proc.returncode == 1
    assert "src/misc/b.hpp:1: layer: src/misc/ is not in the layer table of scripts/check_layout.py" in proc.stdout


def test_namespaces_follow_folders(tmp_path):
    """A file under src/<layer>/ that declares in another layer's namespace, or writes `using namespace` of another
    layer at namespace scope, is an offence naming the file, line and both namespaces; a block of forward
    declarations, a sub-namespace of the file's own layer, a `using namespace` inside a function and the solver layer
    (below topology) are fine."""
    write(tmp_path, "src/runtime/pe_config.hpp",
          "#pragma once\nnamespace kernbench::topology {\nstruct PeConfig {};\n}  // namespace kernbench::topology\n")
    write(tmp_path, "src/platforms/k200/section.hpp",
          "#pragma once\nnamespace kernbench::config {\nclass Schema;\nstruct Key;\n}  // namespace kernbench::config\n"
          "namespace kernbench::platforms::k200 {\nvoid add(config::Schema&);\n}\n")
    write(tmp_path, "src/platforms/k200/section.cpp",
          "namespace kernbench::platforms::k200 {\nusing namespace topology;\nvoid f() {}\n}\n")
    write(tmp_path, "src/workloads/serving/engine.cpp",
          "namespace kernbench::serving {\nvoid g() {}\n}\n"
          "namespace kernbench::workloads::serving {\nvoid h() {\n  using namespace kernbench::kernels;\n}\n}\n")
    write(tmp_path, "src/solver/maxmin.hpp", '#pragma once\n#include "sim/errors.hpp"\nnamespace kernbench::solver {}\n')
    write(tmp_path, "src/sim/errors.hpp", "#pragma once\nnamespace kernbench {\nstruct UsageError {};\n}\n")
    write(tmp_path, "src/topology/fabric/flow.cpp", '#include "solver/maxmin.hpp"\nnamespace kernbench::topology {}\n')
    proc = run_check(tmp_path)
    assert proc.returncode == 1
    lines = sorted(line for line in proc.stdout.splitlines() if ": namespace: " in line)
    assert lines == [
        "src/platforms/k200/section.cpp:2: namespace: 'using namespace topology' at namespace scope: name what is "
        "taken with using-declarations",
        "src/runtime/pe_config.hpp:2: namespace: src/runtime/ declares in kernbench::topology; its namespace is "
        "kernbench::runtime (namespaces follow folders)",
        "src/workloads/serving/engine.cpp:1: namespace: src/workloads/ declares in kernbench::serving; its namespace "
        "is kernbench::workloads (namespaces follow folders)",
    ], proc.stdout
    assert ": layer: " not in proc.stdout  # topology may include solver


def test_a_platforms_bindings_are_the_bindings_layer(tmp_path):
    """src/platforms/<p>/bindings/ counts as the bindings layer: it may include workloads and kernels (a platform
    may not), declares in kernbench::bindings and may write a using-directive of what it binds, while the same
    lines in the platform's own files are offences."""
    write(tmp_path, "src/workloads/llama.hpp", "#pragma once\n")
    write(tmp_path, "src/platforms/k200/k200.hpp", "#pragma once\nnamespace kernbench::platforms::k200 {}\n")
    write(tmp_path, "src/platforms/k200/bindings/bind.cpp",
          '#include "platforms/k200/k200.hpp"\n#include "workloads/llama.hpp"\n'
          "using namespace kernbench::platforms::k200;\nnamespace kernbench::bindings {\nvoid bind_k200() {}\n}\n")
    assert run_check(tmp_path).returncode == 0
    write(tmp_path, "src/platforms/k200/k200.cpp",
          '#include "workloads/llama.hpp"\nnamespace kernbench::bindings {\nvoid f() {}\n}\n')
    out = run_check(tmp_path).stdout
    assert 'src/platforms/k200/k200.cpp:1: layer: platforms may not include workloads ("workloads/llama.hpp")' in out
    assert "src/platforms/k200/k200.cpp:2: namespace: src/platforms/ declares in kernbench::bindings" in out
    assert "bindings/bind.cpp" not in out
