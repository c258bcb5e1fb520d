"""The committed config reference is the one the schema generates."""

from __future__ import annotations

from pathlib import Path

from kernbench.config import reference_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "config-reference.md"


def test_config_reference_is_up_to_date():
    """docs/config-reference.md must be regenerated (`kernbench schema --markdown`) when the schema changes."""
    assert DOC.read_text() == reference_markdown(), "run: kernbench schema --markdown > docs/config-reference.md"


def test_reference_covers_every_link_class():
    """Every link class of the default machine is documented."""
    text = reference_markdown()
    for cls in ("pe", "noc", "hbm", "ucie_port", "ucie", "pcie_port", "pcie"):
        assert f"`links.{cls}`" in text
