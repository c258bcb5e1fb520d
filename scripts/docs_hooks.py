"""MkDocs hooks: pages generated from the installed package at build time.

- benches.md holds the marker ``<!-- kernbench:benches -->``; every
  registered bench (name, description, method, parameters with defaults,
  smoke size, golden metrics) is rendered in its place, so a new bench
  appears in the docs without anyone editing them.
- config-reference.md is rendered from the C++ schema
  (``kernbench.config.reference_markdown()``, what ``kernbench schema
  --markdown`` prints), so the site never shows a stale reference even
  before the committed file is regenerated.
"""

from __future__ import annotations

MARKER = "<!-- kernbench:benches -->"


def _value(v) -> str:
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def bench_markdown() -> str:
    try:
        from kernbench.registry import list_benches
    except ImportError as e:  # building the docs needs the package (scripts/setup.sh)
        raise RuntimeError(f"docs/hooks.py: cannot import kernbench ({e}); install it first") from None
    out = []
    for i, b in enumerate(list_benches()):
        out += [f"### `{b.name}`", "", b.description + ".", ""]
        out.append(f"`kernbench run --bench {b.name}` (index {i}); "
                   + ("simulates a machine config (`--config`, config `--set` paths)." if b.uses_config
                      else "models no machine config."))
        out.append("")
        import importlib

        doc = (importlib.import_module(b.module).__doc__ or "").strip().split("\n")
        body = "\n".join(doc[1:]).strip()  # the first line repeats the description
        if body:
            out += ["```text", body, "```", ""]
        if b.params:
            out += ["| parameter | default |", "|---|---|"]
            out += [f"| `bench.{k}` | `{_value(v)}` |" for k, v in b.params.items()]
            out.append("")
        if b.smoke is not None:
            out.append("Smoke size (`--smoke`, goldens): " + ", ".join(f"`{k}={_value(v)}`" for k, v in b.smoke.items()) + ".")
            out.append("")
        if b.full_check is not None:
            out.append("Full-check size (`--full-check`, what CI's check of every bench runs): "
                       + ", ".join(f"`{k}={_value(v)}`" for k, v in b.full_check.items()) + ".")
            out.append("")
        if b.golden is not None:
            metrics = b.golden.get("metrics", [])
            names = list(metrics) if not isinstance(metrics, dict) else list(metrics.keys())
            key = b.golden.get("key")
            key = [key] if isinstance(key, str) else list(key or [])
            out.append(f"Golden metrics (rows by {', '.join(f'`{k}`' for k in key)}): "
                       + ", ".join(f"`{m}`" for m in names) + ".")
            out.append("")
        else:
            out += ["No golden yet (see [Golden regression](goldens.md)).", ""]
    return "\n".join(out)


def on_page_markdown(markdown, page, config, files, **kwargs):
    if page.file.src_uri == "config-reference.md":
        from kernbench.config import reference_markdown

        return reference_markdown()
    if MARKER in markdown:
        return markdown.replace(MARKER, bench_markdown())
    return markdown
